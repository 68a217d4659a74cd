"""Training on one fixed workflow: setup → collect → advantages → PPO epochs → log, until the
episode budget is spent or compliance reaches the threshold."""
from __future__ import annotations

import sys
import time

import numpy as np

from wfrl import __version__
from wfrl.collect.buffer import to_batch
from wfrl.collect.sequential import make_collector
from wfrl.config import TrainConfig
from wfrl.envs import make_backend
from wfrl.ppo.learner import PPOLearner
from wfrl.runlog import CsvLog, RunDir, save_checkpoint, write_json

LOG_COLUMNS = [
    "Workflow_ID", "Workflow_Order", "Update", "Episodes", "Total_Episodes_Sampled",
    "Env_Reward", "Env_Reward_SE", "Alignment_Bonus", "Total_Reward", "Compliance", "Avg_Fixes",
    "Collection_Time", "Update_Time", "Episodes_Per_Second", "Policy_Loss", "Value_Loss",
    "Entropy", "Approx_KL", "Weights_Version", "Phase",
]


def _mean_se(x):
    x = np.asarray(x, dtype=np.float64)
    se = float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0
    return float(x.mean()), se


def ppo_step(collector, learner, wf, row_cond, first_episode, n, ppo_cfg):
    """Collect n episodes with the learner's current weights, then one PPO update on them.
    Returns (episode stats, update stats, collection seconds, update seconds)."""
    t0 = time.perf_counter()
    eps = collector.collect(learner.flat_weights(), learner.version, wf, first_episode, n)
    t1 = time.perf_counter()
    batch = to_batch(collector.buffer, row_cond, ppo_cfg.gamma, ppo_cfg.gae_lambda)
    ustats = learner.update(batch)
    return eps, ustats, t1 - t0, time.perf_counter() - t1


def evaluate_policy(collector, learner, wf, first_episode: int, n: int, chunk: int) -> dict:
    """n episodes of the learner's current policy (sampling, as in training) on workflow wf,
    numbered first_episode.., collected `chunk` at a time: mean env return, its standard error and
    mean compliance."""
    returns, comps = [], []
    while len(returns) < n:
        k = min(chunk, n - len(returns))
        eps = collector.collect(learner.flat_weights(), learner.version, wf,
                                first_episode + len(returns), k)
        returns += [e.env_return for e in eps]
        comps += [e.compliance for e in eps]
    r = np.asarray(returns, dtype=np.float64)
    se = float(r.std(ddof=1) / np.sqrt(len(r))) if len(r) > 1 else 0.0
    return {"reward": round(float(r.mean()), 4), "se": round(se, 4),
            "compliance": round(float(np.mean(comps)), 4)}


def log_row(wf, update, episodes, total_sampled, eps, ustats, t_collect, t_update, version,
            phase: str = "train") -> dict:
    """One training_log.csv row (LOG_COLUMNS) for an update on workflow wf."""
    env_r, env_se = _mean_se([e.env_return for e in eps])
    align = float(np.mean([e.alignment for e in eps]))
    return {
        "Workflow_ID": wf.index, "Workflow_Order": str(wf), "Update": update,
        "Episodes": episodes, "Total_Episodes_Sampled": total_sampled,
        "Env_Reward": round(env_r, 4), "Env_Reward_SE": round(env_se, 4),
        "Alignment_Bonus": round(align, 4), "Total_Reward": round(env_r + align, 4),
        "Compliance": round(float(np.mean([e.compliance for e in eps])), 4),
        "Avg_Fixes": round(float(np.mean([e.fixes for e in eps])), 3),
        "Collection_Time": round(t_collect, 4), "Update_Time": round(t_update, 4),
        "Episodes_Per_Second": round(len(eps) / max(t_collect, 1e-9), 3),
        "Policy_Loss": round(ustats["policy_loss"], 5),
        "Value_Loss": round(ustats["value_loss"], 5),
        "Entropy": round(ustats["entropy"], 5), "Approx_KL": round(ustats["approx_kl"], 6),
        "Weights_Version": version, "Phase": phase,
    }

# Columns that hold wall-clock measurements (differ between otherwise identical runs).
TIMING_COLUMNS = ("Collection_Time", "Update_Time", "Episodes_Per_Second")


def train(cfg: TrainConfig, progress=None) -> dict:
    """Run training as configured; returns the summary that is also written to summary.json."""
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    cfg.validate()
    wf = cfg.parsed_workflow()
    run = RunDir(cfg.out, cfg.force)
    make_backend(cfg.backend, cfg.red_agent, seed=cfg.seed).close()  # fails early if unavailable
    write_json(run.file("experiment_config.json"), {**cfg.to_dict(), "wfrl_version": __version__})

    learner = PPOLearner(cfg.ppo, seed=cfg.seed)
    M = cfg.episodes_per_update
    collector = make_collector(cfg.collector, cfg.backend, cfg.red_agent, cfg.ppo.hidden, cfg.seed,
                               cfg.alignment_lambda, cfg.count_foothold, cfg.n_workers, M,
                               ray_address=cfg.ray_address)
    row_cond = np.tile(wf.onehot(), (M, 1))
    log = CsvLog(run.file("training_log.csv"), LOG_COLUMNS)

    episodes, update, stop = 0, 0, "budget"
    started = time.perf_counter()
    try:
        while episodes < cfg.total_episodes:
            n = min(M, cfg.total_episodes - episodes)
            eps, ustats, tc, tu = ppo_step(collector, learner, wf, row_cond, episodes, n, cfg.ppo)
            episodes += n
            update += 1
            row = log_row(wf, update, episodes, episodes, eps, ustats, tc, tu, learner.version)
            log.append(row)
            env_r, env_se = row["Env_Reward"], row["Env_Reward_SE"]
            align, compliance = row["Alignment_Bonus"], row["Compliance"]
            save_checkpoint(run.file("checkpoint.pt"), {
                **learner.state(), "hidden": cfg.ppo.hidden, "workflow": str(wf),
                "workflow_id": wf.index, "episodes": episodes, "config": cfg.to_dict()})
            elapsed = time.perf_counter() - started
            progress(f"update {update:4d} | episodes {episodes}/{cfg.total_episodes} | "
                     f"{episodes / elapsed:7.2f} eps/s (collect {n / tc:.2f}) | "
                     f"reward {env_r:8.2f} ± {env_se:.2f} | alignment {align:+.3f} | "
                     f"compliance {compliance:.3f}")
            if episodes >= cfg.min_episodes and compliance >= cfg.compliance_threshold:
                stop = "compliance"
                break
    finally:
        collector.close()

    wall = time.perf_counter() - started
    summary = {"workflow": str(wf), "workflow_id": wf.index, "updates": update,
               "episodes": episodes, "stop_reason": stop, "final_env_reward": env_r,
               "final_compliance": compliance, "wall_time_s": round(wall, 3),
               "episodes_per_s": round(episodes / wall, 3)}
    write_json(run.file("summary.json"), summary)
    progress(f"done: {episodes} episodes in {wall:.1f} s ({stop}); final reward {env_r:.2f}, "
             f"compliance {compliance:.3f}; records in {run.path}")
    return summary
