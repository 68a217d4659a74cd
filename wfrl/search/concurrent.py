"""Where concurrent visits (--concurrent-visits K > 1) run: K worker processes on this machine,
or Ray tasks on a cluster (--ray-address), each running wfrl.search.visits.run_visit on a job
and handing back its result. The driver (wfrl.search.loop) keeps the optimizer and the records;
a pool only trains. The pools (wfrl.collect.jobs) redo a visit whose worker died.
"""
from __future__ import annotations

from wfrl.collect.jobs import LocalVisitPool, RayVisitPool, run_all


def local_run_visit(job: dict) -> dict:
    """run_visit in a worker process (imported there: this module stays light)."""
    from wfrl.search.visits import run_visit
    return run_visit(job)


def ray_run_visit(job: dict) -> dict:
    """run_visit as a Ray task (Ray titles its worker after this function while it runs)."""
    from wfrl.search.visits import run_visit
    return run_visit(job)


def stderr_progress(line: str) -> None:
    """A run's progress line, printed by the worker that runs it."""
    import sys
    print(line, file=sys.stderr, flush=True)


def _quiet(_line: str) -> None:
    pass


def ray_run_seed(run_one, sub, files: dict) -> dict:
    """One seed's run of `wfrl exhaustive` as a Ray task: the run's folder (`files`, name ->
    bytes, what the driver holds of it) laid out in a temp dir of the node, the run continued
    there (run_one(sub, progress)), and the folder handed back. The folder's stored settings
    name the driver's folder, not the node's."""
    import dataclasses
    import json
    import shutil
    import tempfile
    from pathlib import Path

    work = Path(tempfile.mkdtemp(prefix="wfrl-seed-"))
    try:
        for name, data in files.items():
            (work / name).write_bytes(data)
        run_one(dataclasses.replace(sub, out=str(work)), _quiet)
        out = {p.name: p.read_bytes() for p in work.iterdir() if p.is_file()}
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


def visit_cpus(collector: str, n_workers: int) -> int:
    """The CPUs a visit's Ray task declares: its learner's, plus its collector's workers."""
    return 1 if collector == "sequential" else 1 + n_workers


def make_visit_pool(cfg, collector: str):
    """The pool of cfg's concurrent visits: Ray tasks with --ray-address, else processes."""
    if cfg.ray_address:
        return RayVisitPool(cfg.ray_address, visit_cpus(collector, cfg.n_workers),
                            ray_run_visit)
    return LocalVisitPool(cfg.concurrent_visits, local_run_visit)


def run_seeds(run_one, result_of, subs: list, k: int, progress, what: str) -> list:
    """Each seed's run of `subs` (one config per seed with its own --out, all locked here for the
    whole call; `what` names them in a refusal): run_one(sub, progress) K at a time in worker
    processes (run_all), or one after another here with K = 1, or every one as a Ray task with
    the subs' --ray-address (run_seeds_on_ray). Returns run_one's results in seed order
    (result_of(sub) reads them back from a finished folder)."""
    from contextlib import ExitStack

    from wfrl.runlog import locked_dir
    with ExitStack() as locks:
        for sub in subs:
            locks.enter_context(locked_dir(sub.out, what))
        if subs and getattr(subs[0], "ray_address", None):
            progress(f"training runs of seeds {subs[0].seed}..{subs[-1].seed} as Ray tasks")
            return run_seeds_on_ray(run_one, result_of, subs, subs[0].ray_address,
                                    visit_cpus(subs[0].resolved_collector(), subs[0].n_workers))
        if k == 1 or len(subs) == 1:
            out = []
            for i, sub in enumerate(subs):
                progress(f"training run {i + 1} of {len(subs)} (seed {sub.seed}) in {sub.out}")
                out.append(run_one(sub, progress))
            return out
        progress(f"training runs of seeds {subs[0].seed}..{subs[-1].seed}, {k} at a time")
        return run_all(run_one, [(sub, stderr_progress) for sub in subs], k)


def run_seeds_on_ray(run_one, result_of, subs: list, address: str | None, cpus: int) -> list:
    """Every seed's run of `subs` as a Ray task (ray_run_seed) on the cluster at `address`, each
    declaring `cpus` CPUs; each folder's files are shipped to its task and written back here
    (atomically, file by file) as it ends; result_of(sub) of each, in seed order."""
    from pathlib import Path

    from wfrl.runlog import atomic_write_bytes
    pool = RayVisitPool(address, cpus, ray_run_seed, what="run")
    try:
        for i, sub in enumerate(subs):
            files = {p.name: p.read_bytes() for p in Path(sub.out).iterdir()
                     if p.is_file() and not p.name.startswith(".")}
            pool.submit(i, (run_one, sub, files))
        out = []
        for i, sub in enumerate(subs):
            for name, data in pool.result(i).items():
                atomic_write_bytes(Path(sub.out) / name, data)
            out.append(result_of(sub))
        return out
    finally:
        pool.close()
