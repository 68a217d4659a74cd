"""The Ray collector's names where they were first imported from; the code is in wfrl.collect.ray
(collector, local instance, cluster address)."""
from wfrl.collect.ray.address import CONNECT_TIMEOUT_S, check_ray_address, connect_to_cluster  # noqa: F401
from wfrl.collect.ray.collector import (MAX_REBUILDS, POLL_S, READY_TIMEOUT_S,  # noqa: F401
                                        REPLACE_TIMEOUT_S, TASKS_PER_ACTOR, EpisodeActor,
                                        RayCollector)
from wfrl.collect.ray.common import RayClusterError, RayNodeLost, import_ray  # noqa: F401
from wfrl.collect.ray.local import (LocalRay, _alive, _argv, _cmdline, _Guardian,  # noqa: F401
                                    _parents, _start_time)
