"""Whole jobs in parallel: K worker processes on this machine (LocalVisitPool, run_all) or Ray
tasks on a cluster (RayVisitPool), each job fn(*args) with a module-level fn, its result handed
back. Used by the workflow search's concurrent visits and seeds' runs (wfrl.search.concurrent)
and by population training's best responses (wfrl.training.population).

Both pools redo a job whose worker died (a killed process, a lost Ray node): a job's result
depends on its arguments alone (a run continues from what it saved), so the redo gives what the
lost run would have given. A job whose worker dies MAX_REDOS + 1 times, or whose run raises,
ends the caller with that error (one line for a UserError).
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import signal
from concurrent.futures.process import BrokenProcessPool

from wfrl.errors import UserError

MAX_REDOS = 3


def _orphan_guard(parent: int) -> None:
    """Worker initializer: ignore SIGINT (Ctrl-C is the driver's to handle) and end with the
    driver: SIGTERM on its death (Linux; a visit's collector then unlinks its shared memory
    as on any SIGTERM), and at once if it is gone already."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


class LocalVisitPool:
    """K worker processes (spawned) on this machine, one job each at a time: fn(*job), fn a
    module-level function; `what` names a job in errors."""

    def __init__(self, k: int, fn, what: str = "visit"):
        self.k, self.fn, self.what = k, fn, what
        self.pool: cf.ProcessPoolExecutor | None = None
        self.jobs: dict[int, tuple] = {}
        self.futures: dict[int, cf.Future] = {}
        self.redos: dict[int, int] = {}
        self._start()

    def _start(self) -> None:
        self.pool = cf.ProcessPoolExecutor(self.k, mp_context=mp.get_context("spawn"),
                                           initializer=_orphan_guard, initargs=(os.getpid(),))

    def submit(self, key: int, job: tuple) -> None:
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

    def _submit(self, job: tuple) -> cf.Future:
        if self.pool is None:
            raise RuntimeError("the pool is closed")
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
        """End the pool: its workers get SIGTERM (a collector unlinks its shared memory), and
        SIGKILL after 10 s."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        """Idle (every result taken): the workers exit as they would at the end of any pool;
        else they are ended (_shutdown)."""
        if self.pool is not None and not self.futures:
            pool, self.pool = self.pool, None
            pool.shutdown(wait=True)
        self._shutdown()
        self.jobs.clear()
        self.futures.clear()


class RayVisitPool:
    """Jobs as Ray tasks fn(*job) on the cluster at `address` (None: the Ray instance this
    process has already joined), each declaring `cpus` CPUs: Ray places them on the nodes that
    have those free, and runs a task again elsewhere when its node dies (max_retries). The
    driver holds only references to the results; `what` names a job in errors."""

    def __init__(self, address: str | None, cpus: float, fn, what: str = "visit"):
        from wfrl.collect.ray.address import connect_to_cluster
        from wfrl.collect.ray.common import import_ray
        ray = import_ray()
        self.ray = ray
        self._connected = False
        if not ray.is_initialized():
            if address is None:
                raise UserError("no Ray cluster to join: give --ray-address")
            connect_to_cluster(ray, address)
            self._connected = True
        self.what = what
        self.remote = ray.remote(fn).options(num_cpus=cpus, max_retries=MAX_REDOS,
                                             retry_exceptions=False)
        self.jobs: dict[int, tuple] = {}
        self.refs: dict = {}
        self.redos: dict[int, int] = {}

    def submit(self, key: int, job: tuple) -> None:
        self.jobs[key] = job
        self.refs[key] = self.remote.remote(*job)

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
                    raise UserError(f"{self.what} {key} was lost {self.redos[key]} times on the "
                                    f"Ray cluster ({type(exc).__name__}); giving up") from None
                self.refs[key] = self.remote.remote(*self.jobs[key])
                continue
            except ray.exceptions.RayTaskError as exc:
                cause = exc.as_instanceof_cause()
                if isinstance(cause, UserError):
                    raise UserError(str(cause).splitlines()[0]) from None
                raise
            del self.refs[key], self.jobs[key]
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


def run_all(fn, arg_tuples: list, k: int) -> list:
    """fn(*args) for every tuple of arg_tuples, K at a time in worker processes of this machine
    (spawned, ignoring Ctrl-C, ending with this process); the results in the order given. A
    worker that dies has its call run again (at most MAX_REDOS times): the runs of `wfrl
    exhaustive --concurrent` continue from what they saved."""
    pool = LocalVisitPool(k, fn=fn, what="run")
    try:
        for i, args in enumerate(arg_tuples):
            pool.submit(i, args)
        return [pool.result(i) for i in range(len(arg_tuples))]
    finally:
        pool.close()
