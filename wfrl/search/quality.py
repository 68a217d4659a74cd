"""How well the search searches: the rank (in `wfrl exhaustive`'s table) of the best workflow the
search has evaluated after K evaluations, over several seeds, next to random search.

"Best evaluated after K" = among the workflows whose visits 1..K reached compliance θ (the ones
the GP was given), the one with the highest GP posterior mean, the GP fitted to those
observations as the search fits it — what the search itself would report at that point. Its rank
is looked up in exhaustive.csv (1 = highest Reward of 120).

Two random baselines under the same budget of K evaluations:
- random search: the same search loop with `acquisition="random"` (the next workflow drawn
  uniformly among the unvisited ones; training, compliance gating, GP and reporting unchanged) —
  the like-for-like control, same seeds;
- oracle random: K workflows drawn uniformly without replacement, credited with the *true* best
  of the K (no training noise, no failed visit): a bound no honest random search reaches.

The table also carries the ground truth's workflow-effect test (wfrl.search.exhaustive.
workflow_effect) when it combines several training runs: if the workflows do not differ by more
than training randomness, no search can beat random search on it.
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from wfrl.runlog import read_csv
from wfrl.search.exhaustive import load_exhaustive

ACQUISITIONS = ("constrained", "random")  # the search as shipped and its control

KS = (5, 10, 15, 20)


def ground_truth(path) -> dict:
    rows = load_exhaustive(path)
    if len(rows) != 120:
        raise ValueError(f"{path} has {len(rows)} workflows, not 120")
    by_id = {r["Workflow_ID"]: r for r in rows}
    best = min(rows, key=lambda r: r["Rank"])
    return {"rows": by_id, "best": best}


def near_best(truth: dict, wf_id: int, n_se: float = 2.0) -> bool:
    """Within n_se standard errors (of the difference) of the best workflow's reward."""
    r, b = truth["rows"][wf_id], truth["best"]
    return b["Reward"] - r["Reward"] <= n_se * math.hypot(b["Reward_SE"], r["Reward_SE"])


def best_after(gp_log_rows: list[dict], k: int, detrend: bool = True, seed: int = 0) -> int | None:
    """Workflow id the search would report after its first k visits (None: none compliant): the
    highest GP posterior mean among the evaluated workflows, the GP fitted as the search fits it
    to the observations of visits 1..k."""
    from wfrl.search.gp import PermutationGP
    from wfrl.search.loop import fit_observations
    obs: list[dict[str, Any]] = [
        {"workflow": int(r["Workflow_ID"]), "reward": float(r["Reward"]),
         "se": float(r["Reward_SE"]), "lineage": int(r.get("Lineage_Episodes") or 0)}
        for r in gp_log_rows if int(r["Iteration"]) <= k and r["GP_Updated"] == "True"]
    if not obs:
        return None
    mu, _ = fit_observations(PermutationGP(seed=seed), obs, detrend).predict()
    evaluated = sorted({o["workflow"] for o in obs})
    return max(evaluated, key=lambda w: (mu[w], -w))


def random_search_ranks(truth: dict, k: int, draws: int, seed: int = 0) -> np.ndarray:
    ranks = np.array([truth["rows"][w]["Rank"] for w in range(120)])
    rng = np.random.default_rng(seed)
    return np.array([ranks[rng.choice(120, size=k, replace=False)].min() for _ in range(draws)])


def run_searches(seeds, workdir, max_k: int = max(KS), cfg_overrides=None, progress=None,
                 acquisitions=ACQUISITIONS):
    """One default search per seed and acquisition into workdir/<acquisition>/seed<N> (max_k
    evaluations each)."""
    from wfrl.config.run import SearchConfig
    from wfrl.search.loop import search
    workdir, seeds = Path(workdir), list(seeds)
    for acq in acquisitions:
        for seed in seeds:
            cfg = SearchConfig(**{"seed": seed, "max_evaluations": max_k,
                                  "total_episodes": 10_000_000, "collector": "sequential",
                                  **(cfg_overrides or {}), "acquisition": acq,
                                  "out": str(workdir / acq / f"seed{seed}")})
            summary = search(cfg, progress=lambda _line: None)
            if progress:
                progress({"acquisition": acq, "seed": seed, "episodes": summary["episodes_used"],
                          "wall_s": summary["wall_time_s"]})


def _per_seed(truth: dict, run: Path, seed: int, ks) -> dict:
    rows = read_csv(run / "gp_sampling_log.csv")
    summary = json.loads((run / "summary.json").read_text())
    cfg = json.loads((run / "experiment_config.json").read_text())
    entry = {"seed": seed, "acquisition": cfg.get("acquisition", "constrained"),
             "episodes": summary["episodes_used"],
             "wall_s": summary["wall_time_s"], "ranks": {}, "near_best": {}, "picks": {}}
    for k in ks:
        w = best_after(rows, k, cfg.get("detrend", False), cfg["seed"])
        entry["ranks"][k] = truth["rows"][w]["Rank"] if w is not None else 121
        entry["near_best"][k] = bool(w is not None and near_best(truth, w))
        entry["picks"][k] = w
    return entry


def truth_effect(truth: dict) -> dict | None:
    """The workflow-effect test on the ground truth's per-run rewards (None: one run only)."""
    from wfrl.search.exhaustive import workflow_effect
    runs = [truth["rows"][w].get("Run_Rewards") for w in range(120)]
    if any(not r for r in runs):
        return None
    try:
        y = np.array([[float(x) for x in r.split()] for r in runs]).T  # runs x workflows
    except ValueError:  # uneven or malformed Run_Rewards
        return None
    return workflow_effect(y) if y.ndim == 2 and y.shape[0] >= 2 else None


def tabulate(exhaustive_csv, workdir, seeds, ks=KS, acquisitions=ACQUISITIONS) -> dict:
    truth = ground_truth(exhaustive_csv)
    seeds = list(seeds)
    per_seed = {acq: [_per_seed(truth, Path(workdir) / acq / f"seed{seed}", seed, ks)
                      for seed in seeds] for acq in acquisitions}
    table = []
    for k in ks:
        rnd = random_search_ranks(truth, k, 20_000)
        row = {"K": k, "oracle_random_median_rank": float(np.median(rnd)),
               "oracle_random_mean_rank": float(rnd.mean())}
        for acq in acquisitions:
            ranks = np.array([e["ranks"][k] for e in per_seed[acq]])
            row[f"{acq}_median_rank"] = float(np.median(ranks))
            row[f"{acq}_ranks"] = ranks.tolist()
            row[f"{acq}_top5_or_2se"] = int(sum((e["ranks"][k] <= 5) or e["near_best"][k]
                                                for e in per_seed[acq]))
        table.append(row)
    n_near = sum(near_best(truth, w) for w in truth["rows"])
    return {"per_seed": per_seed, "table": table, "n_seeds": len(seeds),
            "best": truth["best"]["Workflow"], "best_reward": truth["best"]["Reward"],
            "workflows_within_2se_of_best": int(n_near), "workflow_effect": truth_effect(truth)}


def run_quality(exhaustive_csv, seeds=range(10), ks=KS, cfg_overrides=None, workdir=None,
                progress=None, acquisitions=ACQUISITIONS) -> dict:
    """Run one search per seed and acquisition (max(ks) evaluations each) and tabulate ranks."""
    ground_truth(exhaustive_csv)  # fail before hours of searching
    seeds = list(seeds)
    workdir = Path(workdir or tempfile.mkdtemp(prefix="wfrl-quality-"))
    run_searches(seeds, workdir, max(ks), cfg_overrides, progress, acquisitions)
    return tabulate(exhaustive_csv, workdir, seeds, ks, acquisitions)
