"""The CAGE Challenge 2 evaluation protocol: 30-, 50- and 100-step episodes against B_lineAgent,
RedMeanderAgent and SleepAgent (1000 episodes per setting by default), reported as the challenge's
leaderboard did — the mean (± sd) per setting and the total, the sum of the nine means — plus the
workflow compliance per setting.

Episodes are numbered from wfrl.rng.CAGE2_EPISODE_BASE (setting k of the protocol's nine: its k-th
block of 10⁶, whichever settings an evaluation plays) with
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
import dataclasses
import os
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from wfrl.envs.reds import B_LINE, CAGE2_REDS, MEANDER, red_spec
from wfrl.errors import UserError
from wfrl.rng import CAGE2_EPISODE_BASE, episode_block
from wfrl.stats import standard_error

if TYPE_CHECKING:
    from wfrl.ppo.netspec import NetSpec

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

# The reference beside each backend's scores is measured on the CybORG code that backend plays by
# (wfrl.envs.base.BACKENDS); the record: docs/results/agents/winner_rerun.json.
# Installed code (csle-cyborg 0.0.3, cage-challenge-2 9421c8e): the winner's released agent re-run
# unchanged from its own checkout, 500 episodes per setting (B_line and Meander, 100 steps).
# Leaderboard code (cage-challenge-2 606813b): the leaderboard itself; the same re-run there
# scored B_line-100 -13.22 and Meander-100 -16.70.
REFERENCES: dict[str, dict] = {
    "installed": {
        "code": "installed CybORG code (cage-challenge-2 9421c8e)",
        "note": "winner = the CAGE2 winner's released agent re-run on this code (500 episodes per "
                "setting); no leaderboard exists for this code",
        "winner": {("B_lineAgent", 100): -36.84, ("RedMeanderAgent", 100): -16.77},
        "best": {}, "winner_total": None},
    "leaderboard": {
        "code": "the leaderboard's CybORG code (cage-challenge-2 606813b)",
        "note": "winner / best = the CAGE2 final leaderboard (1000 episodes per setting, this "
                "code); the winner's agent re-run here: B_line-100 -13.22, Meander-100 -16.70",
        "winner": LEADERBOARD["winner"], "best": LEADERBOARD["best"],
        "winner_total": LEADERBOARD_TOTAL["winner"]},
}


def setting_index(red: str, steps: int, position: int) -> int:
    """The episode block of a setting: its place in the full protocol (B_line 30, 50, 100,
    Meander 30, …), so an evaluation of some settings plays the same episodes as the full one;
    a setting outside the protocol keeps its position in the list, past the protocol's nine."""
    if red in CAGE2_REDS and steps in CAGE2_LENGTHS:
        return CAGE2_REDS.index(red) * len(CAGE2_LENGTHS) + CAGE2_LENGTHS.index(steps)
    return len(CAGE2_REDS) * len(CAGE2_LENGTHS) + position


def reference_for(backend: str) -> dict:
    """The reference measured on the CybORG code `backend` plays by."""
    from wfrl.envs.base import is_leaderboard
    return REFERENCES["leaderboard" if is_leaderboard(backend) else "installed"]


@dataclass(frozen=True)
class EpisodeTask:
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
    attribute: bool = False
    plan: tuple | None = None     # (wfrl.evaluation.planner.PlanBudget, plan red) with --plan
    actions: bool = False         # also return each episode's actions (--episodes-out)


SEARCH_COUNTERS = ("decisions", "switches", "timeouts", "observed", "fallbacks")


def run_task(task: EpisodeTask):
    """Worker side: play one chunk; returns (returns, fixes, compliant, episode compliance,
    per-decision times in ms (empty without --plan), the episodes' cost vectors
    [n, wfrl.evaluation.attribution.N_COLUMNS] with `attribute`, else None, the search's counters
    SEARCH_COUNTERS (zeros without --plan), and each episode's actions with `actions`, else
    None). An agent's task (wfrl.evaluation.agents) returns the same, never searching."""
    from wfrl.envs import make_backend
    from wfrl.evaluation.attribution import ActionRecorder, CostRecorder
    from wfrl.evaluation.returns import play, play_with_plan
    from wfrl.workflow import Workflow
    costs = CostRecorder() if task.attribute else None
    recorder = ActionRecorder(costs) if task.actions else costs
    backend = make_backend(task.backend, task.red, seed=task.seed)
    episodes = range(task.first, task.first + task.n)
    wf = Workflow.parse(task.workflow)
    times = np.zeros(0)
    counters = np.zeros(len(SEARCH_COUNTERS), np.int64)
    try:
        if task.plan is not None:
            stats, search = play_with_plan(task.backend, backend, task.weights, task.net, wf,
                                           task.lam, task.foothold, episodes, task.seed,
                                           task.plan[0], task.plan[1], horizon=task.steps,
                                           observer=recorder)
            times = np.asarray(search.times_ms)
            counters = np.array([getattr(search, k) for k in SEARCH_COUNTERS], np.int64)
        else:
            stats = play(backend, task.weights, task.net, wf, task.lam, task.foothold, episodes,
                         task.seed, task.greedy, horizon=task.steps, observer=recorder)
    finally:
        backend.close()
    return (np.array([s.env_return for s in stats]), np.array([s.fixes for s in stats]),
            np.array([s.compliant_fixes for s in stats]),
            np.array([s.compliance for s in stats]), times,
            None if costs is None else costs.costs, counters,
            cast(ActionRecorder, recorder).episodes if task.actions else None)


def policy_of_checkpoint(path: str, workflow: str | None = None
                         ) -> tuple[np.ndarray, NetSpec, str, float, bool]:
    """(weights, net, workflow, alignment λ, count_foothold) of a checkpoint, as the protocol plays
    it (wfrl.evaluation.checkpoint.policy_of_checkpoint; imported here when needed: it brings torch)."""
    from wfrl.evaluation.checkpoint import policy_of_checkpoint as load
    return load(path, workflow)


def _policy_for(red: str, checkpoints: dict) -> str:
    """Which checkpoint plays against `red`: the per-red one if given, else the general one
    (SleepAgent: the general one, else B_line's)."""
    # a variant of B_line or Meander (wfrl.envs.reds) is played by its base red's policy
    own = {B_LINE: "b_line", MEANDER: "meander"}.get(red_spec(red).base)
    if own and checkpoints.get(own):
        return checkpoints[own]
    if checkpoints.get("all"):
        return checkpoints["all"]
    if red == "SleepAgent" and checkpoints.get("b_line"):
        return checkpoints["b_line"]
    raise UserError(f"no checkpoint for {red}: give --checkpoint (or --checkpoint-b-line and "
                    "--checkpoint-meander)")


def cage2_evaluate(checkpoints: dict | None = None, backend: str = "sim", episodes: int = 1000,
                   seed: int = 153, n_workers: int | None = None, greedy: bool = True,
                   workflow: str | None = None, reds=CAGE2_REDS, lengths=CAGE2_LENGTHS,
                   progress=None, agent: str | None = None, action_timeout: float = 30.0,
                   episode_timeout: float = 600.0, on_setting=None,
                   attribute: bool = False, plan=None, agent_output=None,
                   episodes_out=None) -> dict:
    """Run the protocol. checkpoints: {"all": path, "b_line": path, "meander": path} (any
    subset that covers every red), or agent: MODULE:FACTORY (wfrl.evaluation.agents; compliance then only
    under `workflow`; what it prints goes to the file agent_output, else to stderr).
    on_setting(partial result), if given, runs after every finished setting.
    attribute: each setting also reports its mean return split by host and cause ("cost",
    wfrl.evaluation.attribution.summarise), on the same episodes.
    plan: (wfrl.evaluation.planner.PlanBudget, plan red) to play the greedy policy improved by decision-time
    search (per setting then also the per-decision time median/p95/max in ms, the belief update
    included, and the search's switch, time-out and fallback rates).
    episodes_out: a file that gets one JSON line per episode (episode_records; rewritten from
    the start, each setting's lines appended and synced as it finishes, so settings appear in
    the order they finish).
    Returns the JSON-ready result (see `format_table`); a failure raises EvaluationFailed, whose
    `partial` holds the finished settings."""
    from wfrl.envs.base import backend_engine, check_backend
    check_backend(backend)
    if episodes < 1:
        raise UserError(f"--episodes must be positive (got {episodes})")
    loaded = {}
    if agent is None:   # (checkpoints are given where no agent is)
        for red in reds:
            path = _policy_for(red, cast(dict, checkpoints))
            if path not in loaded:
                loaded[path] = policy_of_checkpoint(path, workflow)
    elif workflow is not None:
        from wfrl.workflow import Workflow
        Workflow.parse(workflow)
    settings = [(red, steps) for red in reds for steps in lengths]
    chunk = CHUNK[backend_engine(backend)]
    tasks: list[tuple[int, Any]] = []   # (setting, an EpisodeTask or an agent's task)
    for k, (red, steps) in enumerate(settings):
        base = episode_block(CAGE2_EPISODE_BASE, setting_index(red, steps, k))
        for first in range(0, episodes, chunk):
            n = min(chunk, episodes - first)
            if agent is None:
                weights, net, wf, lam, foothold = loaded[_policy_for(red, cast(dict, checkpoints))]
                tasks.append((k, EpisodeTask(backend, red, steps, weights, net, wf, lam, foothold, seed,
                                       base + first, n, greedy, attribute, plan,
                                       episodes_out is not None)))
            else:
                tasks.append((k, (k, backend, red, steps, seed, base + first, n, workflow,
                                  attribute, episodes_out is not None)))
    if n_workers is None:
        n_workers = min(2, os.cpu_count() or 1) if backend_engine(backend) == "cyborg" else 1
    head = {"backend": backend, "episodes": episodes, "seed": seed,
            "policy": "agent" if agent else ("plan" if plan else
                                             ("greedy" if greedy else "sampling")),
            **({"plan": {**dataclasses.asdict(plan[0]), "red": plan[1]}} if plan else {}),
            **({"agent": agent, "workflow": workflow} if agent else {})}
    parts: dict[int, list] = {k: [] for k in range(len(settings))}
    left = {k: sum(1 for kk, _ in tasks if kk == k) for k in range(len(settings))}
    rows: dict[int, dict] = {}
    if episodes_out is not None:
        _append_lines(episodes_out, [], mode="w")

    def result(complete: bool) -> dict:
        return _result(head, [rows[k] for k in sorted(rows)], complete)

    def finished(k, first, res):
        parts[k].append((first, res))
        left[k] -= 1
        red, steps = settings[k]
        if progress:
            progress(f"{red} {steps} steps: {sum(p[1][0].size for p in parts[k])} episodes")
        if left[k] == 0:
            source = agent if agent else str(_policy_for(red, cast(dict, checkpoints)))
            rows[k] = _row(red, steps, parts[k], backend, source, agent is not None)
            if episodes_out is not None:
                _append_lines(episodes_out, episode_records(head, red, steps, seed, parts[k],
                                                            source))
            if on_setting:
                on_setting(result(complete=False))

    try:
        if agent is not None:
            from wfrl.evaluation.agents import run_tasks, setting_name
            run_tasks(agent, tasks, n_workers, lambda k: setting_name(backend, *settings[k]),
                      action_timeout, episode_timeout,
                      lambda i, res: finished(tasks[i][0], tasks[i][1][5], res),
                      output=agent_output)
        elif n_workers <= 1:
            for k, t in tasks:
                finished(k, t.first, run_task(t))
        else:
            import multiprocessing as mp

            from wfrl.collect.shm_base import end_pool
            pool = cf.ProcessPoolExecutor(n_workers, mp_context=mp.get_context("spawn"))
            try:
                futs = {pool.submit(run_task, t): (k, t) for k, t in tasks}
                for f in cf.as_completed(futs):
                    k, t = futs[f]
                    finished(k, t.first, f.result())
            except BrokenProcessPool:
                raise UserError("an evaluation worker died (killed or out of memory)") from None
            except BaseException:   # Ctrl-C, SIGTERM, a failure: no worker outlives the command
                end_pool(pool)
                raise
            finally:
                pool.shutdown(wait=True)
    except UserError as exc:
        raise EvaluationFailed(str(exc), result(complete=False)) from None
    return result(complete=True)


class EvaluationFailed(UserError):
    """An evaluation stopped; `partial` is the result of its finished settings."""

    def __init__(self, message: str, partial: dict):
        n = len(partial["settings"])
        super().__init__(f"{message} ({n} finished setting{'s' * (n != 1)} kept)" if n
                         else message)
        self.partial = partial


def episode_records(head: dict, red: str, steps: int, seed: int, parts, source: str) -> list:
    """One setting's episodes as JSON-ready lines, in episode order: the backend, the setting,
    the episode's global number and the env seed it was played on (wfrl.rng.episode_seeds), the
    policy, its return, fixes, compliant fixes, compliance (the training rule's per-episode rate;
    None without a workflow) and actions."""
    from wfrl.rng import episode_seeds
    lines = []
    for first, res in sorted(parts, key=lambda p: p[0]):
        episodes = np.arange(first, first + res[0].size, dtype=np.int64)
        env_seeds, _ = episode_seeds(seed, episodes)
        for i, ep in enumerate(episodes):
            comp = float(res[3][i])
            lines.append({"backend": head["backend"], "red_agent": red, "steps": steps,
                          "episode": int(ep), "env_seed": int(env_seeds[i]), "seed": seed,
                          "policy": source, "return": round(float(res[0][i]), 4),
                          "fixes": int(res[1][i]), "compliant_fixes": int(res[2][i]),
                          "compliance": None if np.isnan(comp) else round(comp, 4),
                          "actions": res[7][i]})
    return lines


def _append_lines(path, lines: list, mode: str = "a") -> None:
    import json

    from wfrl.errors import RecordWriteError
    try:
        with open(path, mode) as f:
            f.write("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise RecordWriteError(path, exc) from None


def _row(red, steps, parts, backend, source, is_agent) -> dict:
    chunks = [p[1] for p in sorted(parts, key=lambda p: p[0])]
    ret, fixes, compliant, ep_comp = (np.concatenate([c[i] for c in chunks]) for i in range(4))
    times = np.concatenate([c[4] for c in chunks])
    search = None
    if times.size:      # a search ran: its tasks (only they) add the search's counters
        from wfrl.evaluation.planner import PlanStats
        summed = np.sum([c[6] for c in chunks], axis=0).tolist()
        search = PlanStats(**dict(zip(SEARCH_COUNTERS, summed))).rates()
    cost = None
    if chunks[0][5] is not None:
        from wfrl.evaluation.attribution import summarise
        cost = summarise(np.concatenate([c[5] for c in chunks]))
    n_fix = int(fixes.sum())
    measured = not np.isnan(ep_comp).any()
    ref = reference_for(backend)
    return {
        "red_agent": red, "steps": steps, "n": int(ret.size),
        "mean": round(float(ret.mean()), 4),
        "sd": round(float(ret.std(ddof=1)) if ret.size > 1 else 0.0, 4),
        "se": round(standard_error(ret), 4),
        "compliance": round(int(compliant.sum()) / n_fix, 4) if n_fix and measured else None,
        "compliance_episode_mean": round(float(ep_comp.mean()), 4) if measured else None,
        "fixes_per_episode": round(float(fixes.mean()), 3),
        "winner": ref["winner"].get((red, steps)),
        "best_entry": ref["best"].get((red, steps)),
        ("agent" if is_agent else "checkpoint"): source,
        **({"decision_ms": {"median": round(float(np.median(times)), 3),
                            "p95": round(float(np.percentile(times, 95)), 3),
                            "max": round(float(times.max()), 3)},
             "search": search} if search is not None else {}),
        **({"cost": cost} if cost is not None else {}),
    }


def _result(head: dict, rows: list, complete: bool) -> dict:
    ref = reference_for(head["backend"])
    total = sum(r["mean"] for r in rows)
    total_se = float(np.sqrt(sum(r["se"] ** 2 for r in rows)))
    return {**head, "settings": rows, "complete": complete,
            "total": round(total, 3), "total_ci95": round(1.96 * total_se, 3),
            "reference": ref["note"], "reference_code": ref["code"],
            "leaderboard_winner_total": ref["winner_total"]}


def format_table(res: dict) -> str:
    """The leaderboard-style text table of a cage2_evaluate result (partial: its finished
    settings)."""
    who = f"agent {res['agent']}" if res.get("agent") else f"{res['policy']} policy"
    done = "" if res.get("complete", True) else " (INCOMPLETE: finished settings only)"
    w = max([16] + [len(r["red_agent"]) for r in res["settings"]])
    lines = [f"CAGE2 evaluation on {res['backend']}, {res['reference_code']}: {res['episodes']} "
             f"episodes per setting, seed {res['seed']}, {who}{done}",
             f"reference: {res['reference']}",
             f"{'red agent':{w}s} {'steps':>5s} {'mean':>9s} {'± sd':>7s} {'± se':>6s} "
             f"{'compliance':>10s} {'fixes/ep':>8s} {'winner':>7s} {'best':>7s}"]
    for r in res["settings"]:
        comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
        win = "" if r["winner"] is None else f"{r['winner']:7.2f}"
        best = "" if r["best_entry"] is None else f"{r['best_entry']:7.2f}"
        lines.append(f"{r['red_agent']:{w}s} {r['steps']:5d} {r['mean']:9.2f} {r['sd']:7.2f} "
                     f"{r['se']:6.2f} {comp:>10s} {r['fixes_per_episode']:8.2f} {win:>7s} {best:>7s}")
    ref_total = res.get("leaderboard_winner_total")
    if len(res["settings"]) != len(CAGE2_REDS) * len(CAGE2_LENGTHS):
        ref_total = None          # a total over some settings compares with no leaderboard total
    lines.append(f"total (sum of the {len(res['settings'])} means): {res['total']:.2f} "
                 f"± {res['total_ci95']:.2f} (95 %)"
                 + ("" if ref_total is None else f"; leaderboard winner: {ref_total}"))
    costs = {f"{r['red_agent']}-{r['steps']}": r["cost"] for r in res["settings"]
             if "cost" in r and r["steps"] == max(CAGE2_LENGTHS) and r["red_agent"] != "SleepAgent"}
    if costs:
        from wfrl.evaluation.attribution import format_costs
        lines += ["", f"where the cost comes from ({max(CAGE2_LENGTHS)}-step episodes; every "
                  "setting's split is in the JSON):", format_costs(costs)]
    return "\n".join(lines)


def base_red(red: str) -> str | None:
    """The CAGE2 red a variant varies (wfrl.envs.reds), None for CAGE2's own."""
    spec = red_spec(red)
    return None if spec.cage2 else spec.base


def robustness_rows(res: dict) -> list[dict]:
    """Per variant setting of a result: its mean, se and the drop from its base red's mean at the
    same length (negative: the defence does worse), with the drop's se (independent episodes)."""
    by = {(r["red_agent"], r["steps"]): r for r in res["settings"]}
    out = []
    for r in res["settings"]:
        base = base_red(r["red_agent"])
        b = by.get((base, r["steps"])) if base else None
        if b is None:
            continue
        out.append({"red_agent": r["red_agent"], "base": base, "steps": r["steps"],
                    "mean": r["mean"], "se": r["se"], "base_mean": b["mean"],
                    "drop": round(r["mean"] - b["mean"], 4),
                    "drop_se": round(float(np.hypot(r["se"], b["se"])), 4)})
    return out


def format_robustness(res: dict) -> str:
    """The variants' rows of a result beside their base red's: the robustness table."""
    rows = robustness_rows(res)
    if not rows:
        return ""
    lines = ["", "against the variants (drop: the variant's mean minus its base red's, same "
             "length):", f"{'red agent':22s} {'steps':>5s} {'mean':>9s} {'± se':>6s} "
             f"{'base':>9s} {'drop':>8s} {'± se':>6s}"]
    for r in rows:
        lines.append(f"{r['red_agent']:22s} {r['steps']:5d} {r['mean']:9.2f} {r['se']:6.2f} "
                     f"{r['base_mean']:9.2f} {r['drop']:8.2f} {r['drop_se']:6.2f}")
    return "\n".join(lines)


def read_episodes(path) -> list[dict]:
    """The lines of an --episodes-out file (UserError naming the file and line if one is not an
    episode record)."""
    import json
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().splitlines()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file of wfrl eval --cage2 --episodes-out") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror})") from None
    out = []
    for i, line in enumerate(text, 1):
        try:
            rec = json.loads(line)
            ok = (isinstance(rec["backend"], str) and isinstance(rec["red_agent"], str)
                  and all(isinstance(rec[k], int) and not isinstance(rec[k], bool)
                          for k in ("steps", "episode", "env_seed"))
                  and isinstance(rec["return"], (int, float))
                  and not isinstance(rec["return"], bool))
            if not ok:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{path}, line {i}: not an episode record of wfrl eval --cage2 "
                            "--episodes-out") from None
        out.append(rec)
    if not out:
        raise UserError(f"{path}: no episodes")
    return out


def compare_episodes(path_a, path_b) -> dict:
    """Paired differences (A − B) per setting of two --episodes-out files, over the episodes both
    played (the same setting, episode number and env seed, on the same backend), with the
    paired standard error and, beside it, the unpaired one the two tables alone would give."""
    a, b = read_episodes(path_a), read_episodes(path_b)
    backends = {r["backend"] for r in a}, {r["backend"] for r in b}
    if backends[0] != backends[1]:
        raise UserError(f"{path_a} was played on {', '.join(sorted(backends[0]))}, {path_b} on "
                        f"{', '.join(sorted(backends[1]))}: not the same episodes")
    by_b = {(r["red_agent"], r["steps"], r["episode"]): r for r in b}
    settings: dict = {}
    for r in a:
        key = (r["red_agent"], r["steps"], r["episode"])
        other = by_b.get(key)
        if other is None:
            continue
        if other["env_seed"] != r["env_seed"]:
            raise UserError(f"episode {r['episode']} of {r['red_agent']}, {r['steps']} steps was "
                            f"played on different env seeds (different --seed): not pairable")
        settings.setdefault(key[:2], []).append((r["return"], other["return"]))
    if not settings:
        raise UserError(f"{path_a} and {path_b} share no episode (different --seed or settings)")
    order = {s: i for i, s in enumerate((red, n) for red in CAGE2_REDS for n in CAGE2_LENGTHS)}
    rows = []
    for (red, steps), pairs in sorted(settings.items(), key=lambda kv: order.get(kv[0], 99)):
        x = np.array(pairs, dtype=np.float64)
        d, n = x[:, 0] - x[:, 1], len(x)
        se = standard_error
        rows.append({"red_agent": red, "steps": steps, "n": n,
                     "mean_a": round(float(x[:, 0].mean()), 4),
                     "mean_b": round(float(x[:, 1].mean()), 4),
                     "diff": round(float(d.mean()), 4), "diff_se": round(se(d), 4),
                     "unpaired_se": round(float(np.hypot(se(x[:, 0]), se(x[:, 1]))), 4)})
    total_se = float(np.sqrt(sum(r["diff_se"] ** 2 for r in rows)))
    return {"a": str(path_a), "b": str(path_b), "backend": next(iter(backends[0])),
            "policy_a": a[0].get("policy"), "policy_b": b[0].get("policy"), "settings": rows,
            "total_diff": round(sum(r["diff"] for r in rows), 4),
            "total_diff_ci95": round(1.96 * total_se, 4),
            "unpaired_total_ci95": round(1.96 * float(np.sqrt(sum(
                r["unpaired_se"] ** 2 for r in rows))), 4)}


def format_comparison(res: dict) -> str:
    lines = [f"paired on {res['backend']}: A = {res['policy_a']} ({res['a']}), "
             f"B = {res['policy_b']} ({res['b']})",
             f"{'red agent':16s} {'steps':>5s} {'pairs':>6s} {'A':>8s} {'B':>8s} {'A - B':>8s} "
             f"{'± se':>6s} {'unpaired':>8s}"]
    for r in res["settings"]:
        lines.append(f"{r['red_agent']:16s} {r['steps']:5d} {r['n']:6d} {r['mean_a']:8.2f} "
                     f"{r['mean_b']:8.2f} {r['diff']:+8.2f} {r['diff_se']:6.2f} "
                     f"{r['unpaired_se']:8.2f}")
    lines.append(f"total of the {len(res['settings'])} differences: {res['total_diff']:+.2f} "
                 f"± {res['total_diff_ci95']:.2f} (95 %, paired; unpaired ± "
                 f"{res['unpaired_total_ci95']:.2f})")
    return "\n".join(lines)
