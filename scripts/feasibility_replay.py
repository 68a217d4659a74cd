"""Replay each visit's saved policy of finished searches on N fresh episodes (sampling, as in
training) and refit the feasibility model with those compliances instead of the training windows
the searches used; agreement with the 10-run ground truth both ways. For searches run before
--compliance-eval-episodes existed (each workflow's checkpoint is its last visit's policy).

    .venv/bin/python scripts/feasibility_replay.py N RUN_DIR...
"""
import json, sys
from pathlib import Path
import numpy as np
from wfrl.envs import make_backend
from wfrl.evaluate import play, summarise, weights_from_checkpoint
from wfrl.runlog import load_checkpoint, read_csv
from wfrl.search.exhaustive import load_exhaustive
from wfrl.search.optimizer import WorkflowOptimizer
from wfrl.workflow import Workflow

N = int(sys.argv[1]); runs = [Path(p) for p in sys.argv[2:]]
truth = np.zeros(120, bool)
for r in load_exhaustive(Path("bench/data/exhaustive_B_lineAgent_conditioned.csv")):
    truth[r["Workflow_ID"]] = r["Compliance"] >= 0.95
backend = make_backend("sim", "B_lineAgent", seed=0)
for run in runs:
    gpl = read_csv(run / "gp_sampling_log.csv")
    cfg = json.loads((run / "experiment_config.json").read_text())
    opt_a = WorkflowOptimizer(theta=0.95, seed=int(cfg.get("seed", 0)))
    opt_b = WorkflowOptimizer(theta=0.95, seed=int(cfg.get("seed", 0)))
    cache = {}
    for r in gpl:
        wid = int(r["Workflow_ID"]); wf = Workflow.from_index(wid)
        if wid not in cache:
            ck = load_checkpoint(run / "checkpoints" / f"wf_{wid:03d}.pt")
            w, net = weights_from_checkpoint(ck)
            lam = float(ck.get("config", {}).get("alignment_lambda", 1.0))
            s = summarise(play(backend, w, net, wf, lam, False, range(900_000, 900_000 + N), 777, greedy=False))
            cache[wid] = s["compliance"]
        c_train = float(r["Final_Compliance"]); c_eval = cache[wid]
        rew = float(r["Reward"]); se = float(r["Reward_SE"])
        opt_a.tell(wf, rew if c_train >= .95 else None, se, c_train)
        opt_b.tell(wf, rew if c_eval >= .95 else None, se, c_eval)
        print(f"  {run.name} v{r['Iteration']:>2} {str(wf):45s} truth={int(truth[wid])} train={c_train:.4f} eval={c_eval:.4f} eps={r['Episodes_Trained']}", flush=True)
    for name, opt in (("train-window", opt_a), ("replayed", opt_b)):
        pred = opt.posterior().p_feasible >= 0.5
        print(f"{run.name} {name}: agreement {(pred == truth).mean():.3f} predicted {pred.sum()}", flush=True)
