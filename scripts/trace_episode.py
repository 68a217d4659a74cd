"""One greedy B_lineAgent episode of a policy, step by step, as the CAGE2 protocol numbers it (seed
153): the action, the reward, red's true access per host (0 none, 1 user, 2 privileged; host order
of wfrl.workflow.HOSTS) and the hosts the observation then shows (activity and compromise bits).

    .venv/bin/python scripts/trace_episode.py CHECKPOINT cyborg|sim EPISODE STEPS
"""
import sys
import numpy as np
from wfrl.envs import make_backend
from wfrl.collect.rollout import make_policy
from wfrl.evaluate import weights_from_checkpoint
from wfrl.runlog import load_checkpoint
from wfrl.rng import episode_seeds
from wfrl.workflow import Workflow, HOSTS
from wfrl._core import Actor

def name(a):
    if a == 0: return "Sleep"
    if a == 1: return "Monitor"
    if a < 15: return "Analyse " + HOSTS[a - 2]
    if a < 28: return "Remove " + HOSTS[a - 15]
    if a < 132: return f"Decoy{(a - 28) // 13} " + HOSTS[(a - 28) % 13]
    return "Restore " + HOSTS[a - 132]

ckpt, backend_name, ep, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ck = load_checkpoint(ckpt); w, net = weights_from_checkpoint(ck)
cfg = ck.get("config", {})
pol = make_policy(w, net, Workflow.parse(ck["workflow"]), float(cfg.get("alignment_lambda", 30.0)), bool(cfg.get("count_foothold", False)), greedy=True)
b = make_backend(backend_name, "B_lineAgent", seed=153)
es, acs = episode_seeds(153, np.array([ep]))
actor = Actor(pol)
b.seed(int(es[0])); actor.begin(int(acs[0]))
obs, acc = b.reset()
tot = 0
for t in range(steps):
    a, logp, v, bonus = actor.act(obs, acc)
    obs, r, acc = b.step(a)
    tot += r
    o = np.asarray(obs).reshape(13, 4); seen = " ".join(f"{HOSTS[h]}:{int(o[h,0])}{int(o[h,1])}{int(o[h,2])}{int(o[h,3])}" for h in range(13) if o[h].any())
    print(f"{t:2d} {name(a):22s} r={r:6.1f} red_access={''.join(str(int(x)) for x in acc)} obs_after: {seen}")
b.close()
