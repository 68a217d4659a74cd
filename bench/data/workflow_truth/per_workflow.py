"""The per-workflow check of the ground truth: a stratified sample of workflows, each trained on
its own with the single-workflow recipe (60,000 episodes against the mixed red, no early stop),
evaluated greedy on the truth's reserved episodes (wfrl.search.truth.evaluate_all's episodes and
seed) against B_line and Meander. Resumable: a finished (workflow, seed) is skipped.

    python bench/data/workflow_truth/per_workflow.py --truth RUNS/truth_sim --backend sim \
        --seeds 0,1,2 --out RUNS/per_workflow_sim [--concurrent K]
    # the specialists with the base's warm-up, scored on 1,000 episodes:
    python bench/data/workflow_truth/per_workflow.py --workflows "$(tr ' ' , < sample.txt)" \
        --warmup 20000 --eval-episodes 1000 --seeds 0 --out RUNS/per_workflow_warm/seed0
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

RECIPE = ["--red-agent", "mixed", "--total-episodes", "60000", "--min-episodes", "60000",
          "--episodes-per-update", "200", "--memory", "--mask", "--lr-final", "0.1",
          "--entropy-final", "0.1", "--no-first-fix-bonus", "--eval-every", "0"]
COLUMNS = ["Workflow", "Workflow_ID", "Seed", "Red", "Reward", "Reward_SE", "Compliance"]


def sample(truth: Path, per_class: int = 12) -> list[int]:
    """The best, middle and worst thirds of each class of the conditioned table (ranked by the
    mean over B_line and Meander of each workflow's reward), `per_class` from each. The classes
    are the followable and unfollowable workflows (mean compliance ≥ 0.95 or not); where every
    workflow is followable, the two sides of the relation that moves compliance most (at the
    recipe's strength: enterprise before user or after it)."""
    import itertools

    from wfrl.search.effects import before_matrix, relation_effects
    from wfrl.search.truth import MEAN_OF_REDS, matrices
    from wfrl.workflow import UNIT_TYPES
    seeds = sorted(p for p in truth.glob("seed*") if (p / "truth.csv").exists())
    rewards, compliance = matrices(seeds, MEAN_OF_REDS)
    reward, comp = rewards.mean(axis=0), compliance.mean(axis=0)
    classes = [comp >= 0.95, comp < 0.95]
    if not classes[1].any():
        top = relation_effects(compliance)[0]["relation"].split(" before ")
        k = list(itertools.combinations(UNIT_TYPES, 2)).index(tuple(sorted(
            top, key=UNIT_TYPES.index)))
        classes = [before_matrix()[k], ~before_matrix()[k]]
    picked = []
    for mask in classes:
        ids = np.flatnonzero(mask)
        ids = ids[np.argsort(-reward[ids], kind="stable")]
        if len(ids) <= per_class:
            picked += ids.tolist()
            continue
        third = per_class // 3
        mid = len(ids) // 2 - third // 2
        chosen = list(ids[:third]) + list(ids[mid:mid + third]) + \
            list(ids[-(per_class - 2 * third):])
        picked += [int(i) for i in chosen]
    return sorted(set(picked))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--truth", type=Path, help="the conditioned truth's --out (for the sample)")
    p.add_argument("--backend", default="sim")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--workflows", default=None, help="comma-separated ids instead of the sample")
    p.add_argument("--alignment-lambda", default="30",
                   help="λ of training (0: no workflow, the price-of-compliance baseline)")
    p.add_argument("--warmup", default="0",
                   help="episodes played first without the compliance reward (wfrl train "
                        "--warmup; the search's base uses a third of its episodes)")
    p.add_argument("--total-episodes", default="60000")
    p.add_argument("--eval-episodes", type=int, default=500)
    p.add_argument("--concurrent", type=int, default=1,
                   help="(workflow, seed) runs trained at once, each its own `wfrl train` "
                        "process; rows are written in the order of the runs whatever K")
    a = p.parse_args(argv)
    if a.concurrent < 1:
        p.error("--concurrent must be positive")
    from wfrl.envs import make_backend
    from wfrl.envs.base import EP_LEN
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.evaluation.returns import play, summarise
    from wfrl.rng import EVAL_EPISODE_BASE
    from wfrl.runlog import load_checkpoint
    from wfrl.search.truth import EVAL_SEED
    from wfrl.workflow import Workflow
    ids = [int(x) for x in a.workflows.split(",")] if a.workflows else sample(a.truth)
    recipe = [a.total_episodes if r == "60000" else r for r in RECIPE]
    a.out.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "sample.txt").write_text(" ".join(map(str, ids)) + "\n")
    table = a.out / "per_workflow.csv"
    done = set()
    if table.exists():
        done = {(int(r["Workflow_ID"]), int(r["Seed"])) for r in csv.DictReader(open(table))}
    else:
        with open(table, "w", newline="") as f:
            csv.writer(f).writerow(COLUMNS)
    seeds = [int(s) for s in a.seeds.split(",")]
    # every workflow's first seed before any second one
    jobs = [(wid, seed) for seed in seeds for wid in ids if (wid, seed) not in done]

    def run_one(job):
        wid, seed = job
        wf = Workflow.from_index(wid)
        run = a.out / f"wf{wid:03d}" / f"seed{seed}"
        cmd = [sys.executable, "-m", "wfrl", "train", "--workflow", str(wf),
               "--backend", a.backend, "--seed", str(seed), "--out", str(run), "--force",
               "--alignment-lambda", a.alignment_lambda, "--warmup", a.warmup, *recipe]
        print(f"[{wid:3d} seed {seed}] {wf.arrow()}", flush=True)
        if not (run / "summary.json").exists():     # trained before an interruption
            with open(a.out / f"train_{wid:03d}_{seed}.log", "a") as log:
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=log)
        weights, net = weights_from_checkpoint(load_checkpoint(run / "checkpoint.pt"))
        rows = []
        for red in ("B_lineAgent", "RedMeanderAgent"):
            b = make_backend(a.backend, red, seed=EVAL_SEED)
            s = summarise(play(b, weights, net, wf, 30.0, False,
                               range(EVAL_EPISODE_BASE, EVAL_EPISODE_BASE + a.eval_episodes),
                               EVAL_SEED, greedy=True, horizon=EP_LEN))
            b.close()
            rows.append([str(wf), wid, seed, red, round(s["mean"], 4), round(s["se"], 4),
                         round(s["compliance"], 4)])
            print(f"    [{wid:3d} seed {seed}] {red}: {s['mean']:.2f} ± {s['se']:.2f}, "
                  f"compliance {s['compliance']:.3f}", flush=True)
        return rows

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(a.concurrent) as pool:
        for rows in pool.map(run_one, jobs):     # in the order of the runs
            with open(table, "a", newline="") as f:
                csv.writer(f).writerows(rows)
                f.flush()
                os.fsync(f.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
