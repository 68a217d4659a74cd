"""Stable-Baselines3 PPO on wfrl's compiled CAGE2, through the native gymnasium vector env.

    python examples/sb3_ppo.py                                   # B_line red, 200k steps
    python examples/sb3_ppo.py --workflow critical_first --total-timesteps 500000

The vector env (wfrl.envs.make_vec) steps all envs in one compiled call; SB3 sees it through
wfrl.envs.sb3.SB3VecEnv, which needs same-step autoreset. With --workflow the observation carries
the workflow and the reward its alignment term (wfrl.envs.workflow_env.VecWorkflowWrapper, the
rules of wfrl's own trainer). The trained policy and the uniform-random one are then evaluated
on the same fixed episode seeds (env return only, alignment excluded).

Needs stable-baselines3 (pip install stable-baselines3), which wfrl itself does not depend on.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import wfrl.envs
from wfrl.envs.workflow_env import DEFAULT_LAMBDA, VecWorkflowWrapper

EVAL_SEED = 1_000_000  # first episode seed of the evaluation episodes (far from training seeds)


def make_env(n_envs, red_agent, seed, workflow=None, lam=DEFAULT_LAMBDA, autoreset="SameStep"):
    venv = wfrl.envs.make_vec(n_envs, red_agent, seed, autoreset_mode=autoreset)
    return VecWorkflowWrapper(venv, workflow, lam) if workflow else venv


def evaluate(policy, episodes=50, red_agent="B_lineAgent", seed=EVAL_SEED, workflow=None,
             lam=DEFAULT_LAMBDA):
    """Mean env return (and mean compliance with a workflow) of `policy(obs [n, d]) → actions
    [n]` over `episodes` episodes with seeds seed .. seed + episodes − 1, played side by side."""
    env = make_env(episodes, red_agent, seed, workflow, lam, autoreset="Disabled")
    obs, _ = env.reset()
    total = np.zeros(episodes)
    info = {}
    for _ in range(wfrl.envs.EP_LEN):
        obs, reward, _, _, info = env.step(policy(obs))
        total += info["env_reward"] if workflow else reward
    out = {"return": float(total.mean()), "return_se": float(total.std() / np.sqrt(episodes))}
    if workflow:
        out["compliance"] = float(np.mean(info["compliance"]))
    env.close()
    return out


def random_policy(seed=0):
    rng = np.random.default_rng(seed)
    return lambda obs: rng.integers(0, wfrl.envs.N_ACTIONS, len(obs))


def train(total_timesteps=200_000, n_envs=16, n_steps=64, seed=0, red_agent="B_lineAgent",
          workflow=None, lam=DEFAULT_LAMBDA, learning_rate=3e-4, verbose=0):
    """Train SB3's PPO (MlpPolicy) on n_envs simulated envs; returns the model."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import HumanOutputFormat, Logger

    from wfrl.envs.sb3 import SB3VecEnv
    venv = SB3VecEnv(make_env(n_envs, red_agent, seed * 100_003, workflow, lam),
                     info_keys=("env_reward", "compliance"))
    model = PPO("MlpPolicy", venv, n_steps=n_steps, batch_size=min(256, n_envs * n_steps),
                n_epochs=4, learning_rate=learning_rate, gamma=0.99, seed=seed, device="cpu",
                verbose=verbose)
    # SB3's default logger makes an (empty) SB3-<date> folder in the temp directory on every
    # learn(); this one writes only to stdout, and only when verbose
    model.set_logger(Logger(None, [HumanOutputFormat(sys.stdout)] if verbose else []))
    model.learn(total_timesteps)
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--total-timesteps", type=int, default=200_000)
    p.add_argument("--n-envs", type=int, default=16)
    p.add_argument("--n-steps", type=int, default=64, help="steps per env per PPO update")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--red-agent", default="B_lineAgent")
    p.add_argument("--workflow", default=None, help="e.g. critical_first or op_server,...")
    p.add_argument("--alignment-lambda", type=float, default=DEFAULT_LAMBDA)
    p.add_argument("--eval-episodes", type=int, default=50)
    p.add_argument("--save", default=None, help="save the trained model here (.zip)")
    p.add_argument("--verbose", type=int, default=0)
    a = p.parse_args(argv)

    t0 = time.perf_counter()
    model = train(a.total_timesteps, a.n_envs, a.n_steps, a.seed, a.red_agent, a.workflow,
                  a.alignment_lambda, verbose=a.verbose)
    seconds = time.perf_counter() - t0
    ev = dict(episodes=a.eval_episodes, red_agent=a.red_agent, workflow=a.workflow,
              lam=a.alignment_lambda)
    trained = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], **ev)
    rand = evaluate(random_policy(a.seed), **ev)
    print(f"trained {a.total_timesteps} steps in {seconds:.1f} s; "
          f"mean env return over {a.eval_episodes} fixed episodes: "
          f"PPO {trained['return']:.1f} ± {trained['return_se']:.1f}, "
          f"uniform random {rand['return']:.1f} ± {rand['return_se']:.1f}")
    if a.workflow:
        print(f"compliance: PPO {trained['compliance']:.3f}, random {rand['compliance']:.3f}")
    if a.save:
        model.save(a.save)
    return {"trained": trained, "random": rand, "seconds": seconds, "model": model}


if __name__ == "__main__":
    main()
