"""The conditioned policy on each sampled workflow against the best specialist trained on that
workflow alone (the best of its seeds, per red), on the same reserved episodes; and the
conditioned policy's compliance over all 120.

    python bench/data/workflow_truth/any_vs_specialists.py workflows_sim.csv \
        PER_WORKFLOW.csv [PER_WORKFLOW.csv ...] [--json OUT]

Each PER_WORKFLOW.csv is a per_workflow.py table (Workflow_ID, Seed, Red, Reward, ...); the
specialists' episodes are the first of the conditioned table's (500 or 1,000)."""
from __future__ import annotations

import argparse
import collections
import csv
import json
import sys

REDS = ("B_lineAgent", "RedMeanderAgent")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("conditioned")
    p.add_argument("specialists", nargs="+")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    cond = {(int(r["Workflow_ID"]), r["Red"]): r for r in csv.DictReader(open(a.conditioned))}
    best = collections.defaultdict(lambda: None)
    for path in a.specialists:
        for r in csv.DictReader(open(path)):
            k = (int(r["Workflow_ID"]), r["Red"])
            if best[k] is None or float(r["Reward"]) > float(best[k]["Reward"]):
                best[k] = r
    rows = []
    for (wid, red), spec in sorted(best.items()):
        c = cond[(wid, red)]
        rows.append({"workflow_id": wid, "workflow": c["Workflow"], "red": red,
                     "conditioned": float(c["Reward"]), "conditioned_se": float(c["Reward_SE"]),
                     "conditioned_compliance": float(c["Compliance"]),
                     "best_specialist": float(spec["Reward"]),
                     "best_specialist_se": float(spec["Reward_SE"]),
                     "best_specialist_seed": int(spec["Seed"]),
                     "difference": round(float(c["Reward"]) - float(spec["Reward"]), 4)})
    print(f"{'id':>3} {'red':16} {'conditioned':>12} {'best specialist':>16} {'diff':>6}")
    for r in rows:
        print(f"{r['workflow_id']:3d} {r['red']:16} {r['conditioned']:7.2f} ± "
              f"{r['conditioned_se']:.2f} {r['best_specialist']:9.2f} ± "
              f"{r['best_specialist_se']:.2f} "
              f"{r['difference']:+6.2f}")
    worst = {red: min(r["difference"] for r in rows if r["red"] == red) for red in REDS}
    compliance = min(float(r["Compliance"]) for r in cond.values())
    summary = {"sampled": len({r["workflow_id"] for r in rows}), "worst_difference": worst,
               "within_0.2": all(r["difference"] >= -0.2 for r in rows),
               "lowest_compliance_of_120": compliance,
               "workflows": len({k[0] for k in cond})}
    print(json.dumps(summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
