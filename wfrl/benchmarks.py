"""`wfrl bench collectors`: every collector on the same workload, next to the bare environment.

Each collector is built, warmed up (workers started, CybORG imported), then timed on collecting
`episodes` episodes with a fixed policy into its buffer (no learning). The bare rate is one
process stepping the environment with uniform random actions and nothing else: ChallengeWrapper
for CybORG, the compiled simulator's C loop for sim. efficiency = episodes/s ÷ (workers × bare
episodes/s) — on the simulator the policy forward pass, not the environment, is the cost, so
there the ratio to the sequential collector is the figure to read. The Ray collector's start-up
(its private Ray instance and actors) counts in startup_s, not in the timed part; it is left out
when Ray is not installed.
"""
from __future__ import annotations

import importlib.util
import random
import time


from wfrl.collect.base import make_collector
from wfrl.envs.base import EP_LEN
from wfrl.workflow import Workflow

COLLECTOR_ORDER = ("sequential", "sync", "async", "ray")


def bare_episodes_per_s(backend: str, red_agent: str, episodes: int) -> float:
    if backend == "cyborg":
        from wfrl.envs.cyborg import challenge_env
        env = challenge_env(red_agent)
        rng = random.Random(0)
        env.reset()
        t = time.perf_counter()
        for _ in range(episodes):
            env.reset()
            for _ in range(EP_LEN):
                env.step(rng.randrange(145))
        return episodes / (time.perf_counter() - t)
    from wfrl._core import Cage2Sim
    sim = Cage2Sim(1, red_agent)
    steps = max(episodes, 1000) * EP_LEN
    t = time.perf_counter()
    sim.random_rollout(0, steps, 1)
    return steps / EP_LEN / (time.perf_counter() - t)


def _worker_rss_mb(collector) -> float | None:
    pids = [p.pid for p in getattr(collector, "procs", [])]
    pool = getattr(collector, "pool", None)
    if pool is not None:
        pids = [p.pid for p in getattr(pool, "_processes", {}).values()]
    if hasattr(collector, "worker_pids"):  # Ray: the actors' processes
        pids = collector.worker_pids()
    rss = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                rss += [int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:")]
        except OSError:
            pass
    return round(max(rss), 1) if rss else None


def bench_collectors(backend: str, n_workers: int, episodes: int, red_agent: str = "B_lineAgent",
                     collectors=COLLECTOR_ORDER, hidden: int = 64, seed: int = 0,
                     repeats: int | None = None, progress=None) -> list[dict]:
    """Each collector's best of `repeats` timed collections (default: 3 on the simulator, where a
    run takes about a second and the machine's noise matters, 1 on CybORG)."""
    repeats = repeats or (1 if backend == "cyborg" else 3)
    from wfrl.ppo.policy import ActorCritic
    import torch
    torch.manual_seed(seed)
    weights = ActorCritic(hidden).flat_weights()
    wf = Workflow.parse("balanced")
    bare = bare_episodes_per_s(backend, red_agent, max(4, episodes // 4))
    results = [{"collector": "bare-env", "n_workers": 1, "episodes_per_s": bare,
                "steps_per_s": bare * EP_LEN, "efficiency": 1.0}]
    for name in collectors:
        if name == "ray" and importlib.util.find_spec("ray") is None:
            continue  # the optional extra is not installed: nothing to compare
        workers = 1 if name == "sequential" else n_workers
        t0 = time.perf_counter()
        c = make_collector(name, backend, red_agent, hidden, seed, 1.0, False, workers, episodes)
        try:
            c.collect(weights, 0, wf, 0, min(episodes, 2 * workers))  # warm-up: workers ready
            startup = time.perf_counter() - t0
            dt = float("inf")
            for r in range(repeats):
                t = time.perf_counter()
                stats = c.collect(weights, 1 + r, wf, 10_000, episodes)
                dt = min(dt, time.perf_counter() - t)
                assert len(stats) == episodes
            rss = _worker_rss_mb(c)
        finally:
            c.close()
        eps = episodes / dt
        row = {"collector": name, "n_workers": workers, "episodes_per_s": eps,
               "steps_per_s": eps * EP_LEN, "efficiency": eps / (workers * bare),
               "startup_s": round(startup, 3), "worker_rss_mb": rss, "repeats": repeats}
        results.append(row)
        if progress:
            progress(row)
    return results
