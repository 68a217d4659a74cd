"""What runs inside a collector's worker process (torch-free).

A worker attaches to the owner's shared memory, builds its backend once, and plays episodes with
the compiled rollout loop straight into the shared trajectory rows it was assigned. It ignores
SIGINT: Ctrl-C is the owner's to handle (it stops the workers and unlinks the memory).
"""
from __future__ import annotations

import os
import signal

import numpy as np

from wfrl.collect.buffer import traj_fields
from wfrl.collect.rollout import make_policy, run_episodes
from wfrl.collect.shm import Attached, WeightsBoard
from wfrl.envs import make_backend
from wfrl.workflow import Workflow

STATS_SPEC = {  # per buffer row: the episode that last completed in it
    "st_episode": np.int64, "st_env_return": np.float32, "st_alignment": np.float32,
    "st_compliance": np.float32, "st_fixes": np.int32, "st_compliant": np.int32,
    "st_version": np.int64,
}


def shared_spec(n_rows: int, T: int, n_weights: int, net=None) -> dict:
    """The shared segment's arrays: the trajectory rows of network `net` (with the belief field
    for a belief network), the per-row statistics and the weights board."""
    spec = {name: ((n_rows, T) + tail, dt) for name, (dt, tail) in traj_fields(net).items()}
    spec["lengths"] = ((n_rows,), np.int32)
    spec.update({name: ((n_rows,), dt) for name, dt in STATS_SPEC.items()})
    spec["weights"] = ((n_weights,), np.float32)
    spec["weights_seq"] = ((2,), np.int64)
    return spec


class WorkerState:
    def __init__(self, handle, backend, red_agent, hidden, lam, count_foothold, seed):
        from wfrl._core import TrajectoryBuffer
        self.att = Attached(handle)
        a = self.att.arrays
        self.buffer = TrajectoryBuffer({k: a[k] for k in list(traj_fields(hidden)) + ["lengths"]})
        self.stats = a
        self.board = WeightsBoard(a)
        self.weights = np.zeros_like(a["weights"])
        self.version = -1
        self.backend = make_backend(backend, red_agent)
        self.hidden, self.lam, self.count_foothold, self.seed = hidden, lam, count_foothold, seed
        self._policy_key = None
        self._policy = None

    def policy(self, workflow_index: int):
        """The current weights as a compiled Policy, re-read when a new version was published."""
        if self.board.version != self.version or self._policy is None \
                or self._policy_key != workflow_index:
            self.version = self.board.read_into(self.weights)
            self._policy = make_policy(self.weights, self.hidden,
                                       Workflow.from_index(workflow_index), self.lam,
                                       self.count_foothold)
            self._policy_key = workflow_index
        return self._policy

    def record(self, rows, stats):
        s = self.stats
        for r, e in zip(rows, stats):
            s["st_episode"][r] = e.episode
            s["st_env_return"][r] = e.env_return
            s["st_alignment"][r] = e.alignment
            s["st_compliance"][r] = e.compliance
            s["st_fixes"][r] = e.fixes
            s["st_compliant"][r] = e.compliant_fixes
            s["st_version"][r] = e.weights_version


_state: WorkerState | None = None


# Niceness of the collectors' worker processes on this machine (async and sync). With overlap
# the workers play the next batch while the learner updates on this one; where the two want more
# cores than there are (2 cores: a worker, the actor's and the critic's threads), the update — the
# run's critical path — goes first and the workers take what it leaves, which is enough: a batch
# is played well before the update ends. Same episodes, same results (docs/learner.md).
WORKER_NICE = 10


def yield_to_learner() -> None:
    """Lower this worker process's scheduling priority by WORKER_NICE (no-op where not allowed)."""
    try:
        os.nice(WORKER_NICE)
    except (AttributeError, OSError):
        pass


STRESS_DELAY_ENV = "WFRL_TEST_WORKER_DELAY_MS"


def stress_delay() -> None:
    """A test-only hook, off unless WFRL_TEST_WORKER_DELAY_MS=N is set: sleep a random 0..N ms
    here (tests/test_stress.py sets it to shake the timing of the multi-process paths: before
    each task of the async collector, each wave of the sync collector, each step of an agent
    worker, each task of a Ray actor)."""
    limit = os.environ.get(STRESS_DELAY_ENV)
    if limit:
        import random
        import time
        time.sleep(random.random() * float(limit) / 1000.0)


def init(*args):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield_to_learner()
    global _state
    _state = WorkerState(*args)


def collect_task(episodes, rows, workflow_index: int):
    """Play global episodes `episodes` into shared rows `rows`; returns (pid, version)."""
    stress_delay()
    st = _state
    assert st is not None   # the pool's initializer, init(), set it
    policy = st.policy(workflow_index)
    stats = run_episodes(st.backend, policy, episodes, st.seed, st.buffer, rows, st.version)
    st.record(rows, stats)
    return os.getpid(), st.version
