"""Decision-time search (`--plan`): a learned greedy policy improved at every step by paired
rollouts in the compiled simulator from a particle belief over the true state.

The compiled planner (csrc/wfrl_plan.h, wfrl._core.Planner) holds the belief and runs the search;
this module gives it a budget with clear errors, a policy object any evaluation path can drive
(PlanningPolicy: reset, then act(obs) each step — it sees only the observation), the episode
loop the evaluations use (play_planned). The plain-Python twin of the particle update,
ParticleFilterReference, lives beside the belief block in wfrl.features.

Red kinds of the particles (`red`): "mixture" starts them as B_line, Meander and Sleep in equal
shares (the policy is not told whom it faces; the observations sort the kinds out within a few
steps); "known" starts them all as the episode's red, which the CAGE2 evaluation protocol
names per setting (as it lets a separate checkpoint play each red); or a red agent's name.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from wfrl.config.eval import PLAN_REDS
from wfrl.errors import UserError
from wfrl.features import MIXTURE_RED_BITS
from wfrl.features import PARTICLE_RED_BITS as _RED_BITS
from wfrl.rng import MASK


@dataclass(frozen=True)
class PlanBudget:
    """What one decision may spend (the defaults stay under 50 ms per decision on one core:
    bench/test_bench_plan.py)."""
    particles: int = 1000
    candidates: int = 4
    rollouts: int = 64
    depth: int = 15
    time_ms: float = 45.0
    seed: int = 0
    leaf_value: bool = True
    z: float = 1.0
    hold: bool = False

    def check(self) -> PlanBudget:
        from wfrl._core import PLAN_LIMITS
        for name in ("particles", "candidates", "rollouts", "depth"):
            v = getattr(self, name)
            lo = 0 if name == "rollouts" else 1
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= PLAN_LIMITS[name]:
                raise UserError(f"--plan-{name} must be a whole number in {lo}..{PLAN_LIMITS[name]}"
                                f" (got {v!r})")
        if isinstance(self.time_ms, bool) or not isinstance(self.time_ms, (int, float)) \
                or not 0 <= self.time_ms <= 1e7:
            raise UserError(f"--plan-time-ms must lie in [0, 1e7], 0 for no limit (got "
                            f"{self.time_ms!r})")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) \
                or not 0 <= self.seed < 2 ** 63:
            raise UserError(f"--plan-seed must be a whole number in [0, 2^63) (got {self.seed!r})")
        if not isinstance(self.hold, bool) or not isinstance(self.leaf_value, bool):
            raise UserError("the plan's hold and leaf_value must be true or false")
        if not isinstance(self.z, (int, float)) or not 0 <= self.z <= 1e6:
            raise UserError(f"the plan's evidence threshold z must lie in [0, 1e6] (got {self.z!r})")
        return self

    @classmethod
    def from_settings(cls, cfg) -> PlanBudget:
        """The budget of a config carrying the plan_* settings (wfrl.config.eval.PlanSettings)."""
        return cls(cfg.plan_particles, cfg.plan_candidates, cfg.plan_rollouts, cfg.plan_depth,
                   cfg.plan_time_ms, cfg.plan_seed, cfg.plan_leaf_value,
                   hold=cfg.plan_hold).check()


def red_set(red: str, episode_red: str | None = None) -> int:
    """The PLAN_RED_* bits of the particles' red kinds (see the module docstring)."""
    if red == "mixture":
        return MIXTURE_RED_BITS
    if red == "known":
        if episode_red is None:
            raise UserError("--plan-red known needs the episode's red agent")
        red = episode_red
    if red not in _RED_BITS:
        raise UserError(f"unknown plan red {red!r} (choose from mixture, known, "
                        f"{', '.join(_RED_BITS)})")
    return _RED_BITS[red]


def greedy_policy(checkpoint: str, workflow: str | None = None):
    """(the compiled greedy policy of a checkpoint, its workflow): under `workflow` if given."""
    from wfrl.collect.rollout import make_policy
    from wfrl.evaluation.checkpoint import policy_of_checkpoint
    from wfrl.workflow import Workflow
    weights, net, wf, lam, foothold = policy_of_checkpoint(checkpoint, workflow)
    return make_policy(weights, net, Workflow.parse(wf), lam, foothold, greedy=True), wf


def make_planner(policy, budget: PlanBudget):
    """The compiled planner (wfrl._core.Planner) of a compiled policy at a checked budget."""
    from wfrl._core import Planner
    if policy.belief:
        raise UserError("--plan takes no policy with the belief input (--belief-input): the "
                        "search's rollouts carry no belief")
    b = budget
    try:
        planner = Planner(policy, b.particles, b.candidates, b.rollouts, b.depth,
                          float(b.time_ms), b.seed, b.leaf_value, float(b.z))
    except ValueError as exc:
        raise UserError(f"plan budget: {exc}") from None
    planner.set_hold(bool(b.hold))
    return planner


class PlanningPolicy:
    """A checkpoint's greedy policy improved by decision-time search. reset(...) at the start of
    every episode, then act(obs) once per step with the observation the last action led to
    (the planner updates its belief with it first). `backend` names the CybORG code the
    particles play by (installed or :leaderboard), whatever engine plays the real episode.
    rollout_checkpoint: continue the rollouts with that checkpoint's greedy policy (and score
    their leaves with its critic) instead of the acting one; a checkpoint trained with the truth
    input reads each particle's true state there."""

    def __init__(self, checkpoint: str | None = None, backend: str = "sim",
                 budget: PlanBudget | None = None, red: str = "mixture",
                 workflow: str | None = None, policy=None, rollout_checkpoint: str | None = None):
        from wfrl.envs.base import is_leaderboard
        self.budget = (budget or PlanBudget()).check()
        if red not in PLAN_REDS and red not in _RED_BITS:
            raise UserError(f"unknown --plan-red {red!r} (choose from "
                            f"{', '.join(PLAN_REDS + tuple(_RED_BITS))})")
        self.red = red
        self.leaderboard = is_leaderboard(backend)
        self.workflow = workflow
        if policy is None:
            if checkpoint is None:
                raise UserError("PlanningPolicy needs a checkpoint")
            policy, self.workflow = greedy_policy(checkpoint, workflow)
        self.policy = policy
        self.planner = make_planner(policy, self.budget)
        if rollout_checkpoint is not None:
            self.planner.set_rollout_policy(greedy_policy(rollout_checkpoint, self.workflow)[0])
        self.last = None
        self._prev: int | None = None

    def reset(self, red_agent: str | None = None, key: int = 0, horizon: int = 100):
        """A new episode (red_agent: the episode's red, read only with red='known')."""
        self.planner.reset(red_set(self.red, red_agent), self.leaderboard, int(key) & MASK,
                           horizon)
        self._prev = None

    def act(self, obs, red_access=None) -> int:
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        if self._prev is not None:
            self.planner.observe(self._prev, obs)
        ra = None if red_access is None else np.ascontiguousarray(red_access, np.uint8)
        info = self.planner.decide(obs, ra if self.policy.truth else None)
        self.last = info
        self._prev = int(info[0])
        return self._prev


@dataclass
class PlanStats:
    """What the search did over a set of episodes. times_ms: the wall time of each act() call,
    the belief update included (what a decision costs its caller)."""
    decisions: int = 0
    switches: int = 0
    vetoes: int = 0
    timeouts: int = 0
    fallbacks: int = 0
    observed: int = 0
    belief_checked: int = 0
    belief_hits: int = 0
    times_ms: list = dataclasses.field(default_factory=list)

    def rates(self) -> dict:
        """Shares of decisions that left the greedy action or were stopped by the time limit,
        and of observed steps that needed the belief's fallback rule."""
        return {"switch_rate": _rate(self.switches, self.decisions),
                "timeout_rate": _rate(self.timeouts, self.decisions),
                "fallback_rate": _rate(self.fallbacks, self.observed)}

    def summary(self) -> dict:
        t = np.asarray(self.times_ms, np.float64)
        q = (lambda p: round(float(np.percentile(t, p)), 3)) if t.size else (lambda p: None)
        rates = self.rates()
        return {"decisions": self.decisions, "switch_rate": rates["switch_rate"],
                "vetoes": self.vetoes, "timeouts": self.timeouts,
                "fallback_rate": rates["fallback_rate"],
                "belief_quality": _rate(self.belief_hits, self.belief_checked),
                "belief_steps": self.belief_checked,
                "ms_median": q(50), "ms_p95": q(95),
                "ms_max": round(float(t.max()), 3) if t.size else None}


def _rate(a, b):
    return round(a / b, 4) if b else None


def play_planned(backend, planning: PlanningPolicy, wf, lam: float, foothold: bool, episodes,
                 seed: int, horizon: int = 100, stats: PlanStats | None = None, observer=None):
    """EpisodeStats of global episodes `episodes` (seeds from (seed, episode)) played by the
    planning policy; compliance and alignment as the compiled actor counts them (against red's
    true access when acting). On the simulator backend the belief's quality is measured too: the
    share of observed steps where some particle holds the true state (its RNG aside). observer
    as in wfrl.collect.rollout.run_episodes."""
    from wfrl.collect.stats import EpisodeStats
    from wfrl.rng import episode_seeds
    from wfrl.workflow import ComplianceTracker
    stats = stats if stats is not None else PlanStats()
    episodes = np.asarray(episodes, dtype=np.int64)
    env_seeds, act_seeds = episode_seeds(seed, episodes)
    sim = getattr(backend, "sim", None)
    red = getattr(backend, "red_agent", None)
    out = []
    before = planning.planner.counters()
    for ep, es, ac in zip(episodes, env_seeds, act_seeds):
        backend.seed(int(es))
        obs, access = backend.reset()
        ep_red = red
        if red == "mixed":
            from wfrl.envs.base import mixed_red_kind
            ep_red = mixed_red_kind(int(es))
        planning.reset(ep_red, key=int(ac), horizon=horizon)
        tracker = ComplianceTracker(wf, lam, foothold)
        env_return = alignment = 0.0
        for t in range(horizon):
            t0 = time.perf_counter()
            a = planning.act(obs, access)
            stats.times_ms.append(1e3 * (time.perf_counter() - t0))
            if t > 0 and sim is not None:
                stats.belief_checked += 1
                stats.belief_hits += planning.planner.count_state(sim, 0) > 0
            alignment += tracker.step(a, access)
            obs, reward, access = backend.step(a)
            env_return += reward
            if observer is not None:
                observer.step(a, reward, access)
        if observer is not None:
            observer.end_episode()
        alignment += tracker.finish()
        out.append(EpisodeStats(int(ep), env_return, alignment, tracker.rate, tracker.fixes,
                                tracker.compliant, 0))
    after = planning.planner.counters()
    for k in ("decisions", "switches", "vetoes", "timeouts", "fallbacks", "observed"):
        setattr(stats, k, getattr(stats, k) + after[k] - before[k])
    return out

