"""The CAGE Challenge 2 evaluation protocol: 30-, 50- and 100-step episodes against B_lineAgent,
RedMeanderAgent and SleepAgent (1000 episodes per setting by default), reported as the challenge's
leaderboard did — the mean (± sd) per setting and the total, the sum of the nine means — plus the
workflow compliance per setting.

Episodes are numbered from wfrl.rng.CAGE2_EPISODE_BASE (setting k: its k-th block of 10⁶) with
the evaluation's own seed, a range no training run uses, so a checkpoint is never evaluated on the
episodes it trained or was selected on. An L-step episode is played as L blue steps from reset;
the policy sees the same time feature as in a 100-step episode (it does not know the horizon),
exactly as in the challenge.

Compliance per setting = compliant fixes / fixes over all the setting's episodes (None when the
policy made no fix at all, e.g. against SleepAgent); the per-episode mean of the training rule
(0.5 for an episode without a fix) is reported beside it as `compliance_episode_mean`.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np

from wfrl.errors import UserError
from wfrl.rng import CAGE2_EPISODE_BASE, episode_block

CAGE2_REDS = ("B_lineAgent", "RedMeanderAgent", "SleepAgent")
CAGE2_LENGTHS = (30, 50, 100)
CHUNK = {"sim": 1000, "cyborg": 50}

# CAGE Challenge 2 final leaderboard (validated scores, 1000 episodes per setting, CybORG 2.1):
# the winner (CardiffUni, "PPO + Greedy Decoys") and the best entry of any team in each setting.
LEADERBOARD = {
    "winner": {("B_lineAgent", 30): -3.47, ("B_lineAgent", 50): -6.41, ("B_lineAgent", 100): -13.76,
               ("RedMeanderAgent", 30): -5.64, ("RedMeanderAgent", 50): -8.69,
               ("RedMeanderAgent", 100): -16.6, ("SleepAgent", 30): 0.0, ("SleepAgent", 50): 0.0,
               ("SleepAgent", 100): 0.0},
    "best": {("B_lineAgent", 30): -3.47, ("B_lineAgent", 50): -5.85, ("B_lineAgent", 100): -11.39,
             ("RedMeanderAgent", 30): -5.64, ("RedMeanderAgent", 50): -8.69,
             ("RedMeanderAgent", 100): -16.6, ("SleepAgent", 30): 0.0, ("SleepAgent", 50): 0.0,
             ("SleepAgent", 100): 0.0},
}
LEADERBOARD_TOTAL = {"winner": -54.57, "best": None}


@dataclass(frozen=True)
class _Task:
    backend: str
    red: str
    steps: int
    weights: np.ndarray
    net: object
    workflow: str
    lam: float
    foothold: bool
    seed: int
    first: int
    n: int
    greedy: bool


def _run_task(task: _Task):
    """Worker side: play one chunk; returns (returns, fixes, compliant, episode compliance)."""
    from wfrl.envs import make_backend
    from wfrl.evaluate import play
    from wfrl.workflow import Workflow
    backend = make_backend(task.backend, task.red, seed=task.seed)
    try:
        stats = play(backend, task.weights, task.net, Workflow.parse(task.workflow), task.lam,
                     task.foothold, range(task.first, task.first + task.n), task.seed,
                     task.greedy, horizon=task.steps)
    finally:
        backend.close()
    return (np.array([s.env_return for s in stats]), np.array([s.fixes for s in stats]),
            np.array([s.compliant_fixes for s in stats]),
            np.array([s.compliance for s in stats]))


def _policy_for(red: str, checkpoints: dict) -> str:
    """Which checkpoint plays against `red`: the per-red one if given, else the general one
    (SleepAgent: the general one, else B_line's)."""
    own = {"B_lineAgent": "b_line", "RedMeanderAgent": "meander"}.get(red)
    if own and checkpoints.get(own):
        return checkpoints[own]
    if checkpoints.get("all"):
        return checkpoints["all"]
    if red == "SleepAgent" and checkpoints.get("b_line"):
        return checkpoints["b_line"]
    raise UserError(f"no checkpoint for {red}: give --checkpoint (or --checkpoint-b-line and "
                    "--checkpoint-meander)")


def policy_of_checkpoint(path: str, workflow: str | None = None) -> tuple:
    """(weights, net, workflow, alignment λ, count_foothold) of a checkpoint, as the protocol plays
    it: its own workflow unless `workflow` is given (checked either way)."""
    from wfrl.evaluate import weights_from_checkpoint
    from wfrl.runlog import load_checkpoint
    from wfrl.workflow import Workflow
    ck = load_checkpoint(path)
    weights, net = weights_from_checkpoint(ck)
    cfg = ck.get("config", {}) if isinstance(ck.get("config"), dict) else {}
    wf = workflow or ck["workflow"]
    Workflow.parse(wf)
    return (weights, net, wf, float(cfg.get("alignment_lambda", 30.0)),
            bool(cfg.get("count_foothold", False)))


def cage2_evaluate(checkpoints: dict, backend: str = "sim", episodes: int = 1000,
                   seed: int = 153, n_workers: int | None = None, greedy: bool = True,
                   workflow: str | None = None, reds=CAGE2_REDS, lengths=CAGE2_LENGTHS,
                   progress=None) -> dict:
    """Run the protocol. checkpoints: {"all": path, "b_line": path, "meander": path} (any
    subset that covers every red). Returns the JSON-ready result (see `format_table`)."""
    from wfrl.envs.base import backend_engine, check_backend
    check_backend(backend)
    if episodes < 1:
        raise UserError(f"--episodes must be positive (got {episodes})")
    loaded = {}
    for red in reds:
        path = _policy_for(red, checkpoints)
        if path not in loaded:
            loaded[path] = policy_of_checkpoint(path, workflow)
    settings = [(red, steps) for red in reds for steps in lengths]
    chunk = CHUNK[backend_engine(backend)]
    tasks = []
    for k, (red, steps) in enumerate(settings):
        weights, net, wf, lam, foothold = loaded[_policy_for(red, checkpoints)]
        base = episode_block(CAGE2_EPISODE_BASE, k)
        for first in range(0, episodes, chunk):
            tasks.append((k, _Task(backend, red, steps, weights, net, wf, lam, foothold, seed,
                                   base + first, min(chunk, episodes - first), greedy)))
    if n_workers is None:
        n_workers = min(2, os.cpu_count() or 1) if backend_engine(backend) == "cyborg" else 1
    parts: dict[int, list] = {k: [] for k in range(len(settings))}
    if n_workers <= 1:
        for k, t in tasks:
            parts[k].append((t.first, _run_task(t)))
            if progress:
                progress(f"{t.red} {t.steps} steps: {sum(p[1][0].size for p in parts[k])} episodes")
    else:
        import multiprocessing as mp
        try:
            with cf.ProcessPoolExecutor(n_workers, mp_context=mp.get_context("spawn")) as pool:
                futs = {pool.submit(_run_task, t): (k, t) for k, t in tasks}
                for f in cf.as_completed(futs):
                    k, t = futs[f]
                    parts[k].append((t.first, f.result()))
                    if progress:
                        progress(f"{t.red} {t.steps} steps: "
                                 f"{sum(p[1][0].size for p in parts[k])} episodes")
        except BrokenProcessPool:
            raise UserError("an evaluation worker died (killed or out of memory); nothing was "
                            "written — run the evaluation again") from None
    rows = []
    for k, (red, steps) in enumerate(settings):
        chunks = [p[1] for p in sorted(parts[k], key=lambda p: p[0])]
        ret, fixes, compliant, ep_comp = (np.concatenate([c[i] for c in chunks]) for i in range(4))
        n_fix = int(fixes.sum())
        rows.append({
            "red_agent": red, "steps": steps, "n": int(ret.size),
            "mean": round(float(ret.mean()), 4),
            "sd": round(float(ret.std(ddof=1)) if ret.size > 1 else 0.0, 4),
            "se": round(float(ret.std(ddof=1) / np.sqrt(ret.size)) if ret.size > 1 else 0.0, 4),
            "compliance": round(int(compliant.sum()) / n_fix, 4) if n_fix else None,
            "compliance_episode_mean": round(float(ep_comp.mean()), 4),
            "fixes_per_episode": round(float(fixes.mean()), 3),
            "winner": LEADERBOARD["winner"].get((red, steps)),
            "best_entry": LEADERBOARD["best"].get((red, steps)),
            "checkpoint": str(_policy_for(red, checkpoints)),
        })
    total = sum(r["mean"] for r in rows)
    total_se = float(np.sqrt(sum(r["se"] ** 2 for r in rows)))
    return {"backend": backend, "episodes": episodes, "seed": seed,
            "policy": "greedy" if greedy else "sampling", "settings": rows,
            "total": round(total, 3), "total_ci95": round(1.96 * total_se, 3),
            "leaderboard_winner_total": LEADERBOARD_TOTAL["winner"]}


def format_table(res: dict) -> str:
    """The leaderboard-style text table of a cage2_evaluate result."""
    lines = [f"CAGE2 evaluation on {res['backend']}: {res['episodes']} episodes per setting, "
             f"seed {res['seed']}, {res['policy']} policy",
             f"{'red agent':16s} {'steps':>5s} {'mean':>9s} {'± sd':>7s} {'± se':>6s} "
             f"{'compliance':>10s} {'fixes/ep':>8s} {'winner':>7s} {'best':>7s}"]
    for r in res["settings"]:
        comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
        win = "" if r["winner"] is None else f"{r['winner']:7.2f}"
        best = "" if r["best_entry"] is None else f"{r['best_entry']:7.2f}"
        lines.append(f"{r['red_agent']:16s} {r['steps']:5d} {r['mean']:9.2f} {r['sd']:7.2f} "
                     f"{r['se']:6.2f} {comp:>10s} {r['fixes_per_episode']:8.2f} {win:>7s} {best:>7s}")
    lines.append(f"total (sum of the {len(res['settings'])} means): {res['total']:.2f} "
                 f"± {res['total_ci95']:.2f} (95 %); leaderboard winner: "
                 f"{res['leaderboard_winner_total']}")
    return "\n".join(lines)
