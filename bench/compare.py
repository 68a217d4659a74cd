"""Benchmark regressions against a committed baseline of machine-independent figures.

    .venv/bin/python bench/compare.py --fast            # the fast subset (.ci/run runs it)
    .venv/bin/python bench/compare.py                   # every figure (needs two idle cores)
    .venv/bin/python bench/compare.py --results R.json  # compare figures measured before
    .venv/bin/python bench/compare.py --fast --save R.json   # also write what was measured

Every figure is a ratio of the CPU times of two things measured in the same process, interleaved
round by round (A B A B ...), so the speed of the machine, its drift and other processes' load
cancel; all are "higher is better". A
figure regresses when it falls below its baseline × (1 − tolerance) in two measurements (a
figure below its floor is measured once more, and the better of the two is compared); the baseline file
(bench/baseline.json) gives each figure's value, tolerance and the reason for that tolerance.
Exit status: 0 no regression, 1 at least one (each named on its own line), 2 bad input.
docs/benchmark-regressions.md describes the figures, the baseline and how to renew it.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

BASELINE = Path(__file__).with_name("baseline.json")


def _interleave(runners: dict, rounds: int, warmup: int = 1) -> dict:
    """Median CPU seconds per unit of work of each runner over `rounds` interleaved rounds.
    runners: name -> (callable doing one round, units of work per round). Every workload here
    runs on the calling thread, so the process's CPU time is its cost; unlike the wall time it
    does not count the time other processes had the core (on a busy machine the wall-time ratio of
    a short and a long round depends on how the scheduler slices them)."""
    per_unit = {k: [] for k in runners}
    for r in range(warmup + rounds):
        for name, (fn, units) in runners.items():
            t = time.process_time()
            fn()
            if r >= warmup:
                per_unit[name].append((time.process_time() - t) / units)
    return {k: float(np.median(v)) for k, v in per_unit.items()}


# ------------------------------------------------------------------------------- the workloads
class _CybORGRandom:
    """Real CybORG as users drive it: ChallengeWrapper, reset + 100 uniform-random steps."""

    def __init__(self):
        from wfrl.envs.cyborg import challenge_env
        random.seed(0)
        self.env = challenge_env("B_lineAgent")
        self.rng = random.Random(1)

    def episode(self):
        self.env.reset()
        for _ in range(100):
            self.env.step(self.rng.randrange(145))


class _VecEnv:
    """The native vector env, `steps` calls with pre-drawn uniform-random actions."""

    def __init__(self, n, steps=50, make_vec=None):
        import wfrl.envs
        make_vec = make_vec or wfrl.envs.make_vec
        self.env = make_vec(n, "B_lineAgent", 0, autoreset_mode="SameStep")
        self.env.reset()
        self.actions = np.random.default_rng(n).integers(0, 145, (steps, n)).astype(np.int32)

    def round(self):
        step = self.env.step
        for a in self.actions:
            step(a)


class _StepBatch:
    """Cage2Sim.step_batch alone, the compiled ceiling of the vector env."""

    def __init__(self, n, steps=50):
        from wfrl._core import Cage2Sim
        self.sim = Cage2Sim(n, "B_lineAgent")
        self.obs = np.zeros((n, 52), np.float32)
        self.ra = np.zeros((n, 13), np.uint8)
        self.rew = np.zeros(n, np.float32)
        self.done = np.zeros(n, np.uint8)
        self.seeds = np.arange(n, dtype=np.uint64)
        self.actions = np.random.default_rng(n).integers(0, 145, (steps, n)).astype(np.int32)

    def round(self):
        self.sim.reset_batch(self.seeds, self.obs, self.ra)
        for a in self.actions:
            self.sim.step_batch(a, self.obs, self.rew, self.done, self.ra)


class _SingleGym:
    """gymnasium.make("wfrl/CAGE2-v0"): reset + 100 steps per episode."""

    def __init__(self, episodes=10):
        import gymnasium

        import wfrl.envs
        self.env = gymnasium.make(wfrl.envs.ENV_ID, red_agent="B_lineAgent", seed=0)
        self.actions = np.random.default_rng(1).integers(0, 145, 100).tolist()
        self.episodes = episodes

    def round(self):
        for _ in range(self.episodes):
            self.env.reset()
            for a in self.actions:
                self.env.step(a)


class _SequentialCollector:
    """wfrl's sequential collector on CybORG, one episode a round, a fresh (near-uniform) policy."""

    def __init__(self):
        import torch

        from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
        from wfrl.collect.rollout import make_policy
        from wfrl.envs.cyborg import CybORGBackend
        from wfrl.ppo.policy import ActorCritic
        from wfrl.workflow import Workflow
        torch.manual_seed(0)
        self.backend = CybORGBackend("B_lineAgent", seed=0)
        self.policy = make_policy(ActorCritic(64).flat_weights(), 64, Workflow.parse("balanced"),
                                  1.0)
        self.buffer = compiled_buffer(allocate_trajectory(1, 100))
        self.i = 0

    def episode(self):
        from wfrl.collect.rollout import run_episodes
        self.buffer.clear()
        run_episodes(self.backend, self.policy, [self.i], 0, self.buffer)
        self.i += 1


# ------------------------------------------------------------------------------- the figures
SIM_STEPS = 100_000
VEC_N = 4096


def sim_vs_cyborg_step(rounds=6):
    """CybORG's seconds per step ÷ the simulator's (one env, the C loop)."""
    from wfrl._core import Cage2Sim
    cy, sim = _CybORGRandom(), Cage2Sim(1, "B_lineAgent")
    t = _interleave({"cyborg": (cy.episode, 100),
                     "sim": (lambda: sim.random_rollout(0, SIM_STEPS, 7), SIM_STEPS)}, rounds)
    return t["cyborg"] / t["sim"]


def vec_env_vs_step_batch(rounds=8, make_vec=None):
    """The vector env's env-steps/s at 4096 envs ÷ Cage2Sim.step_batch's alone (one core):
    what the gymnasium layer keeps of the compiled ceiling."""
    vec, raw = _VecEnv(VEC_N, make_vec=make_vec), _StepBatch(VEC_N)
    t = _interleave({"vec": (vec.round, 50 * VEC_N), "raw": (raw.round, 50 * VEC_N)}, rounds)
    return t["raw"] / t["vec"]


def vec_env_per_core_vs_single_env(rounds=8):
    """The vector env's env-steps/s on one core at 4096 envs ÷ the single env's through
    gymnasium.make: what batching buys per core."""
    vec, single = _VecEnv(VEC_N), _SingleGym()
    t = _interleave({"vec": (vec.round, 50 * VEC_N), "single": (single.round, 1000)}, rounds)
    return t["single"] / t["vec"]


def sequential_collector_vs_bare_cyborg(rounds=8):
    """Bare CybORG stepping's seconds per episode ÷ the sequential collector's with the policy in
    the loop (its efficiency; 1 = the collector costs nothing beyond CybORG)."""
    bare, coll = _CybORGRandom(), _SequentialCollector()
    t = _interleave({"bare": (bare.episode, 1), "coll": (coll.episode, 1)}, rounds)
    return t["bare"] / t["coll"]


def _collectors_cyborg():
    from wfrl.benchmarks import bench_collectors
    rows = {r["collector"]: r for r in bench_collectors("cyborg", 2, 40, collectors=("sync",
                                                                                  "async"))}
    return {"collector_efficiency_sync_cyborg_2w": rows["sync"]["efficiency"],
            "collector_efficiency_async_cyborg_2w": rows["async"]["efficiency"]}


def _update():
    from wfrl.benchmarks import bench_train
    from wfrl.ppo.learner import COMPILED_FAST
    out = bench_train(batches=8, e2e_episodes=200, repeats=1)
    res = {"update_default_vs_original": out["update_speedup"],
           "update_default_vs_autograd": out["update_speedup_over_autograd"]}
    if COMPILED_FAST:    # the compiled step runs only where AVX-512 is
        res["update_compiled_vs_torch_steps"] = out["update_speedup_over_torch_steps"]
    return res


# name -> (function returning {figure: value}, in the fast subset)
GROUPS = {
    "sim_vs_cyborg_step": (lambda: {"sim_vs_cyborg_step": sim_vs_cyborg_step()}, True),
    "vec_env_vs_step_batch": (lambda: {"vec_env_vs_step_batch": vec_env_vs_step_batch()}, True),
    "vec_env_per_core_vs_single_env": (
        lambda: {"vec_env_per_core_vs_single_env": vec_env_per_core_vs_single_env()}, True),
    "sequential_collector_vs_bare_cyborg": (
        lambda: {"sequential_collector_vs_bare_cyborg": sequential_collector_vs_bare_cyborg()},
        True),
    "collectors_cyborg": (_collectors_cyborg, False),
    "update": (_update, False),
}


def measure(fast: bool = True, progress=print, only=None, groups_of=None) -> dict:
    """Measure the groups (the fast subset with `fast`; only the groups named in `only`, if
    given). groups_of, a dict if given, receives figure -> the group that measured it."""
    out = {}
    for name, (fn, in_fast) in GROUPS.items():
        if (fast and not in_fast) or (only is not None and name not in only):
            continue
        t = time.perf_counter()
        got = fn()
        out.update(got)
        if groups_of is not None:
            groups_of.update({k: name for k in got})
        if progress:
            progress(f"  measured {', '.join(f'{k} {v:.3g}' for k, v in got.items())} "
                     f"({time.perf_counter() - t:.0f} s)")
    return out


def below_floor(baseline: dict, results: dict) -> list[str]:
    return [n for n, v in results.items() if n in baseline and
            v < float(baseline[n]["value"]) * (1.0 - float(baseline[n]["tolerance"]))]


def confirm(baseline: dict, results: dict, groups_of: dict, remeasure=None,
            progress=print) -> dict:
    """Measure once more every group with a figure below its floor and keep, per figure, the
    better of its two measurements: on a shared machine timing noise only ever slows a figure
    down (a busy neighbour, a scheduler slice), so a real regression shows in both measurements
    and a passing disturbance in one. groups_of: figure -> group (from measure);
    remeasure(groups) -> {figure: value} (default: measure those groups again)."""
    low = below_floor(baseline, results)
    if not low:
        return results
    remeasure = remeasure or (lambda groups: measure(fast=False, progress=progress, only=groups))
    again = remeasure({groups_of[n] for n in low})
    out = dict(results)
    for n in low:
        if n in again:
            if progress:
                progress(f"  {n} below its floor: measured again, {out[n]:.3g} then {again[n]:.3g}")
            out[n] = max(out[n], again[n])
    return out


# ------------------------------------------------------------------------------- the comparison
def load_baseline(path=BASELINE) -> dict:
    try:
        data = json.loads(Path(path).read_text())
        figs = data["figures"]
        for name, f in figs.items():
            if not (float(f["value"]) > 0 and 0 <= float(f["tolerance"]) < 1):
                raise ValueError(name)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"compare: error: bad baseline {path}: {e}") from None
    return figs


def compare(baseline: dict, results: dict) -> tuple[list[str], list[str]]:
    """(report lines, regression lines). A figure of the baseline that was measured regresses
    below value × (1 − tolerance); figures measured but not in the baseline are reported only."""
    lines, regressions = [], []
    for name, value in results.items():
        if name not in baseline:
            lines.append(f"  {name:40s} {value:10.3f}   (not in the baseline)")
            continue
        b = baseline[name]
        floor = float(b["value"]) * (1.0 - float(b["tolerance"]))
        ok = value >= floor
        lines.append(f"  {name:40s} {value:10.3f}   baseline {float(b['value']):10.3f}   "
                     f"floor {floor:10.3f}   {'ok' if ok else 'REGRESSION'}")
        if not ok:
            regressions.append(f"regression: {name} = {value:.3f} < {floor:.3f} (baseline "
                               f"{float(b['value']):.3f} - {100 * float(b['tolerance']):.0f} %)")
    return lines, regressions


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/compare.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--fast", action="store_true", help="only the fast subset")
    p.add_argument("--baseline", default=str(BASELINE), help="baseline JSON")
    p.add_argument("--results", help="compare figures from this JSON ({name: value}) instead "
                                     "of measuring")
    p.add_argument("--save", help="write the measured figures to this JSON")
    a = p.parse_args(argv)
    baseline = load_baseline(a.baseline)
    if a.results:
        try:
            results = {k: float(v) for k, v in json.loads(Path(a.results).read_text()).items()}
        except (OSError, ValueError, AttributeError) as e:
            print(f"compare: error: bad results {a.results}: {e}", file=sys.stderr)
            return 2
    else:
        t = time.perf_counter()
        groups_of = {}
        results = confirm(baseline, measure(fast=a.fast, groups_of=groups_of), groups_of)
        print(f"measured in {time.perf_counter() - t:.0f} s")
    if a.save:
        Path(a.save).write_text(json.dumps(results, indent=1) + "\n")
    lines, regressions = compare(baseline, results)
    print("\n".join(lines))
    for r in regressions:
        print(r)
    if not regressions:
        print(f"no regression ({len(results)} figures)")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
