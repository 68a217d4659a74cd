"""Ground truth for the search: every workflow trained and evaluated under one fixed protocol.

Protocol (the same for all 120, so their rewards are comparable): the search's pretraining
(`pretrain_episodes`, one random workflow per update, the run's seed) gives one base policy; each
workflow starts from it (weights; a fresh optimiser) and trains `episodes_per_workflow` episodes in
updates of `episodes_per_update` (no early stop; the same episode seeds for every workflow),
then `eval_episodes` episodes of the trained policy as it acts during training (sampling), on
episode numbers reserved for evaluation. Reward is their mean env return with its standard error,
Compliance their mean compliance. One training run per workflow leaves out the randomness of
training itself (retraining a workflow from the same base moves its reward by ~1.5–3, as much as
the gaps among the best 40), so `--repeats R` runs the protocol for R seeds (each with its own
pretrained base) and combines them (see combine()). Rows are appended (and fsynced) one workflow
at a time, so an interrupted run continues where it stopped when started again with the same --out.

`--protocol conditioned` asks the same question without per-workflow training: ONE order-conditioned
policy is trained on random workflows (`pretrain_episodes`, one random workflow per update, as the
search pretrains) and each of the 120 workflows is evaluated by conditioning that policy on it. It
measures what a compliant policy for each workflow achieves once training has converged (about
40,000 episodes on the simulator), for the price of one training run, so many seeds are affordable.

With `--repeats R ≥ 2` the combined table comes with workflow_effect.json: a two-way analysis of
variance (workflow × training run) whose F statistic and p-value say whether the workflows differ
by more than training randomness at all, and the mean Spearman correlation of the per-run rankings.
If they do not, no search can beat random search on that table.
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from wfrl._version import __version__
from wfrl.collect.base import make_collector
from wfrl.collect.resources import check_workers_fit
from wfrl.config.run import ExhaustiveConfig, resolve_collector, with_older_runs_ppo
from wfrl.envs import make_backend
from wfrl.errors import UserError
from wfrl.ppo.learner import PPOLearner
from wfrl.rng import EVAL_EPISODE_BASE, learner_seed
from wfrl.runlog import (
    CsvLog,
    load_checkpoint,
    locked_dir,
    read_csv,
    save_checkpoint,
    write_csv_atomic,
    write_json,
)
from wfrl.stats import standard_error
from wfrl.training.steps import LearnerSteps, base_payload, evaluate_policy, ppo_step, pretrain
from wfrl.workflow import Workflow, all_workflows

COMBINED_COLUMNS = ["Workflow", "Workflow_ID", "Reward", "Reward_SE", "Compliance", "Runs",
                    "Run_Rewards", "Run_Compliance"]
COLUMNS = ["Workflow", "Workflow_ID", "Reward", "Reward_SE", "Compliance", "Train_Reward",
           "Train_Compliance", "Episodes", "Seconds"]


def load_exhaustive(path) -> list[dict]:
    """Rows of an exhaustive.csv with numbers parsed, plus Rank (1 = highest Reward)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} does not exist")
    try:
        rows = read_csv(path)
        for r in rows:
            r["Workflow_ID"] = int(r["Workflow_ID"])
            r.setdefault("Run_Rewards", None)
            r.setdefault("Run_Compliance", None)
            for k in ("Reward", "Reward_SE", "Compliance"):
                r[k] = float(r[k])
    except (KeyError, ValueError) as exc:
        raise UserError(f"{path} is not an exhaustive.csv ({exc})") from None
    for rank, r in enumerate(sorted(rows, key=lambda r: -r["Reward"]), 1):
        r["Rank"] = rank
    return rows


def _base_policy(cfg: ExhaustiveConfig, collector, out: Path, progress):
    """The pretrained base every workflow starts from: the search's pretraining with the same
    seed and settings (saved as base.pt and reused when the table is continued)."""
    if cfg.pretrain_episodes == 0:
        return None
    assert cfg.pretrain_episodes is not None   # (cfg.resolved())
    path = out / "base.pt"
    if path.exists():
        return load_checkpoint(path)
    learner = PPOLearner(cfg.ppo, seed=learner_seed(cfg.seed))
    progress(f"pretraining the base policy: {cfg.pretrain_episodes} episodes")
    for _update in pretrain(LearnerSteps(collector, cfg.ppo), learner, cfg.seed, 0, 0,
                            cfg.pretrain_episodes, cfg.episodes_per_update):
        pass
    save_checkpoint(path, base_payload(learner, cfg.ppo, cfg.pretrain_episodes))
    return load_checkpoint(path)


def exhaustive(cfg: ExhaustiveConfig, progress=None) -> Path:
    """Run the protocol for seeds seed .. seed+repeats-1 (each in DIR/seed<N>/, continued where an
    earlier run stopped) and combine them into DIR/exhaustive.csv; with repeats = 1 the single
    run's table is written to DIR directly."""
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    cfg = cfg.validate().resolved()
    if cfg.protocol == "recipe":
        raise UserError("--protocol recipe is run by wfrl.search.truth.truth()")
    check_workers_fit(resolve_collector(cfg.collector), cfg.backend, cfg.n_workers)
    if cfg.repeats == 1:
        with locked_dir(cfg.out, "exhaustive table"):
            return _exhaustive_one(cfg, progress)
    out = Path(cfg.out)
    with locked_dir(out, "exhaustive table"):
        subs = [replace(cfg, seed=cfg.seed + k, repeats=1, out=str(out / f"seed{cfg.seed + k}"))
                for k in range(cfg.repeats)]
        from wfrl.search.concurrent import run_seeds
        paths = run_seeds(_exhaustive_one, exhaustive_result, subs, cfg.concurrent, progress,
                          "exhaustive table")
        return combine(paths, out / "exhaustive.csv", progress)


def exhaustive_result(sub) -> Path:
    """The table of one seed's finished run (what _exhaustive_one returns)."""
    return Path(sub.out) / "exhaustive.csv"


def combine(paths, target: Path, progress=None) -> Path:
    """One table from several runs of the protocol: Reward = mean over runs of each run's
    evaluation mean, Reward_SE = their standard deviation / √runs (training randomness included,
    which a single run's evaluation SE leaves out), Compliance = mean."""
    tables = [{r["Workflow_ID"]: r for r in load_exhaustive(p)} for p in paths]
    for p, t in zip(paths, tables):
        if len(t) != 120:
            raise UserError(f"{p} has {len(t)} of 120 workflows; finish that run first")
    n = len(tables)
    ids = [wf.index for wf in all_workflows()]
    rewards = np.array([[t[i]["Reward"] for i in ids] for t in tables])        # runs × workflows
    compliance = np.array([[t[i]["Compliance"] for i in ids] for t in tables])
    out_rows = []
    for j, wf in enumerate(all_workflows()):
        rs = rewards[:, j]
        out_rows.append({"Workflow": str(wf), "Workflow_ID": wf.index, "Reward": round(float(rs.mean()), 4),
                    "Reward_SE": round(standard_error(rs) if n > 1 else
                                       float(tables[0][wf.index]["Reward_SE"]), 4),
                    "Compliance": round(float(compliance[:, j].mean()), 4),
                    "Runs": n, "Run_Rewards": " ".join(f"{r:.3f}" for r in rs),
                    "Run_Compliance": " ".join(f"{c:.4f}" for c in compliance[:, j])})
    write_csv_atomic(target, COMBINED_COLUMNS, out_rows)  # never a half-written table
    rows = load_exhaustive(target)
    best = min(rows, key=lambda r: r["Rank"])
    if progress:
        progress(f"combined {n} runs; best: {Workflow.from_index(best['Workflow_ID']).arrow()} "
                 f"reward {best['Reward']:.2f} ± {best['Reward_SE']:.2f}; table in {target}")
    if n >= 2:
        effect = workflow_effect(rewards)
        write_json(target.parent / "workflow_effect.json",
                   {**effect, "compliance": workflow_effect(compliance)})
        if progress:
            progress("do the workflows' rewards differ? " + describe_effect(effect))
    return target


def describe_effect(e: dict) -> str:
    """One line for a workflow_effect() result."""
    if e["F"] is None:
        return "no variation within runs: nothing to test"
    return (f"F = {e['F']:.2f} on ({e['df_workflow']}, {e['df_residual']}) df, p = "
            f"{e['p_value']:.3g}; Friedman p = {e['friedman_p_value']:.3g}; mean Spearman "
            f"between runs {e['mean_spearman_between_runs']:.2f}")


def workflow_effect(rewards) -> dict:
    """Is there a workflow effect beyond training randomness? `rewards` is runs × workflows.
    Two-way analysis of variance without interaction (a training run shifts every workflow's
    reward by its own amount, so runs are blocks): F = MS_workflow / MS_residual with its p-value;
    the workflow effect's standard deviation estimated from the mean squares (0 when F ≤ 1);
    and the mean Spearman rank correlation over pairs of runs (about 0 when the ranking is noise)."""
    from scipy.stats import f as f_dist
    from scipy.stats import friedmanchisquare, spearmanr
    y = np.asarray(rewards, dtype=np.float64)
    r, w = y.shape
    if r < 2 or w < 3:
        raise ValueError("need at least 2 runs and 3 workflows")
    grand = y.mean()
    row_eff = y.mean(axis=1, keepdims=True) - grand
    col_eff = y.mean(axis=0, keepdims=True) - grand
    resid = y - grand - row_eff - col_eff
    df_w, df_e = w - 1, (w - 1) * (r - 1)
    ss_w, ss_e = r * float((col_eff ** 2).sum()), float((resid ** 2).sum())
    ms_w, ms_e = ss_w / df_w, ss_e / df_e
    # Values that do not vary within runs (every workflow fully compliant, say) carry no
    # evidence either way: no F, no p, rather than a rounding-noise "effect" or inf/NaN.
    scale = float(((y - y.mean(axis=1, keepdims=True)) ** 2).sum())
    degenerate = scale <= 1e-12 * max(1.0, float((y ** 2).sum())) or ss_e <= 1e-9 * scale
    F = None if degenerate else ms_w / ms_e
    pairs = [] if degenerate else [spearmanr(y[i], y[j])[0]
                                   for i in range(r) for j in range(i + 1, r)]
    # Friedman's test ranks the workflows within each run: unlike F it does not assume that all
    # runs are equally noisy (one unstable training run can inflate MS_residual and hide an
    # effect from F).
    fr = None if degenerate else friedmanchisquare(*y.T)
    spearman = float(np.mean(pairs)) if pairs and np.all(np.isfinite(pairs)) else None
    return {"runs": r, "workflows": w, "df_workflow": df_w, "df_residual": df_e,
            "F": None if F is None else round(F, 4),
            "p_value": None if F is None else float(f_dist.sf(F, df_w, df_e)),
            "friedman_chi2": None if fr is None else round(float(fr.statistic), 4),
            "friedman_p_value": None if fr is None else float(fr.pvalue),
            "workflow_sd": round(float(np.sqrt(max(ms_w - ms_e, 0.0) / r)), 4),
            "run_noise_sd": round(float(np.sqrt(ms_e)), 4),
            "mean_spearman_between_runs": None if spearman is None else round(spearman, 4)}


# settings that do not change the table
RUNTIME_ONLY = ("out", "repeats", "collector", "n_workers", "concurrent", "ray_address")


def stored_settings(out: Path, what: str) -> dict:
    """The experiment_config.json a table's folder was started with, the PPO settings it
    predates filled in as it ran; one-line UserError naming `what` when it is unreadable."""
    import json
    path = out / "experiment_config.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        raise UserError(f"{out} holds {what} without a readable {path.name}; "
                        "choose another --out") from None
    if isinstance(stored.get("ppo"), dict):
        stored["ppo"] = with_older_runs_ppo(stored["ppo"])   # settings the table predates
    return stored


def check_same_protocol(cfg: ExhaustiveConfig, out: Path) -> None:
    """A table is only continued under the protocol it was started with."""
    stored = stored_settings(out, "an exhaustive.csv")
    stored.setdefault("protocol", "finetune")  # tables from before --protocol existed
    current = asdict(cfg)
    unused = ("episodes_per_workflow", "episodes_per_update") if cfg.protocol == "conditioned" \
        else ()
    for key, value in current.items():
        if key in RUNTIME_ONLY or key in unused or key not in stored:
            continue
        if stored[key] != value:
            raise UserError(f"{out / 'exhaustive.csv'} was started with {key} = {stored[key]!r}, "
                            f"not {value!r}; use the same settings to continue it or another --out")


def _exhaustive_one(cfg: ExhaustiveConfig, progress) -> Path:
    """One table in cfg.out (made and locked by the caller, locked_dir)."""
    assert (cfg.red_agent is not None and cfg.pretrain_episodes is not None
            and cfg.eval_episodes is not None)   # (cfg.resolved())
    out = Path(cfg.out)
    make_backend(cfg.backend, cfg.red_agent).close()
    csv_path = out / "exhaustive.csv"
    done = set()
    if csv_path.exists():
        check_same_protocol(cfg, out)
        done = {r["Workflow_ID"] for r in load_exhaustive(csv_path)}
        progress(f"continuing {csv_path}: {len(done)} of 120 workflows done")
    else:
        write_json(out / "experiment_config.json",
                   {"mode": "exhaustive", "wfrl_version": __version__, **asdict(cfg)})
    log = CsvLog(csv_path, COLUMNS, fresh=not csv_path.exists())
    n_rows = max(cfg.episodes_per_update, cfg.eval_episodes)  # episodes per collect() at most
    collector = make_collector(cfg.resolved_collector(), cfg.backend, cfg.red_agent, cfg.ppo.net(), cfg.seed,
                               cfg.alignment_lambda, False, cfg.n_workers, n_rows)
    try:
        base = _base_policy(cfg, collector, out, progress)
        for wf in all_workflows():
            if wf.index in done:
                continue
            t0 = time.perf_counter()
            learner = PPOLearner(cfg.ppo, seed=cfg.seed)
            if base is not None:
                learner.model.load_state_dict(base["model"])
            used, last = 0, None
            if cfg.protocol == "finetune":
                cond = np.tile(wf.onehot(), (n_rows, 1))
                while used < cfg.episodes_per_workflow:
                    n = min(cfg.episodes_per_update, cfg.episodes_per_workflow - used)
                    last, _, _, _ = ppo_step(collector, learner, wf, cond,
                                             cfg.pretrain_episodes + used, n, cfg.ppo)
                    used += n
            ev = evaluate_policy(collector, learner, wf, EVAL_EPISODE_BASE, cfg.eval_episodes,
                                 n_rows)
            row = {"Workflow": str(wf), "Workflow_ID": wf.index, "Reward": ev["reward"],
                   "Reward_SE": ev["se"], "Compliance": ev["compliance"],
                   "Train_Reward": "" if last is None else
                   round(float(np.mean([e.env_return for e in last])), 4),
                   "Train_Compliance": "" if last is None else
                   round(float(np.mean([e.compliance for e in last])), 4),
                   "Episodes": used, "Seconds": round(time.perf_counter() - t0, 2)}
            log.append(row)
            done.add(wf.index)
            progress(f"[{len(done):3d}/120] {wf.arrow():60s} reward {row['Reward']:8.2f} ± "
                     f"{row['Reward_SE']:.2f}  compliance {row['Compliance']:.3f}  "
                     f"({row['Seconds']:.1f} s)")
    finally:
        collector.close()
    rows = load_exhaustive(csv_path)
    best = min(rows, key=lambda r: r["Rank"])
    progress(f"best: {Workflow.from_index(best['Workflow_ID']).arrow()} reward "
             f"{best['Reward']:.2f} ± {best['Reward_SE']:.2f}; table in {csv_path}")
    return csv_path
