"""The sequential collector: one env in this process, whole episodes one after another."""
from __future__ import annotations

import numpy as np

from wfrl.collect.rollout import make_policy, run_episodes
from wfrl.collect.stats import EpisodeStats
from wfrl.workflow import Workflow


class SequentialCollector:
    """Runs whole episodes one after another on a single backend in this process (a
    wfrl.collect.base.Collector)."""

    def __init__(self, backend, red_agent, hidden: int, seed: int, lam: float,
                 count_foothold: bool = False, n_workers: int = 1, n_rows: int = 1):
        from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
        from wfrl.envs import make_backend
        from wfrl.envs.base import EP_LEN
        self.backend = make_backend(backend, red_agent, seed=seed)
        self.hidden = hidden
        self.seed = seed
        self.lam = lam
        self.count_foothold = count_foothold
        self.buffer = compiled_buffer(allocate_trajectory(n_rows, EP_LEN, hidden))

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, first_episode: int,
                n_episodes: int, spread: bool = False) -> list[EpisodeStats]:
        policy = make_policy(weights, self.hidden, workflow, self.lam, self.count_foothold)
        self.buffer.clear()
        return run_episodes(self.backend, policy, np.arange(first_episode, first_episode + n_episodes),
                            self.seed, self.buffer, version=version)

    def close(self):
        self.backend.close()

