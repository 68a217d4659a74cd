"""The feasibility model refitted to the visits of recorded default searches, under the model's
earlier constants (compliance ceiling 0.999, RBF length scale ≤ 3) and today's, each variant
scored as score_searches.py scores a search: the share of the 120 workflows whose prediction
(P(feasible) ≥ 0.5) agrees with the ground truth's (mean compliance ≥ 0.95 over its runs).

    python docs/results/search/2026-11-28_feasibility_refit/refit.py > refit.txt

visits/<code>/seedN.csv: the visits (workflow, reward, se, compliance) of `python -m wfrl train
--seed N [--backend sim:leaderboard]` made before the change (60,000-episode bases on both
codes), copied from their gp_sampling_log.csv.
"""
import csv
from pathlib import Path

import numpy as np

import wfrl.search.optimizer as optimizer
from wfrl.search.truth import MEAN_OF_REDS, matrices

HERE = Path(__file__).resolve().parent
TRUTH = HERE.parents[2].parent / "bench" / "data" / "workflow_truth"
VARIANTS = {"earlier (ceiling 0.999, length scale <= 3)": (0.0, 3.0),
            "ceiling 0.99 only": (0.2, 3.0),
            "length scale 1.5 only": (0.0, 1.5),
            "today (ceiling 0.99, length scale 1.5)": (0.2, 1.5)}


def predicted_feasible(path: Path, seed: int) -> np.ndarray:
    opt = optimizer.WorkflowOptimizer(seed=seed)
    for r in csv.DictReader(path.open()):
        reward = None if r["Reward"] in ("", "nan") else float(r["Reward"])
        opt.tell(int(r["Workflow_ID"]), reward, float(r["Reward_SE"] or 1.0),
                 float(r["Final_Compliance"]))
    return opt.posterior().p_feasible >= 0.5


def main() -> None:
    for code in ("sim", "sim_leaderboard"):
        runs = sorted((TRUTH / code).glob("seed*"))
        truth = matrices(runs, MEAN_OF_REDS)[1].mean(0) >= 0.95
        for name, (fraction, length) in VARIANTS.items():
            optimizer.CEILING_FRACTION, optimizer.FEAS_MAX_LENGTH_SCALE = fraction, length
            agree = [float(np.mean(predicted_feasible(HERE / "visits" / code / f"seed{s}.csv", s)
                                   == truth)) for s in range(10)]
            print(f"{code:16s} {name:44s} agreement {' '.join(f'{a:.3f}' for a in agree)}"
                  f"  >= 0.95: {sum(a >= 0.95 for a in agree)} of 10", flush=True)


if __name__ == "__main__":
    main()
