"""Rollout entry points shared by every collector (torch-free: workers import this module).

Per episode, the compiled loop (csrc/wfrl_rollout.h) does everything but the env step of CybORG:
policy forward from the flat weights, action sampling from the episode's own xoshiro stream,
compliance and alignment, and the writes into a buffer row. On the simulator the env step is
compiled too, so whole episodes run in C without the GIL. run_episode_reference is the plain
Python twin that tests hold the compiled loop to.
"""
from __future__ import annotations

import numpy as np

from wfrl.collect.stats import EpisodeStats
from wfrl.envs.base import EP_LEN, OBS_DIM
from wfrl.features import (
    BELIEF_DIM,
    MASKED_LOGIT,
    ROLLOUT_BELIEF_STREAM,
    TRUTH_DIM,
    MemoryTracker,
    ParticleFilterReference,
    truth_features,
)
from wfrl.ppo.netspec import NumpyPolicy, as_netspec
from wfrl.rng import Xoshiro256, episode_seeds
from wfrl.workflow import ComplianceTracker, Workflow


def make_policy(weights: np.ndarray, net, workflow: Workflow, lam: float,
                count_foothold: bool = False, greedy: bool = False):
    """The compiled Policy for flat weights of network `net` (a NetSpec, or a hidden width for
    the observation-only network)."""
    from wfrl._core import Policy
    net = as_netspec(net)
    return Policy(weights, net.hidden, workflow.onehot(), workflow.rank, lam, count_foothold, greedy,
                  net.memory, net.mask, net.truth_input, net.belief, net.belief_reds)


def stats_arrays(n: int) -> dict:
    """The per-episode statistics arrays the compiled loop (SimSlots) writes."""
    return {"env_return": np.zeros(n, np.float32), "alignment": np.zeros(n, np.float32),
            "compliance": np.zeros(n, np.float32), "fixes": np.zeros(n, np.int32),
            "compliant": np.zeros(n, np.int32)}


def stats_list(st: dict, episodes, version: int, index=None) -> list[EpisodeStats]:
    """EpisodeStats of global episodes `episodes`, read from entries `index` (default 0, 1, …)
    of stats_arrays `st`."""
    index = range(len(episodes)) if index is None else index
    return [EpisodeStats(int(e), float(st["env_return"][k]), float(st["alignment"][k]),
                         float(st["compliance"][k]), int(st["fixes"][k]), int(st["compliant"][k]),
                         version) for k, e in zip(index, episodes)]


def run_episodes(backend, policy, episodes, seed: int, buffer=None, rows=None,
                 version: int = 0, horizon: int = EP_LEN, observer=None) -> list[EpisodeStats]:
    """Play global episodes `episodes` (seeds from (seed, episode)) with the compiled loop, episode
    k into buffer row rows[k] (rows default to 0, 1, …; buffer may be None). horizon: blue steps
    per episode (training: EP_LEN; the CAGE2 evaluation also plays 30 and 50). observer, if
    given (e.g. wfrl.evaluation.attribution.CostRecorder), sees every step as observer.step(action, reward,
    red_access_after) and every episode's end as observer.end_episode(); the simulator then
    plays step by step through the per-step actor (the same episodes, slower)."""
    episodes = np.asarray(episodes, dtype=np.int64)
    rows = np.arange(len(episodes), dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
    env_seeds, act_seeds = episode_seeds(seed, episodes)
    slots = getattr(backend, "slots", None)
    if slots is not None and observer is None:
        st = stats_arrays(len(episodes))
        slots.run_episodes(0, policy, env_seeds, act_seeds, rows, buffer, st, horizon)
        return stats_list(st, episodes, version)
    actor = make_actor(policy, backend)
    return [actor_episode(backend, actor, int(e), int(es), int(ac), buffer, int(r), version,
                          horizon=horizon, observer=observer)
            for e, es, ac, r in zip(episodes, env_seeds, act_seeds, rows)]


def make_actor(policy, backend):
    """The compiled per-step actor of `policy` for a Python-stepped backend (a belief policy's
    particles then play by the backend's CybORG code)."""
    from wfrl._core import Actor
    return Actor(policy, bool(getattr(backend, "leaderboard", False)))


def actor_episode(backend, actor, episode, env_seed, act_seed, buffer, row, version,
                  after_step=None, horizon: int = EP_LEN, observer=None):
    """One episode of a Python-stepped env (CybORG) with the compiled per-step actor.
    after_step(), if given, runs after every step (the synchronous collector's barrier);
    observer as in run_episodes."""
    backend.seed(env_seed)
    actor.begin(act_seed)
    obs, red_access = backend.reset()
    if buffer is not None:
        buffer.arrays["lengths"][row] = 0
    env_return = alignment = 0.0
    belief = actor.policy.belief > 0 and buffer is not None
    for t in range(horizon):
        action, logp, value, bonus = actor.act(obs, red_access)
        next_obs, reward, next_access = backend.step(action)
        done = t == horizon - 1
        if done:
            bonus += actor.finish()
        if buffer is not None:
            buffer.push(row, obs, action, logp, value, reward + bonus, done, red_access,
                        actor.belief() if belief else None)
        env_return += reward
        alignment += bonus
        if observer is not None:
            observer.step(action, reward, next_access)
        obs, red_access = next_obs, next_access
        if after_step is not None:
            after_step()
    if observer is not None:
        observer.end_episode()
    return EpisodeStats(episode, env_return, alignment, actor.compliance, actor.fixes,
                        actor.compliant, version)


def sample_reference(logits: np.ndarray, greedy: bool, rng: Xoshiro256) -> tuple[int, float]:
    """The sampling rule of wfrl_sample_first over all len(logits) actions (wfrl_sample_action:
    a blue policy's 145), in Python."""
    best = int(np.argmax(logits))
    z = logits.astype(np.float64) - float(logits[best])
    e = np.exp(z)
    total = 0.0
    for v in e:  # sequential sum, in C's order
        total += v
    chosen = best
    if not greedy:
        u = rng.uniform() * total
        acc, chosen = 0.0, len(logits) - 1
        for a in range(len(logits)):
            acc += e[a]
            if u < acc:
                chosen = a
                break
    return chosen, float(z[chosen] - np.log(total))


def run_episode_reference(backend, weights, hidden, workflow: Workflow, lam, env_seed, act_seed,
                          count_foothold=False, greedy=False, buffer=None, row=0,
                          first_fix_bonus=True, inputs=None, beliefs=None):
    """Plain-Python twin of the compiled rollout loop (numpy forward, Python xoshiro, Python
    memory, truth block, belief block (wfrl.features.ParticleFilterReference) and mask). hidden: a
    NetSpec or a hidden width. first_fix_bonus=False: the
    alignment rule without the first-fix bonus (the compiled loop has only the rule with it; the
    learner takes the difference off). inputs: a list that receives a copy of each step's policy
    input; beliefs: a list that receives each step's belief block (a belief network)."""
    net = as_netspec(hidden)
    filt = ParticleFilterReference(net.belief, act_seed) if net.belief else None
    policy = NumpyPolicy(weights, net.hidden, net.in_dim)
    rng = Xoshiro256(act_seed)
    tracker = ComplianceTracker(workflow, lam, count_foothold, first_fix_bonus)
    memory = MemoryTracker()
    x = np.empty(net.in_dim, dtype=np.float32)
    x[net.in_dim - len(workflow.onehot()):] = workflow.onehot()
    backend.seed(env_seed)
    obs, red_access = backend.reset()
    env_return = alignment = 0.0
    actions: list[int] = []
    for t in range(EP_LEN):
        memory.update(obs)
        x[:OBS_DIM] = obs
        k = OBS_DIM
        if net.memory:
            feats = memory.features()
            x[k:k + len(feats)] = feats
            k += len(feats)
        if net.truth_input:
            x[k:k + TRUTH_DIM] = truth_features(red_access)
            k += TRUTH_DIM
        block = None
        if filt is not None:
            if t == 0:   # the compiled loop's filter: its stream of (the action seed, key 0)
                filt.reset(net.belief_reds, bool(getattr(backend, "leaderboard", False)), 0,
                           ROLLOUT_BELIEF_STREAM)
            else:
                filt.observe(actions[-1], obs)
            block = filt.belief()
            x[k:k + BELIEF_DIM] = block
            if beliefs is not None:
                beliefs.append(block)
        if inputs is not None:
            inputs.append(x.copy())
        logits, value = policy.forward(x)
        if net.mask:
            logits = np.where(memory.mask(), logits, np.float32(MASKED_LOGIT)).astype(np.float32)
        action, logp = sample_reference(logits, greedy, rng)
        memory.acted(action)
        bonus = tracker.step(action, red_access)
        next_obs, reward, next_access = backend.step(action)
        done = t == EP_LEN - 1
        if done:
            bonus += tracker.finish()
        if buffer is not None:
            buffer.push(row, obs, action, logp, value, reward + bonus, done, red_access, block)
        actions.append(action)
        env_return += reward
        alignment += bonus
        obs, red_access = next_obs, next_access
    return EpisodeStats(-1, env_return, alignment, tracker.rate, tracker.fixes, tracker.compliant,
                        0), actions
