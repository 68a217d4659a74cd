"""Joining a Ray cluster by --ray-address (no ray import, no torch at import).

With ``ray_address`` (HOST:PORT of the head's GCS, checked by check_ray_address) the collector
joins that cluster (``ray.init(address=...)``; every node needs wfrl installed; docs/collectors.md
has the cluster guide) and close() only disconnects. Before ray.init the address is tried with a
plain TCP connection and a GCS client with short timeouts (connect_to_cluster), so an address
with no cluster behind it is one UserError within ~15 s instead of Ray's minutes of retries.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import sys

from wfrl.errors import UserError

CONNECT_TIMEOUT_S = 5.0      # TCP connect to a cluster's GCS port before ray.init

# --------------------------------------------------------------------------------------------
# --ray-address (no ray import, no torch)

_HOSTNAME_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_ADDRESS_HINT = ("HOST:PORT of the cluster's head node and its GCS port (ray start --head "
                 "--port), e.g. 10.0.0.5:6379 or [fd00::5]:6379")


def check_ray_address(text: str) -> str:
    """`text` if it is HOST:PORT — HOST a hostname, an IPv4 address or an IPv6 address in
    brackets, PORT in 1..65535 — else ValueError with a one-line reason. Ray's other forms are
    refused: 'auto' (whichever cluster `ray start` last recorded on this machine) and
    'ray://HOST:PORT' (Ray Client, a different protocol that the collector does not use)."""
    if not isinstance(text, str):
        raise ValueError(f"expected {_ADDRESS_HINT}; got {text!r}")
    if text.startswith("ray://"):
        raise ValueError(f"Ray Client addresses (ray://) are not supported: give {_ADDRESS_HINT}")
    if text in ("auto", "local"):
        raise ValueError(f"{text!r} is not supported: give {_ADDRESS_HINT}")
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"expected {_ADDRESS_HINT}; got {text!r}")
    if not re.fullmatch(r"[0-9]{1,5}", port) or not 1 <= int(port) <= 65535:
        raise ValueError(f"the port of {text!r} must be a number in 1..65535")
    if host.startswith("["):
        try:
            if not host.endswith("]"):
                raise ValueError
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"{host!r} in {text!r} is not an IPv6 address in brackets") from None
    elif ":" in host:
        raise ValueError(f"an IPv6 address goes in brackets, [ADDRESS]:PORT; got {text!r}")
    elif re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{host!r} in {text!r} is not an IPv4 address") from None
    elif len(host) > 253 or not all(_HOSTNAME_LABEL.fullmatch(label)
                                    for label in host.removesuffix(".").split(".")):
        raise ValueError(f"{host!r} in {text!r} is not a hostname")
    return text


def _split_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


class _StderrMuted:
    """File descriptor 2 pointed at /dev/null for a while: Ray's C++ client writes its
    connection retries to the process's stderr directly."""

    def __enter__(self):
        sys.stderr.flush()
        self.saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        return self

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)


def connect_to_cluster(ray, address: str) -> None:
    """ray.init(address=...) for a checked HOST:PORT, or UserError('cannot reach the Ray cluster
    at ADDRESS: why') within ~15 s: a TCP connection to the GCS port first (nothing listening, an
    unknown host: at once), then a GCS client with a 5 s timeout (something listening that is not
    a Ray GCS, a refused token: ~13 s), then ray.init with one connection attempt
    (RAY_gcs_server_port_wait_time_s=1 while it runs) instead of Ray's default twenty."""
    try:
        check_ray_address(address)
    except ValueError as exc:
        raise UserError(f"--ray-address: {exc}") from None
    from ray._private.services import canonicalize_bootstrap_address
    target = canonicalize_bootstrap_address(address)   # Ray rewrites a loopback host; so do we
    assert target is not None   # None only for 'auto', 'local' or no address: refused above
    shown = address if target == address else f"{address} (Ray dials {target})"
    host, port = _split_address(target)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        if isinstance(exc, TimeoutError):
            why = f"no answer in {CONNECT_TIMEOUT_S:.0f} s"
        raise UserError(f"cannot reach the Ray cluster at {shown}: {why} (is `ray start --head` "
                        "running there with that --port?)") from None
    # ray/_raylet.pyi declares only the ids and ObjectRef of the compiled module
    from ray._raylet import InnerGcsClient  # type: ignore[attr-defined]
    try:
        with _StderrMuted():
            InnerGcsClient.standalone(target, None, 5000)
    except Exception as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise UserError(f"cannot reach the Ray cluster at {shown}: no Ray GCS answered ({why}; "
                        "a cluster with token authentication also needs RAY_AUTH_MODE=token and "
                        "its RAY_AUTH_TOKEN here)") from None
    saved = os.environ.get("RAY_gcs_server_port_wait_time_s")
    os.environ["RAY_gcs_server_port_wait_time_s"] = "1"
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        why = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise UserError(f"cannot reach the Ray cluster at {shown}: {why}") from None
    finally:
        if saved is None:
            os.environ.pop("RAY_gcs_server_port_wait_time_s", None)
        else:
            os.environ["RAY_gcs_server_port_wait_time_s"] = saved
