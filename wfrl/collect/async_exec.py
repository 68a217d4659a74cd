"""Executor-async collection: whole episodes (or chunks of them, on the simulator) run as tasks on
a concurrent.futures ProcessPoolExecutor and are taken with as_completed as they finish.

Episodes are written by the workers straight into shared trajectory rows; a row counts only once
its task has returned, so a worker killed mid-episode never leaves a half-written episode in the
batch: its tasks are run again (same episode numbers, hence the same seeds) on a rebuilt pool.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import threading
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from wfrl.collect import worker
from wfrl.collect.shm import worker_signals_deferred
from wfrl.collect.shm_base import MAX_POOL_REBUILDS, POLL_S, CollectorClosed, SharedCollectorBase, end_pool
from wfrl.collect.stats import EpisodeStats
from wfrl.envs.base import backend_engine
from wfrl.workflow import Workflow


class AsyncCollector(SharedCollectorBase):
    def __init__(self, *args, chunk: int | None = None, **kw):
        super().__init__(*args, **kw)
        # One episode per task on CybORG (~0.1 s each); chunks on the simulator, where an
        # episode (~0.5 ms) is cheaper than a task round trip.
        self.chunk = chunk or (1 if backend_engine(self.backend_name) == "cyborg" else 64)
        self.pool: cf.ProcessPoolExecutor | None = None
        self._closing = False
        # Starting, shutting down and submitting to the pool happen under this lock: abort() and
        # close() run on another thread than a collect() in the background, and a submit racing
        # a shutdown made the pool spawn a worker after the shutdown had listed the ones to end
        # (that worker, and the pool's manager thread the interpreter joins at exit, then lived
        # on: an interrupted run that never exited).
        self._life = threading.RLock()
        self._start_pool()

    def _start_pool(self):
        with self._life:
            if self._closing:
                raise CollectorClosed("the collector was closed during collection")
            self.pool = cf.ProcessPoolExecutor(self.n_workers,
                                               mp_context=mp.get_context("spawn"),
                                               initializer=worker.init,
                                               initargs=self._init_args())

    def _submit(self, *args):
        with self._life, worker_signals_deferred():   # (a submit may spawn a worker)
            if self._closing or self.pool is None:
                raise CollectorClosed("the collector was closed during collection")
            return self.pool.submit(worker.collect_task, *args)

    def _rebuild_pool(self):
        if self._closing:
            raise CollectorClosed("the collector was closed during collection")
        self.rebuilds += 1
        if self.rebuilds > MAX_POOL_REBUILDS:
            raise RuntimeError("worker processes keep dying; giving up")
        self._shutdown_pool()
        self._start_pool()

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, first_episode: int,
                n_episodes: int, spread: bool = False) -> list[EpisodeStats]:
        if n_episodes > self.n_rows:
            raise ValueError(f"{n_episodes} episodes do not fit {self.n_rows} rows")
        self.board.publish(weights, version)
        self.buffer.clear()
        # spread: one task per worker — nobody else needs the cores (a batch collected while the
        # learner updates stays one task of up to `chunk` episodes, leaving it a core)
        chunk = (min(self.chunk, -(-n_episodes // self.n_workers)) if spread and n_episodes
                 else self.chunk)
        pending = [(list(range(first_episode + s, first_episode + min(s + chunk, n_episodes))),
                    list(range(s, min(s + chunk, n_episodes))))
                   for s in range(0, n_episodes, chunk)]
        while pending:
            futures, broken = {}, False
            for eps, rows in pending:
                try:
                    futures[self._submit(eps, rows, workflow.index)] = (eps, rows)
                except (BrokenProcessPool, ValueError):
                    # a worker died while the pool was idle (e.g. during the learner's update):
                    # the pool refuses new tasks, or its on-demand respawn of a replacement
                    # fails ("bad value(s) in fds_to_keep": the dead worker's pipe is already
                    # closed); rebuild it and submit everything again (at most
                    # MAX_POOL_REBUILDS times)
                    broken = True
                    break
            if broken:
                for fut in futures:   # (a broken pool never finishes them: no waiting here)
                    fut.cancel()
                self._rebuild_pool()
                continue
            pending = []
            waiting = set(futures)
            while waiting:
                # polled, never waited on for good: a pool shut down by abort() from another
                # thread can leave its running futures unfinished forever
                done, waiting = cf.wait(waiting, timeout=POLL_S,
                                        return_when=cf.FIRST_COMPLETED)
                if self._closing:
                    raise CollectorClosed("the collector was closed during collection")
                for fut in done:
                    try:
                        fut.result()
                    except BrokenProcessPool:
                        broken = True
                        pending.append(futures[fut])
            if broken:
                self._rebuild_pool()
        return self._stats(range(n_episodes))

    def worker_pids(self) -> list[int]:
        """Process ids of the pool's live workers (started on demand by the first tasks)."""
        pool = self.pool
        return [p.pid for p in list(getattr(pool, "_processes", {}).values()) if p.is_alive()] \
            if pool is not None else []

    def _shutdown_pool(self):
        with self._life, worker_signals_deferred():
            pool, self.pool = self.pool, None
            if pool is None:
                return
            end_pool(pool)

    def abort(self) -> None:
        """Stop the workers now, from any thread: a collect() running elsewhere ends with
        CollectorClosed instead of rebuilding the pool (an interrupted overlapped run)."""
        self._closing = True
        self._shutdown_pool()

    def close(self):
        self._closing = True     # a collect() still running elsewhere must not rebuild the pool
        try:
            self._shutdown_pool()
        finally:
            self.shm.close()
