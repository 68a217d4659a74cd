"""Evaluate a checkpoint: greedy and sampling policy, mean ± standard error of the env return."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from wfrl.collect.rollout import make_policy, run_episodes
from wfrl.config.eval import EvalConfig
from wfrl.envs import make_backend
from wfrl.envs.base import EP_LEN
from wfrl.evaluation.checkpoint import policy_of_checkpoint
from wfrl.stats import mean_se
from wfrl.workflow import Workflow

if TYPE_CHECKING:
    from wfrl.evaluation.planner import PlanStats


def play(backend, weights, net, wf: Workflow, lam: float, foothold: bool, episodes, seed: int,
         greedy: bool, horizon: int = EP_LEN, observer=None):
    """EpisodeStats of global episodes `episodes` (seeds from (seed, episode)) of one policy,
    `horizon` blue steps each; observer as in wfrl.collect.rollout.run_episodes."""
    policy = make_policy(weights, net, wf, lam, foothold, greedy=greedy)
    return run_episodes(backend, policy, episodes, seed, horizon=horizon, observer=observer)


def play_with_plan(backend_name: str, backend, weights, net, wf: Workflow, lam: float,
                   foothold: bool, episodes, seed: int, budget, red: str = "mixture",
                   horizon: int = EP_LEN, observer=None,
                   rollout_checkpoint: str | None = None) -> tuple[list, PlanStats]:
    """EpisodeStats of global episodes `episodes` played by the greedy policy improved by
    decision-time search on `backend` (named backend_name, whose CybORG code the particles play
    by; budget: a wfrl.evaluation.planner.PlanBudget; red: the particles' red kinds), and the search's own
    statistics (a wfrl.evaluation.planner.PlanStats); observer as in wfrl.collect.rollout.run_episodes;
    rollout_checkpoint as in wfrl.evaluation.planner.PlanningPolicy."""
    from wfrl.evaluation.planner import PlanningPolicy, PlanStats, play_planned
    policy = make_policy(weights, net, wf, lam, foothold, greedy=True)
    planning = PlanningPolicy(backend=backend_name, budget=budget, red=red, policy=policy,
                              rollout_checkpoint=rollout_checkpoint)
    stats = PlanStats()
    out = play_planned(backend, planning, wf, lam, foothold, episodes, seed, horizon, stats,
                       observer=observer)
    return out, stats


def summarise(stats) -> dict:
    mean, se = mean_se([s.env_return for s in stats])
    return {"mean": mean, "se": se, "n": len(stats),
            "compliance": float(np.mean([s.compliance for s in stats])),
            "fixes": float(np.mean([s.fixes for s in stats]))}


def evaluate(cfg: EvalConfig) -> dict:
    """Returns {'greedy': {...}, 'sampling': {...}, 'workflow': ...} ('plan' in place of
    'sampling' with --plan, with the search's statistics under 'search'); each has mean, se, n,
    compliance and fixes. Both modes play the same env seeds (paired)."""
    cfg.validate()
    assert cfg.checkpoint is not None   # (validate: eval needs --checkpoint)
    wf: str | Workflow
    weights, net, wf, lam, foothold = policy_of_checkpoint(cfg.checkpoint, cfg.workflow)
    wf = Workflow.parse(wf)
    backend = make_backend(cfg.backend, cfg.red_agent, seed=cfg.seed)
    try:
        out: dict[str, Any] = {"workflow": str(wf), "backend": cfg.backend, "red_agent": cfg.red_agent}
        for mode in ("greedy", "plan" if cfg.plan else "sampling"):
            if mode == "plan":
                from wfrl.evaluation.planner import PlanBudget
                stats, search = play_with_plan(cfg.backend, backend, weights, net, wf, lam,
                                               foothold, range(cfg.episodes), cfg.seed,
                                               PlanBudget.from_settings(cfg), cfg.plan_red)
                out[mode] = {**summarise(stats), "search": search.summary()}
                continue
            out[mode] = summarise(play(backend, weights, net, wf, lam, foothold, range(cfg.episodes),
                                       cfg.seed, greedy=(mode == "greedy")))
    finally:
        backend.close()
    return out
