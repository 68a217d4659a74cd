"""One greedy B_lineAgent episode of a policy, step by step, as the CAGE2 protocol numbers it (seed
153): the action, the reward, red's true access per host (0 none, 1 user, 2 privileged; host order
of wfrl.workflow.HOSTS) and the hosts the observation then shows (activity and compromise bits).

    .venv/bin/python experiments/trace_episode.py CHECKPOINT cyborg|sim EPISODE STEPS
"""

import sys

import numpy as np
from policy_anatomy import action_name
from wfrl._core import Actor

from wfrl.collect.rollout import make_policy
from wfrl.envs import make_backend
from wfrl.envs.actions import HOSTS
from wfrl.evaluation.cage2 import policy_of_checkpoint
from wfrl.rng import episode_seeds
from wfrl.workflow import Workflow


def main():
    ckpt, backend_name, ep, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    weights, net, wf, lam, foothold = policy_of_checkpoint(ckpt)
    actor = Actor(make_policy(weights, net, Workflow.parse(wf), lam, foothold, greedy=True))
    backend = make_backend(backend_name, "B_lineAgent", seed=153)
    env_seeds, act_seeds = episode_seeds(153, np.array([ep]))
    backend.seed(int(env_seeds[0]))
    actor.begin(int(act_seeds[0]))
    obs, access = backend.reset()
    total = 0.0
    try:
        for t in range(steps):
            a, _, _, _ = actor.act(obs, access)
            obs, r, access = backend.step(a)
            total += r
            o = np.asarray(obs).reshape(13, 4)
            seen = " ".join(f"{HOSTS[h]}:{''.join(str(int(v)) for v in o[h])}"
                            for h in range(13) if o[h].any())
            red = "".join(str(int(x)) for x in access)
            print(f"{t:2d} {action_name(a):16s} r={r:6.1f} total={total:7.1f} red_access={red} "
                  f"obs_after: {seen}")
    finally:
        backend.close()


if __name__ == "__main__":
    main()
