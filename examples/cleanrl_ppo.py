"""PPO in one file, in the style of CleanRL's ppo.py, on wfrl's compiled CAGE2 vector env.

    python examples/cleanrl_ppo.py                       # memory + action mask, mixed red, 2M steps
    python examples/cleanrl_ppo.py --env-id wfrl/CAGE2-v0 --total-timesteps 2000000
    python examples/cleanrl_ppo.py --workflow critical_first --alignment-lambda 30
    tensorboard --logdir runs                            # the curves it writes

--env-id is one of wfrl's registered ids: wfrl/CAGE2-v0 (the bare 52-bit observation),
wfrl/CAGE2-Masked-v0 (with info["action_mask"]), wfrl/CAGE2-Memory-v0 (the memory block in the
observation and the mask; the default) or wfrl/CAGE2-Recipe-v0 (both and a workflow). Where the
env gives a mask, invalid actions get a logit of -1e8 (invalid action masking), in the rollout
and in the update. Curves go to runs/RUN_NAME through TensorBoard's SummaryWriter under CleanRL's
keys (charts/episodic_return, charts/SPS, losses/value_loss, losses/approx_kl, ...), and
--save-model writes the weights there.

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

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

import wfrl.envs
from wfrl.envs.workflow_env import DEFAULT_LAMBDA, VecWorkflowWrapper


@dataclass
class Args:
    exp_name: str = "cleanrl_ppo"
    seed: int = 1
    torch_deterministic: bool = True
    env_id: str = "wfrl/CAGE2-Memory-v0"
    red_agent: str = "mixed"
    workflow: str | None = None
    alignment_lambda: float = DEFAULT_LAMBDA
    total_timesteps: int = 2_000_000
    num_envs: int = 16
    num_steps: int = 128            # steps per env per update
    learning_rate: float = 3e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 8
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float = 0.0          # > 0: stop an update's epochs once approx KL passes it
    hidden: int = 64
    torch_threads: int = 1
    tensorboard: bool = True        # write runs/RUN_NAME (needs the tensorboard package)
    save_model: bool = False
    eval_episodes: int = 50         # greedy, on fixed B_line-100 episodes after training
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


def layer(n_in, n_out, gain=2 ** 0.5):
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

    def act(self, x, action=None, mask=None):
        logits = self.actor(x)
        if mask is not None:
            logits = torch.where(mask, logits, torch.tensor(-1e8))
        dist = Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(x)


def make_envs(args: Args, num_envs=None, red_agent=None, seed=None, autoreset="SameStep"):
    """args.env_id's vector env (args' envs, red and seed unless given); with --workflow the
    workflow wrappers (the Recipe id takes the workflow and λ itself)."""
    recipe = args.env_id == wfrl.envs.RECIPE_ID and args.workflow
    kw = {"workflow": args.workflow, "lam": args.alignment_lambda} if recipe else {}
    envs = gym.make_vec(args.env_id, num_envs=num_envs or args.num_envs,
                        vectorization_mode="vector_entry_point",
                        red_agent=red_agent or args.red_agent,
                        seed=args.seed if seed is None else seed, autoreset_mode=autoreset, **kw)
    if args.workflow and not recipe:
        envs = VecWorkflowWrapper(envs, args.workflow, args.alignment_lambda)
    return envs


def summary_writer(args: Args, run_name: str):
    """TensorBoard's SummaryWriter on runs/RUN_NAME, or None (off, or tensorboard missing)."""
    if not args.tensorboard:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print("tensorboard is not installed: no curves (pip install tensorboard)")
        return None
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(
        f"|{k}|{v}|" for k, v in dataclasses.asdict(args).items()))
    return writer


EVAL_SEED = 1_000_000  # first episode seed of the evaluation episodes (far from training seeds)


@torch.no_grad()
def evaluate(agent, args: Args, episodes: int) -> dict:
    """The greedy policy (argmax over the allowed actions) on `episodes` fixed B_line-100
    episodes (seeds EVAL_SEED ...), played side by side: mean env return and its se."""
    envs = make_envs(args, episodes, "B_lineAgent", EVAL_SEED, "Disabled")
    obs, info = envs.reset(seed=EVAL_SEED)
    total = np.zeros(episodes)
    for _ in range(wfrl.envs.EP_LEN):
        logits = agent.actor(torch.as_tensor(obs))
        if "action_mask" in info:
            logits = torch.where(torch.as_tensor(info["action_mask"]), logits,
                                 torch.tensor(-1e8))
        obs, reward, _, _, info = envs.step(logits.argmax(-1).numpy().astype(np.int32))
        total += info["env_reward"] if args.workflow else reward
    envs.close()
    return {"return": float(total.mean()), "return_se": float(total.std() / np.sqrt(episodes))}


def train(args: Args) -> dict:
    run_name = f"{args.env_id.replace('/', '_')}__{args.exp_name}__{args.seed}__{int(time.time())}"
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    envs = make_envs(args)
    writer = summary_writer(args, run_name)
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
    masks = torch.ones((S, N, envs.single_action_space.n), dtype=torch.bool)

    next_obs, info = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs)
    masked = "action_mask" in info
    next_mask = torch.as_tensor(info["action_mask"]) if masked else None
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
            if masked:
                masks[t] = next_mask
            with torch.no_grad():
                action, logp, _, value = agent.act(next_obs, mask=next_mask)
            actions[t], logprobs[t], values[t] = action, logp, value
            o, reward, terminated, truncated, info = envs.step(action.numpy())
            done = terminated | truncated
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.as_tensor(o)
            next_done = torch.as_tensor(done, dtype=torch.float32)
            if masked:
                next_mask = torch.as_tensor(info["action_mask"])
            episode_return += info["env_reward"] if args.workflow else reward
            if done.any():
                finished_now.extend(episode_return[done].tolist())
                if writer:
                    for r in episode_return[done]:
                        writer.add_scalar("charts/episodic_return", r, steps + (t + 1) * N)
                        writer.add_scalar("charts/episodic_length", 100, steps + (t + 1) * N)
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
        b_returns, b_values = returns.reshape(-1), values.reshape(-1)
        b_masks = masks.reshape(-1, masks.shape[-1]) if masked else None
        order = np.arange(batch_size)
        clipfracs = []
        for _ in range(args.update_epochs):
            np.random.default_rng(args.seed * 1_000 + it).shuffle(order)
            for lo in range(0, batch_size, minibatch_size):
                mb = torch.as_tensor(order[lo:lo + minibatch_size])
                _, new_logp, entropy, new_value = agent.act(
                    b_obs[mb], b_actions[mb], None if b_masks is None else b_masks[mb])
                logratio = new_logp - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean().item())
                adv = b_adv[mb]
                if args.norm_adv:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio,
                                    -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                if args.clip_vloss:
                    v_clipped = b_values[mb] + (new_value - b_values[mb]).clamp(-args.clip_coef,
                                                                                args.clip_coef)
                    v_loss = 0.5 * torch.max((new_value - b_returns[mb]).pow(2),
                                             (v_clipped - b_returns[mb]).pow(2)).mean()
                else:
                    v_loss = 0.5 * (new_value - b_returns[mb]).pow(2).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * entropy_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl > 0 and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.numpy(), b_returns.numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        sps = steps / (time.perf_counter() - start)
        if writer:
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], steps)
            writer.add_scalar("losses/value_loss", v_loss.item(), steps)
            writer.add_scalar("losses/policy_loss", pg_loss.item(), steps)
            writer.add_scalar("losses/entropy", entropy_loss.item(), steps)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), steps)
            writer.add_scalar("losses/approx_kl", approx_kl.item(), steps)
            writer.add_scalar("losses/clipfrac", np.mean(clipfracs), steps)
            writer.add_scalar("losses/explained_variance", explained_var, steps)
            writer.add_scalar("charts/SPS", int(sps), steps)
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
    seconds = time.perf_counter() - start
    greedy = evaluate(agent, args, args.eval_episodes) if args.eval_episodes > 0 else None
    if greedy is not None and not args.quiet:
        print(f"trained {steps} steps in {seconds:.1f} s; greedy B_line-100 env return over "
              f"{args.eval_episodes} fixed episodes: {greedy['return']:.1f} ± "
              f"{greedy['return_se']:.1f}")
    if args.save_model:
        import os
        os.makedirs(f"runs/{run_name}", exist_ok=True)
        torch.save(agent.state_dict(), f"runs/{run_name}/{args.exp_name}.cleanrl_model")
    if writer:
        writer.close()
    return {"agent": agent, "history": history, "episodes": len(finished), "seconds": seconds,
            "run_name": run_name, "greedy": greedy}


def main(argv=None):
    return train(parse_args(argv))


if __name__ == "__main__":
    main()
