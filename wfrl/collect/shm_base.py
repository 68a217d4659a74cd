"""What the multi-process collectors (sync, async) share on the owner's side: one shared-memory
segment (wfrl.collect.shm) laid out by wfrl.collect.worker.shared_spec, the learner's view of its
trajectory rows, the weights board, and the per-row episode statistics the workers write."""
from __future__ import annotations

from wfrl.collect import worker
from wfrl.collect.buffer import traj_fields
from wfrl.collect.shm import SharedArrays, WeightsBoard
from wfrl.collect.stats import EpisodeStats
from wfrl.envs.base import EP_LEN
from wfrl.errors import UserError
from wfrl.ppo.netspec import as_netspec

MAX_POOL_REBUILDS = 20  # restarts of dead workers before a collector gives up
POLL_S = 0.05           # how often a collector waiting on its workers looks whether it was closed


def end_processes(procs, grace: float = 5.0) -> None:
    """SIGTERM every live process of `procs`, wait up to `grace` seconds for each, SIGKILL and
    reap what is left (the collectors' workers, stopped under worker_signals_deferred)."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=grace)
        if p.is_alive():
            p.kill()
            p.join()


def end_pool(pool) -> None:
    """Shut a concurrent.futures process pool down now: pending tasks cancelled, its workers
    ended (end_processes), and its manager thread waited for. That thread closes its wake-up
    pipe as it ends; the interpreter's exit writes to that pipe, and a manager ending at that
    moment made the write fail (OSError: bad file descriptor, a traceback after "wfrl:
    interrupted"; seen in tests/test_stress.py). shutdown() forgets the thread: taken first."""
    procs = list(getattr(pool, "_processes", {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    end_processes(procs)
    if manager is not None:
        manager.join(timeout=5)


class CollectorClosed(RuntimeError):
    """collect() was running when the collector was aborted (the run is ending)."""


class SharedCollectorBase:
    """Shared memory, the learner-side buffer view and the episode statistics for the
    multi-process collectors."""

    def __init__(self, backend, red_agent, hidden, seed, lam, count_foothold, n_workers, n_rows):
        from wfrl._core import TrajectoryBuffer
        if n_workers < 1:
            raise UserError(f"--n-workers must be positive (got {n_workers})")
        self.backend_name, self.red_agent = backend, red_agent
        self.hidden, self.seed, self.lam, self.count_foothold = hidden, seed, lam, count_foothold
        self.n_workers, self.n_rows = n_workers, n_rows
        net = as_netspec(hidden)
        self.shm = SharedArrays(worker.shared_spec(n_rows, EP_LEN, net.n_params, net))
        a = self.shm.arrays
        self.buffer = TrajectoryBuffer({k: a[k] for k in list(traj_fields(net)) + ["lengths"]})
        self.board = WeightsBoard(a)
        self.rebuilds = 0

    def _init_args(self):
        return (self.shm.handle, self.backend_name, self.red_agent, self.hidden, self.lam,
                self.count_foothold, self.seed)

    def _stats(self, rows) -> list[EpisodeStats]:
        a = self.shm.arrays
        return [EpisodeStats(int(a["st_episode"][r]), float(a["st_env_return"][r]),
                             float(a["st_alignment"][r]), float(a["st_compliance"][r]),
                             int(a["st_fixes"][r]), int(a["st_compliant"][r]),
                             int(a["st_version"][r])) for r in rows]
