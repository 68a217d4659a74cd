"""One conditioned policy on every workflow: greedy, 100-step episodes against B_line and Meander,
on the ground truth's reserved episodes (wfrl.search.truth.evaluate_all's episodes and seed, so
each workflow's figure is paired with the truth's and the per-workflow check's). One row per
(workflow, red); resumable (rows already written are kept).

    python bench/data/workflow_truth/any_workflow.py pretrained:any_workflow --backend sim \
        --episodes 1000 --out any_workflow_sim.csv
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

COLUMNS = ["Workflow", "Workflow_ID", "Red", "Reward", "Reward_SE", "Compliance", "Episodes"]
REDS = ("B_lineAgent", "RedMeanderAgent")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("--backend", default="sim")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--workflows", default=None, help="comma-separated ids (default: all 120)")
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args(argv)
    from wfrl.envs import make_backend
    from wfrl.envs.base import EP_LEN
    from wfrl.evaluation.cage2 import policy_of_checkpoint
    from wfrl.evaluation.returns import play, summarise
    from wfrl.rng import EVAL_EPISODE_BASE
    from wfrl.search.truth import EVAL_SEED
    from wfrl.workflow import Workflow, all_workflows
    # (the workflow is set per row below; any valid one opens the checkpoint)
    weights, net, _, lam, foothold = policy_of_checkpoint(a.checkpoint, "critical_first")
    ids = ([int(x) for x in a.workflows.split(",")] if a.workflows
           else [wf.index for wf in all_workflows()])
    done = set()
    if a.out.exists():
        done = {(int(r["Workflow_ID"]), r["Red"]) for r in csv.DictReader(open(a.out))}
    else:
        with open(a.out, "w", newline="") as f:
            csv.writer(f).writerow(COLUMNS)
    episodes = range(EVAL_EPISODE_BASE, EVAL_EPISODE_BASE + a.episodes)
    for red in REDS:
        backend = make_backend(a.backend, red, seed=EVAL_SEED)
        try:
            for wid in ids:
                if (wid, red) in done:
                    continue
                wf = Workflow.from_index(wid)
                s = summarise(play(backend, weights, net, wf, lam, foothold, episodes,
                                   EVAL_SEED, greedy=True, horizon=EP_LEN))
                with open(a.out, "a", newline="") as f:
                    csv.writer(f).writerow([str(wf), wid, red, round(s["mean"], 4),
                                            round(s["se"], 4), round(s["compliance"], 4),
                                            s["n"]])
                    f.flush()
                    os.fsync(f.fileno())
                print(f"{wid:3d} {red}: {s['mean']:.2f} ± {s['se']:.2f}, compliance "
                      f"{s['compliance']:.3f}", flush=True)
        finally:
            backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
