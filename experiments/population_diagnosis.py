"""Where a population defender's losses against CAGE2's reds come from (docs/robustness.md):
per defender, red and workflow, the return, blue's Restores and Removes per episode by unit type,
and the cost of red's root by subnet, on the same held-out episodes (simulator, defender greedy).

    python experiments/population_diagnosis.py --defenders D0=pretrained:any_workflow \
        D4=RUNS/nash/defenders/d004.pt --workflows critical_first \
        user,op_host,enterprise,op_server,defender --episodes 1000 --seed 12345 --out F.json
"""
from __future__ import annotations

import argparse
import collections
import json

import numpy as np
from red_anatomy import blue_side

from wfrl.envs.actions import HOSTS, N_HOSTS, REMOVE_FIRST, RESTORE_FIRST
from wfrl.training.attack import load_defender
from wfrl.workflow import HOST_TYPE, UNIT_TYPES

# the reward's parts per step (CAGE2): root on a host costs its value (none on User0, red's
# entry point), a Restore 1, Impact 10
VALUE = np.array([1.0 if h in ("Enterprise0", "Enterprise1", "Enterprise2", "Op_Server0")
                  else 0.0 if h == "User0" else 0.1 for h in HOSTS])


def by_type(counts: np.ndarray, n: int) -> dict:
    out: dict = collections.Counter()
    for h in range(N_HOSTS):
        out[UNIT_TYPES[HOST_TYPE[h]]] += float(counts[h])
    return {k: round(v / n, 2) for k, v in out.items() if v}


def measure(defender, red: str, episodes, seed: int) -> dict:
    arrays, returns = blue_side(defender, "sim", red, episodes, seed)
    acts, access, rew = arrays["actions"], arrays["red_access"], arrays["rewards"]
    n = len(episodes)
    a = acts.ravel()
    restores = np.bincount(a[(a >= RESTORE_FIRST) & (a < RESTORE_FIRST + N_HOSTS)]
                           - RESTORE_FIRST, minlength=N_HOSTS)
    removes = np.bincount(a[(a >= REMOVE_FIRST) & (a < REMOVE_FIRST + N_HOSTS)]
                          - REMOVE_FIRST, minlength=N_HOSTS)
    root_cost = ((access == 2) * VALUE).sum(axis=(0, 1))
    impact = float((rew <= -10).sum()) / n
    return {"return": round(float(returns.mean()), 2),
            "return_se": round(float(returns.std(ddof=1) / np.sqrt(n)), 2),
            "restores": by_type(restores, n), "removes": by_type(removes, n),
            "cost_of_root": by_type(root_cost, n), "impact_steps": round(impact, 2)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--defenders", nargs="+", required=True, metavar="NAME=CHECKPOINT")
    p.add_argument("--workflows", nargs="+", default=["critical_first"])
    p.add_argument("--reds", default="B_lineAgent,RedMeanderAgent")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    eps = range(a.episodes)
    out = {"episodes": a.episodes, "seed": a.seed, "rows": []}
    for spec in a.defenders:
        name, path = spec.split("=", 1)
        for wf in a.workflows:
            d = load_defender(path, wf)
            for red in a.reds.split(","):
                row = {"defender": name, "workflow": wf, "red": red,
                       **measure(d, red, eps, a.seed)}
                print(json.dumps(row), flush=True)
                out["rows"].append(row)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
