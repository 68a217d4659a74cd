"""Where concurrent visits (--concurrent-visits K > 1) run: K worker processes on this machine,
or Ray tasks on a cluster (--ray-address), each running wfrl.search.visits.run_visit on a job
and handing back its result. The driver (wfrl.search.loop) keeps the optimizer and the records;
a pool only trains.

Both pools redo a visit whose worker died (a killed process, a lost Ray node): a visit's result
depends on its job alone, so the redo gives what the lost run would have given. A visit whose
worker dies MAX_REDOS + 1 times, or whose run raises, ends the search with that error (one line
for a UserError).
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import signal
from concurrent.futures.process import BrokenProcessPool

from wfrl.errors import UserError

MAX_REDOS = 3
POLL_S = 0.2


def _orphan_guard(parent: int) -> None:
    """Worker initializer: ignore SIGINT (Ctrl-C is the driver's to handle) and die with the
    driver: SIGKILL on its death (Linux), and at once if it is gone already."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _local_run(job: dict) -> dict:
    from wfrl.search.visits import run_visit
    return run_visit(job)


class LocalVisitPool:
    """K worker processes (spawned) on this machine, one visit each at a time."""

    def __init__(self, k: int, fn=None, what: str = "visit"):
        """fn: what a job runs (fn(*job)); default run_visit(job). what: a job's name in
        errors."""
        self.k, self.fn, self.what = k, fn, what
        self.pool: cf.ProcessPoolExecutor | None = None
        self.jobs: dict[int, dict] = {}
        self.futures: dict[int, cf.Future] = {}
        self.redos: dict[int, int] = {}
        self._start()

    def _start(self) -> None:
        self.pool = cf.ProcessPoolExecutor(self.k, mp_context=mp.get_context("spawn"),
                                           initializer=_orphan_guard, initargs=(os.getpid(),))

    def submit(self, key: int, job: dict) -> None:
        self.jobs[key] = job
        try:
            self.futures[key] = self._submit(job)
        except (BrokenProcessPool, RuntimeError, ValueError):
            self._rebuild(key)

    def _rebuild(self, key: int) -> None:
        """A worker died: every visit in flight runs again on a new pool."""
        self.redos[key] = self.redos.get(key, 0) + 1
        if self.redos[key] > MAX_REDOS:
            raise UserError(f"the worker process of {self.what} {key} died {self.redos[key]} times; "
                            "giving up (out of memory? see dmesg)")
        self._shutdown()
        self._start()
        for k, job in self.jobs.items():
            self.futures[k] = self._submit(job)

    def _submit(self, job) -> cf.Future:
        if self.fn is None:
            return self.pool.submit(_local_run, job)
        return self.pool.submit(self.fn, *job)

    def result(self, key: int) -> dict:
        """The result of visit `key`, waiting for it (other visits go on meanwhile)."""
        while True:
            fut = self.futures[key]
            try:
                out = fut.result()
            except BrokenProcessPool:
                self._rebuild(key)
                continue
            del self.futures[key], self.jobs[key]
            return out

    def pids(self) -> list[int]:
        pool = self.pool
        return [p.pid for p in list(getattr(pool, "_processes", {}).values()) if p.is_alive()] \
            if pool is not None else []

    def _shutdown(self) -> None:
        pool, self.pool = self.pool, None
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())
        for p in procs:
            if p.is_alive():
                p.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        for p in procs:
            p.join(timeout=10)

    def close(self) -> None:
        self._shutdown()
        self.jobs.clear()
        self.futures.clear()


def ray_run_visit(job: dict) -> dict:
    """run_visit as a Ray task, with the node it ran on."""
    import ray
    from wfrl.search.visits import run_visit
    out = run_visit(job)
    out["node"] = ray.get_runtime_context().get_node_id()
    return out


class RayVisitPool:
    """Visits as Ray tasks on the cluster at `address`, each declaring `cpus` CPUs: Ray places
    them on the nodes that have those free, and runs a task again elsewhere when its node dies
    (max_retries). The driver holds only references to the results."""

    def __init__(self, address: str, cpus: float):
        from wfrl.collect.ray.address import connect_to_cluster
        from wfrl.collect.ray.common import import_ray
        ray = import_ray()
        self.ray = ray
        self._connected = False
        if not ray.is_initialized():
            connect_to_cluster(ray, address)
            self._connected = True
        self.remote = ray.remote(ray_run_visit).options(num_cpus=cpus, max_retries=MAX_REDOS,
                                                        retry_exceptions=False)
        self.jobs: dict[int, dict] = {}
        self.refs: dict = {}
        self.redos: dict[int, int] = {}
        self.nodes: dict[int, str] = {}   # visit -> the node its result came from

    def submit(self, key: int, job: dict) -> None:
        self.jobs[key] = job
        self.refs[key] = self.remote.remote(job)

    def result(self, key: int) -> dict:
        ray = self.ray
        while True:
            try:
                out = ray.get(self.refs[key])
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                    ray.exceptions.OwnerDiedError, ray.exceptions.ObjectLostError,
                    ray.exceptions.TaskUnschedulableError) as exc:
                self.redos[key] = self.redos.get(key, 0) + 1
                if self.redos[key] > MAX_REDOS:
                    raise UserError(f"visit {key} was lost {self.redos[key]} times on the Ray "
                                    f"cluster ({type(exc).__name__}); giving up") from None
                self.refs[key] = self.remote.remote(self.jobs[key])
                continue
            except ray.exceptions.RayTaskError as exc:
                cause = exc.as_instanceof_cause()
                if isinstance(cause, UserError):
                    raise UserError(str(cause).splitlines()[0]) from None
                raise
            del self.refs[key], self.jobs[key]
            self.nodes[key] = out.pop("node", "")
            return out

    def close(self) -> None:
        ray = self.ray
        for ref in list(self.refs.values()):
            try:
                ray.cancel(ref, force=True)
            except Exception:   # noqa: BLE001 — closing: a task already gone is fine
                pass
        self.refs.clear()
        self.jobs.clear()
        if self._connected and ray.is_initialized():
            ray.shutdown()


def visit_cpus(collector: str, n_workers: int) -> int:
    """The CPUs a visit's Ray task declares: its learner's, plus its collector's workers."""
    return 1 if collector == "sequential" else 1 + n_workers


def make_visit_pool(cfg, collector: str):
    """The pool of cfg's concurrent visits: Ray tasks with --ray-address, else processes."""
    if cfg.ray_address:
        return RayVisitPool(cfg.ray_address, visit_cpus(collector, cfg.n_workers))
    return LocalVisitPool(cfg.concurrent_visits)


def run_all(fn, arg_tuples: list, k: int) -> list:
    """fn(*args) for every tuple of arg_tuples, K at a time in worker processes of this machine
    (spawned, ignoring Ctrl-C, dying with this process); the results in the order given. A
    worker that dies has its call run again (at most MAX_REDOS times): the calls of `wfrl
    exhaustive --concurrent` continue from what their runs saved."""
    pool = LocalVisitPool(k, fn=fn, what="run")
    try:
        for i, args in enumerate(arg_tuples):
            pool.submit(i, args)
        return [pool.result(i) for i in range(len(arg_tuples))]
    finally:
        pool.close()
