"""Could a free Remove replace the Restores the policy pays on the Enterprise hosts? Plays the
checkpoint's greedy policy against B_lineAgent on the simulator (episode seeds from seed 77) as is,
then with each Restore(Enterprise1) — and, separately, each Restore(Enterprise0) — taken while red
holds only a user-level session there (read from the true state: an oracle) replaced by a Remove.

    .venv/bin/python experiments/remove_injection.py CHECKPOINT EPISODES
"""
import sys

import numpy as np
from wfrl._core import Actor

from wfrl.collect.rollout import make_policy
from wfrl.envs import make_backend
from wfrl.evaluation.checkpoint import weights_from_checkpoint
from wfrl.rng import episode_seeds
from wfrl.runlog import load_checkpoint
from wfrl.workflow import Workflow

ck = load_checkpoint(sys.argv[1]); n = int(sys.argv[2])
weights, net = weights_from_checkpoint(ck)
for mode in ("as is", "Restore(Ent1) at user level -> Remove(Ent1)", "same for Ent0"):
    actor = Actor(make_policy(weights, net, Workflow.parse(ck["workflow"]), 30.0, greedy=True))
    backend = make_backend("sim", "B_lineAgent")
    rets = []
    for env_seed, act_seed in zip(*episode_seeds(77, range(n))):
        backend.seed(int(env_seed)); obs, ra = backend.reset(); actor.begin(int(act_seed)); tot = 0.0
        for _t in range(100):
            a = int(actor.act(obs, ra)[0])
            if mode.startswith("Restore") and a == 132 + 2 and ra[2] == 1: a = 15 + 2
            if mode.startswith("same") and a == 132 + 1 and ra[1] == 1: a = 15 + 1
            obs, r, ra = backend.step(a); tot += r
        rets.append(tot)
    rets = np.array(rets); print(f"{mode}: {rets.mean():.2f} ± {rets.std()/np.sqrt(n):.2f}", flush=True)
