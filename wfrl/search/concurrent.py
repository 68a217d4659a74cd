"""Where concurrent visits (--concurrent-visits K > 1) run: K worker processes on this machine,
or Ray tasks on a cluster (--ray-address), each running wfrl.search.visits.run_visit on a job
and handing back its result. The driver (wfrl.search.loop) keeps the optimizer and the records;
a pool only trains. The pools (wfrl.collect.jobs) redo a visit whose worker died.
"""
from __future__ import annotations

from wfrl.collect.jobs import LocalVisitPool, RayVisitPool, run_all, run_folders_on_ray


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
    """Every seed's run of `subs` as a Ray task (wfrl.collect.jobs.run_folders_on_ray), each
    declaring `cpus` CPUs; result_of(sub) of each, in seed order."""
    run_folders_on_ray(run_one, subs, address, cpus)
    return [result_of(sub) for sub in subs]
