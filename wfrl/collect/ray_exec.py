"""The Ray collector (--collector ray): whole episodes as tasks on long-lived Ray actors.

One actor per worker builds its backend once and keeps it, with a compiled policy, for the whole
run. Per collect() call the driver publishes the weights with one ray.put (only when they changed)
and deals out tasks of whole episodes (CybORG: one episode per task; simulator: chunks of 64, an
episode there costs ~0.5 ms); at most two tasks are in flight per actor and ray.wait takes results
as they complete. A task comes back as compact numpy arrays (its trajectory rows and per-episode
statistics) that the driver copies into rows of its own buffer. An actor re-makes its policy only
when the weights object or the workflow changes. Every episode is seeded by its global number, so
the batch is identical to the sequential collector's whichever actor plays which episode.

Faults: an actor that dies (SIGKILL, OOM, its node lost) surfaces as RayActorError on its tasks
(a result left on a lost node as ObjectLostError); the driver replaces the actor and queues the
episodes it had not returned again. A replacement asks for the CPUs of the one it replaces when
they are free, else for the share of what is free (down to 0 CPUs: placed on any live node), so a
cluster that lost a node carries on with the nodes that remain; one that does not report within
REPLACE_TIMEOUT_S is made again with 0 CPUs, then the run ends with one line (RayClusterError).
After MAX_REBUILDS replacements the collection gives up with a RuntimeError. The driver's own
node (the private instance, or the cluster node whose raylet it attached to) is watched by pid
between short ray.wait slices: when it is gone, collect() raises RayNodeLost, a UserError (one
line on stderr), before Ray's core worker takes the process down on its own, and close() ends
what is left of the instance by pid. wfrl's side of an actor imports no torch (only the
worker-side modules: rollout, buffer, envs); on CybORG the csle_cyborg package itself pulls torch
in (csle_cyborg.agents imports stable_baselines3), as it does in the other collectors' workers.

Where Ray runs
--------------
With ``ray_address`` (HOST:PORT of the head's GCS, checked by check_ray_address) the collector
joins that cluster (``ray.init(address=...)``; every node needs wfrl installed; docs/collectors.md
has the cluster guide) and close() only disconnects. Before ray.init the address is tried with a
plain TCP connection and a GCS client with short timeouts (connect_to_cluster), so an address
with no cluster behind it is one UserError within ~15 s instead of Ray's minutes of retries. Without it, LocalRay starts a private instance whose
every listening socket is bound to the loopback interface and which writes only under a fresh
directory in the system temp dir, removed on close. The recipe, checked against ray 2.60.0 with
/proc/net/tcp{,6} for every process of the instance:

* ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` in the environment of the instance and, because Ray reads
  it at import, ``ray._private.ray_constants.ENABLE_RAY_CLUSTER = False`` in the driver during
  ray.init. Ray's node address is then 127.0.0.1 (the local-only mode it uses on macOS/Windows),
  and gcs_server, raylet (node manager + object manager), every core worker (driver and actors)
  and the runtime-env agent bind 127.0.0.1 (shown as ``::ffff:127.0.0.1`` on their tcp6 sockets)
  instead of ``*``/the machine's external address. ``ray.init(_node_ip_address='127.0.0.1')``
  alone does not do it: ray.init rewrites a loopback node address into the machine's external IP
  (services.resolve_ip_for_localhost), after which gcs_server, raylet and the workers listen on
  ``[::]`` and the runtime-env agent on the external IP.
* ``include_dashboard=False`` (no dashboard HTTP server). With plain ``ray`` (not ray[default])
  the dashboard agent runs ``--minimal`` and listens nowhere; with ray[default] its servers would
  bind the node address, 127.0.0.1 here (dashboard/agent.py), but that was not measured.
* Token authentication stays on (other local users cannot drive the instance through its loopback
  ports), but the token is a random one passed as ``RAY_AUTH_MODE=token`` +
  ``RAY_AUTH_TOKEN=<token>`` in the environment: with the mode left unset, ray.init generates a
  token and writes it to ``~/.ray/auth_token`` (under $HOME). Nothing else is written under $HOME.
* ``_temp_dir`` = a fresh ``wfrl-ray-*`` directory in tempfile.gettempdir() (session dir, logs,
  unix sockets, spill files); removed on close. The object store is the usual mmap under /dev/shm
  (unlinked by Ray; nothing is left there).
* ``RAY_USAGE_STATS_ENABLED=0``; ``log_to_driver=False`` and logging level WARNING (no chatter on
  the run's stderr).

close() kills the actors, calls ``ray.shutdown(wait_for_processes=True)``, SIGKILLs (by pid) any
process of the instance still alive after 10 s, restores the environment variables and the SIGTERM
handler, and removes the temp dir. Ctrl-C: Ray starts its daemons with SIGINT blocked and with
kill-on-parent-death, so only the driver acts on it (also when the terminal signals the whole
process group); its KeyboardInterrupt runs close(). SIGTERM while Ray is up raises SystemExit(143)
so the same clean-up runs (Ray's own handler would exit with status 1).
"""
from __future__ import annotations

import ipaddress
import logging
import math
import os
import re
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import deque

import numpy as np

from wfrl.collect.buffer import TRAJ_FIELDS, allocate_trajectory, compiled_buffer
from wfrl.collect.stats import EpisodeStats
from wfrl.envs.base import EP_LEN, backend_engine
from wfrl.errors import BackendUnavailable, UserError
from wfrl.workflow import Workflow

MAX_REBUILDS = 20
TASKS_PER_ACTOR = 2          # in flight per actor: one running, one queued behind it
READY_TIMEOUT_S = 300.0      # no actor start / no result for this long is an error, not a hang
REPLACE_TIMEOUT_S = 60.0     # a replacement actor that has not reported by then is not placeable
POLL_S = 0.5                 # ray.wait slice: the local node and abort() are checked between
CONNECT_TIMEOUT_S = 5.0      # TCP connect to a cluster's GCS port before ray.init
_INSTALL_HINT = "the ray collector needs Ray: pip install 'wfrl[ray]'"
_STAT_FIELDS = {"episode": np.int64, "env_return": np.float64, "alignment": np.float64,
                "compliance": np.float64, "fixes": np.int64, "compliant": np.int64}


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
    from ray._raylet import InnerGcsClient
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


# --------------------------------------------------------------------------------------------
# Actor side (torch-free)

class EpisodeActor:
    """Lives in a Ray worker process: one backend and one compiled policy for the whole run."""

    def __init__(self, backend, red_agent, hidden, seed, lam, count_foothold, rows):
        from wfrl.envs import make_backend
        self.backend = make_backend(backend, red_agent, seed=seed)
        self.hidden, self.seed, self.lam, self.count_foothold = hidden, seed, lam, count_foothold
        self.buffer = compiled_buffer(allocate_trajectory(rows, EP_LEN))
        self._policy_key = None
        self._policy = None

    def info(self) -> tuple[int, bool, str]:
        """(pid, whether torch got imported in this process, the Ray node id it runs on)."""
        import ray
        return os.getpid(), "torch" in sys.modules, ray.get_runtime_context().get_node_id()

    def _policy_for(self, weights_box, wf_index):
        import ray
        from wfrl.collect.rollout import make_policy
        key = (weights_box[0].hex(), wf_index)
        if key != self._policy_key:
            weights = np.array(ray.get(weights_box[0]), dtype=np.float32)  # own, writable copy
            self._policy = make_policy(weights, self.hidden, Workflow.from_index(wf_index),
                                       self.lam, self.count_foothold)
            self._policy_key = key
        return self._policy

    def run(self, weights_box, wf_index, episodes):
        """Play global episodes `episodes`; returns (pid, trajectory rows, statistics).

        weights_box is [ObjectRef] (a ref nested in a list is not resolved by Ray), so the weights
        are fetched only when they changed."""
        from wfrl.collect.rollout import run_episodes
        policy = self._policy_for(weights_box, wf_index)
        n = len(episodes)
        self.buffer.clear()
        stats = run_episodes(self.backend, policy, episodes, self.seed, self.buffer)
        a = self.buffer.arrays
        rows = {k: a[k][:n].copy() for k in list(TRAJ_FIELDS) + ["lengths"]}
        st = {"episode": [s.episode for s in stats], "env_return": [s.env_return for s in stats],
              "alignment": [s.alignment for s in stats],
              "compliance": [s.compliance for s in stats], "fixes": [s.fixes for s in stats],
              "compliant": [s.compliant_fixes for s in stats]}
        return os.getpid(), rows, {k: np.asarray(v, _STAT_FIELDS[k]) for k, v in st.items()}


# --------------------------------------------------------------------------------------------
# A private, loopback-only Ray instance

_token = None


def _auth_token() -> str:
    """One random token per driver process (Ray caches the token it loaded in-process)."""
    global _token
    if _token is None:
        _token = secrets.token_hex(32)
    return _token


def _cmdline(pid) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


_MARKER = "WFRL_RAY_INSTANCE"


def _environ(pid) -> bytes:
    """The environment pid was started with ("" when it is gone or not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return b"\0" + f.read()
    except OSError:
        return b""


def _argv(pid) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _raylet_of_socket(socket_name: str) -> int | None:
    """The pid of the raylet serving `socket_name` (its --raylet_socket_name), if this process
    can see it."""
    flag = f"--raylet_socket_name={socket_name}"
    for d in os.listdir("/proc"):
        if d.isdigit():
            argv = _argv(d)
            if argv and os.path.basename(argv[0]) == "raylet" and flag in argv:
                return int(d)
    return None


def _parents() -> dict[int, int]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    out[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return out


def _stat(pid) -> list[str]:
    """Fields of /proc/<pid>/stat after the command name ([] if the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _alive(pid) -> bool:
    st = _stat(pid)
    return bool(st) and st[0] != "Z"


def _start_time(pid):
    st = _stat(pid)
    return st[19] if st else None


def _kill_same(procs) -> None:
    """SIGKILL each (pid, start time) still alive and still the same process."""
    for p, started in procs:
        if _alive(p) and _start_time(p) == started:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


class _SigtermAsExit:
    """While Ray is up, SIGTERM raises SystemExit(128 + 15) in the driver (or runs the handler
    that was there before ray.init), so `finally` blocks close the collector; ray.init installs
    handlers of its own that exit with status 1 or 15 and are never removed. Ray turns a
    SystemExit raised during ray.wait/ray.get into SystemExit(1); `received` lets the collector
    restore the status."""

    received: int | None = None

    def __init__(self):
        self.saved = None
        if threading.current_thread() is threading.main_thread():
            self.saved = signal.getsignal(signal.SIGTERM)

    def install(self):
        _SigtermAsExit.received = None  # a new instance: an earlier run's SIGTERM is history
        previous = self.saved
        if previous is None:
            return

        def on_sigterm(signum, frame):
            _SigtermAsExit.received = signum
            if callable(previous):
                return previous(signum, frame)
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, on_sigterm)

    def restore(self):
        saved, self.saved = self.saved, None
        if saved is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, saved)


class LocalRay:
    """A Ray instance on this machine only: loopback listeners, files under a temp dir.

    ray.init() happens in this process (the driver); shutdown() ends it and everything it
    started. See the module docstring for the configuration and why."""

    def __init__(self, num_cpus: int | None = None, object_store_mb: int = 256):
        ray = import_ray()
        if ray.is_initialized():
            raise RuntimeError("Ray is already initialised in this process")
        from ray._private import ray_constants
        from ray._raylet import Config
        self.temp_dir = tempfile.mkdtemp(prefix="wfrl-ray-")
        self.session_dir = None
        env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
               "RAY_AUTH_TOKEN": _auth_token(), "RAY_USAGE_STATS_ENABLED": "0",
               # Inherited by every process the instance starts: Ray's agents rename their
               # command line (ray::DashboardAgent) and are orphaned when their raylet dies, so
               # neither the command line nor the process tree finds them then; this does.
               _MARKER: self.temp_dir,
               # Ray's setproctitle may write a long title over the environment block, where
               # /proc/PID/environ is read; this keeps it off the environment.
               "SPT_NOENV": "1"}
        self._saved_env = {k: os.environ.get(k) for k in list(env) + ["RAY_AUTH_TOKEN_PATH"]}
        self._sigterm = _SigtermAsExit()
        self._up = False
        os.environ.update(env)
        os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
        Config.initialize("")  # this process reads the auth mode again
        cluster_flag = ray_constants.ENABLE_RAY_CLUSTER
        ray_constants.ENABLE_RAY_CLUSTER = False
        try:
            self._up = True
            ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                     _temp_dir=self.temp_dir, object_store_memory=object_store_mb * 2**20,
                     log_to_driver=False, logging_level=logging.WARNING)
            self.session_dir = ray._private.worker._global_node.get_session_dir_path()
        except BaseException:
            self.shutdown()
            raise
        finally:
            ray_constants.ENABLE_RAY_CLUSTER = cluster_flag
        self._sigterm.install()

    def pids(self) -> list[int]:
        """Live processes of this instance: those whose command line names its temp dir
        (gcs_server, raylet, monitors) or whose environment carries its marker (every process
        it started, also an agent that renamed itself and lost its raylet parent), and all their
        descendants (the workers)."""
        parents = _parents()
        kids: dict[int, list[int]] = {}
        for pid, ppid in parents.items():
            kids.setdefault(ppid, []).append(pid)
        marker = f"\0{_MARKER}={self.temp_dir}\0".encode()
        roots = [p for p in parents if p != os.getpid()
                 and (self.temp_dir in _cmdline(p) or marker in _environ(p))]
        out, todo = set(), list(roots)
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo.extend(kids.get(p, []))
        return sorted(p for p in out if _alive(p))

    def shutdown(self, timeout: float = 10.0, kill_first: bool = False) -> None:
        """End the instance and every process it started; restore the environment; remove the
        temp dir (idempotent). kill_first: the instance has lost its raylet or GCS, so its
        processes are SIGKILLed (by pid) before the driver disconnects, which then talks to
        nothing that could take it down or keep it waiting."""
        if self._up:
            self._up = False
            import ray
            procs = [(p, _start_time(p)) for p in self.pids()]
            if kill_first:
                _kill_same(procs)
            try:
                ray.shutdown(wait_for_processes=True)
            finally:
                # Whatever outlived the shutdown is killed, by pid (checked to be the same
                # process: same start time).
                deadline = time.time() + timeout
                while any(_alive(p) for p, _ in procs) and time.time() < deadline:
                    time.sleep(0.05)
                # Then kill what is left, scanning again (not only the snapshot: a process the
                # dying instance was starting, e.g. the raylet's runtime-env agent, is not in
                # it) until nothing of the instance is left; bounded, a process that cannot be
                # killed is not waited for.
                rescan_deadline = time.time() + max(1.0, timeout / 2)
                while time.time() < rescan_deadline:
                    left = [(p, _start_time(p)) for p in self.pids()]
                    if not left:
                        break
                    _kill_same(left)
                    time.sleep(0.05)
                self._restore()
        else:
            self._restore()

    def _restore(self):
        saved, self._saved_env = self._saved_env, None
        if saved is not None:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self._sigterm.restore()
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# A guardian for the driver's last moments

# When the raylet of the driver's node dies, Ray's core worker ends the driver with _exit(1) at
# its next call into the object store (connection.cc: "The connection to the plasma store is
# failed. Terminate the process"), which no Python code sees. The guardian, a small stdlib-only
# child, holds the read end of a pipe from the driver: the driver writes to it when it closes
# the collector; end of file without that means the driver is gone. If one of the watched
# processes (the node's raylet / gcs_server) died while the driver was still alive, it prints
# the one line the driver could not; in either case it SIGKILLs what is left of a private
# instance (by pid: processes naming its temp dir and their descendants) and removes the temp
# dir. Its settings travel in the environment, so its command line names no temp dir.
_GUARDIAN = r"""
import json, os, select, shutil, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
spec = json.loads(os.environ.pop("WFRL_RAY_GUARDIAN"))
def stat(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []
def gone(pid, start):
    st = stat(pid)
    return not st or st[0] == "Z" or st[19] != start
lost = False
while True:
    ready, _, _ = select.select([0], [], [], 0.05)
    if ready:
        if os.read(0, 64):
            sys.exit(0)              # the driver closed the collector itself
        # end of file: the driver is gone — within 50 ms of its node, which the last poll may
        # not have seen (Ray ends the driver at its next object-store call): look once more
        lost = lost or any(gone(p, t) for p, t in spec["watch"])
        break
    if not lost and any(gone(p, t) for p, t in spec["watch"]):
        lost = True
temp = spec["temp_dir"]
if temp:
    import time
    def cmdline(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""
    def environ(pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                return b"\0" + f.read()
        except OSError:
            return b""
    marker = ("\0" + spec["marker"] + "=" + temp + "\0").encode()
    # Scan and kill until nothing of the instance is left: a process the dying instance was
    # starting (a raylet's agent) may appear after the first scan. Bounded.
    deadline = time.time() + 5.0
    while True:
        parents = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                st = stat(d)
                if st and st[0] != "Z":
                    parents[int(d)] = int(st[1])
        todo = [p for p in parents
                if p != os.getpid() and (temp in cmdline(p) or marker in environ(p))]
        seen = set()
        while todo:
            p = todo.pop()
            if p not in seen:
                seen.add(p)
                todo.extend(c for c, pp in parents.items() if pp == p)
        if not seen or time.time() > deadline:
            break
        for p in seen:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
    shutil.rmtree(temp, ignore_errors=True)
if lost:
    os.write(2, ("wfrl: error: " + spec["message"] + "\n").encode())
"""


class _Guardian:
    """The driver's side of the guardian (see _GUARDIAN)."""

    def __init__(self, watch, temp_dir: str | None, message: str):
        import json
        import subprocess
        env = {k: v for k, v in os.environ.items() if k != _MARKER}   # not one of the instance's
        env = {**env, "WFRL_RAY_GUARDIAN": json.dumps(
            {"watch": [[p, t] for p, t in watch], "temp_dir": temp_dir, "marker": _MARKER,
             "message": message})}
        self.proc = subprocess.Popen([sys.executable, "-I", "-c", _GUARDIAN],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env,
                                     close_fds=True)

    def release(self) -> None:
        """The driver is closing normally: the guardian exits without doing anything."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.write(b"closed")
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except Exception:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------------------------
# Driver side

class RayCollector:
    """The collector interface (see SequentialCollector) on Ray actors."""

    def __init__(self, backend, red_agent, hidden, seed, lam, count_foothold=False, n_workers=1,
                 n_rows=1, ray_address=None, chunk: int | None = None):
        ray = import_ray()
        if n_workers < 1:
            raise UserError(f"--n-workers must be positive (got {n_workers})")
        self.backend_name, self.red_agent = backend, red_agent
        self.hidden, self.seed, self.lam, self.count_foothold = hidden, seed, lam, count_foothold
        self.n_workers, self.n_rows = n_workers, n_rows
        self.chunk = chunk or (1 if backend_engine(backend) == "cyborg" else 64)
        self.buffer = compiled_buffer(allocate_trajectory(n_rows, EP_LEN))
        self.rebuilds = 0
        self.local: LocalRay | None = None
        self._connected = False
        self._sigterm = None
        self._closing = False              # abort(): a collect() elsewhere stops at its next slice
        self._node_lost = False
        self._watched: list[tuple[int, str | None]] = []   # (pid, start time) of the driver's node
        self._guardian: _Guardian | None = None
        self.actors: list = []
        self.generation: list[int] = []
        self.pids: list[int | None] = []   # actor process ids (None until a replacement reports)
        self.node_ids: list[str | None] = []   # Ray node each actor runs on (same)
        self.cpus: list[float] = []        # CPUs each actor asked for
        self._placing: dict[int, float] = {}   # slot -> deadline of a replacement's report
        self._probes: dict = {}            # info() ref of a replacement -> (slot, generation)
        self._weights = None               # last weights put, and their ObjectRef
        self._weights_ref = None
        try:
            if ray.is_initialized():
                pass                       # someone else's instance: use it, leave it running
            elif ray_address:
                self._sigterm = _SigtermAsExit()
                self._connected = True
                connect_to_cluster(ray, ray_address)
                self._sigterm.install()
            else:
                self.local = LocalRay()
            self._watched = self._local_node_processes()
            self._guardian = _Guardian(self._watched,
                                       self.local.temp_dir if self.local is not None else None,
                                       str(self._lost_error()))
            # One CPU per actor when the cluster has them free, else an equal share of what is
            # free (n_workers actors always fit: 2 workers on 2 cores, 4 on 2 cores at 0.5 each).
            free = float(ray.available_resources().get("CPU", 0.0))
            self.actor_cpus = max(0.0, min(1.0, _floor4(free / n_workers)))
            self._remote = ray.remote(EpisodeActor)
            self.cpus = [self.actor_cpus] * n_workers
            self.actors = [self._new_actor(self.actor_cpus) for _ in range(n_workers)]
            self.generation = [0] * n_workers
            info = ray.get([a.info.remote() for a in self.actors], timeout=READY_TIMEOUT_S)
            self.pids = [pid for pid, _, _ in info]
            self.node_ids = [node for _, _, node in info]
            self.torch_in_actors = any(t for _, t, _ in info)
        except BaseException:
            self.close()
            raise

    # -- the driver's own node ------------------------------------------------------------

    def _local_node_processes(self) -> list[tuple[int, str | None]]:
        """What the driver cannot live without, by (pid, start time): the private instance's
        gcs_server and raylet, or on a cluster the raylet this driver attached to (when this
        process can see it; a driver in another pid namespace watches nothing)."""
        import ray
        if self.local is not None:
            pids = [p for p in self.local.pids()
                    if os.path.basename((_argv(p) or [""])[0]) in ("raylet", "gcs_server")]
        else:
            node = ray._private.worker._global_node
            sock = getattr(node, "_raylet_socket_name", None) if node is not None else None
            pid = _raylet_of_socket(sock) if sock else None
            pids = [pid] if pid is not None else []
        return [(p, _start_time(p)) for p in pids]

    def local_node_lost(self) -> bool:
        """Whether a watched process of the driver's node has died (sticky)."""
        if not self._node_lost:
            self._node_lost = any(not _alive(p) or _start_time(p) != t for p, t in self._watched)
        return self._node_lost

    def _lost_error(self) -> RayNodeLost:
        where = ("the private Ray instance of this run" if self.local is not None
                 else "the Ray node this driver runs on")
        return RayNodeLost(f"{where} died (a raylet or gcs_server process of it was killed); "
                           "the run stopped after its last completed update, whose checkpoint "
                           "and logs are kept (a search continues with wfrl train --resume DIR)")

    def _check(self) -> None:
        if self.local_node_lost():
            raise self._lost_error()
        if self._closing:
            from wfrl.collect.shm_base import CollectorClosed
            raise CollectorClosed("the collector was closed during collection")

    # -- actors ---------------------------------------------------------------------------

    def _new_actor(self, cpus: float):
        return self._remote.options(num_cpus=cpus).remote(
            self.backend_name, self.red_agent, self.hidden, self.seed, self.lam,
            self.count_foothold, self.chunk)

    def _replacement_cpus(self) -> float:
        """The CPUs of the actor replaced if they are free now, else an equal share of what is
        free among the replacements under way (0 when nothing is: placed on any live node)."""
        import ray
        free = float(ray.available_resources().get("CPU", 0.0))
        return max(0.0, min(self.actor_cpus, _floor4(free / (len(self._placing) + 1))))

    def _replace(self, slot: int, cpus: float | None = None) -> None:
        import ray
        self.rebuilds += 1
        if self.rebuilds > MAX_REBUILDS:
            raise RuntimeError(f"Ray actors keep dying: gave up after {MAX_REBUILDS} "
                               "replacements")
        try:
            ray.kill(self.actors[slot], no_restart=True)
        except Exception:
            pass
        self.cpus[slot] = self._replacement_cpus() if cpus is None else cpus
        self.actors[slot] = self._new_actor(self.cpus[slot])
        self.generation[slot] += 1
        self.pids[slot] = self.node_ids[slot] = None
        self._placing[slot] = time.monotonic() + REPLACE_TIMEOUT_S
        self._probes[self.actors[slot].info.remote()] = (slot, self.generation[slot])

    def _overdue_replacements(self, load: list[int]) -> None:
        """A replacement that has not reported in REPLACE_TIMEOUT_S is made again with 0 CPUs
        (the free CPUs it was sized from may have belonged to a node not yet known dead); one
        of 0 CPUs that has not either cannot be placed anywhere: RayClusterError."""
        import ray
        now = time.monotonic()
        for slot, deadline in list(self._placing.items()):
            if now < deadline:
                continue
            if self.cpus[slot] > 0:
                self._replace(slot, cpus=0.0)
                load[slot] = 0       # the old generation's tasks no longer count against it
                continue
            total = ray.cluster_resources().get("CPU", 0.0)
            raise RayClusterError(
                f"a replacement Ray actor could not be placed in {REPLACE_TIMEOUT_S:.0f} s, not "
                f"even with 0 CPUs (the cluster has {total:g} CPUs on "
                f"{len([n for n in ray.nodes() if n.get('Alive')])} live nodes)")

    def worker_pids(self) -> list[int]:
        return [p for p in self.pids if p is not None]

    def _publish(self, weights: np.ndarray):
        """One ray.put when the weights differ from the last ones put."""
        import ray
        if self._weights is None or self._weights.shape != weights.shape \
                or not np.array_equal(self._weights, weights):
            self._weights = np.array(weights, dtype=np.float32)
            self._weights_ref = ray.put(self._weights)
        return [self._weights_ref]

    # -- collection -----------------------------------------------------------------------

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, first_episode: int,
                n_episodes: int, spread: bool = False) -> list[EpisodeStats]:
        try:
            return self._collect(weights, version, workflow, first_episode, n_episodes)
        except SystemExit:
            signum = _SigtermAsExit.received
            if signum is not None:      # our SIGTERM, rewritten to status 1 inside ray.wait
                raise SystemExit(128 + signum) from None
            raise
        except Exception as exc:
            if not isinstance(exc, RayNodeLost) and self.local_node_lost():
                raise self._lost_error() from None   # whatever Ray raised on the way down
            raise

    def _collect(self, weights, version, workflow, first_episode, n_episodes):
        import ray
        from ray.exceptions import ObjectLostError, RayActorError
        if n_episodes > self.n_rows:
            raise ValueError(f"{n_episodes} episodes do not fit {self.n_rows} rows")
        self._check()
        box = self._publish(weights)
        self.buffer.clear()
        a = self.buffer.arrays
        stats = {k: np.zeros(n_episodes, dt) for k, dt in _STAT_FIELDS.items()}
        pending = deque((s, min(s + self.chunk, n_episodes))
                        for s in range(0, n_episodes, self.chunk))
        in_flight: dict = {}            # ObjectRef -> (slot, generation, (row0, row1))
        load = [0] * self.n_workers
        progress = time.monotonic()
        while pending or in_flight:
            for slot in range(self.n_workers):
                while pending and load[slot] < TASKS_PER_ACTOR:
                    r0, r1 = pending.popleft()
                    eps = np.arange(first_episode + r0, first_episode + r1, dtype=np.int64)
                    ref = self.actors[slot].run.remote(box, workflow.index, eps)
                    in_flight[ref] = (slot, self.generation[slot], (r0, r1))
                    load[slot] += 1
            waiting = list(in_flight) + list(self._probes)
            if waiting:
                ready, _ = ray.wait(waiting, num_returns=1, timeout=POLL_S)
            else:                      # nothing to wait on (ray.wait([]) returns at once)
                time.sleep(POLL_S)
                ready = []
            self._check()
            if not ready:
                self._overdue_replacements(load)
                if time.monotonic() - progress > READY_TIMEOUT_S:
                    raise RuntimeError(f"no episode came back from the Ray actors in "
                                       f"{READY_TIMEOUT_S:.0f} s (can the cluster place "
                                       f"{self.n_workers} actors of {self.actor_cpus:g} CPU?)")
                continue
            progress = time.monotonic()
            for ref in ready:
                if ref in self._probes:
                    self._probe_done(ref, load)
                    continue
                slot, gen, (r0, r1) = in_flight.pop(ref)
                if gen == self.generation[slot]:
                    load[slot] -= 1
                try:
                    pid, rows, st = ray.get(ref)
                except (RayActorError, ObjectLostError) as exc:
                    self._check()
                    pending.appendleft((r0, r1))
                    if isinstance(exc, RayActorError) and gen == self.generation[slot]:
                        self._replace(slot)    # first news of this actor's death
                        load[slot] = 0
                    continue
                if gen == self.generation[slot]:
                    self.pids[slot] = pid
                for k, v in rows.items():
                    a[k][r0:r1] = v
                for k, v in st.items():
                    stats[k][r0:r1] = v
        return [EpisodeStats(int(stats["episode"][i]), float(stats["env_return"][i]),
                             float(stats["alignment"][i]), float(stats["compliance"][i]),
                             int(stats["fixes"][i]), int(stats["compliant"][i]), version)
                for i in range(n_episodes)]

    def _probe_done(self, ref, load) -> None:
        """A replacement's info() came back: it is placed (or it died before it reported)."""
        import ray
        from ray.exceptions import RayActorError
        slot, gen = self._probes.pop(ref)
        if gen != self.generation[slot]:
            return
        try:
            pid, _, node = ray.get(ref)
        except RayActorError:
            self._check()
            self._replace(slot)
            load[slot] = 0
            return
        self._placing.pop(slot, None)
        self.pids[slot], self.node_ids[slot] = pid, node

    def abort(self) -> None:
        """From any thread: a collect() running elsewhere ends at its next ray.wait slice with
        CollectorClosed (an interrupted overlapped run)."""
        self._closing = True

    def close(self) -> None:
        self._closing = True
        actors, self.actors = self.actors, []
        self._weights_ref = None
        self._probes.clear()
        lost = self.local_node_lost()
        if actors and not lost:
            import ray
            for actor in actors:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:
                    pass
        local, self.local = self.local, None
        try:
            if local is not None:
                local.shutdown(kill_first=lost)
            elif self._connected:
                self._connected = False
                import ray
                try:
                    ray.shutdown()
                finally:
                    self._sigterm.restore()
        finally:
            if self._guardian is not None:
                self._guardian.release()


def _floor4(x: float) -> float:
    """Down to Ray's resource precision (1e-4), so a share of what is free fits in it."""
    return math.floor(x * 1e4) / 1e4
