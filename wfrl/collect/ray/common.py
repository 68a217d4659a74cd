"""What every part of the Ray collector shares: Ray's import with the install hint, and the
errors the command line prints as one line."""
from __future__ import annotations

from wfrl.errors import BackendUnavailable, UserError

_INSTALL_HINT = "the ray collector needs Ray: pip install 'wfrl[ray]'"


def import_ray():
    """The ray module, or BackendUnavailable with the install hint."""
    try:
        import ray
    except ImportError:
        raise BackendUnavailable(_INSTALL_HINT) from None
    return ray


class RayClusterError(UserError):
    """The Ray cluster cannot carry the run on (an actor that cannot be placed anywhere); the
    command line prints it as one line."""


class RayNodeLost(RayClusterError):
    """The Ray node this driver runs on is gone (the private instance, or the raylet the driver
    attached to on a cluster): the run cannot go on in this process."""
