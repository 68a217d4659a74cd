"""What a ground-truth table says about workflows: is there an effect beyond training randomness,
which priority relations ("X before Y") move reward or compliance and by how much, which workflows
cannot be followed, and which compliant workflows are indistinguishable from the best.

Input: a matrix runs × 120 (one row per independently trained policy, columns in workflow-index
order) of rewards and one of compliance. Every interval comes from the spread over runs (a run's
difference, whatever the evaluation episodes, is one observation), so training randomness is in
it; with the same evaluation episodes for every run and workflow, the comparisons are paired.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Any, cast

import numpy as np

from wfrl.workflow import UNIT_TYPES, Workflow, all_workflows

THETA = 0.95     # a workflow is followable when its mean compliance reaches θ (the search's rule)
LEVEL = 0.95     # confidence of every interval and test here


def _t(df: int) -> float:
    from scipy.stats import t
    return float(t.ppf(0.5 + LEVEL / 2, df))


def before_matrix() -> np.ndarray:
    """[pair, workflow] = True where the pair's first type comes before its second in the
    workflow; pairs in itertools.combinations(UNIT_TYPES, 2) order."""
    wfs = all_workflows()
    pairs = list(itertools.combinations(UNIT_TYPES, 2))
    out = np.zeros((len(pairs), len(wfs)), dtype=bool)
    for j, wf in enumerate(wfs):
        pos = {t: i for i, t in enumerate(wf.names)}
        for k, (a, b) in enumerate(pairs):
            out[k, j] = pos[a] < pos[b]
    return out


def relation_effects(values: np.ndarray) -> list[dict]:
    """For each unordered pair (a, b), the effect of putting a before b rather than b before a
    with the other relations held fixed: the coefficient of the pair's indicator in a least-
    squares fit of the 120 values on all ten indicators and an intercept (the same features the
    search's Kendall kernel compares workflows by), fitted per run; its mean over runs with a 95 %
    t interval (None with one run). Also the marginal difference (mean with a before b − mean
    with b before a), which a relation sharing a type with an effective one also shows.
    Sorted by |effect|, largest first."""
    y = np.asarray(values, dtype=np.float64)
    runs = y.shape[0]
    B = before_matrix()
    X = np.column_stack([np.ones(B.shape[1]), B.T.astype(np.float64)])
    coef = np.linalg.lstsq(X, y.T, rcond=None)[0][1:].T                  # runs × pairs
    pairs = list(itertools.combinations(UNIT_TYPES, 2))
    rows: list[dict[str, Any]] = []
    for k, (a, b) in enumerate(pairs):
        d = coef[:, k]
        mean = float(d.mean())
        half = _t(runs - 1) * float(d.std(ddof=1)) / math.sqrt(runs) if runs > 1 else None
        marginal = float((y[:, B[k]].mean(axis=1) - y[:, ~B[k]].mean(axis=1)).mean())
        rows.append({"relation": f"{a} before {b}", "effect": round(mean, 4),
                     "ci_low": None if half is None else round(mean - half, 4),
                     "ci_high": None if half is None else round(mean + half, 4),
                     "significant": half is not None and abs(mean) > half,
                     "marginal": round(marginal, 4)})
    rows.sort(key=lambda r: -abs(r["effect"]))
    return rows


def feasibility(compliance: np.ndarray, theta: float = THETA) -> dict:
    """Which workflows are followable (mean compliance over runs ≥ θ), and the relations that the
    unfollowable ones share (each relation present in every unfollowable workflow and in no
    followable one is a complete explanation)."""
    c = np.asarray(compliance, dtype=np.float64).mean(axis=0)
    feasible = c >= theta
    B = before_matrix()
    pairs = list(itertools.combinations(UNIT_TYPES, 2))
    explains = []
    if (~feasible).any():
        for k, (a, b) in enumerate(pairs):
            for rel, mask in ((f"{a} before {b}", B[k]), (f"{b} before {a}", ~B[k])):
                if mask[~feasible].all():
                    explains.append({"relation": rel,
                                     "followable_with_it": int((mask & feasible).sum()),
                                     "unfollowable_with_it": int((mask & ~feasible).sum())})
    return {"theta": theta, "followable": int(feasible.sum()),
            "unfollowable": [Workflow.from_index(cast(int, i)).arrow()
                             for i in np.flatnonzero(~feasible)],
            "unfollowable_ids": [int(i) for i in np.flatnonzero(~feasible)],
            "mean_compliance": [round(float(x), 4) for x in c],
            "shared_by_unfollowable": explains}


@functools.lru_cache(maxsize=64)
def dunnett_one_sided(k: int, df: float | None, level: float = LEVEL) -> float:
    """The critical value d with P(max_i (X_i − X_0) / (√2·S) ≤ d) = level, for X_0..X_k
    independent standard normal and S² an independent χ²_df / df (df None: S = 1): the one-sided
    Dunnett value for k comparisons with one mean, equicorrelated 1/2. Computed as
    E_S[∫ φ(x) Φ(x + d√2·S)^k dx], the inner integral on a fine grid and the outer by Gauss–
    Legendre nodes in S's probability scale; k = 1 gives Student's t quantile."""
    from scipy.optimize import brentq
    from scipy.special import log_ndtr
    from scipy.stats import chi2
    x = np.linspace(-10.0, 10.0, 4001)
    wx = np.full(x.size, x[1] - x[0])
    wx[[0, -1]] /= 2
    wx *= np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    if df is None:
        s, ws = np.ones(1), np.ones(1)
    else:
        u, w = np.polynomial.legendre.leggauss(96)
        s, ws = np.sqrt(chi2.ppf((u + 1) / 2, df) / df), w / 2

    def prob(d: float) -> float:
        inner = np.exp(k * log_ndtr(x[None, :] + d * math.sqrt(2) * s[:, None])) @ wx
        return float(inner @ ws)

    return float(brentq(lambda d: prob(d) - level, -5.0, 20.0, xtol=1e-7))


def best_and_ties(rewards: np.ndarray, feasible: np.ndarray) -> dict:
    """The followable workflow with the highest mean reward, and which other followable workflows
    are not distinguishable from the best at 95 %: Hsu's multiple comparisons with the best. In
    the two-way model over the followable workflows (runs as blocks; s the residual sd on
    (runs − 1)(m − 1) degrees of freedom), workflow i is distinguishable, worse than the best,
    when its mean is below the highest other mean by more than d·s·√(2 / runs), d the one-sided
    Dunnett value for m − 1 comparisons. Under that model (additive, equal-variance normal
    errors) the tied workflows and the best form a set that holds the truly best with 95 %
    confidence, whatever the other means are; a run that fails on a few workflows breaks the
    equal variance and widens every margin. A test of each workflow against the one that
    happened to score highest would not hold it: that best is the maximum of m noisy means, and
    m − 1 uncorrected tests against it call workflows worse by chance. With one run there is no
    interval: nothing is declared tied."""
    y = np.asarray(rewards, dtype=np.float64)
    runs = y.shape[0]
    means = y.mean(axis=0)
    candidates = np.flatnonzero(feasible) if feasible.any() else np.arange(y.shape[1])
    best = int(candidates[np.argmax(means[candidates])])
    ties = []
    margin = None
    if runs >= 2 and len(candidates) >= 2:
        s, df = residual_sd(y[:, candidates])
        margin = dunnett_one_sided(len(candidates) - 1, df) * s * math.sqrt(2.0 / runs)
        # every j but the best trails it: tied when within the margin of it (Gupta's subset)
        ties = [int(j) for j in candidates if j != best and means[j] >= means[best] - margin]
    order = np.argsort(-means, kind="stable")
    return {"best_id": best, "best": Workflow.from_index(best).arrow(),
            "best_reward": round(float(means[best]), 4),
            "best_se": round(float(y[:, best].std(ddof=1) / math.sqrt(runs)), 4) if runs > 1 else None,
            "indistinguishable_ids": ties, "indistinguishable": len(ties),
            "tie_margin": None if margin is None else round(margin, 4),
            "followable": int(len(candidates)),
            "rank": {int(j): r + 1 for r, j in enumerate(order)}}


def workflow_sd_upper(e: dict) -> float:
    """95 % upper confidence bound of the workflow effect's standard deviation in the two-way
    model (workflows as random effects): F / (1 + r·σ_w²/σ_e²) follows F(df_w, df_e), so
    σ_w² ≤ σ_e² · (F / F_0.05 − 1) / r, with F_0.05 that distribution's 5 % quantile."""
    from scipy.stats import f as f_dist
    lower = float(f_dist.ppf(1 - LEVEL, e["df_workflow"], e["df_residual"]))
    ratio = max(e["F"] / lower - 1.0, 0.0) / e["runs"]
    return round(e["run_noise_sd"] * math.sqrt(ratio), 4)


def residual_sd(y: np.ndarray) -> tuple[float, int]:
    """The two-way model's residual sd (√MS_residual: each run's and each workflow's mean
    removed) of a runs × workflows matrix, and its degrees of freedom."""
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (y.shape[0] - 1) * (y.shape[1] - 1)
    return math.sqrt(float((resid ** 2).sum()) / df), df


def run_sd(rewards: np.ndarray) -> dict:
    """How much a workflow's reward moves from one training run to the next: the raw standard
    deviation over runs (mean over workflows, and its largest), and the residual one once each
    run's common offset is removed (the two-way model's √MS_residual)."""
    y = np.asarray(rewards, dtype=np.float64)
    raw = y.std(axis=0, ddof=1)
    return {"raw_sd_mean": round(float(raw.mean()), 4), "raw_sd_max": round(float(raw.max()), 4),
            "residual_sd": round(residual_sd(y)[0], 4),
            "run_offsets": [round(float(x), 4) for x in y.mean(axis=1) - y.mean()]}


def analyse(rewards: np.ndarray, compliance: np.ndarray, theta: float = THETA) -> dict:
    """Everything above for one (red, code) table, plus one sentence a user can quote."""
    from wfrl.search.exhaustive import workflow_effect
    rewards = np.asarray(rewards, dtype=np.float64)
    compliance = np.asarray(compliance, dtype=np.float64)
    eff = workflow_effect(rewards) if rewards.shape[0] >= 2 else None
    feas = feasibility(compliance, theta)
    feasible = np.array([c >= theta for c in compliance.mean(axis=0)])
    best = best_and_ties(rewards, feasible)
    # the effect among followable workflows only: unfollowable ones may differ for that reason
    eff_f = workflow_effect(rewards[:, feasible]) if rewards.shape[0] >= 2 \
        and feasible.sum() >= 3 else None
    for e in (eff, eff_f):
        if e is not None and e["F"] is not None:
            e["workflow_sd_upper95"] = workflow_sd_upper(e)
    out: dict[str, Any] = {"runs": int(rewards.shape[0]), "effect": eff, "effect_followable": eff_f,
                           "run_sd": run_sd(rewards) if rewards.shape[0] >= 2 else None,
                           "relations_reward": relation_effects(rewards),
                           "relations_compliance": relation_effects(compliance),
                           "feasibility": feas, "best": best}
    out["sentence"] = sentence(out)
    return out


def sentence(a: dict) -> str:
    """One plain sentence for an analyse() result."""
    feas, best, eff = a["feasibility"], a["best"], a["effect_followable"] or a["effect"]
    n_bad = len(feas["unfollowable"])
    why = ""
    # a relation explains unfollowability only where it holds mostly for unfollowable workflows
    telling = [e for e in feas["shared_by_unfollowable"]
               if e["followable_with_it"] <= e["unfollowable_with_it"]]
    if telling:
        r = min(telling, key=lambda e: e["followable_with_it"])
        why = f" (all of them put {r['relation']})"
    elif n_bad:
        worst = min(feas["mean_compliance"][i] for i in feas["unfollowable_ids"])
        why = (f": no priority relation singles them out; their mean compliance is "
               f"{worst:.3f} or more, at θ's edge" if feas["theta"] - worst < 0.02 else
               ": no priority relation singles them out")
    follow = (f"{feas['followable']} of 120 workflows can be followed (compliance ≥ "
              f"{feas['theta']:.2f}); {n_bad} cannot{why}")
    if feas["followable"] == 0:
        return (f"no workflow can be followed (compliance ≥ {feas['theta']:.2f}); the highest "
                f"reward, {best['best_reward']:.2f}, is {best['best']}'s.")
    if eff is None or eff["F"] is None:
        return follow + "; one training run: no test of a reward effect."
    sig = eff["p_value"] < 1 - LEVEL
    rel = [r for r in a["relations_reward"] if r["significant"]]
    if sig:
        lead = rel[0] if rel else None
        what = (f"the workflow matters for reward (F = {eff['F']:.2f}, p = {eff['p_value']:.2g}; "
                f"workflow sd {eff['workflow_sd']:.2f} vs run sd {eff['run_noise_sd']:.2f})")
        if lead:
            what += (f", most through '{lead['relation']}' ({lead['effect']:+.2f}, 95 % "
                     f"[{lead['ci_low']:+.2f}, {lead['ci_high']:+.2f}])")
    else:
        what = (f"among those, the workflow does not detectably change reward (F = {eff['F']:.2f}, "
                f"p = {eff['p_value']:.2g}; workflow sd ≤ {eff['workflow_sd_upper95']:.2f} at "
                f"95 % vs run sd {eff['run_noise_sd']:.2f})")
        if eff["friedman_p_value"] is not None and eff["friedman_p_value"] < 1 - LEVEL:
            what += (f", though Friedman's rank test, which weighs every run alike, finds "
                     f"some ordering (p = {eff['friedman_p_value']:.2g})")
    comp = [r for r in a["relations_compliance"] if r["significant"]]
    if comp and abs(comp[0]["effect"]) >= 0.005:
        c = comp[0]
        what += (f"; compliance is {abs(c['effect']):.3f} "
                 f"{'higher' if c['effect'] > 0 else 'lower'} with {c['relation']}")
    ties = (f"; the best, {best['best']} ({best['best_reward']:.2f}), is not distinguishable at "
            f"95 % from {best['indistinguishable']} of the other {best['followable'] - 1} "
            f"followable workflows")
    return follow + "; " + what + ties + "."
