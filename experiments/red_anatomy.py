"""What a learned red does against a defender, and what it costs the defender (docs/duel.md):
red's actions by kind and subnet, where it holds root, blue's Restores and Removes per episode,
and blue's return split into its parts (root on hosts by subnet, Restores, Impact), beside the
same defender against B_line on the same episodes (simulator, the defender greedy, red sampling).

    python experiments/red_anatomy.py --checkpoint pretrained:critical_first \
        --red runs/attack/best.pt [--workflow W] [--backend sim] [--episodes 300] [--seed 12345]
"""
from __future__ import annotations

import argparse
import collections
import json

import numpy as np
from wfrl._core import DuelSlots

from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
from wfrl.collect.rollout import run_episodes
from wfrl.envs import make_backend
from wfrl.envs.actions import HOSTS, N_HOSTS, REMOVE_FIRST, RESTORE_FIRST
from wfrl.envs.base import RED_SUBNETS
from wfrl.envs.duel import HOST_SUBNET, RED_ACTION_NAMES, red_weights
from wfrl.training.attack import load_defender, play, red_buffer

# the reward's parts per step (CAGE2): root on a host costs its value, a Restore 1, Impact 10
VALUE = {h: (1.0 if HOST_SUBNET[h] == 1 and h != "Defender" else 0.1)
         for h in HOSTS}
VALUE["Op_Server0"] = 1.0


def blue_side(defender, backend, red, episodes, seed):
    """Blue's actions, red's access and returns in these episodes against `red` (a name)."""
    be = make_backend(backend, red, seed=0)
    arrays = allocate_trajectory(len(episodes), 100, defender.net)
    buf = compiled_buffer(arrays)
    stats = run_episodes(be, defender.policy, episodes, seed, buffer=buf)
    return arrays, np.array([s.env_return for s in stats])


def describe(defender, backend, red, episodes, seed) -> dict:
    arrays, returns = blue_side(defender, backend, red, episodes, seed)
    acts, access = arrays["actions"], arrays["red_access"]
    n = len(episodes)
    restores = collections.Counter(HOSTS[a - RESTORE_FIRST] for a in acts.ravel()
                                   if RESTORE_FIRST <= a < RESTORE_FIRST + N_HOSTS)
    removes = int(((acts >= REMOVE_FIRST) & (acts < REMOVE_FIRST + N_HOSTS)).sum())
    root = (access == 2).sum(axis=(0, 1)) / n            # steps a host is held as root
    cost_root = {s: round(-sum(root[i] * VALUE[h] for i, h in enumerate(HOSTS)
                               if HOST_SUBNET[h] == k and h != "User0"), 2)
                 for k, s in enumerate(RED_SUBNETS)}
    return {"red": red, "return": round(float(returns.mean()), 2),
            "restores_per_episode": round(sum(restores.values()) / n, 2),
            "restores_by_host": {h: round(c / n, 2) for h, c in restores.most_common()},
            "removes_per_episode": round(removes / n, 2),
            "root_steps_by_host": {h: round(float(root[i]), 1) for i, h in enumerate(HOSTS)
                                   if root[i] > 0 and h != "User0"},
            "cost_of_root_by_subnet": cost_root,
            "cost_of_restores": round(-sum(restores.values()) / n, 2)}


def red_actions(defender, red_path, episodes, seed, leaderboard) -> dict:
    weights, hidden = red_weights(red_path)
    buf = red_buffer(len(episodes))
    play(DuelSlots(1, leaderboard), defender, weights, hidden, episodes, seed, False, buf)
    names = [RED_ACTION_NAMES[a] for a in buf.arrays["actions"].ravel()]
    n = len(episodes)
    kinds = collections.Counter(x.split(" ")[0] for x in names)
    targets = collections.Counter(x for x in names if x != "Sleep")
    first = []
    for row in buf.arrays["actions"]:
        hit = [t for t, a in enumerate(row) if RED_ACTION_NAMES[a].startswith("Exploit")]
        first.append(hit[0] if hit else 100)
    return {"actions_per_episode": {k: round(c / n, 1) for k, c in kinds.most_common()},
            "top_actions_per_episode": {k: round(c / n, 1) for k, c in targets.most_common(8)},
            "first_exploit_step_median": float(np.median(first))}


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--workflow")
    p.add_argument("--red", required=True, help="a red's checkpoint (wfrl attack's best.pt)")
    p.add_argument("--backend", default="sim")
    p.add_argument("--episodes", type=int, default=300)
    p.add_argument("--seed", type=int, default=12345)
    a = p.parse_args(argv)
    d = load_defender(a.checkpoint, a.workflow)
    eps = range(a.episodes)
    out = {"defender": d.describe, "backend": a.backend, "episodes": a.episodes, "seed": a.seed,
           "learned": {**describe(d, a.backend, f"learned:{a.red}", eps, a.seed),
                       **red_actions(d, a.red, eps, a.seed, a.backend.endswith(":leaderboard"))},
           "b_line": describe(d, a.backend, "B_lineAgent", eps, a.seed)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
