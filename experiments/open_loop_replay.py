"""Open-loop replay of a traced blue action sequence: play the first STEPS actions of a per-step
trace (experiments/trace_episode.py output) on a backend for N episode seeds, and record red's true
access and the reward per step.

    .venv/bin/python experiments/open_loop_replay.py TRACE_FILE BACKEND N_EPISODES [STEPS]

BACKEND: sim or cyborg (B_lineAgent). Episode k (k = 0 .. N-1) uses backend.seed(k) before reset,
so the seeds do not depend on the backend. STEPS defaults to 14 (steps 0-13).

Writes, next to the trace (trace_<backend>_<ID>.txt):
  open_loop_<ID>_<backend>_raw.txt   one line per episode: seed, per-step red_access and rewards
  open_loop_<ID>_<backend>.txt       this backend's summary
  open_loop_<ID>.txt                 the summaries of every backend whose raw file exists, plus the
                                     sim - cyborg differences of the headline fractions
The traced episode's own seed (episode ID of the CAGE2 protocol, seed 153) is replayed once as a
check: on the backend the trace came from, it must reproduce the trace exactly.
"""
from __future__ import annotations

import os
import re
import sys
import time

import numpy as np
from policy_anatomy import action_name

from wfrl.envs import make_backend
from wfrl.envs.actions import HOSTS
from wfrl.rng import episode_seeds

LINE = re.compile(r"^\s*(\d+)\s+(\S+)\s+r=\s*(-?[\d.]+)\s+total=\s*(-?[\d.]+)\s+red_access=(\d{13})")
H = {h: i for i, h in enumerate(HOSTS)}
ENT0, ENT1, ENT2, OPS0 = H["Enterprise0"], H["Enterprise1"], H["Enterprise2"], H["Op_Server0"]
NAME_TO_ACTION = {action_name(a): a for a in range(145)}
BACKENDS = ("sim", "cyborg")


def parse_trace(path, steps):
    rows = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                rows.append((int(m[1]), m[2], float(m[3]), m[5]))
    rows = rows[:steps]
    assert [r[0] for r in rows] == list(range(steps)), "trace steps are not 0..STEPS-1"
    actions = [NAME_TO_ACTION[r[1]] for r in rows]
    assert [action_name(a) for a in actions] == [r[1] for r in rows]
    access = np.array([[int(c) for c in r[3]] for r in rows], dtype=np.int8)
    rewards = np.array([r[2] for r in rows])
    return actions, [r[1] for r in rows], access, rewards


def play(backend, seed, actions):
    backend.seed(int(seed))
    backend.reset()
    acc, rew = [], []
    for a in actions:
        _, r, ra = backend.step(int(a))
        acc.append(np.asarray(ra, dtype=np.int8).copy())
        rew.append(float(r))
    return np.array(acc), np.array(rew)


def first_step(acc, host, level):
    """[episodes] first step at which acc[:, :, host] >= level, or -1 (never)."""
    hit = acc[:, :, host] >= level
    return np.where(hit.any(1), hit.argmax(1), -1)


def frac(x):
    x = np.asarray(x, dtype=float)
    p = x.mean()
    return p, np.sqrt(p * (1 - p) / len(x))


def fmt(p, se):
    return f"{p:.4f} ± {se:.4f}"


def read_raw(path):
    seeds, acc, rew = [], [], []
    with open(path) as f:
        meta = f.readline().strip()
        for line in f:
            if line.startswith("#"):
                continue
            parts = line.split()
            seeds.append(int(parts[0]))
            steps = (len(parts) - 1) // 2
            acc.append([[int(c) for c in s] for s in parts[1:1 + steps]])
            rew.append([float(v) for v in parts[1 + steps:]])
    return meta, np.array(seeds), np.array(acc, dtype=np.int8), np.array(rew)


def summary(backend_name, meta, seeds, acc, rew, names, trace_acc, trace_rew, check):
    n, steps = acc.shape[:2]
    out = [f"== backend {backend_name}: {n} episodes, seeds {seeds.min()}..{seeds.max()} "
           f"(episode k: backend.seed(k)), {steps} open-loop steps ==", meta]
    if check:
        out.append(check)
    firsts = {
        "Enterprise0 any": first_step(acc, ENT0, 1),
        "Enterprise1 any": first_step(acc, ENT1, 1),
        "Enterprise2 any": first_step(acc, ENT2, 1),
        "Op_Server0 any": first_step(acc, OPS0, 1),
        "Op_Server0 priv": first_step(acc, OPS0, 2),
    }
    tfirst = {k: int(first_step(trace_acc[None], *v)[0]) for k, v in
              {"Enterprise0 any": (ENT0, 1), "Enterprise1 any": (ENT1, 1), "Enterprise2 any": (ENT2, 1),
               "Op_Server0 any": (OPS0, 1), "Op_Server0 priv": (OPS0, 2)}.items()}
    out.append("first step at which red holds the access (counts of episodes; 'never' = not by "
               f"step {steps - 1}; trace = the traced CybORG episode's first step)")
    cols = list(firsts)
    out.append(f"{'step':>5s} {'action':16s} " + " ".join(f"{c:>16s}" for c in cols))
    for t in range(steps):
        out.append(f"{t:5d} {names[t]:16s} " + " ".join(
            f"{int((firsts[c] == t).sum()):>16d}" for c in cols))
    out.append(f"{'never':>5s} {'':16s} " + " ".join(
        f"{int((firsts[c] == -1).sum()):>16d}" for c in cols))
    out.append(f"{'trace':>5s} {'':16s} " + " ".join(f"{tfirst[c]:>16d}" for c in cols))
    out.append("")
    res = {}
    for c in cols:
        for by in (12, steps - 1):
            p, se = frac((firsts[c] >= 0) & (firsts[c] <= by))
            res[f"{c} by step {by}"] = (p, se)
    exact = (acc == trace_acc[None]).all(axis=(1, 2))
    res["red_access trajectory == trace (steps 0-13)"] = frac(exact)
    prefix = [(acc[:, :t + 1] == trace_acc[None, :t + 1]).all(axis=(1, 2)) for t in range(steps)]
    at9 = acc[:, 9]
    res["step 9: Enterprise2 held (any)"] = frac(at9[:, ENT2] >= 1)
    res["step 9: Enterprise1 held (any)"] = frac(at9[:, ENT1] >= 1)
    held8 = acc[:, 8, ENT1] >= 1
    res["step 8: Enterprise1 held (any)"] = frac(held8)
    res["step 8: Enterprise2 held (any)"] = frac(acc[:, 8, ENT2] >= 1)
    for k, (p, se) in res.items():
        out.append(f"{k:48s} {fmt(p, se)}   ({int(round(p * n))}/{n})")
    if held8.any():
        p, se = frac(at9[held8, ENT2] >= 1)
        out.append(f"{'step 9: Enterprise2 held | Enterprise1 held at 8':48s} {fmt(p, se)}   "
                   f"({int((at9[held8, ENT2] >= 1).sum())}/{int(held8.sum())})")
    e2_9 = acc[:, 8, ENT2] == 0
    if e2_9.any():
        sub = held8 & e2_9
        if sub.any():
            p, se = frac(at9[sub, ENT2] >= 1)
            out.append(f"{'step 9: Ent2 gained | Ent1 held, Ent2 not, at 8':48s} {fmt(p, se)}   "
                       f"({int((at9[sub, ENT2] >= 1).sum())}/{int(sub.sum())})")
    like8 = prefix[8]
    if like8.any():
        m = int(like8.sum())
        out.append(f"conditional on red_access equal to the trace through step 8 ({m} episodes):")
        for lbl, x in (("step 9: Enterprise2 held (any)", at9[like8, ENT2] >= 1),
                       ("step 9: red_access == trace", prefix[9][like8]),
                       ("Op_Server0 any by step 12", (firsts["Op_Server0 any"][like8] >= 0)
                        & (firsts["Op_Server0 any"][like8] <= 12)),
                       ("Op_Server0 priv by step 13", firsts["Op_Server0 priv"][like8] >= 0),
                       ("trajectory 0-13 == trace", exact[like8])):
            p, se = frac(x)
            out.append(f"  {lbl:46s} {fmt(p, se)}   ({int(np.sum(x))}/{m})")
    tot = rew.sum(1)
    out.append(f"{'mean total reward, steps 0-13':48s} {tot.mean():.3f} ± {tot.std(ddof=1) / np.sqrt(n):.3f}"
               f"   (trace {trace_rew.sum():.1f})")
    out.append("")
    out.append("per step: fraction whose red_access prefix (steps 0..t) equals the trace; mean reward "
               "(trace reward); fraction holding Ent1 / Ent2 / OpS0 (any) / OpS0 priv; trace access")
    for t in range(steps):
        out.append(f"{t:3d} {names[t]:16s} prefix {prefix[t].mean():.4f}  r {rew[:, t].mean():7.3f} "
                   f"({trace_rew[t]:6.1f})  Ent1 {(acc[:, t, ENT1] >= 1).mean():.3f} "
                   f"Ent2 {(acc[:, t, ENT2] >= 1).mean():.3f} OpS0 {(acc[:, t, OPS0] >= 1).mean():.3f} "
                   f"OpS0p {(acc[:, t, OPS0] == 2).mean():.3f}  trace "
                   + "".join(map(str, trace_acc[t])))
    out.append("")
    out.append("most frequent red_access vectors per step (count), trace marked *")
    for t in range(steps):
        vecs, counts = np.unique(acc[:, t], axis=0, return_counts=True)
        order = np.argsort(-counts)[:4]
        tv = "".join(map(str, trace_acc[t]))
        items = []
        for i in order:
            v = "".join(map(str, vecs[i]))
            items.append(f"{v}{'*' if v == tv else ''}:{counts[i]}")
        out.append(f"{t:3d} {names[t]:16s} " + "  ".join(items))
    out.append("")
    return "\n".join(out), res


def main():
    trace, backend_name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 14
    assert backend_name in BACKENDS
    actions, names, trace_acc, trace_rew = parse_trace(trace, steps)
    d = os.path.dirname(os.path.abspath(trace))
    m = re.match(r"trace_(\w+?)_(\d+)\.txt$", os.path.basename(trace))
    trace_backend, ep = m[1], int(m[2])
    print("actions:", list(zip(names, actions)), flush=True)

    backend = make_backend(backend_name, "B_lineAgent", seed=0)
    # check: the traced episode's own seed (CAGE2 protocol, seed 153)
    env_seed = int(episode_seeds(153, np.array([ep]))[0][0])
    cacc, crew = play(backend, env_seed, actions)
    same = bool((cacc == trace_acc).all()) and bool(np.allclose(crew, trace_rew, atol=0.051))
    check = (f"check: traced episode {ep} (env seed {env_seed}, from episode_seeds(153, [{ep}])) "
             f"replayed open-loop on {backend_name}: red_access "
             f"{'equals' if (cacc == trace_acc).all() else 'DIFFERS FROM'} the trace, rewards "
             f"{'equal' if np.allclose(crew, trace_rew, atol=0.051) else 'DIFFER'}"
             f"{'' if same else ': ' + ' '.join(''.join(map(str, v)) for v in cacc)}")
    print(check, flush=True)

    acc = np.zeros((n, steps, 13), dtype=np.int8)
    rew = np.zeros((n, steps))
    start = time.time()
    for k in range(n):
        acc[k], rew[k] = play(backend, k, actions)
        if (k + 1) % max(1, n // 10) == 0:
            print(f"{k + 1}/{n} episodes, {time.time() - start:.1f} s", flush=True)
    wall = time.time() - start
    backend.close()

    cmd = "python experiments/open_loop_replay.py " + " ".join(sys.argv[1:])
    meta = (f"# command: {cmd} | {n} episodes in {wall:.1f} s | "
            f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    raw = os.path.join(d, f"open_loop_{ep}_{backend_name}_raw.txt")
    with open(raw, "w") as f:
        f.write(meta + "\n")
        f.write("# seed, red_access per step 0..13 (host order " + ",".join(HOSTS) +
                "), reward per step 0..13\n")
        for k in range(n):
            f.write(f"{k} " + " ".join("".join(map(str, v)) for v in acc[k]) + " "
                    + " ".join(f"{r:g}" for r in rew[k]) + "\n")
    text, _ = summary(backend_name, meta, np.arange(n), acc, rew, names, trace_acc, trace_rew, check)
    with open(os.path.join(d, f"open_loop_{ep}_{backend_name}.txt"), "w") as f:
        f.write(text)
    print(text)

    # combined file from every backend that has been run
    parts = [f"Open-loop replay of the first {steps} blue actions (steps 0-{steps - 1}) of "
             f"{os.path.basename(trace)} (traced on {trace_backend}) against B_lineAgent.",
             "actions: " + ", ".join(f"{t}:{s}={a}" for t, (s, a) in enumerate(zip(names, actions))),
             "host order of red_access: " + ",".join(HOSTS),
             "traced red_access: " + " ".join("".join(map(str, v)) for v in trace_acc),
             "fractions are ± one binomial standard error; reward mean ± standard error", ""]
    results = {}
    for b in BACKENDS:
        rp = os.path.join(d, f"open_loop_{ep}_{b}_raw.txt")
        if not os.path.exists(rp):
            continue
        bmeta, bseeds, bacc, brew = read_raw(rp)
        sp = os.path.join(d, f"open_loop_{ep}_{b}.txt")
        bcheck = None
        if os.path.exists(sp):
            with open(sp) as f:
                bcheck = next((ln.strip() for ln in f if ln.startswith("check:")), None)
        btext, results[b] = summary(b, bmeta, bseeds, bacc, brew, names, trace_acc, trace_rew, bcheck)
        parts.append(btext)
    if len(results) == 2:
        parts.append("== sim - cyborg (difference ± combined standard error) ==")
        for k in results["sim"]:
            (ps, ss), (pc, sc) = results["sim"][k], results["cyborg"][k]
            parts.append(f"{k:48s} sim {ps:.4f}  cyborg {pc:.4f}  diff {ps - pc:+.4f} ± "
                         f"{np.hypot(ss, sc):.4f}")
    with open(os.path.join(d, f"open_loop_{ep}.txt"), "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
