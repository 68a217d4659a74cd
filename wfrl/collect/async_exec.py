"""Executor-async collection: whole episodes (or chunks of them, on the simulator) run as tasks on
a concurrent.futures ProcessPoolExecutor and are taken with as_completed as they finish.

Episodes are written by the workers straight into shared trajectory rows; a row counts only once
its task has returned, so a worker killed mid-episode never leaves a half-written episode in the
batch: its tasks are run again (same episode numbers, hence the same seeds) on a rebuilt pool.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from wfrl.collect import worker
from wfrl.collect.base import EpisodeStats
from wfrl.collect.buffer import TRAJ_FIELDS
from wfrl.collect.shm import SharedArrays, WeightsBoard
from wfrl.envs.base import EP_LEN
from wfrl.errors import UserError
from wfrl.ppo.netspec import as_netspec
from wfrl.workflow import Workflow

MAX_POOL_REBUILDS = 20


class SharedCollectorBase:
    """Shared memory, the learner-side buffer view and the episode statistics for the
    multi-process collectors."""

    def __init__(self, backend, red_agent, hidden, seed, lam, count_foothold, n_workers, n_rows):
        from wfrl._core import TrajectoryBuffer
        if n_workers < 1:
            raise UserError(f"--n-workers must be positive (got {n_workers})")
        self.backend_name, self.red_agent = backend, red_agent
        self.hidden, self.seed, self.lam, self.count_foothold = hidden, seed, lam, count_foothold
        self.n_workers, self.n_rows = n_workers, n_rows
        self.shm = SharedArrays(worker.shared_spec(n_rows, EP_LEN, as_netspec(hidden).n_params))
        a = self.shm.arrays
        self.buffer = TrajectoryBuffer({k: a[k] for k in list(TRAJ_FIELDS) + ["lengths"]})
        self.board = WeightsBoard(a)
        self.rebuilds = 0

    def _init_args(self):
        return (self.shm.handle, self.backend_name, self.red_agent, self.hidden, self.lam,
                self.count_foothold, self.seed)

    def _stats(self, rows) -> list[EpisodeStats]:
        a = self.shm.arrays
        return [EpisodeStats(int(a["st_episode"][r]), float(a["st_env_return"][r]),
                             float(a["st_alignment"][r]), float(a["st_compliance"][r]),
                             int(a["st_fixes"][r]), int(a["st_compliant"][r]),
                             int(a["st_version"][r])) for r in rows]


class AsyncCollector(SharedCollectorBase):
    def __init__(self, *args, chunk: int | None = None, **kw):
        super().__init__(*args, **kw)
        # One episode per task on CybORG (~0.1 s each); chunks on the simulator, where an
        # episode (~0.5 ms) is cheaper than a task round trip.
        self.chunk = chunk or (1 if self.backend_name == "cyborg" else 64)
        self.pool = None
        self._start_pool()

    def _start_pool(self):
        self.pool = cf.ProcessPoolExecutor(self.n_workers, mp_context=mp.get_context("spawn"),
                                           initializer=worker.init, initargs=self._init_args())

    def _rebuild_pool(self):
        self.rebuilds += 1
        if self.rebuilds > MAX_POOL_REBUILDS:
            raise RuntimeError("worker processes keep dying; giving up")
        self._shutdown_pool()
        self._start_pool()

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, first_episode: int,
                n_episodes: int) -> list[EpisodeStats]:
        if n_episodes > self.n_rows:
            raise ValueError(f"{n_episodes} episodes do not fit {self.n_rows} rows")
        self.board.publish(weights, version)
        self.buffer.clear()
        pending = [(list(range(first_episode + s, first_episode + min(s + self.chunk, n_episodes))),
                    list(range(s, min(s + self.chunk, n_episodes))))
                   for s in range(0, n_episodes, self.chunk)]
        while pending:
            futures = {self.pool.submit(worker.collect_task, eps, rows, workflow.index): (eps, rows)
                       for eps, rows in pending}
            pending = []
            broken = False
            for fut in cf.as_completed(futures):
                try:
                    fut.result()
                except BrokenProcessPool:
                    broken = True
                    pending.append(futures[fut])
            if broken:
                self._rebuild_pool()
        return self._stats(range(n_episodes))

    def _shutdown_pool(self):
        pool, self.pool = self.pool, None
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()

    def close(self):
        try:
            self._shutdown_pool()
        finally:
            self.shm.close()
