"""Red's observation on the simulator and on CybORG under the same learned red and defender: the
mean of each of its features at chosen steps, over EPISODES episodes per backend, and the
largest gap. On CybORG the observation is RedKnowledge's (wfrl.envs.duel) reading of CybORG's red
observation, on the simulator the compiled one (csrc/wfrl_cage2.h wfrl_cage2_red_obs).

    python experiments/red_obs_parity.py --checkpoint pretrained:critical_first \
        --red vs_critical_first [--episodes 200] [--seed 31]
"""
from __future__ import annotations

import argparse
import json

import numpy as np
from wfrl._core import Actor

from wfrl.envs import make_backend
from wfrl.envs.actions import HOSTS
from wfrl.envs.duel import RED_HOST_FEATURES, RED_OBS_DIM
from wfrl.rng import episode_seeds
from wfrl.training.attack import load_defender

STEPS = (5, 10, 25, 50, 99)


def names() -> list[str]:
    out = [f"{h}.{f}" for h in HOSTS for f in RED_HOST_FEATURES]
    return out + ["subnet.User", "subnet.Enterprise", "subnet.Operational", "last.ok",
                  "last.failed", "step"]


def play(engine: str, defender, red: str, episodes: int, seed: int) -> np.ndarray:
    """Red's observation at every step of each episode: float [episodes, 100, RED_OBS_DIM]."""
    be = make_backend(engine, f"learned:{red}", seed=0)
    actor = Actor(defender.policy)
    env_seeds, act_seeds = episode_seeds(seed, np.arange(episodes))
    out = np.zeros((episodes, 100, RED_OBS_DIM), np.float32)
    for k in range(episodes):
        be.seed(int(env_seeds[k]))
        actor.begin(int(act_seeds[k]))
        obs, access = be.reset()
        for t in range(100):
            if engine == "sim":
                out[k, t] = be.sim.red_obs(0)
            a = actor.act(obs, access)[0]
            obs, _, access = be.step(a)
            if engine == "cyborg":
                agent = be._cyborg.environment_controller.agent_interfaces["Red"].agent
                out[k, t] = agent.acted_on    # what red chose on at step t
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--workflow")
    p.add_argument("--red", required=True)
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=31)
    a = p.parse_args(argv)
    d = load_defender(a.checkpoint, a.workflow)
    sim = play("sim", d, a.red, a.episodes, a.seed)
    cy = play("cyborg", d, a.red, a.episodes, a.seed)
    gaps = {}
    for t in STEPS:
        diff = np.abs(sim[:, t].mean(0) - cy[:, t].mean(0))
        worst = int(diff.argmax())
        gaps[str(t)] = {"max_gap": round(float(diff.max()), 3), "feature": names()[worst],
                        "sim": round(float(sim[:, t, worst].mean()), 3),
                        "cyborg": round(float(cy[:, t, worst].mean()), 3),
                        "mean_gap": round(float(diff.mean()), 4)}
    print(json.dumps({"defender": d.describe, "red": a.red, "episodes": a.episodes,
                      "seed": a.seed, "by_step": gaps}, indent=2))


if __name__ == "__main__":
    main()
