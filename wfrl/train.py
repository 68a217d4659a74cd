"""Training on one fixed workflow: setup → collect → advantages → PPO epochs → log, until the
episode budget is spent or compliance reaches the threshold.

The module itself is callable: `wfrl.train(**settings)` is `python -m wfrl train` from Python
(train_api below: the same settings, presets, defaults and thread rule; a search without
`workflow`), returning {"run_dir", "checkpoint", "summary"}; train(TrainConfig) below is the
single-workflow loop those settings end in."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
import types
from pathlib import Path

import numpy as np

from wfrl import __version__
from wfrl.collect.base import make_collector
from wfrl.collect.resources import check_workers_fit
from wfrl.config import TrainConfig, field_names, flag_name
from wfrl.envs import EP_LEN, make_backend
from wfrl.errors import UserError
from wfrl.protocol import (LOG_COLUMNS, LearnerSteps, batch_compliance, behaviour_version, log_row,
                           policy_payload)
from wfrl.rng import SELECT_EPISODE_BASE
from wfrl.runlog import (CsvLog, RunDir, TensorBoardLog, eta, locked_dir, read_csv,
                         save_checkpoint, truncate_csv, write_json)

EVAL_COLUMNS = ["Episodes", "Update", "Reward", "Reward_SE", "Compliance", "Best"]


class BestKeeper:
    """Periodic greedy evaluation on reserved episodes (the range at wfrl.rng.SELECT_EPISODE_BASE:
    the same episodes at every evaluation, so two evaluations differ by the policy, not the luck of
    the draw); keeps the best policy so far.

    Best = the highest mean reward among evaluations whose compliance reached θ (among all of
    them while none has). Written to eval_log.csv (one row per evaluation) and best.pt; every
    evaluated policy is kept as evals/ep_NNNNNNNN.pt (weights, no optimiser state)."""

    def __init__(self, cfg: TrainConfig, run, wf, net, fresh: bool = True):
        from wfrl.envs import make_backend
        self.cfg, self.run, self.wf, self.net = cfg, run, wf, net
        self.backend = make_backend(cfg.backend, cfg.red_agent, seed=cfg.seed)
        self.log = CsvLog(run.file("eval_log.csv"), EVAL_COLUMNS, fresh=fresh)
        self.rows = len(read_csv(run.file("eval_log.csv")))
        self.best = None  # (feasible, reward) of the best evaluation
        self.best_row = None

    def due(self, episodes_before: int, episodes: int) -> bool:
        k = self.cfg.eval_every
        total = self.cfg.total_episodes
        return k > 0 and (episodes // k > episodes_before // k
                          or (episodes >= total and total >= k))  # and at the end of the run

    def evaluate(self, learner, episodes: int, update: int, payload: dict) -> dict:
        from wfrl.evaluate import play, summarise
        cfg = self.cfg
        eps = range(SELECT_EPISODE_BASE, SELECT_EPISODE_BASE + cfg.eval_episodes)
        s = summarise(play(self.backend, learner.flat_weights(), self.net, self.wf,
                           cfg.alignment_lambda, cfg.count_foothold, eps, cfg.seed, greedy=True))
        key = (s["compliance"] >= cfg.compliance_threshold, s["mean"])
        better = self.best is None or key > self.best
        row = {"Episodes": episodes, "Update": update, "Reward": round(s["mean"], 4),
               "Reward_SE": round(s["se"], 4), "Compliance": round(s["compliance"], 4),
               "Best": int(better)}
        if better:
            self.best, self.best_row = key, row
            save_checkpoint(self.run.file("best.pt"), {**payload, "selection": row})
        # The evaluated policy itself (weights only), for learning curves on another backend.
        snap = self.run.path / "evals"
        snap.mkdir(exist_ok=True)
        save_checkpoint(snap / f"ep_{episodes:08d}.pt",
                        {k: v for k, v in payload.items() if k not in ("optimizer", "rng")})
        self.log.append(row)
        self.rows += 1
        return row

    def close(self):
        self.backend.close()


def train(cfg: TrainConfig, progress=None, resume: bool = False) -> dict:
    """Run training as configured; returns the summary that is also written to summary.json.
    The run directory is locked for the whole run (one process per run directory). resume:
    continue the run in cfg.out from its last committed update (its checkpoint.pt), exactly as
    the uninterrupted run would have gone on."""
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    # the run records the collector `auto` stood for on this machine
    cfg = dataclasses.replace(cfg.validate(), collector=cfg.resolved_collector())
    check_workers_fit(cfg.collector, cfg.backend, cfg.n_workers, cfg.ray_address)
    # a bad --init-from fails before the run directory is touched; a resume reads its commit
    # under the lock (before its first commit it starts again from the same weights)
    start = None if resume else initial_weights(cfg)
    with locked_dir(cfg.out, "training run"):
        committed = committed_update(cfg.out) if resume else None
        if resume and committed is None:
            start = initial_weights(cfg)
        purge = committed["resume"]["episodes"] * EP_LEN + 1 if committed else None
        tb = TensorBoardLog(cfg.tensorboard, purge) if cfg.tensorboard else None
        try:
            return _train(cfg, progress, start, tb, committed, resume)
        finally:
            if tb is not None:
                tb.close()


def _resume_state(steps, update: int, episodes: int, keeper) -> dict:
    """The loop's counters in checkpoint.pt, and with overlap the weights the batch collected
    ahead plays with (a resumed run collects that batch with them: the same batch)."""
    import torch
    ahead = steps.behaviour
    return {"update": update, "episodes": episodes,
            "eval_rows": keeper.rows if keeper is not None else 0,
            "best": list(keeper.best) if keeper is not None and keeper.best else None,
            "best_row": keeper.best_row if keeper is not None else None,
            "behaviour": None if ahead is None else {
                "weights": torch.from_numpy(np.array(ahead[0], copy=True)),
                "version": int(ahead[1])}}


def initial_weights(cfg: TrainConfig) -> dict | None:
    """The model state --init-from names (None without it); one-line UserError when the checkpoint
    is missing or damaged or its network is not the run's."""
    if cfg.init_from is None:
        return None
    from wfrl.evaluate import net_from_checkpoint, weights_from_checkpoint
    from wfrl.runlog import load_checkpoint
    ck = load_checkpoint(cfg.init_from)
    theirs, ours = net_from_checkpoint(ck), cfg.ppo.net()
    if theirs != ours:
        raise UserError(f"--init-from {cfg.init_from}: its policy is {theirs.describe()}, this run "
                        f"trains {ours.describe()} "
                        "(set --hidden/--memory/--mask/--truth-input/--belief-input to match)")
    weights_from_checkpoint(ck)   # the weights fit the network they claim
    return ck["model"]


def committed_update(out) -> dict | None:
    """The last committed update of a single-workflow run in `out` (checkpoint.pt: the learner
    and the loop's counters), or None when it was stopped before its first; one-line UserError
    for a finished run or a damaged checkpoint."""
    from wfrl.runlog import load_checkpoint
    run = Path(out)
    if (run / "summary.json").exists():
        raise UserError(f"cannot resume: the run in {out} is finished (summary.json)")
    if not (run / "checkpoint.pt").exists():
        return None
    ck = load_checkpoint(run / "checkpoint.pt")
    if not isinstance(ck.get("resume"), dict):
        raise UserError(f"cannot resume: {run / 'checkpoint.pt'} holds no resume state (a run of "
                        "an older wfrl)")
    return ck


def _train(cfg: TrainConfig, progress, start: dict | None = None, tb=None,
           committed: dict | None = None, resume: bool = False) -> dict:
    wf = cfg.parsed_workflow()
    resuming = committed is not None    # (resume before the first commit: from the start)
    run = RunDir(cfg.out, cfg.force or resume)
    make_backend(cfg.backend, cfg.red_agent, seed=cfg.seed).close()  # fails early if unavailable
    if not resuming:
        write_json(run.file("experiment_config.json"),
                   {**cfg.to_dict(), "wfrl_version": __version__})

    from wfrl.ppo.learner import PPOLearner    # (torch: not for a command refused on its input)
    learner = PPOLearner(cfg.ppo, seed=cfg.seed)
    if start is not None:
        learner.model.load_state_dict(start)   # weights only; the optimiser starts fresh
    saved = committed["resume"] if resuming else {}
    if resuming:
        learner.load_state(committed)
        truncate_csv(run.file("training_log.csv"), LOG_COLUMNS, saved["update"])
        if cfg.eval_every > 0:
            truncate_csv(run.file("eval_log.csv"), EVAL_COLUMNS, saved["eval_rows"])
    net = cfg.ppo.net()
    per_update = cfg.episodes_per_update
    def alignment(episode: int) -> float:
        """The alignment weight the batch starting at `episode` plays with (--warmup)."""
        return 0.0 if episode < cfg.warmup else cfg.alignment_lambda

    def open_collector(lam: float):
        c = make_collector(cfg.resolved_collector(), cfg.backend, cfg.red_agent, net, cfg.seed,
                           lam, cfg.count_foothold, cfg.n_workers, per_update,
                           ray_address=cfg.ray_address)
        return c, LearnerSteps(c, cfg.ppo, overlap=cfg.overlap, threads=cfg.learner_threads)

    episodes, update, stop = saved.get("episodes", 0), saved.get("update", 0), "budget"
    env_r, compliance = saved.get("env_reward"), saved.get("compliance")
    collector, steps = open_collector(alignment(episodes))
    row_cond = np.tile(wf.onehot(), (per_update, 1))
    log = CsvLog(run.file("training_log.csv"), LOG_COLUMNS, fresh=not resuming)
    keeper = BestKeeper(cfg, run, wf, net, fresh=not resuming) if cfg.eval_every > 0 else None
    if keeper is not None and saved.get("best"):
        keeper.best, keeper.best_row = tuple(saved["best"]), saved["best_row"]
    behaviour = saved.get("behaviour")
    behaviour = None if behaviour is None else (behaviour["weights"].numpy(),
                                                int(behaviour["version"]))
    if resuming:
        progress(f"resuming {run.path} after update {update} ({episodes} of "
                 f"{cfg.total_episodes} episodes)")
    elif resume:
        progress(f"resuming {run.path}: no update was committed, starting from the beginning")

    def compliant(episodes: int, compliance: float) -> bool:
        """Training stops early: θ reached after --min-episodes (and the warm-up)."""
        return (episodes >= max(cfg.min_episodes, cfg.warmup)
                and compliance >= cfg.compliance_threshold)

    started, episodes_at_start = time.perf_counter(), episodes
    try:
        if saved.get("stop"):
            stop = saved["stop"]      # stopped by compliance at its last commit: it is done
        while episodes < cfg.total_episodes and not saved.get("stop"):
            n = min(per_update, cfg.total_episodes - episodes)
            learner.set_progress(episodes / cfg.total_episodes)

            def then(eps, after=episodes + n):
                # the loop's stop rules, decided from the batch alone: the next batch is wanted
                # unless the budget is spent or this batch's compliance ends the run
                if after >= cfg.total_episodes or compliant(after, batch_compliance(eps)):
                    return None
                if alignment(after) != collector.lam:   # nothing collected across the warm-up
                    return None
                return wf, after, min(per_update, cfg.total_episodes - after)

            if alignment(episodes) != collector.lam:   # the warm-up ended: the λ collector
                steps.cancel()
                old, collector = collector, None       # (closed once, whatever happens next)
                old.close()
                collector, steps = open_collector(alignment(episodes))

            eps, ustats, t_collect, t_update = steps.step(learner, wf, row_cond, episodes, n,
                                                          then=then, behaviour=behaviour)
            behaviour = None
            before, episodes = episodes, episodes + n
            update += 1
            row = log_row(wf, update, episodes, episodes, eps, ustats, t_collect, t_update,
                          behaviour_version(eps),
                          first_fix=steps.first_fix)
            log.append(row)
            env_r, env_se = row["Env_Reward"], row["Env_Reward_SE"]
            align, compliance = row["Alignment_Bonus"], row["Compliance"]
            payload = policy_payload(learner, cfg.ppo, str(wf), wf.index, episodes=episodes,
                                     red_agent=cfg.red_agent, config=cfg.to_dict())
            elapsed = time.perf_counter() - started
            rate = (episodes - episodes_at_start) / elapsed
            if tb is not None:
                tb.update(row, ustats, episodes * EP_LEN, rate * EP_LEN)
            progress(f"update {update:4d} | episodes {episodes}/{cfg.total_episodes} | "
                     f"{rate:7.2f} eps/s (collect {n / t_collect:.2f}) | "
                     f"reward {env_r:8.2f} ± {env_se:.2f} | alignment {align:+.3f} | "
                     f"compliance {compliance:.3f} | "
                     f"ETA {eta(cfg.total_episodes - episodes, rate)}")
            if keeper is not None and keeper.due(before, episodes):
                steps.settle()   # the evaluation's episodes never interleave with a batch's
                ev = keeper.evaluate(learner, episodes, update, payload)
                progress(f"evaluation at {episodes} episodes (greedy, {cfg.eval_episodes} reserved "
                         f"episodes): reward {ev['Reward']:.2f} ± {ev['Reward_SE']:.2f}, "
                         f"compliance {ev['Compliance']:.3f}{' — best so far' if ev['Best'] else ''}")
            # the commit point: the learner and the counters a resume continues from (written
            # after the update's log row and evaluation, which a resume cuts back to it)
            save_checkpoint(run.file("checkpoint.pt"),
                            {**payload, "resume": {
                                **_resume_state(steps, update, episodes, keeper),
                                "env_reward": env_r, "compliance": compliance,
                                "stop": "compliance" if compliant(episodes, compliance) else None}})
            if compliant(episodes, compliance):
                stop = "compliance"
                break
    except BaseException:
        steps.abort()
        raise
    finally:
        steps.cancel()
        if collector is not None:
            collector.close()
        if keeper is not None:
            keeper.close()

    wall = time.perf_counter() - started
    summary = {"workflow": str(wf), "workflow_id": wf.index, "updates": update,
               "episodes": episodes, "stop_reason": stop, "final_env_reward": env_r,
               "final_compliance": compliance, "wall_time_s": round(wall, 3),
               "episodes_per_s": round((episodes - episodes_at_start) / wall, 3)}
    if keeper is not None and keeper.best_row is not None:
        summary["best_eval"] = keeper.best_row
    if cfg.ppo.target_kl > 0:
        summary["kl_early_stops"] = learner.kl_stops   # updates of this process stopped early
    write_json(run.file("summary.json"), summary)
    progress(f"done: {episodes} episodes in {wall:.1f} s ({stop}); final reward {env_r:.2f}, "
             f"compliance {compliance:.3f}; records in {run.path}")
    return summary


# ------------------------------------------------------------------ the command, from Python
# may change on --resume (how the run is collected and watched, not what it computes)
RUNTIME_ONLY = ("collector", "n_workers", "ray_address", "tensorboard")


def train_setting_names() -> list[str]:
    """Every setting `wfrl train` takes (its flags without the dashes): the run's, PPO's,
    workflow, resume and ppo_preset."""
    from wfrl.config import PPOConfig, SearchConfig, TrainConfig
    return list(dict.fromkeys(field_names(SearchConfig) + field_names(TrainConfig)
                              + field_names(PPOConfig)
                              + ["workflow", "resume", "ppo_preset"]))


def train_run(settings: dict) -> dict:
    """`wfrl train` with these settings (flag names without dashes, the values the flags take):
    the single-workflow run with `workflow`, else the search (`resume`: continue that search's
    directory), with the command's presets and defaults. Returns the run's summary. The one
    function behind the command and wfrl.train()."""
    from wfrl.config import (DEFAULT_PRESET, PPOConfig, SearchConfig, TrainConfig,
                             preset_settings)
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
            return train(single, resume=True)
        from wfrl.search.loop import search
        from wfrl.search.state import resume_config
        return search(resume_config(resume, runtime), resume=True)
    run_preset, ppo_preset = preset_settings(preset or DEFAULT_PRESET)
    ppo = PPOConfig(**{**ppo_preset, **ppo_given})
    if workflow is not None:
        bad = [k for k in given if k not in train_names]
        if bad:
            raise UserError(f"{flag_name(bad[0])} belongs to the workflow search; it does not apply "
                            "with --workflow")
        cfg = TrainConfig(**{**run_preset, **given}, ppo=ppo).validate()
        return train(cfg)
    bad = [k for k in given if k not in search_names]
    if bad:
        raise UserError(f"{flag_name(bad[0])} applies to single-workflow training (--workflow)")
    if (preset or DEFAULT_PRESET) == "recipe":
        # the search's base is trained like the ground truth's conditioned policy: the schedules
        # run over the pretraining, no first-fix bonus (unless flags say otherwise)
        from wfrl.config import RECIPE_SCHEDULE
        ppo = PPOConfig(**{**ppo_preset, **RECIPE_SCHEDULE, **ppo_given})
    cfg = SearchConfig(**given, ppo=ppo).validate()   # bad input refused before torch loads
    from wfrl.search.bases import search_defaults
    from wfrl.search.loop import search
    fill, note = search_defaults(cfg.backend, given, cfg)
    if fill:
        cfg = SearchConfig(**{**given, **fill}, ppo=ppo).validate()
    return search(cfg, note=note)


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
    d = {k: v for k, v in d.items() if k not in ("wfrl_version", "workflow_order", "workflow_id")}
    d.update(out=os.fspath(run_dir), **overrides)
    return TrainConfig.from_dict(d, f"{path}")


def train_api(settings: dict) -> dict:
    """wfrl.train(): train_run under the command's thread rule (OMP_NUM_THREADS=1 unless set,
    for this process's pools while it runs and for the workers it starts, restored after), and
    where the run's policy is: {"run_dir", "checkpoint", "summary"}. config=FILE: the settings
    of a TOML file or a run directory, as `--config FILE`; the other keywords win."""
    if settings.get("config") is not None:
        from wfrl.config import load_settings_file
        from_file, _ = load_settings_file(settings["config"])
        settings = {**from_file, **{k: v for k, v in settings.items() if k != "config"}}
    settings = {k: v for k, v in settings.items() if k != "config"}
    try:
        import torch  # noqa: F401  (the [train] extra: said here in one line, not deep inside)
    except ModuleNotFoundError as exc:
        from wfrl.errors import missing_extra
        raise missing_extra(exc, "wfrl.train()") from None
    with command_threads():
        summary = train_run(settings)
    from wfrl.config import SearchConfig
    out = Path(settings.get("resume") or settings.get("out") or SearchConfig.out)
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
    """The thread rule of `python -m wfrl` (wfrl.__main__.one_thread_by_default) for the time of
    a call from Python: the environment the workers inherit, and the OpenMP / BLAS pools of this
    process (threadpoolctl, torch's intra-op count), each put back afterwards."""
    from threadpoolctl import threadpool_limits
    keys = ("OMP_NUM_THREADS", "GOMP_SPINCOUNT")
    saved = {k: os.environ.get(k) for k in keys}
    from wfrl import one_thread_by_default, quiet_openmp
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


class _CallableModule(types.ModuleType):
    """`wfrl.train(...)` calls the command (importing wfrl.train rebinds that name to this
    module, so the module is what answers the call)."""

    def __call__(self, **settings) -> dict:
        return train_api(settings)


sys.modules[__name__].__class__ = _CallableModule
