"""A red best response to a frozen defender: `wfrl attack` (attack(AttackConfig)).

Red is an agent of the two-player CAGE2 (wfrl.envs.duel); the defender, a blue checkpoint, is
frozen and plays greedily. Each update plays `episodes_per_update` episodes in the compiled duel
loop (csrc/wfrl_duel.h: both policies' forward passes, red's mask and sampling, the env, in C
without the GIL), then takes one PPO update of red's network with wfrl's learner (its compiled
steps, compact columns and actions, the same settings as blue's). Red's network is blue's layout
with red's observation as input and red's 56 actions first in the 145-wide head, the others
masked (NetSpec.red). Red's reward is the negative of blue's CAGE2 reward.

Records in --out: experiment_config.json, training_log.csv (per update), eval_log.csv (each
greedy evaluation on reserved episodes: blue's return against red), checkpoint.pt (red's learner
and the loop's counters: `--resume`), best.pt (the strongest red evaluated: the lowest blue
return), evals/ep_N.pt (each evaluated red) and summary.json: the defender's return on held-out
episodes against the strongest red (its greedy and its sampling play) beside its return
against B_line and Meander on the same episodes. The defender's exploitability at this budget is
its B_line return minus its return against that red (docs/duel.md).
"""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from wfrl._version import __version__
from wfrl.config.duel import AttackConfig
from wfrl.envs.base import EP_LEN, is_leaderboard
from wfrl.errors import UserError
from wfrl.rng import EVAL_EPISODE_BASE, SELECT_EPISODE_BASE, episode_seeds
from wfrl.runlog import (
    CsvLog,
    RunDir,
    TensorBoardLog,
    eta,
    locked_dir,
    save_checkpoint,
    tensorboard_log,
    truncate_csv,
    write_json,
)
from wfrl.stats import standard_error

if TYPE_CHECKING:
    from wfrl.ppo.netspec import NetSpec

LOG_COLUMNS = ["Update", "Episodes", "Blue_Return", "Blue_Return_SE", "Red_Return",
               "policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac",
               "Collection_Time", "Update_Time", "Episodes_Per_Second"]
EVAL_COLUMNS = ["Episodes", "Update", "Blue_Return", "Blue_Return_SE", "Red_Play", "Best"]
SIDE = "red"          # what a red checkpoint records as its side


def red_net(hidden: int):
    """The NetSpec of a red policy of this width."""
    from wfrl.ppo.netspec import NetSpec
    return NetSpec(hidden=int(hidden), red=True)


def red_buffer(n_rows: int):
    """A trajectory buffer whose rows hold a red's episodes (obs: red's observation)."""
    from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
    return compiled_buffer(allocate_trajectory(n_rows, EP_LEN, red_net(1)))


def red_batch(buffer, gamma: float, lam: float):
    """GAE (compiled) over a red buffer's rows, flattened into a learner Batch with red's
    masks."""
    from wfrl.collect.buffer import allocate_flat
    from wfrl.envs.duel import RED_OBS_DIM, red_masks
    from wfrl.ppo.batch import Batch
    from wfrl.ppo.gae import gae
    a = buffer.arrays
    adv, ret = gae(a["rewards"], a["values"], a["dones"], a["lengths"],
                   np.zeros(len(a["lengths"]), np.float32), gamma, lam)
    flat = allocate_flat(int(buffer.count()), RED_OBS_DIM)
    buffer.flatten(adv, ret, flat)
    return Batch(flat["obs"], flat["actions"], flat["logprobs"], flat["values"],
                 flat["advantages"], flat["returns"], masks=red_masks(flat["obs"]))


@dataclasses.dataclass
class Defender:
    """A frozen blue policy, as the duel loop plays it."""
    policy: object        # wfrl._core.Policy, greedy
    checkpoint: str
    workflow: str
    net: NetSpec          # its flat-weights layout

    @property
    def describe(self) -> str:
        return f"{self.checkpoint} under {self.workflow} ({self.net.describe()})"


def load_defender(checkpoint: str, workflow: str | None) -> Defender:
    """A blue checkpoint as the frozen defender (one-line UserError for a red's checkpoint, a
    belief policy or a bad file or workflow)."""
    from wfrl.collect.rollout import make_policy
    from wfrl.evaluation.checkpoint import policy_of_checkpoint
    from wfrl.workflow import Workflow
    weights, net, wf, lam, count_foothold = policy_of_checkpoint(checkpoint, workflow)
    if net.belief:
        raise UserError(f"{checkpoint} reads a belief over CAGE2's scripted reds; a learned red "
                        "is outside what its particles model")
    w = Workflow.parse(wf)
    policy = make_policy(weights, net, w, lam, count_foothold, greedy=True)
    return Defender(policy, str(checkpoint), str(w), net)


def play(slots, defender: Defender, red_weights, hidden: int, episodes, seed: int,
         greedy: bool, buffer=None, pool=None) -> np.ndarray:
    """Blue's returns in global episodes `episodes` (seeds from (seed, episode)) of red's policy
    against the defender; red's steps go into buffer rows 0.. (buffer may be None). With a
    thread pool (and one slot per thread), the episodes are split over the slots, each playing
    its share without the GIL: the same episodes, the same rows."""
    from wfrl._core import RedPolicy
    episodes = np.asarray(episodes, np.int64)
    env_seeds, act_seeds = episode_seeds(seed, episodes)
    rows = (np.arange(len(episodes), dtype=np.int64) if buffer is not None
            else np.full(len(episodes), -1, np.int64))
    out = np.zeros(len(episodes), np.float64)
    red = RedPolicy(np.ascontiguousarray(red_weights, np.float32), hidden, greedy)
    parts = slots.n if pool is not None else 1
    cuts = np.linspace(0, len(episodes), parts + 1).astype(int)

    def part(k: int) -> None:
        a, b = cuts[k], cuts[k + 1]
        slots.run_episodes(k, defender.policy, red, env_seeds[a:b], act_seeds[a:b], rows[a:b],
                           buffer, out[a:b])
    if pool is None:
        part(0)
    else:
        for f in [pool.submit(part, k) for k in range(parts)]:
            f.result()
    return out


def strongest(slots, defender: Defender, red_weights, hidden: int, episodes, seed: int,
              pool=None):
    """Red's score on these episodes: blue's return against its greedy play and against its
    sampling play, whichever is lower (a learned red can be stronger either way). Returns
    (score, "greedy" or "sampling")."""
    scores = {how: _score(play(slots, defender, red_weights, hidden, episodes, seed,
                               how == "greedy", pool=pool))
              for how in ("greedy", "sampling")}
    how = min(scores, key=lambda k: scores[k]["mean"])
    return scores[how], how


def duel_episode_reference(defender: Defender, red_weights, hidden: int, env_seed: int,
                           act_seed: int, leaderboard: bool = False, greedy: bool = False):
    """Plain-Python twin of the compiled duel loop (csrc/wfrl_duel.h): the external red of a
    Cage2Sim stepped from Python, blue's compiled per-step actor, red's numpy forward and Python
    sampling from its own stream. Returns (blue's return, red's steps: [(obs, action, logp,
    value, reward)])."""
    from wfrl._core import RED_STREAM, Actor, Cage2Sim
    from wfrl.collect.rollout import sample_reference
    from wfrl.envs.duel import RED_N_ACTIONS, RED_OBS_DIM
    from wfrl.features import MASKED_LOGIT, stream_seed
    from wfrl.ppo.netspec import NumpyPolicy
    from wfrl.rng import Xoshiro256
    sim = Cage2Sim(1, "SleepAgent", leaderboard, external=True)
    obs, access = sim.reset(0, int(env_seed))
    actor = Actor(defender.policy)
    actor.begin(int(act_seed))
    red = NumpyPolicy(np.ascontiguousarray(red_weights, np.float32), hidden, RED_OBS_DIM)
    rng = Xoshiro256(stream_seed(int(env_seed), 0, RED_STREAM))
    total, steps = 0.0, []
    for _ in range(EP_LEN):
        b = actor.act(obs, access)[0]
        x = sim.red_obs(0)
        logits, value = red.forward(x)
        z = np.where(sim.red_mask(0), logits[:RED_N_ACTIONS], np.float32(MASKED_LOGIT))
        a, logp = sample_reference(z.astype(np.float32), greedy, rng)
        sim.set_red_action(0, a)
        obs, reward, access = sim.step(0, b)
        total += reward
        steps.append((x, a, logp, value, -reward))
    return total, steps


def scripted_returns(defender: Defender, backend: str, red: str, episodes, seed: int):
    """Blue's returns against a scripted red on the same episodes (the compiled loop)."""
    from wfrl.collect.rollout import run_episodes
    from wfrl.envs import make_backend
    stats = run_episodes(make_backend(backend, red), defender.policy, episodes, seed)
    return np.array([s.env_return for s in stats], np.float64)


def _score(x) -> dict:
    x = np.asarray(x, np.float64)
    return {"mean": round(float(x.mean()), 4), "se": round(float(standard_error(x)), 4),
            "n": int(len(x))}


def red_payload(learner, cfg: AttackConfig, defender: Defender, episodes: int) -> dict:
    """What a red checkpoint holds: the learner's state, the network, the defender it was trained
    against and on which code."""
    return {**learner.state(), "side": SIDE, "hidden": cfg.ppo.hidden,
            "net": red_net(cfg.ppo.hidden).to_dict(), "episodes": episodes,
            "defender": {"checkpoint": defender.checkpoint, "workflow": defender.workflow},
            "config": {"backend": cfg.backend, "seed": cfg.seed}}


def attack(cfg: AttackConfig, progress=None, resume: bool = False) -> dict:
    """Train red against cfg's defender; returns the summary also written to summary.json.
    resume: continue the run in cfg.out from its last committed update."""
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    cfg = cfg.validate()
    defender = load_defender(cfg.checkpoint, cfg.workflow)   # bad input before any file
    if cfg.tensorboard:
        TensorBoardLog.check()
    with locked_dir(cfg.out, "attack run"):
        committed = _committed(cfg.out) if resume else None
        with tensorboard_log(cfg.tensorboard, committed) as tb:
            return _attack(cfg, defender, progress, committed, tb, resume)


def stored_config(run_dir) -> AttackConfig:
    """The settings an attack run in run_dir was started with (one line if it is not one)."""
    import json
    path = Path(run_dir) / "experiment_config.json"
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        raise UserError(f"cannot resume: {path} is missing or unreadable") from None
    if not isinstance(d, dict) or d.get("mode") != "attack":
        raise UserError(f"cannot resume: {run_dir} is not an attack run")
    from wfrl.config.run import PPOConfig
    d = {k: v for k, v in d.items() if k not in ("mode", "wfrl_version", "defender")}
    d["out"] = str(run_dir)
    cfg = AttackConfig.from_dict({k: v for k, v in d.items() if k != "ppo"}, str(path))
    return dataclasses.replace(cfg, ppo=PPOConfig.from_dict(d.get("ppo") or {}, str(path)))


def _committed(out) -> dict | None:
    """The last commit of the attack run in `out` (wfrl.training.run.committed_update), or
    None before its first; one line for another kind of run."""
    from wfrl.training.run import committed_update
    ck = committed_update(out)
    if ck is not None and ck.get("side") != SIDE:
        raise UserError(f"cannot resume: {Path(out) / 'checkpoint.pt'} is not an attack run's")
    return ck


def _attack(cfg, defender, progress, committed, tb, resume) -> dict:
    from wfrl._core import DuelSlots
    from wfrl.ppo.learner import PPOLearner
    resuming = committed is not None
    run = RunDir(cfg.out, cfg.force or resume)
    if not resuming:
        write_json(run.file("experiment_config.json"),
                   {"mode": "attack", "wfrl_version": __version__, **cfg.to_dict(),
                    "defender": defender.describe})
    hidden = cfg.ppo.hidden
    learner = PPOLearner(cfg.ppo, seed=cfg.seed, net=red_net(hidden))
    saved = committed["resume"] if resuming else {}
    if resuming:
        learner.load_state(committed)
        truncate_csv(run.file("training_log.csv"), LOG_COLUMNS, saved["update"])
        truncate_csv(run.file("eval_log.csv"), EVAL_COLUMNS, saved["eval_rows"])
        progress(f"resuming {run.path} after update {saved['update']} ({saved['episodes']} of "
                 f"{cfg.total_episodes} episodes)")
    log = CsvLog(run.file("training_log.csv"), LOG_COLUMNS, fresh=not resuming)
    evals = CsvLog(run.file("eval_log.csv"), EVAL_COLUMNS, fresh=not resuming)
    threads = max(1, min(cfg.threads, per_update_max(cfg)))
    slots = DuelSlots(threads, is_leaderboard(cfg.backend))
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(threads, thread_name_prefix="wfrl-duel") if threads > 1 else None
    per_update = cfg.episodes_per_update
    buffer = red_buffer(per_update)
    episodes, update = saved.get("episodes", 0), saved.get("update", 0)
    best = saved.get("best")          # the lowest blue return an evaluation has seen
    eval_rows = saved.get("eval_rows", 0)
    started, at_start = time.perf_counter(), episodes
    progress(f"attacking {defender.describe} on {cfg.backend}: {cfg.total_episodes} episodes")

    def evaluate(episodes: int, update: int, payload: dict) -> None:
        nonlocal best, eval_rows
        eps = range(SELECT_EPISODE_BASE, SELECT_EPISODE_BASE + cfg.eval_episodes)
        s, how = strongest(slots, defender, learner.flat_weights(), hidden, eps, cfg.seed, pool)
        better = best is None or s["mean"] < best
        if better:
            best = s["mean"]
            save_checkpoint(run.file("best.pt"), {**payload, "selection": s})
        snap = run.path / "evals"
        snap.mkdir(exist_ok=True)
        save_checkpoint(snap / f"ep_{episodes:08d}.pt",
                        {k: v for k, v in payload.items() if k not in ("optimizer", "rng")})
        evals.append({"Episodes": episodes, "Update": update, "Blue_Return": s["mean"],
                      "Blue_Return_SE": s["se"], "Red_Play": how, "Best": int(better)})
        eval_rows += 1
        progress(f"evaluation at {episodes} episodes (red {how}, {s['n']} reserved episodes): "
                 f"blue {s['mean']:.2f} ± {s['se']:.2f}{' — strongest so far' if better else ''}")

    while episodes < cfg.total_episodes:
        n = min(per_update, cfg.total_episodes - episodes)
        learner.set_progress(episodes / cfg.total_episodes)
        t0 = time.perf_counter()
        blue = play(slots, defender, learner.flat_weights(), hidden,
                    range(episodes, episodes + n), cfg.seed, False, buffer, pool)
        t1 = time.perf_counter()
        ustats = learner.update(red_batch(buffer, cfg.ppo.gamma, cfg.ppo.gae_lambda))
        t2 = time.perf_counter()
        before, episodes = episodes, episodes + n
        update += 1
        rate = (episodes - at_start) / (t2 - started)
        row = {"Update": update, "Episodes": episodes,
               "Blue_Return": round(float(blue.mean()), 4),
               "Blue_Return_SE": round(float(standard_error(blue)), 4),
               "Red_Return": round(-float(blue.mean()), 4),
               **{k: round(float(ustats.get(k, float("nan"))), 6)
                  for k in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")},
               "Collection_Time": round(t1 - t0, 4), "Update_Time": round(t2 - t1, 4),
               "Episodes_Per_Second": round(n / (t2 - t0), 3)}
        log.append(row)
        if tb is not None:
            tb.scalars({"red/blue_return": row["Blue_Return"], "red/red_return": row["Red_Return"],
                        **{f"losses/{k}": row[k] for k in ("policy_loss", "value_loss",
                                                           "entropy", "approx_kl", "clip_frac")},
                        "charts/SPS": rate * EP_LEN}, episodes * EP_LEN)
        progress(f"update {update:4d} | episodes {episodes}/{cfg.total_episodes} | "
                 f"{rate:7.1f} eps/s | blue {row['Blue_Return']:8.2f} ± "
                 f"{row['Blue_Return_SE']:.2f} | ETA {eta(cfg.total_episodes - episodes, rate)}")
        payload = red_payload(learner, cfg, defender, episodes)
        k = cfg.eval_every
        if (k > 0 and episodes // k > before // k) or episodes >= cfg.total_episodes:
            evaluate(episodes, update, payload)
        save_checkpoint(run.file("checkpoint.pt"), {**payload, "resume": {
            "update": update, "episodes": episodes, "best": best, "eval_rows": eval_rows}})

    summary = _summary(cfg, defender, slots, run, started, episodes, at_start, update, pool)
    if pool is not None:
        pool.shutdown()
    write_json(run.file("summary.json"), summary)
    lost = summary["exploitability"]
    progress(f"done: {episodes} episodes; blue {summary['vs_red']['mean']:.2f} against the "
             f"strongest red, {summary['vs_b_line']['mean']:.2f} against B_line "
             f"(exploitability {lost:.2f}); records in {run.path}")
    return summary


def per_update_max(cfg: AttackConfig) -> int:
    """The most threads a batch can use (one episode each at least)."""
    return max(1, min(cfg.episodes_per_update, cfg.eval_episodes))


def _summary(cfg, defender, slots, run, started, episodes, at_start, update, pool=None) -> dict:
    """The defender on held-out episodes (the EVAL range): against the strongest red evaluated
    (its greedy and its sampling play; the lower is its score), B_line and Meander."""
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.runlog import load_checkpoint
    ck = load_checkpoint(run.file("best.pt"))
    weights, _ = weights_from_checkpoint(ck)
    eps = range(EVAL_EPISODE_BASE, EVAL_EPISODE_BASE + cfg.eval_episodes)
    greedy = _score(play(slots, defender, weights, cfg.ppo.hidden, eps, cfg.seed, True, pool=pool))
    sampling = _score(play(slots, defender, weights, cfg.ppo.hidden, eps, cfg.seed, False,
                           pool=pool))
    top = min((greedy, sampling), key=lambda s: s["mean"])
    b_line = _score(scripted_returns(defender, cfg.backend, "B_lineAgent", eps, cfg.seed))
    meander = _score(scripted_returns(defender, cfg.backend, "RedMeanderAgent", eps, cfg.seed))
    wall = time.perf_counter() - started
    return {"defender": defender.describe, "backend": cfg.backend, "episodes": episodes,
            "updates": update, "red": "best.pt", "red_selected_at": ck.get("selection"),
            "vs_red": top, "vs_red_greedy": greedy, "vs_red_sampling": sampling,
            "vs_b_line": b_line, "vs_meander": meander,
            "exploitability": round(b_line["mean"] - top["mean"], 4),
            "held_out_episodes": f"{EVAL_EPISODE_BASE}..{EVAL_EPISODE_BASE + cfg.eval_episodes - 1}",
            "wall_time_s": round(wall, 3),
            "episodes_per_s": round((episodes - at_start) / wall, 3)}
