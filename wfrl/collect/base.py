"""What every collector shares: episode statistics, per-episode seeds, the collector names."""
from __future__ import annotations

from dataclasses import dataclass

from wfrl.errors import check_choice

COLLECTORS = ("sequential", "sync", "async", "ray")


def check_collector(name: str) -> str:
    return check_choice("collector", name, COLLECTORS)


@dataclass
class EpisodeStats:
    episode: int            # global episode index in the run
    env_return: float       # sum of CAGE2 rewards over the 100 steps
    alignment: float        # sum of alignment rewards (incl. the no-fix end penalty)
    compliance: float       # compliant fixes / fixes, 0.5 with no fix
    fixes: int
    compliant_fixes: int
    weights_version: int    # learner version of the weights that produced the episode
