"""Route 3's pilot: does a learned recurrent memory in the actor help, beside the memory block?

A self-contained PPO in torch on wfrl's vector env (`wfrl.envs.make_vec_recipe`: the observation,
the memory block and the workflow one-hot, the action mask, the CAGE2 reward plus the compliance
reward at lambda 30 and the recipe's first-fix rule), `critical_first`, mixed red, 200 whole
episodes per update. The arms differ only in the actor:
  mlp   the recipe's actor, a 2x64 tanh MLP on the input x_t;
  gru   the same MLP on [x_t, h_t], h_t a GRU (64) over x_1..x_t of the episode, trained by
        backpropagation through the whole 100-step episode;
  gru0  the same GRU with its state reset at every step (its capacity without memory).
--privileged-critic gives the critic x_t and the truth block (red's true access,
wfrl.features.truth_features), as `wfrl train --privileged-critic` does. --actor-truth gives the
actor (mlp) more than the defender sees, to measure what each part of the truth is worth:
  full   the truth block (each host's access level: none, user, privileged), as --truth-input;
  where  one float per host, 1 where red holds any access: where red is, not its level. Each run is scored
greedily (the GRU carried through the episode) on 1,000 simulator episodes per red on seeds
training never draws (wfrl.rng.episode_seeds, key 7777).

    python experiments/route3_pilot.py --arm gru --seed 1 --episodes 60000 --out DIR
    python experiments/route3_pilot.py --arm mlp --actor-truth where --privileged-critic ...
    python experiments/route3_pilot.py --table DIR [DIR ...]    # the runs' table, paired
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

import wfrl.envs as E
from wfrl.features import N_HOSTS, TRUTH_DIM, truth_features
from wfrl.rng import episode_seeds
from wfrl.stats import standard_error
from wfrl.workflow import FIRST_FIX_BONUS, is_fix

N_ACT = 145
T = 100
MASKED = -1.0e9


def mlp(out_dim, hidden, in_dim):
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                         nn.Tanh(), nn.Linear(hidden, out_dim))


def init_mlp(seq, gain):
    for i, layer in enumerate(m for m in seq if isinstance(m, nn.Linear)):
        nn.init.orthogonal_(layer.weight, gain if i == 2 else np.sqrt(2))
        nn.init.zeros_(layer.bias)


class Agent(nn.Module):
    def __init__(self, arm, in_dim, hidden=64, gru_hidden=64, critic_extra=0):
        super().__init__()
        self.arm = arm
        self.gh = gru_hidden
        a_in = in_dim + (gru_hidden if arm in ("gru", "gru0") else 0)
        self.actor = mlp(N_ACT, hidden, a_in)
        self.critic = mlp(1, hidden, in_dim + critic_extra)
        init_mlp(self.actor, 0.01)
        init_mlp(self.critic, 1.0)
        if arm in ("gru", "gru0"):
            self.gru = nn.GRU(in_dim, gru_hidden, batch_first=True)
            for name, p in self.gru.named_parameters():
                if "weight" in name:
                    nn.init.orthogonal_(p)
                else:
                    nn.init.zeros_(p)

    def actor_params(self):
        ps = list(self.actor.parameters())
        if self.arm in ("gru", "gru0"):
            ps += list(self.gru.parameters())
        return ps

    def step_logits(self, x, h):
        """x [B, I]; h [1, B, gh] or None -> logits [B, A], new h."""
        if self.arm == "gru":
            out, h = self.gru(x[:, None, :], h)
            x = torch.cat([x, out[:, 0]], dim=1)
        elif self.arm == "gru0":
            out, _ = self.gru(x[:, None, :], None)
            x = torch.cat([x, out[:, 0]], dim=1)
        return self.actor(x), h

    def seq_logits(self, x):
        """x [B, T, I] whole episodes -> logits [B, T, A]."""
        if self.arm == "gru":
            out, _ = self.gru(x)
            x = torch.cat([x, out], dim=2)
        elif self.arm == "gru0":
            B, TT, I = x.shape
            out, _ = self.gru(x.reshape(B * TT, 1, I))
            x = torch.cat([x, out.reshape(B, TT, -1)], dim=2)
        return self.actor(x)

    def value(self, x):
        return self.critic(x).squeeze(-1)


ACTOR_TRUTH_DIM = {"none": 0, "full": TRUTH_DIM, "where": N_HOSTS}


def actor_truth(kind, red_access):
    """The actor's extra input for --actor-truth KIND from red access uint8 [B, 13]."""
    if kind == "full":
        return truth_features(red_access)
    if kind == "where":
        return (np.asarray(red_access) > 0).astype(np.float32)
    return np.zeros((len(red_access), 0), np.float32)


def make_env(n, red, seed=None, backend="sim"):
    return E.make_vec_recipe(n, red, seed, workflow="critical_first", autoreset_mode="Disabled",
                             backend=backend)


@torch.no_grad()
def evaluate(agent, red, seeds, truth_kind="none", backend="sim"):
    """Greedy (argmax over masked logits), GRU carried through the episode; returns per-episode
    CAGE2 return (env reward only) as a numpy array."""
    n = len(seeds)
    env = make_env(n, red, backend=backend)
    obs, info = env.reset(seed=[int(s) for s in seeds])
    h = None
    ret = np.zeros(n)
    counts = np.zeros((n, 2))   # Remove, Restore actions per episode
    for _t in range(T):
        x = torch.from_numpy(np.concatenate(
            [np.asarray(obs, np.float32), actor_truth(truth_kind, info["red_access"])], 1))
        m = torch.from_numpy(info["action_mask"])
        logits, h = agent.step_logits(x, h)
        logits = logits.masked_fill(~m, MASKED)
        a = logits.argmax(1).numpy().astype(np.int64)
        counts[:, 0] += (a >= 15) & (a < 28)
        counts[:, 1] += (a >= 132) & (a < 145)
        obs, r, term, trunc, info = env.step(a)
        ret += info["env_reward"]
    assert trunc.all()
    env.close()
    evaluate.counts = counts.mean(0)
    return ret


def eval_seeds(base_episode, n, key=7777):
    s, _ = episode_seeds(key, np.arange(base_episode, base_episode + n))
    return s


def _mean_se(v) -> str:
    """Mean ± se over seeds (nan for a single seed: no spread to report)."""
    return f"{np.mean(v):+.2f} ± {standard_error(v) if len(v) > 1 else float('nan'):.2f}"


def table(dirs) -> str:
    """Every run's final scores under the given directories (each holding ARM_sSEED/result.json),
    the means over seeds by arm and critic, and the paired differences between arms and critics."""
    import glob
    runs = {}
    for d in dirs:
        for f in sorted(glob.glob(os.path.join(d, "*_s*", "result.json"))):
            with open(f) as fh:
                r = json.load(fh)
            truth = r.get("actor_truth", "none")
            arm = r["arm"] if truth == "none" else f"{r['arm']}+truth:{truth}"
            arm += f", {r['episodes'] // 1000}k" if r["episodes"] != 60000 else ""
            arm += " (leaderboard)" if r.get("backend", "sim") != "sim" else ""
            runs[(bool(r.get("privileged_critic", False)), arm, r["seed"])] = r
    reds = ("B_lineAgent", "RedMeanderAgent")

    def score(key, seed, red):
        return runs[(*key, seed)]["final"][red]["mean"]

    def critic(pc):
        return "privileged" if pc else "plain"

    lines = ["| critic | arm | seed | episodes | B_line-100 | Meander-100 | Removes / Restores "
             "per Meander episode | episodes/s |", "|---|---|---|---|---|---|---|---|"]
    for (pc, arm, seed), r in sorted(runs.items()):
        f = r["final"]
        m = f["RedMeanderAgent"]
        lines.append(f"| {critic(pc)} | {arm} | {seed} | {r['episodes']} | "
                     + " | ".join(f"{f[x]['mean']:.2f} ± {f[x]['se']:.2f}" for x in reds)
                     + f" | {m['removes_per_ep']:.2f} / {m['restores_per_ep']:.2f}"
                     + f" | {r['episodes_per_s']:.0f} |")
    lines += ["", "| critic | arm | seeds | B_line-100 | Meander-100 |", "|---|---|---|---|---|"]
    for key in sorted({(pc, arm) for pc, arm, _ in runs}):
        seeds = sorted(s for p, a, s in runs if (p, a) == key)
        cells = [_mean_se([score(key, s, x) for s in seeds]).lstrip("+") for x in reds]
        lines.append(f"| {critic(key[0])} | {key[1]} | {len(seeds)} | " + " | ".join(cells) + " |")
    lines.append("")
    # paired by seed (and so by evaluation episode): (label, A, B) for A − B
    pairs = [(f"{a} − {b}, {critic(pc)} critic", (pc, a), (pc, b))
             for pc in (False, True) for a, b in (("gru", "mlp"), ("gru0", "mlp"), ("gru", "gru0"))]
    pairs += [(f"privileged − plain critic, {arm}", (True, arm), (False, arm)) for arm in ("mlp", "gru")]
    pairs += [(f"{a} − {b}, privileged critic", (True, a), (True, b))
              for code in ("", " (leaderboard)") for n in ("", ", 120k", ", 300k")
              for a, b in ((f"mlp+truth:where{n}{code}", f"mlp{n}{code}"),
                           (f"mlp+truth:full{n}{code}", f"mlp+truth:where{n}{code}"))]
    for label, ka, kb in pairs:
        seeds = sorted(s for p, a, s in runs if (p, a) == ka and (*kb, s) in runs)
        if not seeds:
            continue
        parts = []
        for x in reds:
            d = np.array([score(ka, s, x) - score(kb, s, x) for s in seeds])
            parts.append(f"{x} {_mean_se(d)} (per seed {np.round(d, 2).tolist()})")
        lines.append(f"- {label}, seeds {seeds}: " + "; ".join(parts))
    return "\n".join(lines)


def main():
    if "--table" in sys.argv:
        print(table(sys.argv[sys.argv.index("--table") + 1:]))
        return
    p = argparse.ArgumentParser()
    p.add_argument("--arm", choices=["mlp", "gru", "gru0"], required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--n-envs", type=int, default=200)        # = episodes per update
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--lr-final", type=float, default=0.1)
    p.add_argument("--ent", type=float, default=0.01)
    p.add_argument("--ent-final", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lam", type=float, default=0.95)
    p.add_argument("--vcoef", type=float, default=0.5)
    p.add_argument("--max-grad", type=float, default=0.5)
    p.add_argument("--align-lambda", type=float, default=30.0)
    p.add_argument("--eval-every", type=int, default=10000)
    p.add_argument("--eval-episodes-periodic", type=int, default=300)
    p.add_argument("--final-eval", type=int, default=1000)
    p.add_argument("--out", required=True)
    p.add_argument("--privileged-critic", action="store_true",
                   help="critic input = x_t + truth block (red's true access, 39 floats)")
    p.add_argument("--backend", choices=["sim", "sim:leaderboard"], default="sim",
                   help="the simulator's code: installed (sim) or the leaderboard's")
    p.add_argument("--actor-truth", choices=sorted(ACTOR_TRUTH_DIM), default="none",
                   help="the actor's input adds red's true access: full (levels) or where (any)")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)

    n = args.n_envs
    env = make_env(n, "mixed", backend=args.backend)
    # training episode seeds: env i's chain starting at 10^12*seed + i (eval seeds are hashed,
    # from wfrl.rng.episode_seeds with another key, so they never coincide in practice)
    obs, info = env.reset(seed=10**12 * args.seed)
    kind = args.actor_truth

    def actor_input(obs, info):
        return np.concatenate([np.asarray(obs, np.float32), actor_truth(kind, info["red_access"])], 1)

    in_dim = obs.shape[1] + ACTOR_TRUTH_DIM[kind]
    pc = args.privileged_critic
    agent = Agent(args.arm, in_dim, critic_extra=TRUTH_DIM if pc else 0)
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    a_params, c_params = agent.actor_params(), list(agent.critic.parameters())
    n_updates = max(1, args.episodes // n)
    first_fix = -FIRST_FIX_BONUS * args.align_lambda
    log = open(os.path.join(args.out, "train_log.jsonl"), "w")
    periodic = []
    t_collect = t_update = 0.0
    t_start = time.perf_counter()
    X = np.zeros((n, T, in_dim), np.float32)
    TR = np.zeros((n, T, TRUTH_DIM), np.float32)     # truth block at step t (privileged critic)
    M = np.zeros((n, T, N_ACT), np.bool_)
    A = np.zeros((n, T), np.int64)
    LP = np.zeros((n, T), np.float32)
    V = np.zeros((n, T), np.float32)
    R = np.zeros((n, T), np.float32)
    ENV_R = np.zeros((n, T), np.float32)
    for upd in range(n_updates):
        frac = upd / n_updates
        lr = args.lr * (1 + (args.lr_final - 1) * frac)
        ent_coef = args.ent * (1 + (args.ent_final - 1) * frac)
        for g in opt.param_groups:
            g["lr"] = lr
        # ---- collect n whole episodes in lock-step
        t0 = time.perf_counter()
        if upd > 0:
            obs, info = env.reset()
        fixed = np.zeros(n, np.bool_)
        h = None
        with torch.no_grad():
            for t in range(T):
                x = torch.from_numpy(actor_input(obs, info))
                m = torch.from_numpy(info["action_mask"])
                logits, h = agent.step_logits(x, h)
                logits = logits.masked_fill(~m, MASKED)
                logp_all = torch.log_softmax(logits, 1)
                a = torch.multinomial(logp_all.exp(), 1, generator=gen).squeeze(1)
                X[:, t] = x.numpy(); M[:, t] = m.numpy(); A[:, t] = a.numpy()
                LP[:, t] = logp_all.gather(1, a[:, None]).squeeze(1).numpy()
                if pc:
                    tr = truth_features(info["red_access"])   # red's access when a_t is chosen
                    TR[:, t] = tr
                    V[:, t] = agent.value(torch.cat([x, torch.from_numpy(tr)], 1)).numpy()
                else:
                    V[:, t] = agent.value(x).numpy()
                an = a.numpy()
                obs, r, term, trunc, info = env.step(an)
                fx = is_fix(an)
                r = np.asarray(r, np.float32) + first_fix * (fx & ~fixed)
                fixed |= fx
                R[:, t] = r
                ENV_R[:, t] = info["env_reward"]
        assert trunc.all()
        # GAE (episodes end at T, no bootstrap)
        adv = np.zeros((n, T), np.float32)
        last = np.zeros(n, np.float32)
        for t in reversed(range(T)):
            nv = V[:, t + 1] if t + 1 < T else 0.0
            delta = R[:, t] + args.gamma * nv - V[:, t]
            last = delta + args.gamma * args.lam * last
            adv[:, t] = last
        ret = adv + V
        t1 = time.perf_counter()
        # ---- PPO update; minibatches of whole episodes (both arms alike)
        tX, tM, tA = torch.from_numpy(X), torch.from_numpy(M), torch.from_numpy(A)
        tLP, tADV, tRET = torch.from_numpy(LP), torch.from_numpy(adv), torch.from_numpy(ret)
        tTR = torch.from_numpy(TR)
        mb = n // args.minibatches
        st = {"pg": 0.0, "vl": 0.0, "ent": 0.0, "kl": 0.0, "cf": 0.0}
        k = 0
        for _ in range(args.epochs):
            perm = torch.randperm(n, generator=gen)
            for s in range(0, n, mb):
                idx = perm[s:s + mb]
                x = tX[idx]
                logits = agent.seq_logits(x).reshape(-1, N_ACT)
                logits = logits.masked_fill(~tM[idx].reshape(-1, N_ACT), MASKED)
                log_p = torch.log_softmax(logits, -1)
                act = tA[idx].reshape(-1)
                logp = log_p.gather(1, act[:, None]).squeeze(1)
                ad = tADV[idx].reshape(-1)
                ad = (ad - ad.mean()) / (ad.std() + 1e-8)
                lr_ = logp - tLP[idx].reshape(-1)
                ratio = lr_.exp()
                pg = torch.max(-ad * ratio, -ad * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                if pc:
                    v = agent.value(torch.cat([x, tTR[idx]], 2).reshape(-1, in_dim + TRUTH_DIM))
                else:
                    v = agent.value(x.reshape(-1, in_dim))
                vl = 0.5 * (v - tRET[idx].reshape(-1)).pow(2).mean()
                ent = -(log_p.exp() * log_p).sum(-1).mean()
                loss = pg + args.vcoef * vl - ent_coef * ent
                opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(a_params, args.max_grad)   # --clip-per-net
                nn.utils.clip_grad_norm_(c_params, args.max_grad)
                opt.step()
                with torch.no_grad():
                    st["pg"] += pg.item(); st["vl"] += vl.item(); st["ent"] += ent.item()
                    st["kl"] += ((ratio - 1) - lr_).mean().item()
                    st["cf"] += ((ratio - 1).abs() > args.clip).float().mean().item()
                k += 1
        t2 = time.perf_counter()
        t_collect += t1 - t0
        t_update += t2 - t1
        eps_done = (upd + 1) * n
        row = {"update": upd + 1, "episodes": eps_done, "env_return": float(ENV_R.sum(1).mean()),
               "total_return": float(R.sum(1).mean()), "fixes": float(is_fix(A).sum(1).mean()),
               "lr": lr, "ent_coef": ent_coef, **{kk: vv / k for kk, vv in st.items()},
               "t_collect": t1 - t0, "t_update": t2 - t1, "wall": time.perf_counter() - t_start}
        if args.eval_every and (eps_done % args.eval_every == 0) and eps_done < n_updates * n:
            ev = {}
            for j, red in enumerate(["B_lineAgent", "RedMeanderAgent"]):
                # periodic (monitoring) seeds: key 5555, disjoint from the final eval's key 7777
                r_ = evaluate(agent, red, eval_seeds(j * 10**6, args.eval_episodes_periodic, 5555),
                              kind, args.backend)
                ev[red] = float(r_.mean())
            row["periodic_eval"] = ev
            periodic.append({"episodes": eps_done, **ev})
        log.write(json.dumps(row) + "\n")
        log.flush()
        if (upd + 1) % 10 == 0 or upd == 0 or "periodic_eval" in row:
            print(f"upd {upd+1} eps {eps_done} env_ret {row['env_return']:.2f} tot {row['total_return']:.2f} "
                  f"ent {row['ent']:.3f} kl {row['kl']:.4f} fixes {row['fixes']:.1f} "
                  f"tc {t1-t0:.2f}s tu {t2-t1:.2f}s {row.get('periodic_eval','')}", flush=True)
    train_wall = time.perf_counter() - t_start
    torch.save(agent.state_dict(), os.path.join(args.out, "final.pt"))
    # ---- final greedy evaluation on unseen seeds
    res = {"arm": args.arm, "seed": args.seed, "privileged_critic": pc, "actor_truth": kind,
           "backend": args.backend, "episodes": n_updates * n, "args": vars(args),
           "train_wall_s": train_wall, "collect_s": t_collect, "update_s": t_update,
           "episodes_per_s": n_updates * n / train_wall, "periodic": periodic, "final": {}}
    te = time.perf_counter()
    for j, red in enumerate(["B_lineAgent", "RedMeanderAgent"]):
        r_ = evaluate(agent, red, eval_seeds(j * 10**6, args.final_eval, 7777), kind,
                      args.backend)
        res["final"][red] = {"mean": float(r_.mean()), "se": standard_error(r_),
                             "n": len(r_), "removes_per_ep": float(evaluate.counts[0]),
                             "restores_per_ep": float(evaluate.counts[1])}
        np.save(os.path.join(args.out, f"eval_{red}.npy"), r_)
    res["eval_wall_s"] = time.perf_counter() - te
    print(json.dumps(res["final"]), f"train {train_wall:.0f}s eps/s {res['episodes_per_s']:.1f}",
          flush=True)
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
