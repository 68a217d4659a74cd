"""A private, loopback-only Ray instance for one run, and the guardian that cleans up after a
driver that dies with it.

Without --ray-address, LocalRay starts a private instance whose every listening socket is bound
to the loopback interface and which writes only under a fresh directory in the system temp dir,
removed on shutdown. Ray 2.60 has no setting for this; the recipe (environment, private constant,
token, temp dir), what shutdown does and how it was checked: docs/collectors.md, "Ray".
"""
from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time

from wfrl.collect.ray.common import import_ray

# --------------------------------------------------------------------------------------------
# A private, loopback-only Ray instance

_token = None


def _auth_token() -> str:
    """One random token per driver process (Ray caches the token it loaded in-process)."""
    global _token
    if _token is None:
        _token = secrets.token_hex(32)
    return _token


def pid_cmdline(pid) -> str:
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


def pid_argv(pid) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def raylet_of_socket(socket_name: str) -> int | None:
    """The pid of the raylet serving `socket_name` (its --raylet_socket_name), if this process
    can see it."""
    flag = f"--raylet_socket_name={socket_name}"
    for d in os.listdir("/proc"):
        if d.isdigit():
            argv = pid_argv(d)
            if argv and os.path.basename(argv[0]) == "raylet" and flag in argv:
                return int(d)
    return None


def parent_pids() -> dict[int, int]:
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


def pid_alive(pid) -> bool:
    st = _stat(pid)
    return bool(st) and st[0] != "Z"


def pid_start_time(pid):
    st = _stat(pid)
    return st[19] if st else None


def _kill_same(procs) -> None:
    """SIGKILL each (pid, start time) still alive and still the same process."""
    for p, started in procs:
        if pid_alive(p) and pid_start_time(p) == started:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


class SigtermAsExit:
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
        SigtermAsExit.received = None  # a new instance: an earlier run's SIGTERM is history
        previous = self.saved
        if previous is None:
            return

        def on_sigterm(signum, frame):
            SigtermAsExit.received = signum
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

        # ray/_raylet.pyi declares only the ids and ObjectRef of the compiled module
        from ray._raylet import Config  # type: ignore[attr-defined]
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
        self._saved_env: dict[str, str | None] | None = {
            k: os.environ.get(k) for k in list(env) + ["RAY_AUTH_TOKEN_PATH"]}
        self._sigterm = SigtermAsExit()
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
        parents = parent_pids()
        kids: dict[int, list[int]] = {}
        for pid, ppid in parents.items():
            kids.setdefault(ppid, []).append(pid)
        marker = f"\0{_MARKER}={self.temp_dir}\0".encode()
        roots = [p for p in parents if p != os.getpid()
                 and (self.temp_dir in pid_cmdline(p) or marker in _environ(p))]
        out, todo = set(), list(roots)
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo.extend(kids.get(p, []))
        return sorted(p for p in out if pid_alive(p))

    def shutdown(self, timeout: float = 10.0, kill_first: bool = False) -> None:
        """End the instance and every process it started; restore the environment; remove the
        temp dir (idempotent). kill_first: the instance has lost its raylet or GCS, so its
        processes are SIGKILLed (by pid) before the driver disconnects, which then talks to
        nothing that could take it down or keep it waiting."""
        if self._up:
            self._up = False
            import ray
            procs = [(p, pid_start_time(p)) for p in self.pids()]
            if kill_first:
                _kill_same(procs)
            try:
                ray.shutdown(wait_for_processes=True)
            finally:
                # Whatever outlived the shutdown is killed, by pid (checked to be the same
                # process: same start time).
                deadline = time.time() + timeout
                while any(pid_alive(p) for p, _ in procs) and time.time() < deadline:
                    time.sleep(0.05)
                # Then kill what is left, scanning again (not only the snapshot: a process the
                # dying instance was starting, e.g. the raylet's runtime-env agent, is not in
                # it) until nothing of the instance is left; bounded, a process that cannot be
                # killed is not waited for.
                rescan_deadline = time.time() + max(1.0, timeout / 2)
                while time.time() < rescan_deadline:
                    left = [(p, pid_start_time(p)) for p in self.pids()]
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


class Guardian:
    """The driver's side of the guardian (see _GUARDIAN)."""

    def __init__(self, watch, temp_dir: str | None, message: str):
        import json
        import subprocess
        env = {k: v for k, v in os.environ.items() if k != _MARKER}   # not one of the instance's
        env = {**env, "WFRL_RAY_GUARDIAN": json.dumps(
            {"watch": [[p, t] for p, t in watch], "temp_dir": temp_dir, "marker": _MARKER,
             "message": message})}
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-I", "-c", _GUARDIAN], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, env=env, close_fds=True)

    def release(self) -> None:
        """The driver is closing normally: the guardian exits without doing anything."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None   # opened with stdin=PIPE
            proc.stdin.write(b"closed")
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except Exception:
            proc.kill()
            proc.wait()
