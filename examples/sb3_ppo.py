"""Stable-Baselines3 PPO (or sb3-contrib's MaskablePPO) on wfrl's compiled CAGE2 vector env.

    python examples/sb3_ppo.py --save runs/sb3_ppo.zip                  # plain PPO, 2M steps
    python examples/sb3_ppo.py --mask --save runs/sb3_masked.zip        # MaskablePPO, same budget
    python examples/sb3_ppo.py --mask --memory --workflow critical_first --save runs/sb3_wf.zip
    WFRL_SB3_MODEL=runs/sb3_ppo.zip wfrl eval --cage2 --agent examples/sb3_ppo.py:agent \\
        --backend cyborg                                                # scored on real CybORG

Training runs on simulated envs against the mixed red (each episode B_line or Meander), the
attackers the CAGE2 protocol scores against. The vector env (wfrl.envs.make_vec) steps all envs
in one compiled call; SB3 sees it through wfrl.envs.sb3.SB3VecEnv (same-step autoreset). The
recipe's parts are wrappers (wfrl.envs.memory_env, workflow_env): --mask gives MaskablePPO the
action mask (info["action_mask"], action_masks()), --memory adds the memory block to the
observation, --workflow conditions on a workflow and adds its alignment reward. The trained
policy and the uniform-random one are then evaluated on the same fixed episode seeds (env
return only, alignment excluded). --save writes the model and, beside it (FILE.json), the
settings `agent()` needs to rebuild the policy's input: the CAGE2 agent object that `wfrl eval
--cage2 --agent` and CAGE2's own evaluation.py play.

Needs stable-baselines3 (pip install stable-baselines3; --mask: sb3-contrib).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import wfrl.envs
from wfrl.envs.memory_env import VecActionMaskWrapper, VecBeliefWrapper, VecMemoryWrapper
from wfrl.envs.workflow_env import DEFAULT_LAMBDA, VecWorkflowWrapper

EVAL_SEED = 1_000_000  # first episode seed of the evaluation episodes (far from training seeds)
MODEL_ENV = "WFRL_SB3_MODEL"  # the saved model agent() loads


def make_env(n_envs, red_agent, seed, workflow=None, lam=DEFAULT_LAMBDA, autoreset="SameStep",
             mask=False, memory=False, belief=0):
    venv = wfrl.envs.make_vec(n_envs, red_agent, seed, autoreset_mode=autoreset)
    if memory:
        venv = VecMemoryWrapper(venv)
    if belief:
        venv = VecBeliefWrapper(venv, particles=belief, seed=seed)
    if workflow:
        venv = VecWorkflowWrapper(venv, workflow, lam)
    return VecActionMaskWrapper(venv) if mask else venv


def evaluate(policy, episodes=50, red_agent="B_lineAgent", seed=EVAL_SEED, workflow=None,
             lam=DEFAULT_LAMBDA, mask=False, memory=False, belief=0):
    """Mean env return (and mean compliance with a workflow) of `policy(obs [n, d], masks [n, 145]
    or None) → actions [n]` over `episodes` episodes with seeds seed .. seed + episodes − 1,
    played side by side."""
    env = make_env(episodes, red_agent, seed, workflow, lam, "Disabled", mask, memory, belief)
    obs, _ = env.reset()
    total = np.zeros(episodes)
    info = {}
    for _ in range(wfrl.envs.EP_LEN):
        obs, reward, _, _, info = env.step(policy(obs, env.action_masks() if mask else None))
        total += info["env_reward"] if workflow else reward
    out = {"return": float(total.mean()), "return_se": float(total.std() / np.sqrt(episodes))}
    if workflow:
        out["compliance"] = float(np.mean(info["compliance"]))
    env.close()
    return out


def random_policy(seed=0):
    rng = np.random.default_rng(seed)
    return lambda obs, masks=None: rng.integers(0, wfrl.envs.N_ACTIONS, len(obs))


def model_policy(model):
    def act(obs, masks=None):
        kw = {} if masks is None else {"action_masks": masks}
        return model.predict(obs, deterministic=True, **kw)[0]
    return act


def train(total_timesteps=2_000_000, n_envs=16, n_steps=128, seed=0, red_agent="mixed",
          workflow=None, lam=DEFAULT_LAMBDA, learning_rate=3e-4, verbose=0, mask=False,
          memory=False, tensorboard=None, belief=0):
    """Train SB3's PPO (MlpPolicy; MaskablePPO with mask) on n_envs simulated envs; returns the
    model."""
    from stable_baselines3.common.logger import HumanOutputFormat, Logger, configure

    from wfrl.envs.sb3 import SB3VecEnv
    if mask:
        from sb3_contrib import MaskablePPO as Algo
    else:
        from stable_baselines3 import PPO as Algo
    venv = SB3VecEnv(make_env(n_envs, red_agent, seed * 100_003, workflow, lam, mask=mask,
                              memory=memory, belief=belief),
                     info_keys=("env_reward", "compliance"))
    model = Algo("MlpPolicy", venv, n_steps=n_steps, batch_size=min(256, n_envs * n_steps),
                 n_epochs=4, learning_rate=learning_rate, gamma=0.99, seed=seed, device="cpu",
                 verbose=verbose)
    # SB3's default logger makes an (empty) SB3-<date> folder in the temp directory on every
    # learn(); this one writes only to stdout (when verbose) and to TensorBoard (when asked)
    if tensorboard:
        model.set_logger(configure(tensorboard, ["tensorboard"] + (["stdout"] if verbose else [])))
    else:
        model.set_logger(Logger(None, [HumanOutputFormat(sys.stdout)] if verbose else []))
    model.learn(total_timesteps)
    return model


class Agent:
    """A trained model as a CAGE2 agent (get_action / end_episode): it rebuilds the input it was
    trained on from the 52-entry observation (memory block, workflow one-hot) and plays greedily,
    masked if it was trained with the mask."""

    def __init__(self, path):
        path = path if path.endswith(".zip") else path + ".zip"
        with open(path + ".json") as f:
            self.settings = json.load(f)
        if self.settings.get("belief"):
            raise ValueError("a model trained with --belief reads the belief block, which agent() "
                             "does not rebuild")
        if self.settings["mask"]:
            from sb3_contrib import MaskablePPO as Algo
        else:
            from stable_baselines3 import PPO as Algo
        self.model = Algo.load(path, device="cpu")
        self._cond = None
        if self.settings["workflow"]:
            from wfrl.workflow import Workflow
            self._cond = Workflow.parse(self.settings["workflow"]).onehot()
        self.end_episode()

    def end_episode(self):
        import wfrl._core as core
        self._mem = core.MemoryBatch(1)
        self._last = -1

    def get_action(self, observation, action_space=None):
        obs = np.asarray(observation, np.float32).reshape(1, -1)
        if self._last >= 0:
            self._mem.acted(np.array([self._last], np.int32))
        self._mem.update(obs)
        parts = [obs[0]]
        if self.settings["memory"]:
            parts.append(self._mem.features[0])
        if self._cond is not None:
            parts.append(self._cond)
        kw = {"action_masks": self._mem.allowed[0].astype(bool)} if self.settings["mask"] else {}
        action = int(self.model.predict(np.concatenate(parts), deterministic=True, **kw)[0])
        self._last = action
        return action


def agent():
    """The factory `wfrl eval --cage2 --agent examples/sb3_ppo.py:agent` calls: the model saved at
    $WFRL_SB3_MODEL (default runs/sb3_ppo.zip)."""
    return Agent(os.environ.get(MODEL_ENV, "runs/sb3_ppo.zip"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--total-timesteps", type=int, default=2_000_000)
    p.add_argument("--n-envs", type=int, default=16)
    p.add_argument("--n-steps", type=int, default=128, help="steps per env per PPO update")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--red-agent", default="mixed", help="training attacker (mixed: B_line or "
                   "Meander per episode); the evaluation plays B_lineAgent")
    p.add_argument("--mask", action="store_true", help="MaskablePPO with the action mask")
    p.add_argument("--memory", action="store_true", help="the memory block in the observation")
    p.add_argument("--belief", type=int, default=0, metavar="N", help="the belief block of a "
                   "particle filter with N particles in the observation (0: none; training and "
                   "the example's evaluation only, not agent())")
    p.add_argument("--workflow", default=None, help="e.g. critical_first or op_server,...")
    p.add_argument("--alignment-lambda", type=float, default=DEFAULT_LAMBDA)
    p.add_argument("--eval-episodes", type=int, default=50)
    p.add_argument("--save", default=None, help="save the trained model here (.zip)")
    p.add_argument("--tensorboard", default=None, metavar="DIR", help="SB3's TensorBoard log")
    p.add_argument("--verbose", type=int, default=0)
    a = p.parse_args(argv)

    t0 = time.perf_counter()
    model = train(a.total_timesteps, a.n_envs, a.n_steps, a.seed, a.red_agent, a.workflow,
                  a.alignment_lambda, verbose=a.verbose, mask=a.mask, memory=a.memory,
                  tensorboard=a.tensorboard, belief=a.belief)
    seconds = time.perf_counter() - t0
    ev = dict(episodes=a.eval_episodes, red_agent="B_lineAgent", workflow=a.workflow,
              lam=a.alignment_lambda, mask=a.mask, memory=a.memory, belief=a.belief)
    trained = evaluate(model_policy(model), **ev)
    rand = evaluate(random_policy(a.seed), **ev)
    meander = evaluate(model_policy(model), **{**ev, "red_agent": "RedMeanderAgent"})
    print(f"trained {a.total_timesteps} steps in {seconds:.1f} s; "
          f"mean B_line-100 env return over {a.eval_episodes} fixed episodes: "
          f"PPO {trained['return']:.1f} ± {trained['return_se']:.1f}, "
          f"uniform random {rand['return']:.1f} ± {rand['return_se']:.1f}")
    print(f"mean Meander-100 env return over {a.eval_episodes} fixed episodes: PPO "
          f"{meander['return']:.1f} ± {meander['return_se']:.1f}")
    if a.workflow:
        print(f"compliance: PPO {trained['compliance']:.3f}, random {rand['compliance']:.3f}")
    if a.belief and a.save:
        print("note: agent() does not rebuild the belief block; this model is for the simulator")
    if a.save:
        model.save(a.save)
        settings = {"mask": a.mask, "memory": a.memory, "belief": a.belief,
                    "workflow": a.workflow,
                    "total_timesteps": a.total_timesteps, "seed": a.seed,
                    "red_agent": a.red_agent, "train_seconds": round(seconds, 1)}
        path = a.save if a.save.endswith(".zip") else a.save + ".zip"
        with open(path + ".json", "w") as f:
            json.dump(settings, f, indent=1)
    return {"trained": trained, "random": rand, "meander": meander, "seconds": seconds,
            "model": model}


if __name__ == "__main__":
    main()
