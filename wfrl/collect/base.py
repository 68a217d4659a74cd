"""What every collector shares: episode statistics, per-episode seeds, the collector names."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wfrl.errors import UserError

COLLECTORS = ("sequential",)


def check_collector(name: str) -> str:
    if name not in COLLECTORS:
        raise UserError(f"unknown collector {name!r} (choose from {', '.join(COLLECTORS)})")
    return name


def episode_seeds(seed: int, episode: int) -> tuple[int, int]:
    """(env seed, policy-sampling seed) of global episode number `episode` of a run.

    Derived from (seed, episode) only, not from the worker, so every collector produces the same
    episode for the same index whichever worker runs it.
    """
    s = np.random.SeedSequence([seed, episode]).generate_state(2, dtype=np.uint64)
    return int(s[0]), int(s[1])


@dataclass
class EpisodeStats:
    episode: int            # global episode index in the run
    env_return: float       # sum of CAGE2 rewards over the 100 steps
    alignment: float        # sum of alignment rewards (incl. the no-fix end penalty)
    compliance: float       # compliant fixes / fixes, 0.5 with no fix
    fixes: int
    compliant_fixes: int
    weights_version: int    # learner version of the weights that produced the episode
