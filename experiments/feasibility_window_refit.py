"""Default searches of experiments/search_feasibility.sh, refitted: the feasibility model's agreement
with the 10-run ground truth when told each visit's fresh compliance (as the searches ran, the
default --compliance-eval-episodes 200) and when told the training window that ended the visit
instead (read from the run's progress lines; same visits, so a counterfactual refit, not a rerun).

    .venv/bin/python experiments/feasibility_window_refit.py runs/feasibility
"""
import json
import re
import sys
from pathlib import Path

import numpy as np

from wfrl.runlog import read_csv
from wfrl.search.exhaustive import load_exhaustive
from wfrl.search.optimizer import WorkflowOptimizer
from wfrl.workflow import Workflow

truth = np.zeros(120, bool)
for r in load_exhaustive(Path("bench/data/exhaustive_B_lineAgent_conditioned.csv")):
    truth[r["Workflow_ID"]] = r["Compliance"] >= 0.95
pat = re.compile(r"→ (\w+): reward (\S+) ± (\S+), compliance (\S+) \(training window (\S+),")
flips = 0
for run in sorted(Path(sys.argv[1]).glob("seed*/"), key=lambda p: int(p.name[4:])):
    gpl = read_csv(run / "gp_sampling_log.csv")
    ends = pat.findall((run.parent / f"{run.name}.log").read_text())
    assert len(ends) == len(gpl), (len(ends), len(gpl))
    seed = json.loads((run / "experiment_config.json").read_text())["seed"]
    res = {}
    for mode in ("fresh", "window"):
        opt = WorkflowOptimizer(theta=0.95, seed=seed)
        for r, e in zip(gpl, ends):
            c = float(e[3]) if mode == "fresh" else float(e[4])
            opt.tell(Workflow.from_index(int(r["Workflow_ID"])), float(r["Reward"]) if c >= .95 else None,
                     float(r["Reward_SE"]), c)
        res[mode] = float(((opt.posterior().p_feasible >= 0.5) == truth).mean())
    dis = [(int(r["Iteration"]), e[4], e[3]) for r, e in zip(gpl, ends) if (float(e[3]) >= .95) != (float(e[4]) >= .95)]
    flips += len(dis)
    ube = [(int(r["Iteration"]), e[4], e[3]) for r, e in zip(gpl, ends) if not truth[int(r["Workflow_ID"])]]
    print(f"{run.name}: agreement fresh {res['fresh']:.3f} window {res['window']:.3f}; θ decided differently: {dis}; truly infeasible visits (window, fresh): {ube}")
print("visits where window and fresh measurement fall on different sides of θ:", flips)
