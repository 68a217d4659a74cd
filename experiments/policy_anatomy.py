"""Where a policy's cost against a red agent comes from, on the simulator: the return (and its
value after 30 and 50 steps), the steps per episode each host is privileged, the Restores per
episode by decade of the episode, and the most frequent actions.

    .venv/bin/python experiments/policy_anatomy.py CHECKPOINT [RED] [EPISODES]

CHECKPOINT: a run's best.pt / checkpoint.pt, or the shipped policy's file
(wfrl/pretrained/critical_first.pt). Greedy actions, episode seeds from seed 77.
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
KINDS = [("Analyse", 2), ("Remove", 15), ("DecApache", 28), ("DecFemit", 41), ("DecHaraka", 54),
         ("DecSmss", 67), ("DecSSHD", 80), ("DecSvchost", 93), ("DecTomcat", 106),
         ("DecVsftpd", 119), ("Restore", 132)]


def action_name(a: int) -> str:
    if a < 2:
        return ("Sleep", "Monitor")[a]
    kind, base = next((k, b) for k, b in reversed(KINDS) if a >= b)
    return f"{kind}({HOSTS[a - base]})"


def main():
    ck = load_checkpoint(sys.argv[1])
    red = sys.argv[2] if len(sys.argv) > 2 else "B_lineAgent"
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    weights, net = weights_from_checkpoint(ck)
    actor = Actor(make_policy(weights, net, Workflow.parse(ck["workflow"]), 30.0, greedy=True))
    backend = make_backend("sim", red)
    reward_t, privileged = np.zeros(100), np.zeros(13)
    actions, restores = collections.Counter(), collections.Counter()
    returns = []
    for env_seed, act_seed in zip(*episode_seeds(77, range(n))):
        backend.seed(int(env_seed))
        obs, ra = backend.reset()
        actor.begin(int(act_seed))
        for t in range(100):
            a = int(actor.act(obs, ra)[0])
            actions[action_name(a)] += 1
            if a >= 132:
                restores[t // 10 * 10] += 1
            obs, r, ra = backend.step(a)
            reward_t[t] += r
            privileged += np.asarray(ra) == 2
        returns.append(reward_t.sum())
    returns = np.diff([0.0] + returns)
    print(f"{red}, {n} episodes: return {returns.mean():.2f} ± {returns.std() / np.sqrt(n):.2f} "
          f"(after 30 steps {reward_t[:30].sum() / n:.2f}, after 50 {reward_t[:50].sum() / n:.2f})")
    print("privileged steps per episode:",
          ", ".join(f"{HOSTS[h]} {privileged[h] / n:.2f}" for h in range(13) if privileged[h]))
    print(f"restores per episode {sum(restores.values()) / n:.2f}; by decade of the episode:",
          ", ".join(f"{k}-{k + 9}: {v / n:.2f}" for k, v in sorted(restores.items())))
    print("most frequent actions per episode:",
          ", ".join(f"{k} {v / n:.2f}" for k, v in actions.most_common(25)))


if __name__ == "__main__":
    main()
