"""Where a trained policy's B_line cost comes from: the first user host red takes.

Plays the checkpoint's greedy policy on the simulator against B_lineAgent (300 episodes), as is
and with one Restore of the privileged user host injected at the first step >= 5 where there is
one; then the same for a sleeping defender. Prints the mean return and the steps per episode a
user host (User1-4) is privileged.

    .venv/bin/python experiments/bline_foothold.py RUN/best.pt
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

USERS = range(9, 13)


def run(choose, n=300, seed=5):
    b = make_backend("sim", "B_lineAgent")
    rets, user_priv = [], []
    for env_seed, act_seed in zip(*episode_seeds(seed, range(n))):
        b.seed(int(env_seed))
        obs, ra = b.reset()
        state = {"act_seed": int(act_seed), "restored": False}
        total, priv = 0.0, 0
        for t in range(100):
            a = choose(t, obs, ra, state)
            obs, r, ra = b.step(a)
            total += r
            priv += sum(ra[h] == 2 for h in USERS)
        rets.append(total)
        user_priv.append(priv)
    return np.mean(rets), np.std(rets) / np.sqrt(n), np.mean(user_priv)


def injector(base):
    def choose(t, obs, ra, state):
        a = base(t, obs, ra, state)
        if t >= 5 and not state["restored"]:
            hosts = [h for h in USERS if ra[h] == 2]
            if hosts:
                state["restored"] = True
                return 132 + hosts[0]
        return a
    return choose


def main():
    ck = load_checkpoint(sys.argv[1])
    weights, net = weights_from_checkpoint(ck)
    actor = Actor(make_policy(weights, net, Workflow.parse(ck["workflow"]), 30.0, greedy=True))

    def policy(t, obs, ra, state):
        if t == 0:
            actor.begin(state["act_seed"])
        return actor.act(obs, ra)[0]

    def sleep(t, obs, ra, state):
        return 0

    for name, choose in (("trained policy", policy), ("  + one Restore of the user host", injector(policy)),
                         ("sleeping defender", sleep), ("  + one Restore of the user host", injector(sleep))):
        mean, se, priv = run(choose)
        print(f"{name:34s} return {mean:8.2f} ± {se:.2f}   user host privileged {priv:5.1f} steps/episode")


if __name__ == "__main__":
    main()
