"""The Ray collector (--collector ray): whole episodes as tasks on long-lived Ray actors.

Where Ray runs: a private local instance (wfrl.collect.ray.local) or a cluster joined by
address (wfrl.collect.ray.address).

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
what is left of the instance by pid. An actor imports no torch (only the worker-side modules:
rollout, buffer, envs), on CybORG too (wfrl.envs.reds.cyborg_agents_on_demand).
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from wfrl.collect.buffer import allocate_trajectory, compiled_buffer, traj_fields
from wfrl.collect.ray.address import connect_to_cluster
from wfrl.collect.ray.common import RayClusterError, RayNodeLost, import_ray
from wfrl.collect.ray.local import (
    Guardian,
    LocalRay,
    SigtermAsExit,
    pid_alive,
    pid_argv,
    pid_start_time,
    raylet_of_socket,
)
from wfrl.collect.stats import EpisodeStats
from wfrl.envs.base import EP_LEN, backend_engine
from wfrl.errors import UserError
from wfrl.workflow import Workflow

if TYPE_CHECKING:
    from ray import ObjectRef

MAX_REBUILDS = 20
TASKS_PER_ACTOR = 2          # in flight per actor: one running, one queued behind it
READY_TIMEOUT_S = 300.0      # no actor start / no result for this long is an error, not a hang
REPLACE_TIMEOUT_S = 60.0     # a replacement actor that has not reported by then is not placeable
POLL_S = 0.5                 # ray.wait slice: the local node and abort() are checked between
_STAT_FIELDS = {"episode": np.int64, "env_return": np.float64, "alignment": np.float64,
                "compliance": np.float64, "fixes": np.int64, "compliant": np.int64}

# --------------------------------------------------------------------------------------------
# Actor side (torch-free)

class EpisodeActor:
    """Lives in a Ray worker process: one backend and one compiled policy for the whole run."""

    def __init__(self, backend, red_agent, hidden, seed, lam, count_foothold, rows):
        from wfrl.envs import make_backend
        self.backend = make_backend(backend, red_agent, seed=seed)
        self.hidden, self.seed, self.lam, self.count_foothold = hidden, seed, lam, count_foothold
        self.buffer = compiled_buffer(allocate_trajectory(rows, EP_LEN, hidden))
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
        from wfrl.collect.worker import stress_delay
        stress_delay()
        policy = self._policy_for(weights_box, wf_index)
        n = len(episodes)
        self.buffer.clear()
        stats = run_episodes(self.backend, policy, episodes, self.seed, self.buffer)
        a = self.buffer.arrays
        rows = {k: a[k][:n].copy() for k in list(traj_fields(self.hidden)) + ["lengths"]}
        st = {"episode": [s.episode for s in stats], "env_return": [s.env_return for s in stats],
              "alignment": [s.alignment for s in stats],
              "compliance": [s.compliance for s in stats], "fixes": [s.fixes for s in stats],
              "compliant": [s.compliant_fixes for s in stats]}
        return os.getpid(), rows, {k: np.asarray(v, _STAT_FIELDS[k]) for k, v in st.items()}


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
        self.buffer = compiled_buffer(allocate_trajectory(n_rows, EP_LEN, hidden))
        self.rebuilds = 0
        self.local: LocalRay | None = None
        self._connected = False
        self._sigterm: SigtermAsExit | None = None
        self._closing = False              # abort(): a collect() elsewhere stops at its next slice
        self._node_lost = False
        self._watched: list[tuple[int, str | None]] = []   # (pid, start time) of the driver's node
        self._guardian: Guardian | None = None
        self.actors: list = []
        self.generation: list[int] = []
        self.pids: list[int | None] = []   # actor process ids (None until a replacement reports)
        self.node_ids: list[str | None] = []   # Ray node each actor runs on (same)
        self.cpus: list[float] = []        # CPUs each actor asked for
        self._placing: dict[int, float] = {}   # slot -> deadline of a replacement's report
        self._probes: dict = {}            # info() ref of a replacement -> (slot, generation)
        self._weights: np.ndarray | None = None   # last weights put, and their ObjectRef
        self._weights_ref: ObjectRef[np.ndarray] | None = None
        try:
            if ray.is_initialized():
                pass                       # someone else's instance: use it, leave it running
            elif ray_address:
                self._sigterm = SigtermAsExit()
                self._connected = True
                connect_to_cluster(ray, ray_address)
                self._sigterm.install()
            else:
                self.local = LocalRay()
            self._watched = self._local_node_processes()
            self._guardian = Guardian(self._watched,
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
                    if os.path.basename((pid_argv(p) or [""])[0]) in ("raylet", "gcs_server")]
        else:
            node = ray._private.worker._global_node
            sock = getattr(node, "_raylet_socket_name", None) if node is not None else None
            pid = raylet_of_socket(sock) if sock else None
            pids = [pid] if pid is not None else []
        return [(p, pid_start_time(p)) for p in pids]

    def local_node_lost(self) -> bool:
        """Whether a watched process of the driver's node has died (sticky)."""
        if not self._node_lost:
            self._node_lost = any(not pid_alive(p) or pid_start_time(p) != t for p, t in self._watched)
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
            signum = SigtermAsExit.received
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
                assert self._sigterm is not None   # set whenever _connected is
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
