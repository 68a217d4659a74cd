"""Score default searches against the 10-run ground truth's feasible set (B_line, simulator).

    .venv/bin/python experiments/search_feasibility.py runs/feasibility [OUT.json]

Ground truth: bench/data/exhaustive_B_lineAgent_conditioned.csv, a workflow is feasible when its
mean compliance over the 10 conditioned training runs reaches θ = 0.95. Per search (seed): the
first visit that reached θ, and after 20 visits the share of the 120 workflows on which the
search's feasibility model (P(feasible) ≥ 0.5, restored from the run's final state) agrees with
the ground truth; also the most visits one workflow got and the run's tie sentence.
"""
import json
import sys
from pathlib import Path

import numpy as np

from wfrl.runlog import read_csv
from wfrl.search.exhaustive import load_exhaustive
from wfrl.search.optimizer import WorkflowOptimizer
from wfrl.search.state import STATE_FILE, load_state

root = Path(sys.argv[1])
truth_rows = load_exhaustive(Path(__file__).parents[1] / "bench" / "data" /
                             "exhaustive_B_lineAgent_conditioned.csv")
truth = np.zeros(120, dtype=bool)
for r in truth_rows:
    truth[r["Workflow_ID"]] = r["Compliance"] >= 0.95
out = []
for run in sorted(root.glob("seed*/"), key=lambda p: int(p.name[4:])):
    if not (run / "summary.json").exists():
        continue
    summary = json.loads((run / "summary.json").read_text())
    state, _ = load_state(run / STATE_FILE)
    opt = WorkflowOptimizer.from_state(state.optimizer)
    pred = opt.posterior().p_feasible >= 0.5
    gpl = read_csv(run / "gp_sampling_log.csv")
    first = next((int(r["Iteration"]) for r in gpl if r["GP_Updated"] == "True"), None)
    visited_truth = [bool(truth[int(r["Workflow_ID"])]) for r in gpl]
    out.append({"seed": int(run.name[4:]), "visits": len(gpl), "first_feasible_visit": first,
                "agreement": float((pred == truth).mean()), "predicted_feasible": int(pred.sum()),
                "visits_to_truly_infeasible": int(len(gpl) - sum(visited_truth)),
                "most_visits_of_one_workflow": summary["most_visits_of_one_workflow"],
                "best_workflow": summary["best_workflow"], "sentence": summary["distinguishable"],
                "relations": summary["feasibility_relations"],
                "episodes": summary["episodes_used"], "wall_s": summary["wall_time_s"]})
    e = out[-1]
    print(f"seed {e['seed']}: first feasible visit {e['first_feasible_visit']}, agreement "
          f"{e['agreement']:.3f} ({e['predicted_feasible']} predicted feasible), truly infeasible "
          f"visits {e['visits_to_truly_infeasible']}/{e['visits']}, most visits of one "
          f"workflow {e['most_visits_of_one_workflow']}, {e['wall_s']:.0f} s")
n = len(out)
if n:
    print(f"{n} seeds: first feasible within 3 visits in "
          f"{sum(1 for e in out if e['first_feasible_visit'] and e['first_feasible_visit'] <= 3)}"
          f" of {n}; agreement ≥ 0.90 in {sum(e['agreement'] >= 0.9 for e in out)} of {n} "
          f"(mean {np.mean([e['agreement'] for e in out]):.3f})")
if len(sys.argv) > 2:
    Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
