"""The feasible set of recorded default searches as the search reports it (P(feasible) ≥ 0.5) and
with its workflows at θ counted followable (a workflow unfollowable only when P(feasible) <
1 − SURE_LEVEL), each scored as score_searches.py scores a search: the share of the 120 whose
prediction agrees with the ground truth's (mean compliance ≥ 0.95 over its runs). The visits are
those of ../2026-11-28_feasibility_refit/visits (seeds 0–9 per code, 60,000-episode bases),
refitted with today's feasibility model.

    OMP_NUM_THREADS=1 python docs/results/search/2026-11-28_followable_level/replay.py > replay.txt
"""
import csv
from pathlib import Path

import numpy as np

from wfrl.search.optimizer import WorkflowOptimizer
from wfrl.search.truth import MEAN_OF_REDS, matrices

HERE = Path(__file__).resolve().parent
VISITS = HERE.parent / "2026-11-28_feasibility_refit" / "visits"
TRUTH = HERE.parents[2].parent / "bench" / "data" / "workflow_truth"


def fitted(path: Path, seed: int) -> WorkflowOptimizer:
    opt = WorkflowOptimizer(seed=seed)
    for r in csv.DictReader(path.open()):
        reward = None if r["Reward"] in ("", "nan") else float(r["Reward"])
        opt.tell(int(r["Workflow_ID"]), reward, float(r["Reward_SE"] or 1.0),
                 float(r["Final_Compliance"]))
    return opt


def main() -> None:
    for code in ("sim", "sim_leaderboard"):
        truth = matrices(sorted((TRUTH / code).glob("seed*")), MEAN_OF_REDS)[1].mean(0) >= 0.95
        reported, sure = [], []
        for s in range(10):
            opt = fitted(VISITS / code / f"seed{s}.csv", s)
            predicted = opt.predicted_feasible()
            reported.append(float(np.mean(predicted == truth)))
            sure.append(float(np.mean((predicted | opt.at_theta()) == truth)))
        for name, agree in (("reported", reported), ("at theta followable", sure)):
            print(f"{code:16s} {name:20s} agreement {' '.join(f'{a:.3f}' for a in agree)}"
                  f"  >= 0.95: {sum(a >= 0.95 for a in agree)} of 10", flush=True)


if __name__ == "__main__":
    main()
