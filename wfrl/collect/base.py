"""The collector interface the learner side programs against, the collector names, and
make_collector, which builds the one a run asked for."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from wfrl.collect.stats import EpisodeStats
from wfrl.config.names import COLLECTORS  # noqa: E402  (the names, declared once)
from wfrl.errors import check_choice
from wfrl.workflow import Workflow


def check_collector(name: str) -> str:
    return check_choice("collector", name, COLLECTORS)


@runtime_checkable
class Collector(Protocol):
    """Plays episodes with the learner's flat weights into its own trajectory buffer.

    collect() fills rows 0..n_episodes-1 of `buffer` (a wfrl._core.TrajectoryBuffer) with global
    episodes first_episode..first_episode+n_episodes-1, each seeded by its number (so every
    collector produces the same episodes), and returns their statistics in that order. close()
    ends the collector's processes and releases its shared memory. spread=True: the caller waits
    for this batch with nothing else to do (an evaluation, a visit's first batch) — a collector
    that plays a batch as tasks may then split it over all its workers (the same episodes)."""

    buffer: object

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, first_episode: int,
                n_episodes: int, spread: bool = False) -> list[EpisodeStats]: ...

    def close(self) -> None: ...


def make_collector(name: str, backend: str, red_agent: str, hidden, seed: int, lam: float,
                   count_foothold: bool, n_workers: int, n_rows: int,
                   ray_address: str | None = None) -> Collector:
    """The collector called `name` (sequential | sync | async | ray) for the policy network
    `hidden` (a NetSpec, or a hidden width for the observation-only network), with room for
    n_rows episodes per collect(). ray_address: the Ray cluster the ray collector joins (default:
    a private local instance)."""
    args = (backend, red_agent, hidden, seed, lam, count_foothold)
    if name == "sequential":
        from wfrl.collect.sequential import SequentialCollector
        return SequentialCollector(*args, n_workers=n_workers, n_rows=n_rows)
    if name == "sync":
        from wfrl.collect.sync import SyncCollector
        return SyncCollector(*args, n_workers=n_workers, n_rows=n_rows)
    if name == "async":
        from wfrl.collect.async_exec import AsyncCollector
        return AsyncCollector(*args, n_workers=n_workers, n_rows=n_rows)
    if name == "ray":
        from wfrl.collect.ray.collector import RayCollector
        from wfrl.collect.ray.common import import_ray
        import_ray()  # BackendUnavailable with the install hint when Ray is missing
        return RayCollector(*args, n_workers=n_workers, n_rows=n_rows, ray_address=ray_address)
    raise ValueError(name)
