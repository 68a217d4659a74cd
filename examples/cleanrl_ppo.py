"""PPO in one file, in the style of CleanRL's ppo.py, on wfrl's compiled CAGE2 vector env.

    python examples/cleanrl_ppo.py --total-timesteps 1000000 --num-envs 64
    python examples/cleanrl_ppo.py --workflow critical_first --alignment-lambda 30

Everything is in this file: the actor-critic, the rollout storage, GAE and the clipped PPO
update. The env is gymnasium's VectorEnv API, so the loop is the same for any vector env; here it
is wfrl.envs.make_vec (all envs in one compiled call per step) with same-step autoreset: when
an episode ends (always by truncation, after 100 steps) the observation returned is already the
next episode's first, and the step is treated as terminal (no bootstrap across it, as wfrl's own
trainer does). With --workflow the policy is conditioned on a workflow and rewarded for
following it (wfrl.envs.workflow_env.VecWorkflowWrapper).
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

import wfrl.envs
from wfrl.envs.workflow_env import DEFAULT_LAMBDA, VecWorkflowWrapper


@dataclass
class Args:
    seed: int = 1
    red_agent: str = "B_lineAgent"
    workflow: str | None = None
    alignment_lambda: float = DEFAULT_LAMBDA
    total_timesteps: int = 1_000_000
    num_envs: int = 64
    num_steps: int = 100            # steps per env per update (one episode)
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64
    torch_threads: int = 1
    quiet: bool = False


def parse_args(argv=None) -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            kind = {"int": int, "float": float}.get(str(f.type), str)
            p.add_argument(flag, type=kind, default=f.default)
    return Args(**vars(p.parse_args(argv)))


def layer(n_in, n_out, gain=np.sqrt(2)):
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, gain)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden):
        super().__init__()
        self.critic = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden),
                                    nn.Tanh(), layer(hidden, 1, gain=1.0))
        self.actor = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden),
                                   nn.Tanh(), layer(hidden, n_actions, gain=0.01))

    def value(self, x):
        return self.critic(x).squeeze(-1)

    def act(self, x, action=None):
        dist = Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(x)


def make_envs(args: Args):
    envs = wfrl.envs.make_vec(args.num_envs, args.red_agent, args.seed, autoreset_mode="SameStep")
    if args.workflow:
        envs = VecWorkflowWrapper(envs, args.workflow, args.alignment_lambda)
    return envs


def train(args: Args) -> dict:
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    envs = make_envs(args)
    obs_dim = envs.single_observation_space.shape[0]
    agent = Agent(obs_dim, envs.single_action_space.n, args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    S, N = args.num_steps, args.num_envs
    batch_size = S * N
    minibatch_size = batch_size // args.num_minibatches
    iterations = max(1, args.total_timesteps // batch_size)
    obs = torch.zeros((S, N, obs_dim))
    actions = torch.zeros((S, N), dtype=torch.long)
    logprobs = torch.zeros((S, N))
    rewards = torch.zeros((S, N))
    dones = torch.zeros((S, N))
    values = torch.zeros((S, N))

    next_obs = torch.as_tensor(envs.reset(seed=args.seed)[0])
    next_done = torch.zeros(N)
    episode_return = np.zeros(N)        # env return (alignment excluded)
    episode_compliance = []
    finished = []
    history = []
    start = time.perf_counter()
    steps = 0
    for it in range(1, iterations + 1):
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * (1 - (it - 1) / iterations)
        finished_now = []
        for t in range(S):
            obs[t] = next_obs
            dones[t] = next_done
            with torch.no_grad():
                action, logp, _, value = agent.act(next_obs)
            actions[t], logprobs[t], values[t] = action, logp, value
            o, reward, terminated, truncated, info = envs.step(action.numpy())
            done = terminated | truncated
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.as_tensor(o)
            next_done = torch.as_tensor(done, dtype=torch.float32)
            episode_return += info["env_reward"] if args.workflow else reward
            if done.any():
                finished_now.extend(episode_return[done].tolist())
                episode_return[done] = 0.0
                if args.workflow:
                    episode_compliance.extend(info["final_info"]["compliance"][done].tolist())
        steps += batch_size
        finished.extend(finished_now)

        # GAE over the rollout; a done marks the first obs of a new episode
        with torch.no_grad():
            next_value = agent.value(next_obs)
            advantages = torch.zeros_like(rewards)
            gae = torch.zeros(N)
            for t in reversed(range(S)):
                if t == S - 1:
                    not_done, v_next = 1.0 - next_done, next_value
                else:
                    not_done, v_next = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + args.gamma * v_next * not_done - values[t]
                gae = delta + args.gamma * args.gae_lambda * not_done * gae
                advantages[t] = gae
            returns = advantages + values

        b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1)
        b_logprobs, b_adv = logprobs.reshape(-1), advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        order = np.arange(batch_size)
        for _ in range(args.update_epochs):
            np.random.default_rng(args.seed * 1_000 + it).shuffle(order)
            for lo in range(0, batch_size, minibatch_size):
                mb = torch.as_tensor(order[lo:lo + minibatch_size])
                _, new_logp, entropy, new_value = agent.act(b_obs[mb], b_actions[mb])
                ratio = (new_logp - b_logprobs[mb]).exp()
                adv = b_adv[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio,
                                    -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * (new_value - b_returns[mb]).pow(2).mean()
                loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        sps = steps / (time.perf_counter() - start)
        row = {"iteration": it, "steps": steps, "sps": sps,
               "mean_return": float(np.mean(finished_now)) if finished_now else float("nan")}
        if args.workflow and episode_compliance:
            row["mean_compliance"] = float(np.mean(episode_compliance[-N:]))
        history.append(row)
        if not args.quiet:
            extra = f", compliance {row['mean_compliance']:.3f}" if "mean_compliance" in row else ""
            print(f"iter {it}/{iterations}: {steps} steps, {sps:,.0f} steps/s, "
                  f"mean episode return {row['mean_return']:.1f}{extra}")
    envs.close()
    return {"agent": agent, "history": history, "episodes": len(finished),
            "seconds": time.perf_counter() - start}


def main(argv=None):
    return train(parse_args(argv))


if __name__ == "__main__":
    main()
