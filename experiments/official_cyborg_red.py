"""A learned red in the cage-challenge-2 repository's own CybORG package against the same red in
csle-cyborg's (docs/duel.md): the same episodes (Python's `random` seeded per episode, as wfrl's
CybORG backend does), the same blue, episode by episode; beside the simulator's mean.

The repository's package is not on PyPI: put its checkout's CybORG folder (the one holding
setup.py; commit 9421c8e is the code csle-cyborg 0.0.3 carries, 606813b the code the CAGE2
leaderboard was scored on) and an old `gym` on PYTHONPATH:

    PYTHONPATH=CHECKOUT/CybORG:GYM python experiments/official_cyborg_red.py \
        --red learned:vs_any_workflow --blue react-restore --episodes 100 --out F.json
    (--leaderboard with 606813b's checkout: csle-cyborg then plays by the leaderboard's code,
    wfrl.envs.cyborg._LeaderboardCode)
"""
from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import random

import numpy as np

from wfrl.config.names import LEARNED_PREFIX
from wfrl.envs.duel import learned_red_class
from wfrl.tools.parity import LearnedBlue, blue_action, is_learned, run_sim_episodes


def make_env(package: str, red_cls):
    """Scenario2 behind its ChallengeWrapper, in the given package."""
    if package == "CybORG":
        from CybORG import CybORG
        from CybORG.Agents.Wrappers import ChallengeWrapper
        path = os.path.join(os.path.dirname(inspect.getfile(CybORG)), "Shared", "Scenarios",
                            "Scenario2.yaml")
        return ChallengeWrapper(env=CybORG(path, "sim", agents={"Red": red_cls}),
                                agent_name="Blue")
    from csle_cyborg.agents.wrappers.challenge_wrapper import ChallengeWrapper as CW
    from csle_cyborg.main import Main
    from gym_csle_cyborg.constants.constants import CYBORG as C
    return CW(env=Main(copy.deepcopy(C.CYBORG_SCENARIO_2_DICT), "sim", agents={"Red": red_cls}),
              agent_name="Blue", max_steps=None)


def play(package: str, red: str, blue: str, episodes: int, seed: int,
         leaderboard: bool) -> list[float]:
    import contextlib

    from wfrl.envs.cyborg import _LeaderboardCode
    env = make_env(package, learned_red_class(red[len(LEARNED_PREFIX):], package=package,
                                              leaderboard=leaderboard))
    code = _LeaderboardCode() if leaderboard and package == "csle_cyborg" else \
        contextlib.nullcontext()
    learned = LearnedBlue(blue, 1, leaderboard) if is_learned(blue) else None
    out = []
    for i in range(episodes):
        ss = np.random.SeedSequence([seed, i]).generate_state(2, dtype=np.uint64)
        random.seed(int(ss[0]))
        rng = np.random.default_rng(int(ss[1]))
        with code:
            first = env.reset()
        obs = np.asarray(first[0] if isinstance(first, tuple) else first, np.float32)
        if learned is not None:
            learned.begin()
        total = 0
        for t in range(100):
            a = (int(learned.act(obs[None])[0]) if learned is not None
                 else blue_action(blue, obs, t, rng))
            with code:
                step = env.step(a)
            obs, r = np.asarray(step[0], np.float32), float(step[1])
            total += round(r * 10)
        out.append(total / 10)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--red", default="learned:vs_any_workflow")
    p.add_argument("--blue", default="react-restore")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--leaderboard", action="store_true")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    runs = {pkg: play(pkg, a.red, a.blue, a.episodes, a.seed, a.leaderboard)
            for pkg in ("CybORG", "csle_cyborg")}
    sim = run_sim_episodes(a.red, a.blue, 2000, a.seed, a.leaderboard).returns
    off, csle = np.array(runs["CybORG"]), np.array(runs["csle_cyborg"])

    def ms(x):
        return {"mean": round(float(x.mean()), 3),
                "se": round(float(x.std(ddof=1) / np.sqrt(len(x))), 3), "n": len(x)}
    out = {"red": a.red, "blue": a.blue, "seed": a.seed, "leaderboard": a.leaderboard,
           "cage_challenge_2": ms(off), "csle_cyborg": ms(csle), "sim": ms(sim),
           "episodes_equal": int((off == csle).sum()),
           "max_episode_difference": float(np.abs(off - csle).max())}
    print(json.dumps(out))
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
