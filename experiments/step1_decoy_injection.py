"""What the shipped policy's step 1 costs: its greedy policy as is, and with its step-1 action (a
Remove of User1, a clean host: the first fix can be nothing else then) replaced by Sleep or by a
second decoy on User2, 1,000 simulator episodes per red (the same episodes for every variant).

    .venv/bin/python experiments/step1_decoy_injection.py [CHECKPOINT]     # default pretrained:critical_first
"""
import sys

import numpy as np
from wfrl._core import Actor

from wfrl.collect.rollout import make_policy
from wfrl.envs import make_backend
from wfrl.envs.actions import DECOY_KINDS, HOSTS
from wfrl.evaluation.checkpoint import weights_from_checkpoint
from wfrl.features import decoy_action
from wfrl.rng import episode_seeds
from wfrl.runlog import load_checkpoint
from wfrl.workflow import Workflow

KIND = {k: i for i, k in enumerate(DECOY_KINDS)}
USER2 = HOSTS.index("User2")


def run(actor, plan, red, n=1000, seed=11):
    """Mean return (and its se) and Restores per episode; plan[t] replaces the policy's action at
    step t (None: the policy's own)."""
    b = make_backend("sim", red)
    rets, restores = [], []
    for env_seed, act_seed in zip(*episode_seeds(seed, range(n))):
        b.seed(int(env_seed))
        obs, ra = b.reset()
        actor.begin(int(act_seed))
        total, k = 0.0, 0
        for t in range(100):
            a = actor.act(obs, ra)[0]
            if t < len(plan) and plan[t] is not None:
                a = plan[t]
            k += a >= 132
            obs, r, ra = b.step(a)
            total += r
        rets.append(total)
        restores.append(k)
    return np.mean(rets), np.std(rets) / np.sqrt(n), np.mean(restores)


def main():
    ck = load_checkpoint(sys.argv[1] if len(sys.argv) > 1 else "pretrained:critical_first")
    weights, net = weights_from_checkpoint(ck)
    actor = Actor(make_policy(weights, net, Workflow.parse(ck["workflow"]), 30.0, greedy=True))
    plans = {"as is": [],
             "step 1: Sleep": [None, 0],
             "step 1: Femitter on User2": [None, decoy_action(KIND["Femitter"], USER2)],
             "step 1: Apache on User2": [None, decoy_action(KIND["Apache"], USER2)]}
    for name, plan in plans.items():
        line = [f"{name:28s}"]
        for red in ("B_lineAgent", "RedMeanderAgent"):
            m, se, k = run(actor, plan, red)
            line.append(f"{red} {m:7.2f} ± {se:.2f} (Restores {k:.2f})")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()
