"""What following each workflow costs, at full strength: the order-conditioned policy under W
against the unconstrained policy (the same training with λ = 0) on the same episodes, paired.

Both policies play greedy 100-step episodes against B_line and Meander on the ground truth's
reserved episodes (as any_workflow.py); the λ = 0 policy is given the same workflow input W as
the conditioned one (it was trained on random inputs it has no reason to use, so any effect of
the input is in both). cost(W) = return(λ = 0) − return(conditioned, W), per episode; reported
with its paired standard error, and per red (and for the mean of both reds) one statement: the
range of the costs, how many workflows cost more than zero at 95 % (Holm over the 120), and the
largest cost with its interval.

    python bench/data/workflow_truth/cost_table.py pretrained:any_workflow RUN_L0/checkpoints/base.pt \
        --backend sim --episodes 1000 --out cost_sim.json [--reds family]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

REDS = ("B_lineAgent", "RedMeanderAgent")
Z95 = 1.959964


def _returns(backend, policy, wf, episodes, seed):
    from wfrl.envs.base import EP_LEN
    from wfrl.evaluation.returns import play
    weights, net, lam, foothold = policy
    stats = play(backend, weights, net, wf, lam, foothold, episodes, seed, greedy=True,
                 horizon=EP_LEN)
    return (np.array([s.env_return for s in stats]), float(np.mean([s.compliance for s in stats])))


def _holm(p: np.ndarray, level: float = 0.05) -> np.ndarray:
    """Holm's step-down rejections of one-sided p-values (True: cost > 0 at the level)."""
    order = np.argsort(p)
    out = np.zeros(len(p), bool)
    for i, k in enumerate(order):
        if p[k] > level / (len(p) - i):
            break
        out[k] = True
    return out


def statement(rows: list[dict], what: str) -> dict:
    cost = np.array([r["cost"] for r in rows])
    se = np.array([r["cost_se"] for r in rows])
    p = np.array([0.5 * math.erfc(c / s / math.sqrt(2)) if s > 0 else float(c <= 0)
                  for c, s in zip(cost, se)])
    costly = _holm(p)
    worst = int(np.argmax(cost))
    best = int(np.argmin(cost))
    w = rows[worst]
    text = (f"{what}: following a workflow costs {cost.min():+.2f} to {cost.max():+.2f} per "
            f"episode against the λ = 0 policy (mean {cost.mean():+.2f}); "
            f"{int(costly.sum())} of {len(rows)} cost more than nothing at 95 % (Holm); the "
            f"largest, {w['workflow']}, {w['cost']:+.2f} [{w['cost'] - Z95 * w['cost_se']:+.2f}, "
            f"{w['cost'] + Z95 * w['cost_se']:+.2f}].")
    return {"what": what, "min": round(float(cost.min()), 4), "max": round(float(cost.max()), 4),
            "mean": round(float(cost.mean()), 4), "costly_at_95": int(costly.sum()),
            "costly_ids": [rows[i]["workflow_id"] for i in np.flatnonzero(costly)],
            "largest": w["workflow"], "largest_cost": w["cost"], "largest_se": w["cost_se"],
            "cheapest": rows[best]["workflow"], "statement": text}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("conditioned")
    p.add_argument("lambda0")
    p.add_argument("--backend", default="sim")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--reds", default=",".join(REDS),
                   help="the red agents, comma separated, or `family` (wfrl.envs.reds: the nine "
                        "variants of B_line and Meander)")
    a = p.parse_args(argv)
    from wfrl.envs.reds import FAMILY
    reds = FAMILY if a.reds == "family" else tuple(r.strip() for r in a.reds.split(","))
    from wfrl.envs import make_backend
    from wfrl.evaluation.cage2 import policy_of_checkpoint
    from wfrl.rng import EVAL_EPISODE_BASE
    from wfrl.search.truth import EVAL_SEED
    from wfrl.workflow import all_workflows
    pols = {}
    for name, ck in (("conditioned", a.conditioned), ("lambda0", a.lambda0)):
        weights, net, _, lam, foothold = policy_of_checkpoint(ck, "critical_first")
        pols[name] = (weights, net, lam, foothold)
    episodes = range(EVAL_EPISODE_BASE, EVAL_EPISODE_BASE + a.episodes)
    per_red, by_wf = {}, {}
    for red in reds:
        backend = make_backend(a.backend, red, seed=EVAL_SEED)
        rows = []
        try:
            for wf in all_workflows():
                cond, comp = _returns(backend, pols["conditioned"], wf, episodes, EVAL_SEED)
                free, _ = _returns(backend, pols["lambda0"], wf, episodes, EVAL_SEED)
                d = free - cond
                rows.append({"workflow": str(wf), "workflow_id": wf.index,
                             "conditioned": round(float(cond.mean()), 4),
                             "lambda0": round(float(free.mean()), 4),
                             "cost": round(float(d.mean()), 4),
                             "cost_se": round(float(d.std(ddof=1) / math.sqrt(len(d))), 4),
                             "compliance": round(comp, 4)})
                by_wf.setdefault(wf.index, []).append(d)
        finally:
            backend.close()
        per_red[red] = rows
    mean_rows = []
    for wf in all_workflows():
        d = np.mean(by_wf[wf.index], axis=0)        # per episode, the mean over the reds
        mean_rows.append({"workflow": str(wf), "workflow_id": wf.index,
                          "cost": round(float(d.mean()), 4),
                          "cost_se": round(float(d.std(ddof=1) / math.sqrt(len(d))), 4)})
    out = {"backend": a.backend, "conditioned": a.conditioned, "lambda0": a.lambda0,
           "episodes": a.episodes, "eval_seed": EVAL_SEED,
           "reds": list(reds),
           "statements": [statement(per_red[r], f"{r}, 100 steps") for r in reds]
           + [statement(mean_rows, "mean of the reds")],
           "per_red": per_red, "mean_of_reds": mean_rows}
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    for s in out["statements"]:
        print(s["statement"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
