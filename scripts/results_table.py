"""Markdown table of training runs from their records (experiment_config.json, eval_log.csv):
the greedy evaluation on the run's 500 reserved episodes at given training lengths.

    .venv/bin/python scripts/results_table.py --at 20000 40000 docs/results/recipe/2026-11-26_ablation/*/
"""
import argparse
import csv
import json
from pathlib import Path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--at", nargs="+", type=int, default=[20000, 40000])
    a = ap.parse_args(argv)
    head = ["run", "red", "episodes/update", "memory", "mask", "lr_final", "entropy_final",
            "gae λ", "overlap", "decoupled"] + [f"at {k // 1000}k" for k in a.at] + \
        ["last", "best (θ reached)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for run in map(Path, a.runs):
        cfg = json.loads((run / "experiment_config.json").read_text())
        rows = list(csv.DictReader(open(run / "eval_log.csv")))
        by = {int(r["Episodes"]): r for r in rows}
        fmt = lambda r: f"{float(r['Reward']):.2f} ± {float(r['Reward_SE']):.2f}"  # noqa: E731
        feas = [r for r in rows if float(r["Compliance"]) >= cfg["compliance_threshold"]]
        best = max(feas or rows, key=lambda r: float(r["Reward"]))
        p = cfg["ppo"]
        cells = [run.name, cfg["red_agent"], cfg["episodes_per_update"], p["memory"], p["mask"],
                 p["lr_final"], p["entropy_final"], p["gae_lambda"],
                 # runs made before these options existed had neither
                 cfg.get("overlap", False), p.get("decoupled", False) and cfg.get("overlap", False)]
        cells += [fmt(by[k]) if k in by else "–" for k in a.at]
        cells += [f"{fmt(rows[-1])} ({int(rows[-1]['Episodes']) // 1000}k)",
                  f"{fmt(best)} ({int(best['Episodes']) // 1000}k)"]
        print("| " + " | ".join(map(str, cells)) + " |")


if __name__ == "__main__":
    main()
