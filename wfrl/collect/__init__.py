"""Experience collection: trajectory arrays, episode statistics, and the collectors."""
from wfrl.collect.base import COLLECTORS, EpisodeStats, check_collector

__all__ = ["COLLECTORS", "EpisodeStats", "check_collector"]
