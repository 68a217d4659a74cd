"""Whole jobs in parallel: K worker processes on this machine (LocalVisitPool, run_all) or Ray
tasks on a cluster (RayVisitPool; run_folders_on_ray for runs that keep their records in a
folder), each job fn(*args) with a module-level fn, its result handed back. Used by the workflow
search's concurrent visits and seeds' runs (wfrl.search.concurrent) and by population
training's best responses (wfrl.training.population).

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
            self.redos.pop(key, None)     # a key given again later is a new job
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
            self.redos.pop(key, None)     # a key given again later is a new job
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


def folder_files(folder) -> dict[str, bytes]:
    """A run folder's files by path relative to it (nested ones included; dotfiles, such as the
    run's lock, left out); {} for a folder that does not exist yet."""
    from pathlib import Path
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def _quiet(_line: str) -> None:
    pass


def ray_run_in_folder(run_one, sub, files: dict) -> dict:
    """One run as a Ray task: its folder (`files`, what the driver holds of it) laid out in a
    temp dir of the node, the run continued there (run_one(sub with that --out, progress)), and
    the folder handed back. The folder's stored settings name the driver's folder, not the
    node's."""
    import dataclasses
    import json
    import shutil
    import tempfile
    from pathlib import Path

    work = Path(tempfile.mkdtemp(prefix="wfrl-run-"))
    try:
        for name, data in files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes(data)
        run_one(dataclasses.replace(sub, out=str(work)), _quiet)
        out = folder_files(work)
        config = out.get("experiment_config.json")
        if config is not None:
            d = json.loads(config)
            if "out" in d:
                d["out"] = sub.out
                out["experiment_config.json"] = (json.dumps(d, indent=2, sort_keys=True)
                                                 + "\n").encode()
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_folders_on_ray(run_one, subs: list, address: str | None, cpus: float) -> None:
    """Every run of `subs` (configs, each with its own --out) as a Ray task (ray_run_in_folder)
    on the cluster at `address`, each declaring `cpus` CPUs: each folder's files are shipped to
    its task and written back here (atomically, file by file) as it ends, in the order given."""
    from pathlib import Path

    from wfrl.runlog import atomic_write_bytes
    pool = RayVisitPool(address, cpus, ray_run_in_folder, what="run")
    try:
        for i, sub in enumerate(subs):
            pool.submit(i, (run_one, sub, folder_files(sub.out)))
        for i, sub in enumerate(subs):
            for name, data in pool.result(i).items():
                target = Path(sub.out) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(target, data)
    finally:
        pool.close()
