"""What red held on a host when the policy fixed it: Restores and Removes per episode by (host,
red's access before the action: 0 none, 1 user-level, 2 privileged), on the simulator, greedy
actions, episode seeds from seed 77, and the host's observation bits at the Restores.

    .venv/bin/python experiments/restore_anatomy.py CHECKPOINT RED EPISODES
"""
import collections
import sys

import numpy as np
from wfrl._core import Actor

from wfrl.collect.rollout import make_policy
from wfrl.envs import make_backend
from wfrl.evaluation.checkpoint import weights_from_checkpoint
from wfrl.rng import episode_seeds
from wfrl.runlog import load_checkpoint
from wfrl.workflow import Workflow

HOSTS = ["Def", "Ent0", "Ent1", "Ent2", "OpH0", "OpH1", "OpH2", "OpS0", "U0", "U1", "U2", "U3", "U4"]
ck = load_checkpoint(sys.argv[1]); red = sys.argv[2]; n = int(sys.argv[3])
weights, net = weights_from_checkpoint(ck)
actor = Actor(make_policy(weights, net, Workflow.parse(ck["workflow"]), 30.0, greedy=True))
backend = make_backend("sim", red)
c = collections.Counter(); rem = collections.Counter(); obsc = collections.Counter()
for env_seed, act_seed in zip(*episode_seeds(77, range(n))):
    backend.seed(int(env_seed)); obs, ra = backend.reset(); actor.begin(int(act_seed))
    for _t in range(100):
        a = int(actor.act(obs, ra)[0])
        if a >= 132:
            h = a - 132; c[(HOSTS[h], int(ra[h]))] += 1
            o = tuple(int(x) for x in np.asarray(obs)[4*h:4*h+4]); obsc[(HOSTS[h], int(ra[h]), o)] += 1
        if 15 <= a < 28:
            h = a - 15; rem[(HOSTS[h], int(ra[h]))] += 1
        obs, r, ra = backend.step(a)
print("restores per episode by (host, red access before):", {k: round(v/n,3) for k,v in sorted(c.items())})
print("removes per episode by (host, red access before):", {k: round(v/n,3) for k,v in sorted(rem.items())})
for k,v in obsc.most_common(12): print(k, round(v/n,3))
