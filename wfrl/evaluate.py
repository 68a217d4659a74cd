"""Evaluate a checkpoint: greedy and sampling policy, mean ± standard error of the env return."""
from __future__ import annotations

import numpy as np

from wfrl.collect.rollout import make_policy, run_episodes
from wfrl.config import EvalConfig
from wfrl.envs import make_backend
from wfrl.errors import UserError
from wfrl.ppo.policy import ActorCritic
from wfrl.runlog import load_checkpoint
from wfrl.workflow import Workflow


def weights_from_checkpoint(ck: dict) -> tuple[np.ndarray, int]:
    """(flat weights, hidden) of a checkpoint's actor-critic."""
    model = ActorCritic(int(ck["hidden"]))
    try:
        model.load_state_dict(ck["model"])
    except (RuntimeError, KeyError, TypeError) as exc:
        raise UserError(f"checkpoint weights do not fit the policy: {str(exc).splitlines()[0]}") from None
    return model.flat_weights(), model.hidden


def _summarise(stats) -> dict:
    r = np.array([s.env_return for s in stats], dtype=np.float64)
    n = len(r)
    return {"mean": float(r.mean()), "se": float(r.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0,
            "n": n, "compliance": float(np.mean([s.compliance for s in stats])),
            "fixes": float(np.mean([s.fixes for s in stats]))}


def evaluate(cfg: EvalConfig) -> dict:
    """Returns {'greedy': {...}, 'sampling': {...}, 'workflow': ...}; each has mean, se, n,
    compliance and fixes. Both modes play the same env seeds (paired)."""
    cfg.validate()
    ck = load_checkpoint(cfg.checkpoint)
    weights, hidden = weights_from_checkpoint(ck)
    wf = Workflow.parse(cfg.workflow or ck["workflow"])
    lam = float(ck.get("config", {}).get("alignment_lambda", 1.0))
    foothold = bool(ck.get("config", {}).get("count_foothold", False))
    backend = make_backend(cfg.backend, cfg.red_agent, seed=cfg.seed)
    try:
        out = {"workflow": str(wf), "backend": cfg.backend, "red_agent": cfg.red_agent}
        for mode in ("greedy", "sampling"):
            policy = make_policy(weights, hidden, wf, lam, foothold, greedy=(mode == "greedy"))
            out[mode] = _summarise(run_episodes(backend, policy, range(cfg.episodes), cfg.seed))
    finally:
        backend.close()
    return out
