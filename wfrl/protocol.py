"""The training protocol shared by single-workflow training (wfrl.train), the search
(wfrl.search.loop) and the exhaustive ground truth (wfrl.search.exhaustive).

One learner step is: the collector plays a batch of episodes with the learner's current weights
(wfrl.collect), the batch is built from its buffer (wfrl.ppo.batch: GAE, flattening) and the
learner makes one PPO update on it (wfrl.ppo.learner). Around that: the evaluation of a trained
policy, the row each update adds to training_log.csv, pretraining on random workflows, and the
checkpoints a run keeps. Episode numbers (hence seeds) of evaluations come from the reserved
ranges in wfrl.rng.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from wfrl.ppo.batch import to_batch
from wfrl.workflow import Workflow

LOG_COLUMNS = [
    "Workflow_ID", "Workflow_Order", "Update", "Episodes", "Total_Episodes_Sampled",
    "Env_Reward", "Env_Reward_SE", "Alignment_Bonus", "Total_Reward", "Compliance", "Avg_Fixes",
    "Collection_Time", "Update_Time", "Episodes_Per_Second", "Policy_Loss", "Value_Loss",
    "Entropy", "Approx_KL", "Weights_Version", "Phase",
]
# Columns that hold wall-clock measurements (differ between otherwise identical runs).
TIMING_COLUMNS = ("Collection_Time", "Update_Time", "Episodes_Per_Second")


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
    batch = to_batch(collector.buffer, row_cond, ppo_cfg.gamma, ppo_cfg.gae_lambda, ppo_cfg.net())
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


# ------------------------------------------------------------------------------ pretraining
PRETRAIN_STREAM = 7  # keys the random stream of pretraining's workflow draws


def pretrain_workflow(seed: int, update: int) -> Workflow:
    """The workflow of pretraining update `update` (0-based): uniform, from the run's seed."""
    return Workflow.from_index(
        int(np.random.default_rng([seed, PRETRAIN_STREAM, update]).integers(120)))


def pretrain(collector, learner, ppo_cfg, seed: int, first_episode: int, done_episodes: int,
             total: int, per_update: int, done_updates: int = 0):
    """Generator over pretraining updates (each on a workflow drawn by pretrain_workflow):
    yields (workflow, episodes, episode stats, update stats, collection s, update s) after each;
    continues after `done_updates` updates that used `done_episodes` of `total`, numbering
    episodes from first_episode."""
    update = done_updates
    done = done_episodes
    while done < total:
        wf = pretrain_workflow(seed, update)
        n = min(per_update, total - done)
        cond = np.tile(wf.onehot(), (per_update, 1))
        eps, ustats, t_collect, t_update = ppo_step(collector, learner, wf, cond,
                                                    first_episode + done, n, ppo_cfg)
        done += n
        update += 1
        yield wf, n, eps, ustats, t_collect, t_update


# ------------------------------------------------------------------------------ checkpoints
BASE_POLICY = -1  # the "workflow index" of a search's pretrained base policy


def checkpoint_path(run: Path, wf_index: int) -> Path:
    """Where a search keeps the policy of workflow wf_index (BASE_POLICY: the pretrained base)."""
    if wf_index == BASE_POLICY:
        return Path(run) / "checkpoints" / "base.pt"
    return Path(run) / "checkpoints" / f"wf_{wf_index:03d}.pt"


def policy_payload(learner, ppo_cfg, workflow: str, workflow_id: int, **extra) -> dict:
    """What a policy checkpoint holds: the learner's state (weights, optimiser, RNG), the network
    it fits, the workflow it was trained on, then `extra` (episodes, config, …)."""
    return {**learner.state(), "hidden": ppo_cfg.hidden, "net": ppo_cfg.net().to_dict(),
            "workflow": workflow, "workflow_id": workflow_id, **extra}


def base_payload(learner, ppo_cfg, episodes: int, **extra) -> dict:
    """A pretrained base policy's checkpoint (trained on random workflows; it records the
    balanced workflow as its own)."""
    return policy_payload(learner, ppo_cfg, "balanced", 0, base=True, episodes=episodes, **extra)
