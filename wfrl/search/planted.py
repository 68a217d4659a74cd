"""Planted ground truths: synthetic search problems over the 120 workflows with known answers.

A method is judged on problems whose answer is known. An instance (seeded) has

- reward(w) = Σ_pairs a_p·x_p(w) + Σ_types b_t[position of t in w] + offset: pairwise-order effects
  (three strong, the rest weak) plus a free effect for every (type, position); rescaled so the best
  feasible workflow is `spread` (drawn from 3–10) above the feasible median, like the real tables;
- feasibility by pairwise order constraints: one or two relations "t before s" are forbidden, and a
  workflow is feasible when it breaks none (between 30 and 90 of the 120 feasible);
- true compliance 0.975–0.985 for feasible workflows, 0.89–0.93 for the others;
- observations like a search's visits: reward + N(0, se²) with se drawn per instance from 1–3 and
  reported with the observation, compliance + N(0, 0.015²).

`run_planted` drives WorkflowOptimizer with each acquisition on every (instance, seed) for K
evaluations and scores what it reports after K: the rank of optimizer.recommend() among the
feasible workflows by true reward (1 = the best feasible; no report = last), whether it is within
2 noise standard errors of the best, the share of the 120 workflows whose predicted feasibility
is right, and the share of evaluations after the 5th spent on infeasible workflows. Every method
gets the same observation noise stream per (instance, seed) and the same reporting rule, so the
table compares acquisitions only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from wfrl.search.gp import ALL_EMBEDDED, N_WORKFLOWS, PAIRS
from wfrl.search.optimizer import ACQUISITIONS, WorkflowOptimizer
from wfrl.workflow import ALL_WORKFLOWS, N_TYPES, UNIT_TYPES

KS = (5, 10, 15, 20)
THETA = 0.95
COMPLIANCE_NOISE = 0.015


@dataclass
class PlantedInstance:
    seed: int
    reward: np.ndarray          # true reward of every workflow
    compliance: np.ndarray      # true compliance
    feasible: np.ndarray        # bool
    noise_se: float
    spread: float
    forbidden: list[tuple[int, int]]   # (t, s): "t before s" makes a workflow infeasible

    def describe(self) -> str:
        rules = ", ".join(f"{UNIT_TYPES[t]} before {UNIT_TYPES[s]}" for t, s in self.forbidden)
        return (f"instance {self.seed}: {int(self.feasible.sum())} feasible (infeasible: {rules}), "
                f"noise se {self.noise_se:.2f}, best-to-median {self.spread:.2f}")

    def feasible_rank(self) -> np.ndarray:
        """Rank among feasible workflows by true reward (1 = best); infeasible ones get n+1."""
        ids = np.flatnonzero(self.feasible)
        order = ids[np.argsort(-self.reward[ids], kind="stable")]
        rank = np.full(N_WORKFLOWS, len(ids) + 1)
        rank[order] = np.arange(1, len(ids) + 1)
        return rank

    def best(self) -> int:
        ids = np.flatnonzero(self.feasible)
        return int(ids[np.argmax(self.reward[ids])])

    def observe(self, w: int, rng: np.random.Generator) -> tuple[float, float, float]:
        r = float(self.reward[w] + self.noise_se * rng.standard_normal())
        c = float(np.clip(self.compliance[w] + COMPLIANCE_NOISE * rng.standard_normal(), 0, 1))
        return r, self.noise_se, c


def _positions() -> np.ndarray:
    """[120, 5]: position of each unit type in each workflow."""
    pos = np.empty((N_WORKFLOWS, N_TYPES), dtype=np.int64)
    for w, order in enumerate(ALL_WORKFLOWS):
        for p, t in enumerate(order):
            pos[w, t] = p
    return pos


POSITIONS = _positions()


def planted_instance(seed: int) -> PlantedInstance:
    rng = np.random.default_rng([seed, 0x91A7])
    a = rng.normal(0.0, 0.3, len(PAIRS))
    strong = rng.choice(len(PAIRS), 3, replace=False)
    a[strong] = rng.normal(0.0, 1.5, 3)
    b = rng.normal(0.0, 0.6, (N_TYPES, N_TYPES))
    raw = ALL_EMBEDDED @ a + b[np.arange(N_TYPES), POSITIONS].sum(axis=1)
    while True:
        k = int(rng.integers(1, 3))
        forbidden = []
        for p in rng.choice(len(PAIRS), k, replace=False):
            i, j = PAIRS[p]
            forbidden.append((i, j) if rng.random() < 0.5 else (j, i))
        feasible = np.ones(N_WORKFLOWS, dtype=bool)
        for t, s in forbidden:
            feasible &= ~(POSITIONS[:, t] < POSITIONS[:, s])
        if 30 <= feasible.sum() <= 90:
            break
    spread = float(rng.uniform(3.0, 10.0))
    fr = raw[feasible]
    raw = (raw - np.median(fr)) * spread / (fr.max() - np.median(fr))
    reward = raw - float(rng.uniform(15.0, 30.0))
    compliance = np.where(feasible, rng.uniform(0.975, 0.985, N_WORKFLOWS),
                          rng.uniform(0.89, 0.93, N_WORKFLOWS))
    return PlantedInstance(seed, reward, compliance, feasible, float(rng.uniform(1.0, 3.0)),
                           spread, forbidden)


def run_one(inst: PlantedInstance, acquisition: str, seed: int, k_max: int = max(KS),
            ks=KS, batch: int = 1) -> dict:
    """One optimizer run of k_max evaluations; what it reports after each K in ks (K visits
    told). batch: visits in flight at once, as a search with --concurrent-visits runs them —
    visit i is asked once visit i − batch is told, with the visits still in flight pending, and
    results are told in visit order (batch = 1: one after another)."""
    opt = WorkflowOptimizer(acquisition, theta=THETA, seed=seed)
    noise = np.random.default_rng([inst.seed, seed, 0x0B5])
    ranks = inst.feasible_rank()
    best = inst.best()
    picks: list[int] = []
    in_flight: list[int] = []
    out: dict[str, Any] = {"ranks": {}, "near_best": {}, "reported": {}, "feasible_right": {},
                           "feasible_right_sure": {}}
    for k in range(1, k_max + 1):
        while len(picks) < k_max and len(in_flight) < batch:
            w = opt.ask(pending=in_flight).index
            picks.append(w)
            in_flight.append(w)
        w = in_flight.pop(0)
        opt.tell(w, *inst.observe(w, noise))
        if k in ks:
            rep = opt.recommend()
            out["reported"][k] = rep
            out["ranks"][k] = int(ranks[rep]) if rep is not None else int(inst.feasible.sum())
            out["near_best"][k] = bool(rep is not None and inst.feasible[rep] and
                                       inst.reward[best] - inst.reward[rep] <= 2 * inst.noise_se)
            # the share of the 120 whose predicted feasibility is right: the search's feasible set
            # and, beside it, that set with the workflows at θ added (unfollowable only if sure)
            predicted = opt.predicted_feasible()
            out["feasible_right"][k] = float(np.mean(predicted == inst.feasible))
            out["feasible_right_sure"][k] = float(np.mean(
                (predicted | opt.at_theta()) == inst.feasible))
    later = picks[5:]
    out["infeasible_share_after_5"] = (float(np.mean(~inst.feasible[later])) if later else 0.0)
    out["picks"] = picks
    out["max_visits_share"] = float(np.bincount(picks).max() / len(picks))
    return out


def method_name(acquisition: str, batch: int) -> str:
    """The table's name of an acquisition run with `batch` visits in flight."""
    return acquisition if batch == 1 else f"{acquisition}_k{batch}"


def run_planted(instances=range(5), seeds=range(20), acquisitions=ACQUISITIONS, ks=KS,
                progress=None, batches=(1,)) -> dict:
    """Every acquisition at every batch size (visits in flight) on every (instance, seed);
    summary table per K. A method is named by method_name (the acquisition, with _kB for a
    batch B > 1)."""
    methods = [(acq, b) for b in batches for acq in acquisitions]
    runs: dict[str, list] = {method_name(a, b): [] for a, b in methods}
    insts = [planted_instance(i) for i in instances]
    for inst in insts:
        if progress:
            progress(inst.describe())
        for acq, b in methods:
            for s in seeds:
                runs[method_name(acq, b)].append(
                    {"instance": inst.seed, "seed": int(s),
                     **run_one(inst, acq, int(s), max(ks), ks, batch=b)})
    acquisitions = list(runs)
    table = []
    for k in ks:
        row = {"K": k}
        for acq in acquisitions:
            rs = runs[acq]
            ranks = np.array([r["ranks"][k] for r in rs])
            good = np.array([(r["ranks"][k] <= 5) or r["near_best"][k] for r in rs])
            row[acq] = {"median_rank": float(np.median(ranks)), "mean_rank": float(ranks.mean()),
                        "top5_or_2se": float(good.mean()),
                        "feasible_right": float(np.mean([r["feasible_right"][k] for r in rs])),
                        "feasible_right_sure": float(np.mean([r["feasible_right_sure"][k]
                                                              for r in rs]))}
        table.append(row)
    infeasible = {acq: float(np.mean([r["infeasible_share_after_5"] for r in runs[acq]]))
                  for acq in acquisitions}
    max_share = {acq: float(np.max([r["max_visits_share"] for r in runs[acq]]))
                 for acq in acquisitions}
    return {"instances": [i.describe() for i in insts], "n_runs": len(insts) * len(list(seeds)),
            "table": table, "infeasible_share_after_5": infeasible,
            "max_share_of_one_workflow": max_share, "runs": runs}


def format_planted(res: dict) -> str:
    acqs = list(res["infeasible_share_after_5"])
    lines = [f"{res['n_runs']} runs per acquisition (instances × seeds)",
             f"{'K':>3} " + " ".join(f"{a + ' med':>16} {'top5/2se':>8} {'feas.':>6} {'sure':>6}"
                                     for a in acqs)]
    for row in res["table"]:
        lines.append(f"{row['K']:3d} " + " ".join(
            f"{row[a]['median_rank']:16.1f} {row[a]['top5_or_2se']:8.0%} "
            f"{row[a]['feasible_right']:6.1%} {row[a]['feasible_right_sure']:6.1%}" for a in acqs))
    lines.append("feas.: share of the 120 whose predicted feasibility (P(feasible) ≥ 0.5) is "
                 "right; sure: the same if only workflows 95 % sure to fall short were "
                 "unfollowable")
    lines.append("infeasible evaluations after the 5th: " + ", ".join(
        f"{a} {res['infeasible_share_after_5'][a]:.0%}" for a in acqs))
    return "\n".join(lines)
