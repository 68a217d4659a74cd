"""The sequential collector: one env in this process, whole episodes one after another."""
from __future__ import annotations

import numpy as np

from wfrl.collect.base import EpisodeStats
from wfrl.collect.rollout import make_policy, run_episodes
from wfrl.workflow import Workflow


class SequentialCollector:
    """Runs whole episodes one after another on a single backend in this process.

    Every collector has this interface: collect(...) fills rows 0..n-1 of its own `buffer` with
    global episodes first_episode..first_episode+n-1 and returns their statistics; close()."""

    def __init__(self, backend, red_agent, hidden: int, seed: int, lam: float,
                 count_foothold: bool = False, n_workers: int = 1, n_rows: int = 1):
        from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
        from wfrl.envs import EP_LEN, make_backend
        self.backend = make_backend(backend, red_agent, seed=seed)
        self.hidden = hidden
        self.seed = seed
        self.lam = lam
        self.count_foothold = count_foothold
        self.buffer = compiled_buffer(allocate_trajectory(n_rows, EP_LEN))

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, first_episode: int,
                n_episodes: int) -> list[EpisodeStats]:
        policy = make_policy(weights, self.hidden, workflow, self.lam, self.count_foothold)
        self.buffer.clear()
        return run_episodes(self.backend, policy, np.arange(first_episode, first_episode + n_episodes),
                            self.seed, self.buffer, version=version)

    def close(self):
        self.backend.close()


def make_collector(name: str, backend: str, red_agent: str, hidden: int, seed: int, lam: float,
                   count_foothold: bool, n_workers: int, n_rows: int,
                   ray_address: str | None = None):
    """The collector called `name` (sequential | sync | async | ray). ray_address: the Ray cluster
    the ray collector joins (default: a private local instance)."""
    args = (backend, red_agent, hidden, seed, lam, count_foothold)
    if name == "sequential":
        return SequentialCollector(*args, n_workers=n_workers, n_rows=n_rows)
    if name == "sync":
        from wfrl.collect.sync import SyncCollector
        return SyncCollector(*args, n_workers=n_workers, n_rows=n_rows)
    if name == "async":
        from wfrl.collect.async_exec import AsyncCollector
        return AsyncCollector(*args, n_workers=n_workers, n_rows=n_rows)
    if name == "ray":
        from wfrl.collect.ray_exec import RayCollector, import_ray
        import_ray()  # BackendUnavailable with the install hint when Ray is missing
        return RayCollector(*args, n_workers=n_workers, n_rows=n_rows, ray_address=ray_address)
    raise ValueError(name)
