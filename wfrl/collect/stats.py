"""What one played episode reports to the learner (every collector returns a list of these)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EpisodeStats:
    episode: int            # global episode index in the run
    env_return: float       # sum of CAGE2 rewards over the 100 steps
    alignment: float        # sum of alignment rewards (incl. the no-fix end penalty)
    compliance: float       # compliant fixes / fixes, 0.5 with no fix
    fixes: int
    compliant_fixes: int
    weights_version: int    # learner version of the weights that produced the episode
