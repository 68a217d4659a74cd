"""The simulator through gymnasium's API, uniform-random blue vs B_lineAgent, one core:

  * the native vector env (wfrl.envs.make_vec, SAME_STEP autoreset so every call is n real
    env-steps, resets included) with 1, 64, 1024 and 4096 envs, returning fresh arrays (copy=True,
    the default) and its own buffers (copy=False); Cage2Sim.step_batch alone, for the C ceiling;
  * the single env through gymnasium.make("wfrl/CAGE2-v0") (its wrappers included), against real
    CybORG's ChallengeWrapper, which is what users drive without wfrl.

    .venv/bin/python -m pytest bench/test_bench_vec.py -s --benchmark-columns=median,mean,rounds

Actions are drawn beforehand (a table per size), so the figures are the env's cost alone.
Recorded only (machine-dependent): every env-steps/s figure. Asserted (ratios of things timed
interleaved on one core): test_vec_targets fails below 2,000x CybORG for the single env (the
margin: see bench/test_bench_sim.py) or when the vector env at 1,024 and 4,096 envs keeps less
than half of Cage2Sim.step_batch's rate (it keeps 0.8-0.9 on the development machine: a
per-step Python cost the size of the compiled step would halve it). The same test stores, in
its extra_info, the figures bench/compare.py reads: vec_env_vs_step_batch (4,096 envs) and
vec_env_per_core_vs_single_env (CPU times, so another process's load cancels).
"""
import os
import random
import time

import gymnasium
import numpy as np
import pytest
from wfrl._core import Cage2Sim

import wfrl.envs

SIZES = (1, 64, 1024, 4096)
STEPS = 100          # calls per round of the vector env
SINGLE_EPISODES = 20  # episodes per round of the single env
MIN_VEC_SHARE_OF_C = 0.5
MIN_SINGLE_SPEEDUP = 2000


# A planted slowdown for tests/test_bench_compare.py: WFRL_BENCH_PLANT=slow_vec makes every vector
# env step twice (on a twin env), the work per env-step doubled as a slower step function would.
PLANT = os.environ.get("WFRL_BENCH_PLANT")


class _Twice:
    def __init__(self, make, *args, **kwargs):
        self.env, self.twin = make(*args, **kwargs), make(*args, **kwargs)

    def reset(self):
        self.twin.reset()
        return self.env.reset()

    def step(self, a):
        self.twin.step(a)
        return self.env.step(a)


def _make_vec(*args, **kwargs):
    if PLANT == "slow_vec":
        return _Twice(wfrl.envs.make_vec, *args, **kwargs)
    return wfrl.envs.make_vec(*args, **kwargs)


class Vec:
    """The vector env stepped STEPS times per round with pre-drawn uniform-random actions."""

    def __init__(self, n, copy=True):
        self.n = n
        self.env = _make_vec(n, "B_lineAgent", 0, autoreset_mode="SameStep", copy=copy)
        self.env.reset()
        self.actions = np.random.default_rng(n).integers(0, 145, (STEPS, n)).astype(np.int32)

    def round(self):
        step = self.env.step
        for a in self.actions:
            step(a)

    @property
    def env_steps(self):
        return STEPS * self.n


class RawBatch:
    """Cage2Sim.step_batch alone (no autoreset, no gymnasium): the compiled ceiling."""

    def __init__(self, n):
        self.n = n
        self.sim = Cage2Sim(n, "B_lineAgent")
        self.obs = np.zeros((n, 52), np.float32)
        self.ra = np.zeros((n, 13), np.uint8)
        self.rew = np.zeros(n, np.float32)
        self.done = np.zeros(n, np.uint8)
        self.seeds = np.arange(n, dtype=np.uint64)
        self.actions = np.random.default_rng(n).integers(0, 145, (STEPS, n)).astype(np.int32)

    def round(self):
        self.sim.reset_batch(self.seeds, self.obs, self.ra)
        for a in self.actions:
            self.sim.step_batch(a, self.obs, self.rew, self.done, self.ra)

    @property
    def env_steps(self):
        return STEPS * self.n


class Single:
    """gymnasium.make("wfrl/CAGE2-v0"): reset + 100 steps per episode, SINGLE_EPISODES a round."""

    def __init__(self):
        self.env = gymnasium.make(wfrl.envs.ENV_ID, red_agent="B_lineAgent", seed=0)
        self.actions = np.random.default_rng(1).integers(0, 145, 100).tolist()

    def round(self):
        env, actions = self.env, self.actions
        for _ in range(SINGLE_EPISODES):
            env.reset()
            for a in actions:
                env.step(a)

    env_steps = 100 * SINGLE_EPISODES


class CybORG:
    """Real CybORG as users drive it: ChallengeWrapper, reset + 100 steps, one episode a round."""

    def __init__(self):
        from wfrl.envs.cyborg import challenge_env
        random.seed(0)
        self.env = challenge_env("B_lineAgent")
        self.rng = random.Random(1)

    def round(self):
        self.env.reset()
        for _ in range(100):
            self.env.step(self.rng.randrange(145))

    env_steps = 100


def _bench(benchmark, runner, group, rounds):
    benchmark.group = group
    benchmark.pedantic(runner.round, rounds=rounds, iterations=1, warmup_rounds=1)
    rate = runner.env_steps / benchmark.stats.stats.median
    benchmark.extra_info.update({"env_steps_per_round": runner.env_steps,
                                 "env_steps_per_s": rate})
    return rate


@pytest.mark.parametrize("n", SIZES)
def test_vec_env(benchmark, n):
    _bench(benchmark, Vec(n), "vector-env", max(5, min(200, 200_000 // (STEPS * n))))


@pytest.mark.parametrize("n", SIZES)
def test_vec_env_no_copy(benchmark, n):
    _bench(benchmark, Vec(n, copy=False), "vector-env-no-copy",
           max(5, min(200, 200_000 // (STEPS * n))))


@pytest.mark.parametrize("n", (1024, 4096))
def test_step_batch_alone(benchmark, n):
    _bench(benchmark, RawBatch(n), "vector-env-c-ceiling", 10)


def test_single_env_gymnasium_make(benchmark):
    _bench(benchmark, Single(), "single-env", 30)


def test_single_env_cyborg(benchmark):
    pytest.importorskip("csle_cyborg")
    _bench(benchmark, CybORG(), "single-env", 10)


def test_vec_targets(benchmark):
    """Everything in one interleaved loop; medians over the rounds after the warm-up."""
    pytest.importorskip("csle_cyborg")
    runners = {"cyborg": CybORG(), "single": Single()}
    for n in SIZES:
        runners[f"vec{n}"] = Vec(n)
        runners[f"vec{n}_nocopy"] = Vec(n, copy=False)
    runners["step_batch4096"] = RawBatch(4096)
    per_step = {k: [] for k in runners}

    def one_round():   # CPU time: another process's load on the machine does not count
        for name, r in runners.items():
            t = time.process_time()
            r.round()
            per_step[name].append((time.process_time() - t) / r.env_steps)

    benchmark.group = "vector-env-targets"
    benchmark.pedantic(one_round, rounds=15, iterations=1, warmup_rounds=1)
    med = {k: float(np.median(v[1:])) for k, v in per_step.items()}
    rate = {k: 1.0 / v for k, v in med.items()}
    speedup = med["cyborg"] / med["single"]
    benchmark.extra_info.update({f"{k}_env_steps_per_s": v for k, v in rate.items()})
    benchmark.extra_info["single_env_speedup_vs_cyborg"] = speedup
    # the figures bench/compare.py reads
    benchmark.extra_info["vec_env_vs_step_batch"] = rate["vec4096"] / rate["step_batch4096"]
    benchmark.extra_info["vec_env_per_core_vs_single_env"] = rate["vec4096"] / rate["single"]
    print(f"\nCybORG {med['cyborg'] * 1e6:,.0f} us/step; single env via gymnasium.make "
          f"{med['single'] * 1e9:,.0f} ns/step = {speedup:,.0f}x CybORG")
    for n in SIZES:
        print(f"vector env, {n:5d} envs: {rate[f'vec{n}'] / 1e6:6.2f} M env-steps/s (copy), "
              f"{rate[f'vec{n}_nocopy'] / 1e6:6.2f} M (no copy)")
    print(f"Cage2Sim.step_batch alone, 4096 envs: {rate['step_batch4096'] / 1e6:.2f} M env-steps/s")
    assert speedup >= MIN_SINGLE_SPEEDUP
    for n in (1024, 4096):
        share = rate[f"vec{n}"] / rate["step_batch4096"]
        assert share >= MIN_VEC_SHARE_OF_C, f"{n} envs: {share:.2f} of step_batch's rate"
