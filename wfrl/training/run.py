"""Training on one fixed workflow: setup → collect → advantages → PPO epochs → log, until the
episode budget is spent or compliance reaches the threshold. train(TrainConfig) is the loop that
`wfrl train --workflow W` and wfrl.train(workflow=W) end in (wfrl.api turns their settings into
the config)."""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from wfrl._version import __version__
from wfrl.collect.base import make_collector
from wfrl.collect.resources import check_workers_fit
from wfrl.config.run import TrainConfig
from wfrl.envs import make_backend
from wfrl.envs.base import EP_LEN
from wfrl.errors import UserError
from wfrl.rng import SELECT_EPISODE_BASE
from wfrl.runlog import (
    CsvLog,
    RunDir,
    eta,
    locked_dir,
    read_csv,
    save_checkpoint,
    tensorboard_log,
    truncate_csv,
    write_json,
)
from wfrl.training.steps import (
    LOG_COLUMNS,
    LearnerSteps,
    batch_compliance,
    behaviour_version,
    load_teacher,
    log_row,
    policy_payload,
)

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
        self.best: tuple | None = None  # (feasible, reward) of the best evaluation
        self.best_row: dict | None = None

    def due(self, episodes_before: int, episodes: int) -> bool:
        k = self.cfg.eval_every
        total = self.cfg.total_episodes
        return k > 0 and (episodes // k > episodes_before // k
                          or (episodes >= total and total >= k))  # and at the end of the run

    def evaluate(self, learner, episodes: int, update: int, payload: dict) -> dict:
        from wfrl.evaluation.returns import play, summarise
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
    if cfg.ppo.teacher is not None:   # a bad --teacher likewise (the run loads it again)
        load_teacher(cfg.ppo.teacher, cfg.backend)
    with locked_dir(cfg.out, "training run"):
        committed = committed_update(cfg.out) if resume else None
        if resume and committed is None:
            start = initial_weights(cfg)
        with tensorboard_log(cfg.tensorboard, committed) as tb:
            return _train(cfg, progress, start, tb, committed, resume)


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
    from wfrl.evaluation.checkpoint import net_from_checkpoint, weights_from_checkpoint
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
    from wfrl.ppo.learner import PPOLearner, update_step_name  # (torch: not before the checks)
    if not resuming:
        write_json(run.file("experiment_config.json"),
                   {**cfg.to_dict(), "wfrl_version": __version__,
                    "update_step": update_step_name(cfg.ppo)})

    learner = PPOLearner(cfg.ppo, seed=cfg.seed)
    if start is not None:
        learner.model.load_state_dict(start)   # weights only; the optimiser starts fresh
    saved = committed["resume"] if committed is not None else {}
    if committed is not None:
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
        return c, LearnerSteps(c, cfg.ppo, overlap=cfg.overlap, threads=cfg.learner_threads,
                               backend=cfg.backend)

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
                # (collector: the one of the step this is called from, after any switch below)
                if alignment(after) != collector.lam:  # noqa: B023 (nothing across the warm-up)
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
