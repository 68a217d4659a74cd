"""What the CAGE2 leaderboard's CybORG code gives a defender: a policy's B_line returns per user
host red takes first (B_line picks one of User1-4 at random), as it plays and with one rule
injected for the episodes where that host is User3 — restore User3 whenever red is privileged
there, remove red from it whenever an exploit shows there (from step 5, so the policy's own
opening is kept; the trigger reads red's true access, so this is a probe, not a policy).

Under the leaderboard's code a restored User3 no longer falls to HarakaRCE, red's exploit of
choice there, and the rule holds it for about one Restore; under the installed code HarakaRCE
makes red root there again at once and the rule pays a Restore every second step.

    .venv/bin/python experiments/user3_hold.py CHECKPOINT BACKEND [EPISODES]

BACKEND: sim, sim:leaderboard, cyborg or cyborg:leaderboard. Greedy actions, episode seeds 991.
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

USERS = range(9, 13)
USER3, RESTORE, REMOVE = 11, 132, 15


def play(actor, backend, n, hold):
    by_user = collections.defaultdict(list)
    for env_seed, act_seed in zip(*episode_seeds(991, range(n))):
        backend.seed(int(env_seed))
        obs, ra = backend.reset()
        actor.begin(int(act_seed))
        first, total = None, 0.0
        for t in range(100):
            a = int(actor.act(obs, ra)[0])
            if hold and first == USER3 and t >= 5:
                if ra[USER3] == 2:
                    a = RESTORE + USER3
                elif obs[4 * USER3] == 1 and obs[4 * USER3 + 1] == 1:
                    a = REMOVE + USER3
            obs, r, ra = backend.step(a)
            total += r
            if first is None:
                first = next((h for h in USERS if ra[h]), None)
        by_user[first].append(total)
    return by_user


def main():
    ckpt, backend_name = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    ck = load_checkpoint(ckpt)
    weights, net = weights_from_checkpoint(ck)
    actor = Actor(make_policy(weights, net, Workflow.parse(ck["workflow"]), 30.0, greedy=True))
    backend = make_backend(backend_name, "B_lineAgent")
    print(f"{ckpt} on {backend_name}, B_lineAgent, {n} episodes (mean ± se)")
    for hold in (False, True):
        by_user = play(actor, backend, n, hold)
        everything = np.concatenate(list(by_user.values()))
        cells = [f"User{h - 8} {np.mean(by_user[h]):7.2f} ± {np.std(by_user[h]) / np.sqrt(len(by_user[h])):.2f}"
                 f" ({len(by_user[h])})" for h in USERS if by_user.get(h)]
        label = "policy + hold User3" if hold else "policy"
        print(f"  {label:20s} all {everything.mean():7.2f} ± "
              f"{everything.std() / np.sqrt(len(everything)):.2f} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
