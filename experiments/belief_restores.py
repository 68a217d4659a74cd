"""What the belief says when a policy restores: for each checkpoint, greedy 100-step episodes on
the simulator against one red (the CAGE2 protocol's episode seeds under --seed), a 32-particle
filter of the `mixture` kinds following every episode beside the policy (the same filter the
belief input uses, csrc/wfrl_belief.h; for a policy with the belief input it is the policy's
own). Per Restore of host h: red's true access level on h when the Restore was chosen (none,
user, privileged) and the belief's shares there. Printed per checkpoint: Restores per episode by
host and by red's true level, the Restores of a host red did not hold ("on suspicion") with the
belief's share of red presence there, and the belief's privileged share at the Restores of each
true level, with its distribution (bins 0-0.1, ..., 0.9-1.0) at the Restores of a host red held
with user access only (where a Remove, which costs nothing, would have evicted it); the Removes by
red's true level; over every step and host red holds (User0 aside), the belief's mean privileged
share where red is truly user and where it is truly privileged (red's privilege escalation is
not in the defender's observation: only an Analyse of the host shows its malware); and the
belief's privileged share on User2 at the steps red holds it privileged and no host above the
user ones (B_line's User2 moment).

    python experiments/belief_restores.py CHECKPOINT [CHECKPOINT ...] [--red RedMeanderAgent]
        [--episodes 500] [--backend sim] [--seed 153] [--json OUT]
"""
import argparse
import json

import numpy as np
from wfrl._core import Actor, Cage2Sim, Planner

from wfrl.collect.rollout import make_policy
from wfrl.envs.base import is_leaderboard
from wfrl.evaluation.checkpoint import policy_of_checkpoint
from wfrl.evaluation.screen import first_episode
from wfrl.features import MIXTURE_RED_BITS
from wfrl.ppo.netspec import NetSpec
from wfrl.ppo.policy import ActorCritic
from wfrl.rng import episode_seeds
from wfrl.workflow import Workflow

HOSTS = ("Defender", "Enterprise0", "Enterprise1", "Enterprise2", "Op_Host0", "Op_Host1",
         "Op_Host2", "Op_Server0", "User0", "User1", "User2", "User3", "User4")
RESTORE = 132
REMOVE = 15


def measure(checkpoint, red, episodes, backend, seed):
    weights, net, wf, lam, foothold = policy_of_checkpoint(checkpoint)
    lb = is_leaderboard(backend)
    actor = Actor(make_policy(weights, net, Workflow.parse(wf), lam, foothold, greedy=True), lb)
    # beside a policy without the belief: a 32-particle filter fed its actions (a planner that
    # never searches; its filter is the same code)
    idle = make_policy(np.zeros(ActorCritic(1, NetSpec(1).in_dim).flat_weights().shape,
                                np.float32), 1, Workflow.parse(wf), lam, foothold, greedy=True)
    watcher = Planner(idle, 32, 1, 0, 1, 0.0, seed)
    first = first_episode(red, 100)
    env_seeds, act_seeds = episode_seeds(seed, np.arange(first, first + episodes))
    sim = Cage2Sim(1, red, lb)
    restores = np.zeros(13)
    suspicion = np.zeros(13)
    by_level = np.zeros(3)                        # Restores at red's true level 0 / 1 / 2
    priv_share = {0: [], 1: [], 2: []}            # the belief's privileged share there
    share_susp, share_held, returns = [], [], []
    removes = np.zeros(3)                         # Removes at red's true level 0 / 1 / 2
    held_user, held_priv = [], []                 # the belief's privileged share, every step and
    #                                               host red holds, by its true level
    user2_alone, user2_episodes = [], 0           # its share on User2 where red is privileged
    #                                               there and holds no host above the user ones
    for es, ac in zip(env_seeds, act_seeds):
        obs, access = sim.reset(0, int(es))
        actor.begin(int(ac))
        watcher.reset(MIXTURE_RED_BITS, lb, int(es))
        ret, a, alone = 0.0, None, False
        for t in range(100):
            if t:
                watcher.observe(a, obs)
            a = actor.act(obs, access)[0]
            b = actor.belief() if net.belief else watcher.belief_features()
            for h in range(13):
                if h != 8 and access[h] == 1:         # User0, red's foothold, left out
                    held_user.append(float(b[3 * h + 2]))
                elif h != 8 and access[h] >= 2:
                    held_priv.append(float(b[3 * h + 2]))
            if access[10] >= 2 and not access[:8].any():
                user2_alone.append(float(b[3 * 10 + 2]))
                alone = True
            if REMOVE <= a < REMOVE + 13:
                removes[min(int(access[a - REMOVE]), 2)] += 1
            if RESTORE <= a < RESTORE + 13:
                h = a - RESTORE
                held = access[h] > 0
                share = float(b[3 * h + 1] + b[3 * h + 2])
                restores[h] += 1
                level = min(int(access[h]), 2)
                by_level[level] += 1
                priv_share[level].append(float(b[3 * h + 2]))
                if held:
                    share_held.append(share)
                else:
                    suspicion[h] += 1
                    share_susp.append(share)
            obs, r, access = sim.step(0, a)
            ret += r
        returns.append(ret)
        user2_episodes += alone
    n = len(returns)
    hist = np.histogram(share_susp, bins=10, range=(0.0, 1.0))[0] if share_susp else np.zeros(10)
    return {"checkpoint": checkpoint, "red": red, "backend": backend, "episodes": n,
            "belief_input": net.belief, "hidden": net.hidden,
            "mean_return": float(np.mean(returns)),
            "se": float(np.std(returns, ddof=1) / np.sqrt(n)),
            "restores_per_episode": {HOSTS[h]: round(restores[h] / n, 3) for h in range(13)
                                     if restores[h]},
            "on_suspicion_per_episode": {HOSTS[h]: round(suspicion[h] / n, 3) for h in range(13)
                                         if suspicion[h]},
            "restores_total": round(restores.sum() / n, 3),
            "on_suspicion_total": round(suspicion.sum() / n, 3),
            "belief_share_on_suspicion": float(np.mean(share_susp)) if share_susp else None,
            "belief_share_when_held": float(np.mean(share_held)) if share_held else None,
            "belief_share_hist_on_suspicion": [int(x) for x in hist],
            "restores_by_true_level_per_episode": [round(x / n, 3) for x in by_level],
            "belief_privileged_share_by_true_level": [
                float(np.mean(priv_share[k])) if priv_share[k] else None for k in range(3)],
            "removes_by_true_level_per_episode": [round(x / n, 3) for x in removes],
            "belief_privileged_share_where_red_holds_user": float(np.mean(held_user)),
            "belief_privileged_share_where_red_holds_privileged": float(np.mean(held_priv)),
            "user2_privileged_alone_episodes": user2_episodes,
            "belief_user2_privileged_share_there": float(np.mean(user2_alone))
            if user2_alone else None,
            "belief_privileged_share_hist_at_user_level": [
                int(x) for x in np.histogram(priv_share[1], bins=10, range=(0.0, 1.0))[0]]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--red", default="RedMeanderAgent")
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--backend", default="sim")
    ap.add_argument("--seed", type=int, default=153)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    out = []
    for ck in a.checkpoints:
        res = measure(ck, a.red, a.episodes, a.backend, a.seed)
        out.append(res)
        print(json.dumps(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
