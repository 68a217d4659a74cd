"""wfrl from Python: wfrl.train(**settings), wfrl.search(**settings) and wfrl.load_agent(...).

train() and search() are `python -m wfrl train` (with and without `workflow`; the flags' names
with underscores): the same settings, presets, defaults and thread rule, returning
{"run_dir", "checkpoint", "summary"}. train_run() is the one function behind the command and
both calls: flat settings into a single-workflow run (wfrl.training) or a search (wfrl.search).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from wfrl.config.fields import field_names, flag_name
from wfrl.config.run import TrainConfig
from wfrl.errors import UserError
from wfrl.runlog import TensorBoardLog

# The thread rule of `python -m wfrl` (wfrl.__main__) and of wfrl.train() / wfrl.search()
# (command_threads below). This module imports neither numpy nor torch when it loads (the run's
# packages are imported by the calls), so __main__ can apply the rule before either loads.
SPIN_COUNT = "10000"


def quiet_openmp(environ) -> None:
    """GOMP_SPINCOUNT=10000 for this process and its workers, unless the user set it or an
    OMP_WAIT_POLICY: an idle OpenMP thread of a multi-threaded pool sleeps after well under a
    millisecond instead of spinning on the collectors' and the learner's cores (figures:
    docs/learner.md, "Threads"). It changes when an idle thread sleeps, never a result. Must run
    before torch is imported: OpenMP reads it once, when it loads."""
    if "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ:
        return
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT


def one_thread_by_default(environ) -> None:
    """OMP_NUM_THREADS=1 for this process and its workers unless the user set it. A run's
    results depend on the thread count of every pool that sums for it (torch's and OpenBLAS's,
    sized from the cores when unset). The learner sets its own count around each update, but
    other work runs on those pools as they are: each new learner's orthogonal initialisation,
    work on other threads (the collect-ahead thread builds the next update's batch), the
    feasibility model's linear algebra. Left to the machine, the same seed and settings give
    other numbers on a machine with another core count (docs/learner.md, "Threads").
    One thread is what the default run uses anyway: the learner sets its own count for each
    update (--learner-threads), and the collectors' workers play one episode at a time. Must
    run before numpy and torch are imported: both read it once, when they load."""
    environ.setdefault("OMP_NUM_THREADS", "1")


# may change on --resume (how the run is collected and watched, not what it computes)
RUNTIME_ONLY = ("collector", "n_workers", "ray_address", "tensorboard")


def train_setting_names() -> list[str]:
    """Every setting `wfrl train` takes (its flags without the dashes): the run's, PPO's,
    workflow, resume and ppo_preset."""
    from wfrl.config.run import PPOConfig, SearchConfig, TrainConfig
    return list(dict.fromkeys(field_names(SearchConfig) + field_names(TrainConfig)
                              + field_names(PPOConfig)
                              + ["workflow", "resume", "ppo_preset"]))


def train_run(settings: dict) -> dict:
    """`wfrl train` with these settings (flag names without dashes, the values the flags take):
    the single-workflow run with `workflow`, else the search (`resume`: continue that search's
    directory), with the command's presets and defaults. Returns the run's summary. The one
    function behind the command and wfrl.train()."""
    from wfrl.config.run import PPOConfig, SearchConfig, TrainConfig, preset_settings
    unknown = [k for k in settings if k not in train_setting_names()]
    if unknown:
        raise UserError(f"wfrl train has no setting {unknown[0]!r} ({flag_name(unknown[0])})")
    settings = {k: v for k, v in settings.items() if v is not None}
    if settings.get("tensorboard"):
        TensorBoardLog.check()     # a missing package is said before any file is written
    preset, resume = settings.pop("ppo_preset", None), settings.pop("resume", None)
    workflow = settings.get("workflow")
    search_names, train_names = field_names(SearchConfig), field_names(TrainConfig)
    given = {k: v for k, v in settings.items() if k in search_names or k in train_names}
    ppo_given = {k: v for k, v in settings.items() if k in field_names(PPOConfig)}
    if resume is not None:
        if preset is not None:
            raise UserError("--resume continues with the run's stored settings; --ppo-preset "
                            "cannot be changed")
        fixed = [k for k in list(given) + list(ppo_given) if k not in RUNTIME_ONLY]
        if fixed:
            raise UserError(f"--resume continues with the run's stored settings; {flag_name(fixed[0])}"
                            f" cannot be changed (only {', '.join(map(flag_name, RUNTIME_ONLY))})")
        runtime = {k: given[k] for k in RUNTIME_ONLY if k in given}
        single = single_run_config(resume, runtime)
        if single is not None:
            from wfrl.training.run import train as train_one
            return train_one(single, resume=True)
        from wfrl.search.loop import search
        from wfrl.search.state import resume_config
        return search(resume_config(resume, runtime), resume=True)
    if workflow is not None:
        from wfrl.training.run import train as train_one
        return train_one(single_run_of(given, ppo_given, preset))
    run_preset, ppo_preset = preset_settings(preset)
    ppo = PPOConfig(**{**ppo_preset, **ppo_given})
    bad = [k for k in given if k not in search_names]
    if bad:
        raise UserError(f"{flag_name(bad[0])} applies to single-workflow training (--workflow)")
    cfg = SearchConfig(**given, ppo=ppo).validate()   # bad input refused before torch loads
    from wfrl.search.bases import search_defaults
    from wfrl.search.loop import search
    fill, note = search_defaults(cfg.backend, given, cfg)
    if fill:
        cfg = SearchConfig(**{**given, **fill}, ppo=ppo).validate()
    return search(cfg, note=note)


def single_run_of(given: dict, ppo_given: dict, preset: str | None = None) -> TrainConfig:
    """The single-workflow run `wfrl train --workflow W` starts: the preset (default: the
    recipe, the shipped policies' command) with the run's and PPO's settings given over it."""
    from wfrl.config.run import PPOConfig, preset_settings
    bad = [k for k in given if k not in field_names(TrainConfig)]
    if bad:
        raise UserError(f"{flag_name(bad[0])} belongs to the workflow search; it does not apply "
                        "with --workflow")
    run_preset, ppo_preset = preset_settings(preset)
    ppo = PPOConfig(**{**ppo_preset, **ppo_given})
    return TrainConfig(**{**run_preset, **given}, ppo=ppo).validate()


def single_run_config(run_dir, overrides: dict) -> TrainConfig | None:
    """The stored settings of the single-workflow run in run_dir (with runtime-only overrides),
    or None when run_dir is not one (a search, or no run: the search's resume says which)."""
    import json
    path = Path(run_dir) / "experiment_config.json"
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or d.get("mode") == "search" or not d.get("workflow"):
        return None
    d = {k: v for k, v in d.items()
         if k not in ("wfrl_version", "update_step", "workflow_order", "workflow_id")}
    d.update(out=os.fspath(run_dir), **overrides)
    return TrainConfig.from_dict(d, f"{path}")


def _run_api(settings: dict) -> dict:
    """wfrl.train() and wfrl.search(): train_run under the command's thread rule
    (OMP_NUM_THREADS=1 unless set, for this process's pools while it runs and for the workers it
    starts, restored after), and where the run's policy is: {"run_dir", "checkpoint",
    "summary"}. config=FILE: the settings of a TOML file or a run directory, as `--config FILE`;
    the other keywords win."""
    if settings.get("config") is not None:
        from wfrl.config.files import load_settings_file
        from_file, _ = load_settings_file(settings["config"])
        settings = {**from_file, **{k: v for k, v in settings.items() if k != "config"}}
    settings = {k: v for k, v in settings.items() if k != "config"}
    try:
        import torch  # noqa: F401  (the [train] extra: said here in one line, not deep inside)
    except ModuleNotFoundError as exc:
        from wfrl.errors import missing_extra
        failed = missing_extra(exc, "wfrl.train()")
        if failed is None:
            raise
        raise failed from None
    with command_threads():
        summary = train_run(settings)
    from wfrl.config.run import SearchConfig
    out = Path(settings.get("resume") or settings.get("out") or SearchConfig.out)
    ck: Path | None
    if settings.get("workflow") is not None or (settings.get("resume") and
                                                 single_run_config(out, {}) is not None):
        best = out / "best.pt"
        ck = best if best.exists() else out / "checkpoint.pt"
    else:
        wid = summary.get("best_workflow_id")
        ck = None if wid is None else out / "checkpoints" / f"wf_{wid:03d}.pt"
    return {"run_dir": str(out), "checkpoint": None if ck is None else str(ck),
            "summary": summary}


@contextlib.contextmanager
def command_threads():
    """The thread rule of `python -m wfrl` (one_thread_by_default above) for the time of
    a call from Python: the environment the workers inherit, and the OpenMP / BLAS pools of this
    process (threadpoolctl, torch's intra-op count), each put back afterwards."""
    from threadpoolctl import threadpool_limits
    keys = ("OMP_NUM_THREADS", "GOMP_SPINCOUNT")
    saved = {k: os.environ.get(k) for k in keys}
    quiet_openmp(os.environ)
    one_thread_by_default(os.environ)
    try:   # (OpenMP also takes a list per nesting level, "4,2": the outer count counts here)
        n = max(1, int(os.environ["OMP_NUM_THREADS"].split(",")[0]))
    except ValueError:
        raise UserError(f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']!r} is not a thread "
                        "count") from None
    import torch
    before = torch.get_num_threads()
    try:
        with threadpool_limits(n):
            torch.set_num_threads(n)
            yield
    finally:
        torch.set_num_threads(before)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def train(**settings) -> dict:
    """wfrl.train(): `python -m wfrl train` from Python (see the module docstring)."""
    return _run_api(settings)


def search(**settings) -> dict:
    """wfrl.search(): the workflow search, `python -m wfrl train` without --workflow."""
    if settings.get("workflow") is not None:
        raise UserError("wfrl.search() searches the workflows: use wfrl.train(workflow=...) "
                        "to train one")
    return _run_api(settings)


def load_agent(checkpoint: str, workflow: str | None = None, leaderboard: bool = False):
    """A checkpoint (a file or pretrained:NAME) as a CAGE2 agent with get_action(observation,
    action_space) and end_episode(), played greedily: wfrl.evaluation.agents.load_agent."""
    from wfrl.evaluation.agents import load_agent as load
    return load(checkpoint, workflow, leaderboard)
