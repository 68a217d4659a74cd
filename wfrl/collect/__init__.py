"""Experience collection: trajectory arrays, episode statistics, and the collectors."""
from wfrl.collect.base import COLLECTORS, Collector, check_collector, make_collector
from wfrl.collect.stats import EpisodeStats

__all__ = ["COLLECTORS", "Collector", "EpisodeStats", "check_collector", "make_collector"]
