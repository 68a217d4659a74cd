"""Synchronous collection: every worker's envs step together, one barrier per step.

Worker w owns `envs_per_worker` envs (CybORG: one; simulator: many, stepped in one compiled call).
Episodes are dealt out in waves of n_workers × envs_per_worker; within a wave all envs take step t,
then wait for each other. Episode i of the batch is written to row i by whichever worker plays it,
with the seeds of its global episode number, so the batch is identical to the sequential
collector's. A worker that dies breaks the barrier; the owner then restarts every worker and plays
the whole batch again (same seeds, same episodes).
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import time
from multiprocessing.process import BaseProcess

import numpy as np

from wfrl.collect import worker
from wfrl.collect.rollout import actor_episode, make_actor, stats_arrays, stats_list
from wfrl.collect.shm import worker_signals_deferred
from wfrl.collect.shm_base import (
    MAX_POOL_REBUILDS,
    POLL_S,
    CollectorClosed,
    SharedCollectorBase,
    end_processes,
)
from wfrl.collect.stats import EpisodeStats
from wfrl.envs.base import EP_LEN, backend_engine
from wfrl.workflow import Workflow

CMD_WORK, CMD_STOP = 1, 2


def _sync_worker(*args):
    """Worker process main. A broken barrier means the owner is stopping or restarting the
    workers: leave quietly."""
    try:
        _sync_loop(*args)
    except threading.BrokenBarrierError:
        pass


def _sync_loop(w, n_workers, k, init_args, cmd, start, step, done):
    """Wait for a command, play this worker's share of the batch in lock-step."""
    from wfrl.collect.worker import yield_to_learner
    yield_to_learner()
    from wfrl._core import SimSlots
    from wfrl.rng import episode_seeds
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    st = worker.WorkerState(*init_args)
    slots = (SimSlots(k, st.backend.red_agent, st.backend.leaderboard)
             if hasattr(st.backend, "slots") else None)
    stats = stats_arrays(k)
    while True:
        start.wait()
        op, first, n, wf_index = (int(v) for v in cmd[:4])
        if op == CMD_STOP:
            return
        policy = st.policy(wf_index)
        actor = None if slots is not None else make_actor(policy, st.backend)
        wave = n_workers * k
        for base in range(0, n, wave):
            worker.stress_delay()
            mine = [base + w * k + j for j in range(k)]
            rows = np.array([r if r < n else -1 for r in mine], np.int64)
            env_seeds, act_seeds = episode_seeds(st.seed, first + np.maximum(rows, 0))
            if slots is not None:
                slots.begin(env_seeds, act_seeds, rows, st.buffer)
                for _t in range(EP_LEN):
                    slots.step(policy, st.buffer)
                    step.wait()
                slots.stats(stats)
                used = [j for j, r in enumerate(rows) if r >= 0]
                st.record(rows[used], stats_list(stats, first + rows[used], st.version, used))
            elif rows[0] >= 0:
                r = int(rows[0])
                st.record([r], [actor_episode(st.backend, actor, first + r, int(env_seeds[0]),
                                              int(act_seeds[0]), st.buffer, r, st.version,
                                              after_step=step.wait)])
            else:  # no episode left for this worker in the wave: still meet every barrier
                for _ in range(EP_LEN):
                    step.wait()
        done.wait()


class SyncCollector(SharedCollectorBase):
    def __init__(self, *args, envs_per_worker: int | None = None, **kw):
        super().__init__(*args, **kw)
        self.k = envs_per_worker or (1 if backend_engine(self.backend_name) == "cyborg" else 1024)
        self.ctx = mp.get_context("spawn")
        self.cmd = self.ctx.Array("q", 4, lock=False)
        self.procs: list[BaseProcess] = []
        self._idle = False
        self._closing = False
        # Workers are started and stopped under this lock (abort() and close() may run on
        # another thread than a collect() restarting dead workers): once closing, none starts.
        self._life = threading.RLock()
        self._start_workers()

    def _start_workers(self):
        with self._life, worker_signals_deferred():
            if self._closing:
                raise CollectorClosed("the collector was closed during collection")
            n = self.n_workers
            self.start_b = self.ctx.Barrier(n + 1)
            self.step_b = self.ctx.Barrier(n)
            self.done_b = self.ctx.Barrier(n + 1)
            self.procs = [self.ctx.Process(target=_sync_worker, daemon=True,
                                           args=(w, n, self.k, self._init_args(), self.cmd,
                                                 self.start_b, self.step_b, self.done_b))
                          for w in range(n)]
            for p in self.procs:
                p.start()

    def worker_pids(self) -> list[int]:
        # (a live process has been started, so has its pid)
        return [p.pid for p in self.procs if p.is_alive() and p.pid is not None]

    def _stop_workers(self):
        # No barrier.abort() here or in _wait: a worker SIGKILLed inside barrier.wait() can die
        # holding the barrier's lock, and abort() would then block forever. Workers are ended by
        # signal instead, and _start_workers makes fresh barriers.
        with self._life, worker_signals_deferred():
            procs, self.procs = self.procs, []
            end_processes(procs)

    def _wait(self, barrier) -> bool:
        """Wait at `barrier` while watching the workers; False if one died."""
        result = {}

        def waiter():
            try:
                barrier.wait()
                result["ok"] = True
            except threading.BrokenBarrierError:
                result["ok"] = False

        th = threading.Thread(target=waiter, daemon=True)
        th.start()
        while th.is_alive():
            th.join(POLL_S)
            if self._closing or any(not p.is_alive() for p in self.procs):
                return False  # the waiter thread stays parked on this (discarded) barrier
        return result.get("ok", False)

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, first_episode: int,
                n_episodes: int, spread: bool = False) -> list[EpisodeStats]:
        if n_episodes > self.n_rows:
            raise ValueError(f"{n_episodes} episodes do not fit {self.n_rows} rows")
        self.board.publish(weights, version)
        self._idle = False
        while True:
            self.buffer.clear()
            self.cmd[:4] = [CMD_WORK, first_episode, n_episodes, workflow.index]
            if self._wait(self.start_b) and self._wait(self.done_b):
                self._idle = True
                return self._stats(range(n_episodes))
            if self._closing:
                raise CollectorClosed("the collector was closed during collection")
            self.rebuilds += 1
            if self.rebuilds > MAX_POOL_REBUILDS:
                raise RuntimeError("worker processes keep dying; giving up")
            self._stop_workers()
            time.sleep(0.05)
            self._start_workers()

    def abort(self) -> None:
        """Stop the workers now, from any thread: a collect() running elsewhere ends with
        CollectorClosed instead of restarting them (an interrupted overlapped run)."""
        self._closing = True
        self._stop_workers()

    def close(self):
        """Stop the workers (politely when they are idle, otherwise at once) and unlink."""
        self._closing = True     # a collect() still running elsewhere must not restart them
        try:
            if self._idle and self.procs and all(p.is_alive() for p in self.procs):
                self.cmd[0] = CMD_STOP
                self._wait(self.start_b)
                for p in self.procs:
                    p.join(timeout=5)
        finally:
            self._stop_workers()
            self.shm.close()
