"""`wfrl bench collectors`: every collector on the same workload, next to the bare environment;
`wfrl bench train`: where a training run's time goes (collection, update, end to end with and
without overlap).

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
import os
import random
import time
from typing import Any, cast

from wfrl.collect.base import COLLECTORS, make_collector
from wfrl.envs.base import EP_LEN, backend_engine
from wfrl.workflow import Workflow

COLLECTOR_ORDER = COLLECTORS   # the order the benchmark reports them in


def bare_episodes_per_s(backend: str, red_agent: str, episodes: int) -> float:
    if backend_engine(backend) == "cyborg":
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
    """Largest resident memory of the collector's workers (processes or Ray actors)."""
    pids = collector.worker_pids() if hasattr(collector, "worker_pids") else []
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
    repeats = repeats or (1 if backend_engine(backend) == "cyborg" else 3)
    import torch

    from wfrl.ppo.policy import ActorCritic
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


# --------------------------------------------------------------------------------------------
# `wfrl bench train`: where a training run's time goes

def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def _e2e_rates(walls: dict, episodes: int) -> dict:
    """Each variant's end-to-end rate (median of its runs) and its runs' wall times."""
    out = {}
    for k, w in walls.items():
        out[f"e2e_{k}_episodes_per_s"] = episodes / _median(w)
        out[f"e2e_{k}_runs_s"] = [round(x, 3) for x in w]
    return out


def _train_walls(variants: dict, common: dict, repeats: int, say, before=None,
                 first_run: int = 1) -> dict:
    """Wall times of `wfrl train` runs (no periodic evaluation, each in a fresh directory), the
    variants alternated run by run `repeats` times: {variant: [seconds, ...]}. variants: name ->
    the TrainConfig settings of that variant; common: the settings all share. before(), if
    given, runs before each run. Runs are numbered from first_run in what is said."""
    import tempfile

    from wfrl.config.run import TrainConfig
    from wfrl.training.run import train
    walls: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(repeats):
        for k, settings in variants.items():
            if before is not None:
                before()
            with tempfile.TemporaryDirectory(prefix="wfrl-bench-") as d:
                cfg = TrainConfig(**common, **settings, eval_every=0, out=d)
                t = time.perf_counter()
                train(cfg, progress=lambda line: None)
                walls[k].append(time.perf_counter() - t)
            say(f"end to end, {k.replace('_', ' ')}, run {first_run + r}: "
                f"{common['total_episodes'] / walls[k][-1]:.0f} episodes/s")
    return walls


def bench_train(episodes_per_update: int = 50, batches: int = 12, e2e_episodes: int = 2000,
                repeats: int = 3, collector: str = "auto", n_workers: int = 2,
                red_agent: str = "B_lineAgent", seed: int = 0, progress=None,
                learner_threads: int = 1) -> dict:
    """In one run, on the simulator with the recipe's learner settings (memory block, mask, 6
    epochs of 4 minibatches):

    - collect: the collector alone, `batches` batches of episodes_per_update episodes with fixed
      weights (episodes/s);
    - update: building the batch and the PPO update alone, on recorded batches, for the default
      path (each network's minibatch step compiled, over the columns and actions in use, the
      actor's and the critic's steps on two threads), the same with torch's products and fused
      Adam (torch_steps: the hand-written backward), on one thread (one_thread), over every column
      and action (full_width), the autograd path it replaced, and the original one
      (to_batch with the Python memory twin, update_reference with masked_fill and unfused
      Adam), and the default learner on torch's public path (WFRL_TORCH_PUBLIC=1: opt.step(),
      clip_grad_norm_, no split), alternated batch by batch (episodes/s of each, and the ratios);
      the first two on learner_threads torch threads (a run's --learner-threads), the others on every CPU this
      process may use (reference_threads; torch's default where OMP_NUM_THREADS is unset), as
      they ran before that setting existed;
    - end_to_end: `wfrl train --workflow critical_first` with and without --overlap on
      e2e_episodes episodes, alternated run by run, `repeats` times (median episodes/s, the
      wall time including start-up).
    Medians everywhere: the machine's speed drifts between runs, alternating keeps the
    comparisons fair."""
    import numpy as np
    import torch

    from wfrl.config.run import PPOConfig, preset_settings, resolve_collector
    from wfrl.ppo.batch import to_batch
    from wfrl.ppo.learner import PPOLearner

    say = progress or (lambda line: None)
    collector = resolve_collector(collector)
    _, ppo_preset = preset_settings("recipe")
    ppo = PPOConfig(**ppo_preset)
    net = ppo.net()
    wf = Workflow.parse("critical_first")
    cond = np.tile(wf.onehot(), (episodes_per_update, 1))
    out: dict[str, Any] = {"collector": collector, "n_workers": n_workers, "episodes_per_update":
                           episodes_per_update, "torch_threads": torch.get_num_threads(),
                           "cpu_count": os.cpu_count()}

    # collect only, and a store of recorded batches for the update
    learner = PPOLearner(ppo, seed=seed)
    c = make_collector(collector, "sim", red_agent, net, seed, 30.0, False, n_workers,
                       episodes_per_update)
    recorded = []
    try:
        c.collect(learner.flat_weights(), 0, wf, 0, episodes_per_update)   # warm-up
        collect_times: list[float] = []
        for b in range(batches):
            t = time.perf_counter()
            c.collect(learner.flat_weights(), 0, wf, (b + 1) * episodes_per_update,
                      episodes_per_update)
            collect_times.append(time.perf_counter() - t)
            if b < 3:
                # (Any: the collector's buffer, a wfrl._core.TrajectoryBuffer)
                recorded.append({k: v.copy() for k, v in cast(Any, c.buffer).arrays.items()})
        buffer: Any = c.buffer
        out["collect_episodes_per_s"] = episodes_per_update / _median(collect_times)
        say(f"collect only ({collector} x{n_workers}): "
            f"{out['collect_episodes_per_s']:.0f} episodes/s")

        # update only: batch building + PPO update, default vs original path, alternated; the
        # default and full-width paths on the learner's threads (--learner-threads, 1), the
        # autograd and original ones on every core, as they used to run (`python -m wfrl` sets
        # OMP_NUM_THREADS=1, so torch's default is no longer every core there)
        mine, theirs = learner_threads, len(os.sched_getaffinity(0))
        out["learner_threads"], out["reference_threads"] = mine, theirs
        os.environ["WFRL_TORCH_PUBLIC"] = "1"    # torch's public path (wfrl.ppo.optim)
        try:
            public = PPOLearner(ppo, seed=seed)
        finally:
            del os.environ["WFRL_TORCH_PUBLIC"]
        paths = {"default": (PPOLearner(ppo, seed=seed), False, mine),
                 "public_torch": (public, False, mine),
                 "torch_steps": (PPOLearner(ppo, seed=seed, compiled=False), False, mine),
                 "one_thread": (PPOLearner(ppo, seed=seed, split=False), False, mine),
                 "full_width": (PPOLearner(ppo, seed=seed, compact=False), False, mine),
                 "autograd": (PPOLearner(ppo, seed=seed, manual=False), False, theirs),
                 "original": (PPOLearner(ppo, seed=seed, reference=True), True, theirs)}
        times: dict[str, list[float]] = {name: [] for name in paths}
        for b in range(batches):
            for name, (lrn, reference, threads) in paths.items():
                torch.set_num_threads(threads)
                for k, v in recorded[b % len(recorded)].items():
                    buffer.arrays[k][...] = v
                t = time.perf_counter()
                batch = to_batch(buffer, cond, ppo.gamma, ppo.gae_lambda, net,
                                 reference=reference)
                lrn.update(batch)
                times[name].append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(out["torch_threads"])
        c.close()
    for name in paths:
        out[f"update_{name}_episodes_per_s"] = episodes_per_update / _median(times[name])
    out["update_speedup"] = out["update_default_episodes_per_s"] / \
        out["update_original_episodes_per_s"]
    out["update_speedup_over_autograd"] = out["update_default_episodes_per_s"] / \
        out["update_autograd_episodes_per_s"]
    out["update_speedup_over_full_width"] = out["update_default_episodes_per_s"] / \
        out["update_full_width_episodes_per_s"]
    out["update_speedup_over_one_thread"] = out["update_default_episodes_per_s"] / \
        out["update_one_thread_episodes_per_s"]
    out["update_speedup_over_torch_steps"] = out["update_default_episodes_per_s"] / \
        out["update_torch_steps_episodes_per_s"]
    out["update_speedup_over_public_torch"] = out["update_default_episodes_per_s"] / \
        out["update_public_torch_episodes_per_s"]
    say(f"update only: {out['update_default_episodes_per_s']:.0f} episodes/s (original path "
        f"{out['update_original_episodes_per_s']:.0f}: {out['update_speedup']:.2f}x; autograd "
        f"path {out['update_autograd_episodes_per_s']:.0f}: "
        f"{out['update_speedup_over_autograd']:.2f}x; full width "
        f"{out['update_full_width_episodes_per_s']:.0f}: "
        f"{out['update_speedup_over_full_width']:.2f}x; actor and critic on one thread "
        f"{out['update_one_thread_episodes_per_s']:.0f}: "
        f"{out['update_speedup_over_one_thread']:.2f}x; torch's steps "
        f"{out['update_torch_steps_episodes_per_s']:.0f}: "
        f"{out['update_speedup_over_torch_steps']:.2f}x; torch's public path "
        f"{out['update_public_torch_episodes_per_s']:.0f}: "
        f"{out['update_speedup_over_public_torch']:.2f}x)")

    # end to end, with and without overlap, alternated
    walls = _train_walls({"no_overlap": {"overlap": False, "ppo": ppo},
                          "overlap": {"overlap": True, "ppo": ppo}},
                         dict(workflow=str(wf), collector=collector, n_workers=n_workers,
                              red_agent=red_agent, total_episodes=e2e_episodes,
                              episodes_per_update=episodes_per_update, seed=seed),
                         repeats, say, before=lambda: torch.set_num_threads(out["torch_threads"]))
    torch.set_num_threads(out["torch_threads"])
    for key in ("overlap", "no_overlap"):
        out[f"e2e_{key}_episodes_per_s"] = e2e_episodes / _median(walls[key])
        out[f"e2e_{key}_runs_s"] = [round(w, 3) for w in walls[key]]
    out["overlap_speedup"] = out["e2e_overlap_episodes_per_s"] / \
        out["e2e_no_overlap_episodes_per_s"]
    say(f"end to end: {out['e2e_overlap_episodes_per_s']:.0f} episodes/s with overlap, "
        f"{out['e2e_no_overlap_episodes_per_s']:.0f} without: {out['overlap_speedup']:.2f}x")
    return out


def bench_belief_train(particles: int = 32, episodes_per_update: int = 200, batches: int = 8,
                       e2e_episodes: int = 4000, repeats: int = 3, collector: str = "sequential",
                       n_workers: int = 2, red_agent: str = "mixed", seed: int = 0,
                       progress=None) -> dict:
    """What the belief input costs a training run, in one run, on the simulator with the
    recipe's learner settings (memory block, mask): the same training with and without the
    belief block of `particles` particles —

    - collect: the collector alone, `batches` batches of episodes_per_update episodes each, the
      two networks alternated batch by batch (episodes/s);
    - end_to_end: `wfrl train --workflow critical_first` on e2e_episodes episodes (overlap on,
      as a run trains), the two alternated run by run, `repeats` times (median episodes/s, the
      wall time including start-up).
    belief_vs_plain is the end-to-end ratio; collect_belief_vs_plain the collect-only one."""
    from wfrl.config.run import PPOConfig, preset_settings, resolve_collector
    from wfrl.ppo.learner import PPOLearner

    say = progress or (lambda line: None)
    collector = resolve_collector(collector)
    _, ppo_preset = preset_settings("recipe")
    ppos = {"plain": PPOConfig(**ppo_preset),
            "belief": PPOConfig(**{**ppo_preset, "belief_input": particles})}
    wf = Workflow.parse("critical_first")
    out: dict[str, Any] = {"collector": collector, "n_workers": n_workers, "particles": particles,
                           "episodes_per_update": episodes_per_update, "red_agent": red_agent}
    collectors = {k: make_collector(collector, "sim", red_agent, p.net(), seed, 30.0, False,
                                    n_workers, episodes_per_update) for k, p in ppos.items()}
    weights = {k: PPOLearner(p, seed=seed).flat_weights() for k, p in ppos.items()}
    times: dict[str, list[float]] = {k: [] for k in ppos}
    try:
        for b in range(batches + 1):          # the first round warms up
            for k, c in collectors.items():
                t = time.perf_counter()
                c.collect(weights[k], 0, wf, b * episodes_per_update, episodes_per_update)
                if b:
                    times[k].append(time.perf_counter() - t)
    finally:
        for c in collectors.values():
            c.close()
    for k in ppos:
        out[f"collect_{k}_episodes_per_s"] = episodes_per_update / _median(times[k])
    out["collect_belief_vs_plain"] = out["collect_belief_episodes_per_s"] / \
        out["collect_plain_episodes_per_s"]
    say(f"collect only ({collector}): {out['collect_plain_episodes_per_s']:.0f} episodes/s "
        f"without the belief, {out['collect_belief_episodes_per_s']:.0f} with {particles} "
        f"particles: {out['collect_belief_vs_plain']:.2f}x")
    walls = _train_walls({k: {"ppo": ppo} for k, ppo in ppos.items()},
                         dict(workflow=str(wf), collector=collector, n_workers=n_workers,
                              red_agent=red_agent, total_episodes=e2e_episodes,
                              episodes_per_update=episodes_per_update, seed=seed),
                         repeats, say)
    out.update(_e2e_rates(walls, e2e_episodes))
    out["belief_vs_plain"] = out["e2e_belief_episodes_per_s"] / out["e2e_plain_episodes_per_s"]
    say(f"end to end: {out['e2e_plain_episodes_per_s']:.0f} episodes/s without the belief, "
        f"{out['e2e_belief_episodes_per_s']:.0f} with it: {out['belief_vs_plain']:.2f}x")
    return out


def bench_privileged_train(teacher: str | None, episodes_per_update: int = 200,
                           e2e_episodes: int = 4000, repeats: int = 3,
                           collector: str = "auto", n_workers: int = 2,
                           red_agent: str = "mixed", seed: int = 0, progress=None) -> dict:
    """What the privileged routes (wfrl.ppo.privileged) cost a training run, in one run, on the
    simulator with the recipe's learner settings: `wfrl train --workflow critical_first` on
    e2e_episodes episodes with the recipe alone, with --privileged-critic, and (given a teacher)
    with --teacher and with both, and the cheaper forms (_fast: --privileged-epochs 2,
    --teacher-steps 1), alternated run by run `repeats` times (median episodes/s, the wall time
    including start-up). ROUTE_vs_recipe is each route's end-to-end ratio. The
    teacher's weight is annealed as in a run (to 0 over the first 70 %)."""
    from wfrl.config.run import PPOConfig, preset_settings, resolve_collector
    from wfrl.training.steps import load_teacher
    if teacher is not None:
        load_teacher(teacher, "sim")     # a bad teacher is said before any run
    say = progress or (lambda line: None)
    collector = resolve_collector(collector)
    _, ppo_preset = preset_settings("recipe")
    routes: dict[str, dict[str, Any]] = {"recipe": {}, "pcritic": {"privileged_critic": True}}
    fast = {"privileged_critic": True, "privileged_epochs": 2}
    routes["pcritic_fast"] = fast
    if teacher is not None:
        routes.update(teacher={"teacher": teacher},
                      pcritic_teacher={"privileged_critic": True, "teacher": teacher},
                      pcritic_teacher_fast={**fast, "teacher": teacher, "teacher_steps": 1})
    wf = Workflow.parse("critical_first")
    walls = _train_walls({k: {"ppo": PPOConfig(**{**ppo_preset, **r})} for k, r in routes.items()},
                         dict(workflow=str(wf), collector=collector, n_workers=n_workers,
                              red_agent=red_agent, total_episodes=e2e_episodes,
                              episodes_per_update=episodes_per_update, seed=seed),
                         repeats, say)
    out: dict[str, Any] = {"collector": collector, "n_workers": n_workers, "teacher": teacher,
                           "episodes_per_update": episodes_per_update, "red_agent": red_agent,
                           "e2e_episodes": e2e_episodes}
    out.update(_e2e_rates(walls, e2e_episodes))
    for k in routes:
        if k != "recipe":
            out[f"{k}_vs_recipe"] = out[f"e2e_{k}_episodes_per_s"] / \
                out["e2e_recipe_episodes_per_s"]
            say(f"end to end, {k}: {out[f'{k}_vs_recipe']:.2f}x the recipe")
    return out



def bench_attack_train(defender: str = "pretrained:critical_first",
                       episodes_per_update: int = 200, e2e_episodes: int = 4000,
                       repeats: int = 3, collector: str = "auto", n_workers: int = 2,
                       seed: int = 0, progress=None) -> dict:
    """Red's training against blue's, side by side in one run on the simulator: `wfrl attack`
    against `defender` (red's default settings, its batch played on 2 threads) and the blue
    recipe's `wfrl train --workflow critical_first --red-agent mixed` (its collector and
    workers), each on e2e_episodes episodes of episodes_per_update per update, alternated run by
    run `repeats` times (median episodes/s, wall time with start-up; red's run without its
    periodic evaluations, its final score on one episode). red_vs_recipe is red's end-to-end
    rate over blue's."""
    import tempfile

    from wfrl.config.duel import ATTACK_PPO, AttackConfig
    from wfrl.config.run import PPOConfig, preset_settings, resolve_collector
    from wfrl.training.attack import attack, load_defender
    load_defender(defender, None)     # a bad defender is said before any run
    say = progress or (lambda line: None)
    collector = resolve_collector(collector)
    _, ppo_preset = preset_settings("recipe")
    blue = {"ppo": PPOConfig(**ppo_preset)}
    walls: dict = {"recipe": [], "red": []}
    for r in range(repeats):
        walls["recipe"] += _train_walls(
            {"recipe": blue}, dict(workflow="critical_first", collector=collector,
                                   n_workers=n_workers, red_agent="mixed",
                                   total_episodes=e2e_episodes,
                                   episodes_per_update=episodes_per_update, seed=seed),
            1, say, first_run=r + 1)["recipe"]
        with tempfile.TemporaryDirectory(prefix="wfrl-bench-") as d:
            cfg = AttackConfig(checkpoint=defender, total_episodes=e2e_episodes,
                               episodes_per_update=episodes_per_update, eval_every=0,
                               eval_episodes=1, seed=seed, out=d,
                               ppo=PPOConfig(**ATTACK_PPO))
            t = time.perf_counter()
            attack(cfg, progress=lambda line: None)
            walls["red"].append(time.perf_counter() - t)
        say(f"end to end, red against {defender}, run {r + 1}: "
            f"{e2e_episodes / walls['red'][-1]:.0f} episodes/s")
    out: dict[str, Any] = {"defender": defender, "collector": collector, "n_workers": n_workers,
                           "episodes_per_update": episodes_per_update,
                           "e2e_episodes": e2e_episodes}
    out.update(_e2e_rates(walls, e2e_episodes))
    out["red_vs_recipe"] = out["e2e_red_episodes_per_s"] / out["e2e_recipe_episodes_per_s"]
    say(f"end to end: red {out['e2e_red_episodes_per_s']:.0f} episodes/s, the blue recipe "
        f"{out['e2e_recipe_episodes_per_s']:.0f}: {out['red_vs_recipe']:.2f}x")
    return out
