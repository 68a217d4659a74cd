"""Default searches scored against the ground truth: runs `python -m wfrl train` (the default
search) for each seed on one backend (skipping seeds already finished), then reads each one's
recommendation and posterior against the truth's mean-of-reds table and its analysis.

    python bench/data/workflow_truth/score_searches.py --truth RUNS/truth_sim --backend sim \
        --seeds 0-9 --out RUNS/searches_sim --json SCORES.json

Per search: the recommendation's rank in the truth (1 = the highest mean reward over the truth's
runs), whether it is in the truth's top 5 or not distinguishable from the truth's best at 95 %
(the truth's multiple comparisons with its best), the share of the 120 workflows whose
predicted feasibility (P_Feasible ≥ 0.5, as the search reports it; beside it, with its
workflows at θ counted followable: P_Feasible ≥ 1 − SURE_LEVEL) agrees with the truth's
(mean compliance ≥ 0.95), whether its tie statement agrees with the truth's (both say the best
has ties, or both say it has none), how many workflows each calls distinguishable from its best beside the truth's count, its
wall time, and each compliant visit's measurement minus
the truth's mean for that workflow; and, to tell a weak base from a wrong model, the base's mean
training reward over its last 10 updates and the mean compliance of the visits to workflows with
user before enterprise.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def seeds_arg(text: str) -> list[int]:
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(x) for x in text.split(",")]


def score_one(run: Path, analysis: dict, truth_means: np.ndarray) -> dict:
    from wfrl.runlog import read_csv
    from wfrl.search.optimizer import SURE_LEVEL
    summary = json.loads((run / "summary.json").read_text())
    post = read_csv(run / "posterior.csv")
    rec = summary["best_workflow_id"]
    order = np.argsort(-truth_means, kind="stable")
    rank = {int(w): i + 1 for i, w in enumerate(order)}
    best = analysis["best"]
    followable = np.array(analysis["feasibility"]["mean_compliance"]) >= \
        analysis["feasibility"]["theta"]
    p_feasible = np.array([float(r["P_Feasible"]) for r in post])
    predicted = p_feasible >= 0.5
    near = rec is not None and (rec == best["best_id"] or rec in best["indistinguishable_ids"])
    gp = read_csv(run / "gp_sampling_log.csv")
    pre = [float(r["Env_Reward"]) for r in read_csv(run / "training_log.csv")
           if r["Phase"] == "pretrain"]
    late = [float(r["Final_Compliance"]) for r in gp
            if user_before_enterprise(int(r["Workflow_ID"]))]
    diffs = [float(r["Reward"]) - truth_means[int(r["Workflow_ID"])]
             for r in gp if r["GP_Updated"] == "True"]
    return {"seed": int(json.loads((run / "experiment_config.json").read_text())["seed"]),
            "recommended": summary["best_workflow"], "recommended_id": rec,
            "rank": rank.get(rec), "top5": rec is not None and rank[rec] <= 5,
            "indistinguishable_from_truth_best": near,
            "top5_or_tied": bool(rec is not None and (rank[rec] <= 5 or near)),
            "feasible_agreement": round(float(np.mean(predicted == followable)), 4),
            "feasible_agreement_sure": round(float(np.mean(
                (p_feasible >= 1.0 - SURE_LEVEL) == followable)), 4),
            "search_ties": summary["indistinguishable_from_best"],
            "truth_ties": best["indistinguishable"],
            "tie_statement_agrees": (summary["indistinguishable_from_best"] > 0) ==
                                    (best["indistinguishable"] > 0),
            "search_distinguishable": summary["predicted_feasible"] - 1
            - summary["indistinguishable_from_best"],
            "truth_distinguishable": best["followable"] - 1 - best["indistinguishable"],
            "visits": summary["visits"], "wall_time_s": summary["wall_time_s"],
            "visit_minus_truth_mean": round(float(np.mean(diffs)), 4) if diffs else None,
            "visit_minus_truth_sd": round(float(np.std(diffs, ddof=1)), 4)
            if len(diffs) > 1 else None,
            "base_last_10_updates_reward": round(float(np.mean(pre[-10:])), 3) if pre else None,
            "user_first_visits": len(late),
            "user_first_visit_compliance": round(float(np.mean(late)), 4) if late else None}


def user_before_enterprise(workflow_id: int) -> bool:
    """Whether a workflow puts user before enterprise: the relation that moves compliance in the
    ground truth."""
    from wfrl.workflow import UNIT_TYPES, Workflow
    rank = Workflow.from_index(workflow_id).rank
    return rank[UNIT_TYPES.index("user")] < rank[UNIT_TYPES.index("enterprise")]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--truth", required=True, type=Path, help="the recipe truth's --out")
    p.add_argument("--backend", default="sim")
    p.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 0,3,5")
    p.add_argument("--out", required=True, type=Path, help="where the searches run")
    p.add_argument("--json", type=Path, help="write the scores here")
    p.add_argument("--no-run", action="store_true", help="score finished searches only")
    a = p.parse_args(argv)
    from wfrl.search.truth import MEAN_OF_REDS, analyse_runs, matrices
    seed_dirs = sorted(d for d in a.truth.glob("seed*") if (d / "truth.csv").exists())
    analysis = analyse_runs(seed_dirs, MEAN_OF_REDS)
    truth_means = matrices(seed_dirs, MEAN_OF_REDS)[0].mean(axis=0)
    scores = []
    for seed in seeds_arg(a.seeds):
        run = a.out / f"seed{seed}"
        if not (run / "summary.json").exists() and not a.no_run:
            a.out.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            with open(a.out / f"seed{seed}.log", "w") as log:
                subprocess.run([sys.executable, "-m", "wfrl", "train", "--backend", a.backend,
                                "--seed", str(seed), "--out", str(run), "--force"], check=True,
                               stdout=subprocess.DEVNULL, stderr=log)
            wall = time.perf_counter() - t0
            (run / "process_wall_s.txt").write_text(f"{wall:.1f}\n")
        if (run / "summary.json").exists():
            s = score_one(run, analysis, truth_means)
            w = run / "process_wall_s.txt"
            s["process_wall_s"] = float(w.read_text()) if w.exists() else None
            scores.append(s)
            print(json.dumps(s), flush=True)
    n = len(scores)
    result = {"backend": a.backend, "searches": n,
              "top5_or_tied": sum(s["top5_or_tied"] for s in scores),
              "feasible_agreement_min": min((s["feasible_agreement"] for s in scores), default=None),
              "feasible_agreement_95": sum(s["feasible_agreement"] >= 0.95 for s in scores),
              "feasible_agreement_sure_95": sum(s["feasible_agreement_sure"] >= 0.95
                                                for s in scores),
              "tie_statement_agrees": sum(s["tie_statement_agrees"] for s in scores),
              "distinguishable_within_truth_plus_5": sum(
                  s["search_distinguishable"] <= s["truth_distinguishable"] + 5 for s in scores),
              "wall_s_max": max((s["wall_time_s"] for s in scores), default=None),
              "truth_sentence": analysis["sentence"], "truth_best": analysis["best"]["best"],
              "truth_runs": analysis["runs"], "scores": scores}
    print(json.dumps({k: v for k, v in result.items() if k != "scores"}, indent=1))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
