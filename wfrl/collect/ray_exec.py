"""The Ray collector (--collector ray): whole episodes as tasks on long-lived Ray actors.

One actor per worker builds its backend once and keeps it, with a compiled policy, for the whole
run. Per collect() call the driver publishes the weights with one ray.put (only when they changed)
and deals out tasks of whole episodes (CybORG: one episode per task; simulator: chunks of 64, an
episode there costs ~0.5 ms); at most two tasks are in flight per actor and ray.wait takes results
as they complete. A task comes back as compact numpy arrays (its trajectory rows and per-episode
statistics) that the driver copies into rows of its own buffer. An actor re-makes its policy only
when the weights object or the workflow changes. Every episode is seeded by its global number, so
the batch is identical to the sequential collector's whichever actor plays which episode.

Faults: an actor that dies (SIGKILL, OOM) surfaces as RayActorError on its tasks; the driver
replaces it with a new actor (which fetches the current weights) and queues the episodes it had
not returned again. After MAX_REBUILDS replacements the collection gives up with a RuntimeError.
wfrl's side of an actor imports no torch (only the worker-side modules: rollout, buffer, envs);
on CybORG the csle_cyborg package itself pulls torch in (csle_cyborg.agents imports
stable_baselines3), as it does in the other collectors' workers.

Where Ray runs
--------------
With ``ray_address`` the collector joins that cluster (``ray.init(address=...)``; every node needs
wfrl installed) and close() only disconnects. Without it, LocalRay starts a private instance whose
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

import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque

import numpy as np

from wfrl.collect.buffer import TRAJ_FIELDS, allocate_trajectory, compiled_buffer
from wfrl.collect.stats import EpisodeStats
from wfrl.envs.base import EP_LEN
from wfrl.errors import BackendUnavailable, UserError
from wfrl.workflow import Workflow

MAX_REBUILDS = 20
TASKS_PER_ACTOR = 2          # in flight per actor: one running, one queued behind it
READY_TIMEOUT_S = 300.0      # no actor start / no result for this long is an error, not a hang
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

    def info(self) -> tuple[int, bool]:
        """(pid, whether torch got imported in this process)."""
        return os.getpid(), "torch" in sys.modules

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
               "RAY_AUTH_TOKEN": _auth_token(), "RAY_USAGE_STATS_ENABLED": "0"}
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
        (gcs_server, raylet, agents, monitors) and all their descendants (the workers)."""
        parents = _parents()
        kids: dict[int, list[int]] = {}
        for pid, ppid in parents.items():
            kids.setdefault(ppid, []).append(pid)
        roots = [p for p in parents if p != os.getpid() and self.temp_dir in _cmdline(p)]
        out, todo = set(), list(roots)
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo.extend(kids.get(p, []))
        return sorted(p for p in out if _alive(p))

    def shutdown(self, timeout: float = 10.0) -> None:
        """End the instance and every process it started; restore the environment; remove the
        temp dir (idempotent)."""
        if self._up:
            self._up = False
            import ray
            procs = [(p, _start_time(p)) for p in self.pids()]
            try:
                ray.shutdown(wait_for_processes=True)
            finally:
                # Whatever outlived the shutdown is killed, by pid (checked to be the same
                # process: same start time).
                deadline = time.time() + timeout
                while any(_alive(p) for p, _ in procs) and time.time() < deadline:
                    time.sleep(0.05)
                for p, started in procs:
                    if _alive(p) and _start_time(p) == started:
                        try:
                            os.kill(p, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
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
        self.chunk = chunk or (1 if backend == "cyborg" else 64)
        self.buffer = compiled_buffer(allocate_trajectory(n_rows, EP_LEN))
        self.rebuilds = 0
        self.local: LocalRay | None = None
        self._connected = False
        self._sigterm = None
        self.actors: list = []
        self.generation: list[int] = []
        self.pids: list[int | None] = []   # actor process ids (None until a replacement reports)
        self._weights = None               # last weights put, and their ObjectRef
        self._weights_ref = None
        try:
            if ray.is_initialized():
                pass                       # someone else's instance: use it, leave it running
            elif ray_address:
                self._sigterm = _SigtermAsExit()
                self._connected = True
                ray.init(address=ray_address, log_to_driver=False, logging_level="WARNING")
                self._sigterm.install()
            else:
                self.local = LocalRay()
            # One CPU per actor when the cluster has them free, else an equal share of what is
            # free (n_workers actors always fit: 2 workers on 2 cores, 4 on 2 cores at 0.5 each).
            free = float(ray.available_resources().get("CPU", 0.0))
            self.actor_cpus = max(0.0, min(1.0, free / n_workers))
            self._remote = ray.remote(EpisodeActor)
            self.actors = [self._new_actor() for _ in range(n_workers)]
            self.generation = [0] * n_workers
            info = ray.get([a.info.remote() for a in self.actors], timeout=READY_TIMEOUT_S)
            self.pids = [pid for pid, _ in info]
            self.torch_in_actors = any(t for _, t in info)
        except BaseException:
            self.close()
            raise

    def _new_actor(self):
        return self._remote.options(num_cpus=self.actor_cpus).remote(
            self.backend_name, self.red_agent, self.hidden, self.seed, self.lam,
            self.count_foothold, self.chunk)

    def _replace(self, slot: int) -> None:
        import ray
        self.rebuilds += 1
        if self.rebuilds > MAX_REBUILDS:
            raise RuntimeError(f"Ray actors keep dying: gave up after {MAX_REBUILDS} "
                               "replacements")
        try:
            ray.kill(self.actors[slot], no_restart=True)
        except Exception:
            pass
        self.actors[slot] = self._new_actor()
        self.generation[slot] += 1
        self.pids[slot] = None

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

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, first_episode: int,
                n_episodes: int) -> list[EpisodeStats]:
        try:
            return self._collect(weights, version, workflow, first_episode, n_episodes)
        except SystemExit:
            signum = _SigtermAsExit.received
            if signum is not None:      # our SIGTERM, rewritten to status 1 inside ray.wait
                raise SystemExit(128 + signum) from None
            raise

    def _collect(self, weights, version, workflow, first_episode, n_episodes):
        import ray
        from ray.exceptions import RayActorError
        if n_episodes > self.n_rows:
            raise ValueError(f"{n_episodes} episodes do not fit {self.n_rows} rows")
        box = self._publish(weights)
        self.buffer.clear()
        a = self.buffer.arrays
        stats = {k: np.zeros(n_episodes, dt) for k, dt in _STAT_FIELDS.items()}
        pending = deque((s, min(s + self.chunk, n_episodes))
                        for s in range(0, n_episodes, self.chunk))
        in_flight: dict = {}            # ObjectRef -> (slot, generation, (row0, row1))
        load = [0] * self.n_workers
        while pending or in_flight:
            for slot in range(self.n_workers):
                while pending and load[slot] < TASKS_PER_ACTOR:
                    r0, r1 = pending.popleft()
                    eps = np.arange(first_episode + r0, first_episode + r1, dtype=np.int64)
                    ref = self.actors[slot].run.remote(box, workflow.index, eps)
                    in_flight[ref] = (slot, self.generation[slot], (r0, r1))
                    load[slot] += 1
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=READY_TIMEOUT_S)
            if not ready:
                raise RuntimeError(f"no episode came back from the Ray actors in "
                                   f"{READY_TIMEOUT_S:.0f} s (can the cluster place "
                                   f"{self.n_workers} actors of {self.actor_cpus:g} CPU?)")
            for ref in ready:
                slot, gen, (r0, r1) = in_flight.pop(ref)
                if gen == self.generation[slot]:
                    load[slot] -= 1
                try:
                    pid, rows, st = ray.get(ref)
                except RayActorError:
                    pending.appendleft((r0, r1))
                    if gen == self.generation[slot]:   # first news of this actor's death
                        self._replace(slot)
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

    def close(self) -> None:
        actors, self.actors = self.actors, []
        self._weights_ref = None
        if actors:
            import ray
            for actor in actors:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:
                    pass
        local, self.local = self.local, None
        if local is not None:
            local.shutdown()
        elif self._connected:
            self._connected = False
            import ray
            try:
                ray.shutdown()
            finally:
                self._sigterm.restore()
