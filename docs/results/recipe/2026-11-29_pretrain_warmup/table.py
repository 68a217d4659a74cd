"""The ablation's table: per arm and seed, the base's training reward over its last 10 updates
(2,000 episodes against the mixed red), its reward over updates 61-100 (the plateau, if any), and
its greedy evaluation on all 120 workflows (eval_bases.py): mean reward per red, the
user-before-enterprise class's compliance, workflows at or above θ = 0.95.

usage: python table.py RUNS_DIR BASES.json
"""
import csv
import json
import sys
from pathlib import Path

import numpy as np

ARMS = ("default", "warmup", "no_overlap", "entropy_0.02", "lr_final_0.3", "lambda_0",
        "lambda_10")


def main(runs: Path, bases: Path) -> None:
    ev = json.loads(bases.read_text())
    print(f"{'arm':14} {'seed':>4} {'last10':>7} {'upd61-100':>9} {'B_line':>7} {'Meander':>8} "
          f"{'user<ent':>8} {'>=θ':>4}")
    for arm in ARMS:
        rows = []
        for run in sorted((runs / arm).glob("seed*")):
            key = f"{arm}/{run.name}"
            if key not in ev:
                continue
            log = [r for r in csv.DictReader(open(run / "training_log.csv"))
                   if r["Phase"] == "pretrain"]
            r = np.array([float(x["Env_Reward"]) for x in log])
            e = ev[key]
            row = (r[-10:].mean(), r[60:100].mean(), e["reward_B_line"], e["reward_Meander"],
                   e["user_before_enterprise_compliance"], e["workflows_at_or_above_theta"])
            rows.append(row)
            print(f"{arm:14} {run.name[4:]:>4} {row[0]:7.2f} {row[1]:9.2f} {row[2]:7.2f} "
                  f"{row[3]:8.2f} {row[4]:8.3f} {row[5]:4d}")
        if rows:
            m = np.array(rows)
            print(f"{arm:14} {'mean':>4} {m[:, 0].mean():7.2f} {m[:, 1].mean():9.2f} "
                  f"{m[:, 2].mean():7.2f} {m[:, 3].mean():8.2f} {m[:, 4].mean():8.3f} "
                  f"{m[:, 5].mean():4.0f}   ({len(rows)} seeds)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
