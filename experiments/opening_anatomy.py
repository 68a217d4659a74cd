"""What a checkpoint does first, and how it defends: its greedy policy's first three actions
against B_lineAgent and its mean return against B_lineAgent and RedMeanderAgent, 1,000 simulator
episodes each (episode seed 4242, not used by training or its periodic evaluations).

    .venv/bin/python experiments/opening_anatomy.py CHECKPOINT...
"""
import sys
from collections import Counter

import numpy as np
from wfrl._core import Actor

from wfrl.collect.rollout import make_policy
from wfrl.envs import make_backend
from wfrl.envs.actions import DECOY_KINDS
from wfrl.evaluation.checkpoint import weights_from_checkpoint
from wfrl.rng import episode_seeds
from wfrl.runlog import load_checkpoint
from wfrl.workflow import Workflow


def name(a):
    if a >= 132: return f"Restore{a-132}"
    if 28 <= a < 132: return f"{DECOY_KINDS[(a-28)//13]}@{(a-28)%13}"
    if 15 <= a < 28: return f"Remove{a-15}"
    if 2 <= a < 15: return f"Analyse{a-2}"
    return str(a)
for path in sys.argv[1:]:
    ck = load_checkpoint(path)
    w, net = weights_from_checkpoint(ck)
    actor = Actor(make_policy(w, net, Workflow.parse(ck["workflow"]), 30.0, greedy=True))
    out = []
    for red in ("B_lineAgent", "RedMeanderAgent"):
        b = make_backend("sim", red); cnt = [Counter() for _ in range(3)]; rets = []
        for es, as_ in zip(*episode_seeds(4242, range(1000))):
            b.seed(int(es)); obs, ra = b.reset(); actor.begin(int(as_)); tot = 0.0
            for t in range(100):
                a = actor.act(obs, ra)[0]
                if t < 3: cnt[t][name(a)] += 1
                obs, r, ra = b.step(a); tot += r
            rets.append(tot)
        out.append(f"{red} {np.mean(rets):7.2f} ± {np.std(rets)/np.sqrt(len(rets)):.2f}")
        if red == "B_lineAgent":
            opening = " | ".join(", ".join(f"{k} {v}" for k, v in c.most_common(2)) for c in cnt)
    print(f"{path}: {'; '.join(out)}; opening (B_line, 1000 eps): {opening}", flush=True)
