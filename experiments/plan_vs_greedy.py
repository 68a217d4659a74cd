"""Greedy vs --plan on the simulator: pretrained:critical_first, 100-step episodes from the CAGE2
protocol's reserved episode range (seed 153), paired on the same episodes; with the search's
statistics (belief quality, switch rate, vetoes, fallbacks, time per decision). With
--rollout-checkpoint PATH the rollouts continue with that checkpoint's policy (PlanningPolicy's
rollout_checkpoint; e.g. the full-information bound's, which reads each particle's true state).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/plan_vs_greedy.py N [mixture|known] [BUDGET_JSON]
        [REDS] [--rollout-checkpoint PATH]
"""
import json
import sys
import time

import numpy as np

from wfrl.envs import make_backend
from wfrl.evaluation.cage2 import policy_of_checkpoint
from wfrl.evaluation.planner import PlanBudget
from wfrl.evaluation.returns import play, play_with_plan
from wfrl.rng import CAGE2_EPISODE_BASE, episode_block
from wfrl.workflow import Workflow

args = sys.argv[1:]
rollout_checkpoint = None
if "--rollout-checkpoint" in args:
    i = args.index("--rollout-checkpoint")
    rollout_checkpoint = args[i + 1]
    del args[i:i + 2]
n = int(args[0])
red_mode = args[1] if len(args) > 1 else "mixture"
kw = json.loads(args[2]) if len(args) > 2 else {}
reds = args[3].split(",") if len(args) > 3 else ["B_lineAgent", "RedMeanderAgent"]
budget = PlanBudget(**kw).check()
weights, net, wf, lam, foothold = policy_of_checkpoint("pretrained:critical_first")
wf = Workflow.parse(wf)
print(f"budget {budget}, particles' red: {red_mode}, rollouts continued by "
      f"{rollout_checkpoint or 'the acting policy'}, n={n} per red, seed 153, "
      f"episodes from the CAGE2 reserved range (setting block k=2 B_line-100, k=5 Meander-100)",
      flush=True)
for red in reds:
    k = {"B_lineAgent": 2, "RedMeanderAgent": 5}[red]
    eps = range(episode_block(CAGE2_EPISODE_BASE, k), episode_block(CAGE2_EPISODE_BASE, k) + n)
    b = make_backend("sim", red, seed=153)
    g = play(b, weights, net, wf, lam, foothold, eps, 153, True, horizon=100)
    t0 = time.time()
    p, st = play_with_plan("sim", b, weights, net, wf, lam, foothold, eps, 153, budget, red_mode,
                           horizon=100, rollout_checkpoint=rollout_checkpoint)
    wall = time.time() - t0
    gr = np.array([s.env_return for s in g]); pr = np.array([s.env_return for s in p])
    d = pr - gr
    se = lambda x: x.std(ddof=1) / np.sqrt(len(x))
    comp = lambda S: (sum(s.compliant_fixes for s in S) / max(1, sum(s.fixes for s in S)),
                      float(np.mean([s.fixes for s in S])))
    cg, cp = comp(g), comp(p)
    print(f"{red}-100: greedy {gr.mean():.2f} ± {se(gr):.2f} (se), plan {pr.mean():.2f} ± "
          f"{se(pr):.2f}; paired difference plan − greedy {d.mean():+.2f} ± {se(d):.2f} (n={n})",
          flush=True)
    print(f"  compliance (compliant fixes / fixes): greedy {cg[0]:.3f} ({cg[1]:.2f} fixes/ep), "
          f"plan {cp[0]:.3f} ({cp[1]:.2f} fixes/ep)", flush=True)
    print(f"  search: {json.dumps(st.summary())}; wall {wall:.0f} s", flush=True)
