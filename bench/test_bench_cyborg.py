"""Cost of one CybORG episode: bare stepping vs wfrl's sequential collector with the policy in
the loop (backend adapter, RNG isolation, red_access read, and the compiled per-step actor: policy
forward, sampling, compliance, buffer writes).

    .venv/bin/python -m pytest bench/test_bench_cyborg.py --benchmark-columns=median,mean,stddev,rounds

Fixed seeds and sizes; the ratio test interleaves the two (A B A B …) so drifting machine speed
cancels, and fails if the collector costs more than 1.10× bare stepping; its inverse is the
figure "sequential_collector_vs_bare_cyborg" bench/compare.py reads from extra_info.
"""
import random
import time

import numpy as np
import pytest

from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
from wfrl.collect.rollout import make_policy, run_episodes
from wfrl.envs.cyborg import CybORGBackend, challenge_env
from wfrl.ppo.policy import ActorCritic
from wfrl.workflow import Workflow

pytestmark = pytest.mark.cyborg
MAX_RATIO = 1.10


class Bare:
    """What a user without wfrl runs: ChallengeWrapper, uniform random actions."""

    def __init__(self, red="B_lineAgent"):
        random.seed(0)
        self.env = challenge_env(red)
        self.rng = random.Random(1)

    def episode(self):
        self.env.reset()
        for _ in range(100):
            self.env.step(self.rng.randrange(145))


class Collector:
    """wfrl's sequential collector path for one episode, with a freshly initialised policy
    (near-uniform over the 145 actions, like the bare loop)."""

    def __init__(self, red="B_lineAgent"):
        import torch
        torch.manual_seed(0)
        self.backend = CybORGBackend(red, seed=0)
        self.policy = make_policy(ActorCritic(64).flat_weights(), 64, Workflow.parse("balanced"),
                                  1.0)
        self.buffer = compiled_buffer(allocate_trajectory(1, 100))
        self.i = 0

    def episode(self):
        self.buffer.clear()
        run_episodes(self.backend, self.policy, [self.i], 0, self.buffer)
        self.i += 1


def test_bare_cyborg_episode(benchmark):
    bare = Bare()
    benchmark.group = "cyborg-episode"
    benchmark.pedantic(bare.episode, rounds=20, iterations=1, warmup_rounds=2)


def test_sequential_collector_episode(benchmark):
    coll = Collector()
    benchmark.group = "cyborg-episode"
    benchmark.pedantic(coll.episode, rounds=20, iterations=1, warmup_rounds=2)


def test_collector_overhead_ratio(benchmark):
    bare, coll = Bare(), Collector()
    times = {"bare": [], "collector": []}

    def pair():   # CPU time: another process's load on the machine does not count
        for name, fn in (("bare", bare.episode), ("collector", coll.episode)):
            t = time.process_time()
            fn()
            times[name].append(time.process_time() - t)

    benchmark.group = "cyborg-overhead"
    benchmark.pedantic(pair, rounds=40, iterations=1, warmup_rounds=2)
    # Warm-up rounds are recorded too; drop them.
    a = np.array(times["bare"][2:])
    b = np.array(times["collector"][2:])
    # medians of the CPU time per episode: one slow episode (a scheduler slice, a busy
    # neighbour's cache) moves a sum, not a median
    ratio = float(np.median(b) / np.median(a))
    benchmark.extra_info.update({"bare_ms_per_episode": 1e3 * float(np.median(a)),
                                 "collector_ms_per_episode": 1e3 * float(np.median(b)),
                                 "ratio_collector_over_bare": ratio,
                                 # the figure bench/compare.py reads
                                 "sequential_collector_vs_bare_cyborg": 1.0 / ratio})
    print(f"\nbare {1e3 * np.median(a):.1f} ms/episode, collector {1e3 * np.median(b):.1f} "
          f"ms/episode, ratio {ratio:.3f}")
    assert ratio <= MAX_RATIO
