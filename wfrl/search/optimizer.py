"""The workflow optimizer: ask which workflow to try next, tell it what a visit measured.

    opt = WorkflowOptimizer(seed=0)
    for _ in range(15):
        wf = opt.ask()
        reward, se, compliance = my_experiment(wf)          # train a policy on wf, measure it
        opt.tell(wf, reward, se, compliance)
    post = opt.posterior()                                  # mean, sd, p_feasible for all 120
    print(opt.report().sentence)

No training happens here: the search loop (wfrl.search.loop), the benchmarks and users' own
experiments all drive the same object, and `state_dict()` / `from_state()` carry it across a
restart (the next `ask()` after a resume is the one the run would have made).

Two models over the permutation kernel of wfrl.search.gp:

- reward: a GP on the rewards of the visits whose compliance reached θ (a visit below θ did not
  follow its workflow, so its reward says nothing about what following it earns). It is fitted
  twice: as the model behind posterior(), recommend() and report() (the answers, the tie
  statement), and with a prior that keeps workflows able to differ (ACQ_REWARD_*) as the model the
  constrained acquisition steers by (acquisition_posterior());
- feasibility: a GP on *every* visit's final compliance, mapped to the logit scale (clipped to
  [0.01, compliance_ceiling(θ)], 0.99 at θ = 0.95) with its prior centred on logit(θ) — far
  from any observation a workflow is a coin toss. P(feasible) = P(a visit's compliance ≥ θ) =
  Φ((μ − logit θ) / sd), sd including the observation noise the GP learned.

Acquisitions (`acquisition=`):

- "constrained" (default): Gardner et al.'s constrained form, (UCB of reward − bar)⁺ ×
  min(1, P(feasible) / 0.9), on the acquisition's reward model; workflows with P(feasible) < 0.7
  set aside while a workflow not yet seen feasible reaches it (PF_FLOOR_RULE). The bar is the
  best posterior mean among workflows already seen feasible (before any, the lowest lower
  confidence bound), so the first factor is the optimistic improvement a visit could show and
  never negative; the UCB's spread is what one more visit can teach (see scores()). The first
  three asks are a spread-out design (N_INIT).
- "ucb": reward-only GP-UCB, the project's first search: a visit below θ never changes the
  posterior, which is why it kept revisiting infeasible workflows.
- "random": uniformly among the workflows not yet told (all of them once each was told).
- "original": the original system's rule, re-implemented for comparison (see original_scores).

UCB uses β_t from wfrl.search.gp.beta_schedule (t = evaluations told + 1) unless `beta` is given.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wfrl.errors import UserError
from wfrl.search.gp import (
    ALL_EMBEDDED,
    N_WORKFLOWS,
    PAIRS,
    PermutationGP,
    argmax_ucb,
    beta_schedule,
    discordant_pairs,
    ucb_scores,
)
from wfrl.workflow import UNIT_TYPES, Workflow

ACQUISITIONS = ("constrained", "ucb", "random", "original")
STATE_KIND = "wfrl/workflow-optimizer"
STATE_VERSION = 1
COMPLIANCE_CLIP = (0.01, 0.999)
# Why each constant below has its value, and what it was worth: docs/search-choices.md.
# The feasibility model sees compliance clipped at 1 − (1 − θ)·CEILING_FRACTION: above it a
# difference says nothing about θ, yet spans more logit than θ's margin.
CEILING_FRACTION = 0.2
ORIGINAL_BETA = 2.0
# The first N_INIT asks are a design (each the workflow farthest from all told): with one or two
# observations the fitted GPs are guesses, and the product with P(feasible) locks on.
N_INIT = 3
# P(feasible) enters the product as min(1, P / PF_CAP); below PF_MIN a workflow is set aside
# (score × 1e-3) while any workflow reaches PF_MIN (PF_FLOOR_RULE: which ones count).
PF_CAP = 0.9
PF_MIN = 0.7
# The feasibility RBF stays local, so that far from infeasible visits a workflow stays a coin
# toss; what reaches far is the relations' linear part and the shared offset.
FEAS_MAX_LENGTH_SCALE = 1.5
# One linear weight per pairwise-order relation (ARD): a one-relation rule is one coordinate.
FEAS_LINEAR = "ard"
FEAS_MIN_SIGNAL = 0.25
# One offset shared by all workflows (variance ≤ FEAS_BIAS on the logit scale): without it a
# relation's two sides sit symmetrically about θ, and a followable side reads unfollowable.
FEAS_BIAS = 4.0
# Two reward GPs: the acquisition steers by one whose prior keeps workflows able to differ
# (ACQ_REWARD_*); the answer (posterior, recommend, report) uses REWARD_*, which finds no effect
# in pure noise.
REWARD_MAX_LENGTH_SCALE = 20.0
REWARD_MIN_SIGNAL = 0.25
ACQ_REWARD_MAX_LENGTH_SCALE = 4.0
ACQ_REWARD_MIN_SIGNAL = 1.0
# "new": only a workflow not yet seen feasible switches the P(feasible) floor on; "any": any
# workflow at PF_MIN does, and the one workflow seen feasible could then be re-measured alone.
PF_FLOOR_RULE = "new"
# The feasible set a search reports is P(feasible) ≥ 0.5; of the others, those the model is not
# SURE_LEVEL sure fall short of θ are reported apart as "at θ".
SURE_LEVEL = 0.95


def compliance_ceiling(theta: float) -> float:
    """Where the feasibility model clips compliance: 1 − (1 − θ)·CEILING_FRACTION, at most
    COMPLIANCE_CLIP[1] and never below θ's own clip."""
    return min(COMPLIANCE_CLIP[1], max(1.0 - (1.0 - float(theta)) * CEILING_FRACTION,
                                       min(float(theta), COMPLIANCE_CLIP[1])))


def logit(p: float, ceiling: float = COMPLIANCE_CLIP[1]) -> float:
    p = min(max(float(p), COMPLIANCE_CLIP[0]), ceiling)
    return math.log(p / (1.0 - p))


def _norm_cdf(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr
    return ndtr(x)


def as_index(workflow) -> int:
    if isinstance(workflow, Workflow):
        return workflow.index
    if isinstance(workflow, (int, np.integer)) and 0 <= int(workflow) < N_WORKFLOWS:
        return int(workflow)
    if isinstance(workflow, str):
        return Workflow.parse(workflow).index
    raise UserError(f"not a workflow: {workflow!r}")


@dataclass
class Posterior:
    """What the optimizer believes about every workflow (arrays of 120, by workflow index)."""
    mean: np.ndarray
    sd: np.ndarray
    p_feasible: np.ndarray


@dataclass
class Relation:
    """'first before second' and what the visits say about it."""
    first: int
    second: int
    visits: int
    feasible: int
    other_visits: int
    other_feasible: int
    mean_p_feasible: float

    def words(self) -> str:
        a, b = UNIT_TYPES[self.first], UNIT_TYPES[self.second]
        return (f"{a} before {b}: {self.feasible} of {self.visits} visited reached θ "
                f"({b} before {a}: {self.other_feasible} of {self.other_visits}); "
                f"predicted feasible on average {self.mean_p_feasible:.2f}")


@dataclass
class Report:
    """Distinguishability of the best workflow (see WorkflowOptimizer.report)."""
    best: int | None
    candidates: list[int]
    p_best: dict[int, float]
    indistinguishable: list[int]
    predicted_feasible: int
    sentence: str
    relations: list[Relation] = field(default_factory=list)


class WorkflowOptimizer:
    def __init__(self, acquisition: str = "constrained", theta: float = 0.95,
                 beta: float | None = None, seed: int = 0, detrend: bool = False,
                 n_init: int = N_INIT):
        if acquisition not in ACQUISITIONS:
            raise UserError(f"unknown acquisition {acquisition!r} (choose from "
                            f"{', '.join(ACQUISITIONS)})")
        if not 0.0 <= theta <= 1.0:
            raise UserError(f"θ must lie in [0, 1] (got {theta})")
        self.acquisition, self.theta, self.beta = acquisition, float(theta), beta
        self.seed, self.detrend = int(seed), bool(detrend)
        self.n_init = int(n_init)
        self.history: list[dict] = []
        self.rng = np.random.default_rng([self.seed, 0x5EA])
        self.last_ask: dict | None = None
        self._models: tuple[PermutationGP, PermutationGP] | None = None
        self._posterior: Posterior | None = None
        self._acq_posterior: Posterior | None = None
        # the acquisition's reward GP (acquisition_posterior)
        self._acq_reward: PermutationGP | None = None

    # ------------------------------------------------------------------ data
    def tell(self, workflow, reward: float | None, reward_se: float, compliance: float,
             lineage: int | None = None) -> None:
        """One visit's result: its reward (mean env return, None if not measured) with standard
        error, its final compliance, and optionally the training episodes behind its policy."""
        w = as_index(workflow)
        c = float(compliance)
        if not (0.0 <= c <= 1.0) or math.isnan(c):
            raise UserError(f"compliance must lie in [0, 1] (got {compliance})")
        if reward is not None and not math.isfinite(float(reward)):
            raise UserError(f"reward must be finite (got {reward})")
        se = float(reward_se)
        if not (se >= 0.0 and math.isfinite(se)):
            raise UserError(f"reward_se must be a finite non-negative number (got {reward_se})")
        self.history.append({"workflow": w, "reward": None if reward is None else float(reward),
                             "se": se, "compliance": c,
                             "lineage": None if lineage is None else int(lineage)})
        self._models = self._posterior = self._acq_posterior = self._acq_reward = None

    def feasible_observations(self) -> list[dict]:
        return [h for h in self.history
                if h["compliance"] >= self.theta and h["reward"] is not None]

    def visits(self) -> np.ndarray:
        n = np.zeros(N_WORKFLOWS, dtype=np.int64)
        for h in self.history:
            n[h["workflow"]] += 1
        return n

    # ---------------------------------------------------------------- models
    def _reward_gp(self, max_length_scale: float, min_signal: float) -> PermutationGP:
        obs = self.feasible_observations()
        reward = PermutationGP(seed=self.seed, max_length_scale=max_length_scale,
                               min_signal=min_signal)
        z = None
        if self.detrend:
            z = [math.log1p(o["lineage"] or 0) for o in obs]
        reward.fit([o["workflow"] for o in obs], [o["reward"] for o in obs],
                   [o["se"] for o in obs], covariate=z)
        return reward

    def models(self) -> tuple[PermutationGP, PermutationGP]:
        """The inference models (reward, feasibility) behind posterior(), recommend() and
        report()."""
        if self._models is None:
            reward = self._reward_gp(REWARD_MAX_LENGTH_SCALE, REWARD_MIN_SIGNAL)
            top = compliance_ceiling(self.theta)
            feas = PermutationGP(seed=self.seed, prior_mean=self._logit_theta(), scale=1.0,
                                 max_noise=1.0, max_length_scale=FEAS_MAX_LENGTH_SCALE,
                                 linear=FEAS_LINEAR, min_signal=FEAS_MIN_SIGNAL,
                                 bias=FEAS_BIAS)
            feas.fit([h["workflow"] for h in self.history],
                     [logit(h["compliance"], top) for h in self.history])
            self._models = (reward, feas)
        return self._models

    def _logit_theta(self) -> float:
        """θ on the feasibility model's scale: its prior mean and the line P(feasible) is read
        against (the same clipped logit the observations are mapped by)."""
        return logit(self.theta, compliance_ceiling(self.theta))

    def acquisition_posterior(self) -> Posterior:
        """What the constrained acquisition steers by: reward mean and sd from the reward GP with
        the optimistic prior (ACQ_REWARD_*), P(feasible) as in posterior(). Not used for any
        answer (recommend, report, plots)."""
        if self._acq_posterior is None:
            post = self.posterior()
            if (ACQ_REWARD_MAX_LENGTH_SCALE, ACQ_REWARD_MIN_SIGNAL) == (
                    REWARD_MAX_LENGTH_SCALE, REWARD_MIN_SIGNAL):
                self._acq_posterior = post
            else:
                self._acq_reward = self._reward_gp(ACQ_REWARD_MAX_LENGTH_SCALE,
                                                   ACQ_REWARD_MIN_SIGNAL)
                mu, sd = self._acq_reward.predict()
                self._acq_posterior = Posterior(mu, sd, post.p_feasible)
        return self._acq_posterior

    def pending_posterior(self, pending, acquisition: bool = True) -> Posterior:
        """The acquisition's posterior (acquisition=False: the inference one) with the visits
        `pending` (workflows asked for, not yet told) believed: each model is given, at each
        pending workflow, an observation equal to its own posterior mean — the reward model with
        the typical standard error of the rewards told, the feasibility model on its logit scale
        — with the fitted hyperparameters kept (GP-BUCB's hallucinated observations, a kriging
        believer; docs/scale.md, "Concurrent visits"). Means stay where they are; the standard
        deviations at and around the pending workflows shrink, so the next ask looks elsewhere
        unless a workflow's mean alone makes it the best. No pending visits: the posterior."""
        post = self.acquisition_posterior() if acquisition else self.posterior()
        if len(pending) == 0:
            return post
        reward, feas = self.models()
        if acquisition and self._acq_reward is not None:
            reward = self._acq_reward
        pending = [as_index(w) for w in pending]
        ses = [o["se"] for o in self.feasible_observations()]
        _, sd = reward.predict_given(pending, float(np.median(ses)) if ses else 0.0)
        fm, fs = feas.predict_given(pending, 0.0, observation=True)
        p = _norm_cdf((fm - self._logit_theta()) / np.maximum(fs, 1e-9))
        return Posterior(post.mean, sd, p)

    def posterior(self) -> Posterior:
        """Computed once per history (asks, reports and plots share it); read-only."""
        if self._posterior is None:
            reward, feas = self.models()
            mu, sd = reward.predict()
            fm, fs = feas.predict(observation=True)
            p = _norm_cdf((fm - self._logit_theta()) / np.maximum(fs, 1e-9))
            self._posterior = Posterior(mu, sd, p)
        return self._posterior

    def predicted_feasible(self) -> np.ndarray:
        """Boolean over the 120: the feasible set the search reports (P(feasible) ≥ 0.5)."""
        return self.posterior().p_feasible >= 0.5

    def at_theta(self) -> np.ndarray:
        """Boolean over the 120: outside the predicted feasible set, but not SURE_LEVEL sure to
        fall short of θ."""
        return ~self.predicted_feasible() & (self.posterior().p_feasible >= 1.0 - SURE_LEVEL)

    def beta_t(self) -> float:
        return float(self.beta) if self.beta is not None else beta_schedule(len(self.history) + 1)

    # ----------------------------------------------------------- acquisition
    def scores(self, pending=()) -> tuple[np.ndarray, dict]:
        """Acquisition value of every workflow and the numbers behind it (random and original do
        not consult the GPs, so they cost nothing). pending: workflows of visits asked for and
        not yet told (a batch, --concurrent-visits): believed as pending_posterior() says; the
        random rule and the design treat them as told, the original rule as visits without a
        reward."""
        nan = np.full(N_WORKFLOWS, np.nan)
        pending = [as_index(w) for w in pending]
        if self.acquisition == "random":
            told = self.visits() > 0
            told[pending] = True
            score = np.where(told, 0.0, 1.0) if not told.all() else np.ones(N_WORKFLOWS)
            return score, {"mean": nan, "sd": nan, "p_feasible": nan, "ucb": nan, "beta": math.nan}
        if self.acquisition == "original":
            score, mean, sd = original_scores(
                self.history + [{"workflow": w, "reward": None, "compliance": 0.0}
                                for w in pending], self.theta)
            return score, {"mean": mean, "sd": sd, "p_feasible": nan, "ucb": score,
                           "beta": ORIGINAL_BETA}
        if self.acquisition == "constrained" and len(self.history) + len(pending) < self.n_init:
            # initial design: the workflow farthest (Kendall) from every one told so far
            told = [h["workflow"] for h in self.history] + pending
            far = np.array([min((discordant_pairs(w, t) for t in told), default=10)
                            for w in range(N_WORKFLOWS)], dtype=np.float64)
            return far, {"mean": nan, "sd": nan, "p_feasible": nan, "ucb": nan,
                         "beta": math.nan, "design": True}
        post = self.pending_posterior(pending, acquisition=self.acquisition == "constrained")
        beta = self.beta_t()
        root = math.sqrt(max(beta, 0.0))
        spread = post.sd
        if self.acquisition == "constrained":
            # What one more visit can teach: the sd of the posterior mean's move after one more
            # observation with the typical standard error, σ² / √(σ² + se²). A workflow already
            # measured to below its noise gains little from being measured again.
            ses = [o["se"] for o in self.feasible_observations()]
            se = float(np.median(ses)) if ses else 0.0
            spread = post.sd ** 2 / np.sqrt(post.sd ** 2 + se ** 2) if se > 0 else post.sd
        ucb = ucb_scores(post.mean, spread, beta)
        parts = {"mean": post.mean, "sd": post.sd, "p_feasible": post.p_feasible,
                 "ucb": ucb, "beta": beta}
        if self.acquisition == "constrained":
            seen = sorted({o["workflow"] for o in self.feasible_observations()})
            # the bar: the best posterior mean among workflows seen feasible (the incumbent);
            # before any, the lowest lower confidence bound (then only P(feasible) differs)
            bar = (float(np.max(post.mean[seen])) if seen
                   else float(np.min(post.mean - root * spread)))
            parts["bar"] = bar
            weight = np.minimum(1.0, post.p_feasible / PF_CAP)
            others = post.p_feasible >= PF_MIN
            if PF_FLOOR_RULE == "new":
                others[seen] = False  # only a workflow not yet seen feasible switches it on
            if PF_MIN > 0 and np.any(others):
                weight = np.where(post.p_feasible >= PF_MIN, weight, 1e-3 * weight)
            return np.maximum(ucb - bar, 0.0) * weight, parts
        return ucb, parts

    def ask(self, pending=()) -> Workflow:
        """The workflow to visit next; pending: the workflows of visits already asked for whose
        results are not yet told (see scores())."""
        score, parts = self.scores(pending)
        if self.acquisition == "random" or parts.get("design") or (
                self.acquisition == "original" and not self.history):
            w = int(self.rng.choice(np.flatnonzero(score >= score.max() - 1e-12)))
        else:
            w = argmax_ucb(score, self.rng)
        self.last_ask = {"workflow": w, "score": float(score[w]), "mu": float(parts["mean"][w]),
                         "sd": float(parts["sd"][w]), "ucb": float(parts["ucb"][w]),
                         "beta": float(parts["beta"]), "p_feasible":
                         float(parts["p_feasible"][w]), "acquisition": self.acquisition}
        return Workflow.from_index(w)

    # --------------------------------------------------------------- answers
    def candidates(self) -> list[int]:
        """Workflows the optimizer can vouch for: a visit reached θ and the feasibility model
        still predicts it feasible (one lucky visit of an infeasible workflow is not enough)."""
        seen = sorted({o["workflow"] for o in self.feasible_observations()})
        if not seen:
            return []
        predicted = self.predicted_feasible()
        sure = [w for w in seen if predicted[w]]
        return sure or seen

    def recommend(self) -> int | None:
        """The workflow the optimizer reports as best: among candidates(), the highest posterior
        mean reward (ties: lowest index); None before any visit reached θ."""
        cands = self.candidates()
        if not cands:
            return None
        mu = self.posterior().mean
        return max(cands, key=lambda w: (mu[w], -w))

    def report(self, n_samples: int = 4000, level: float = 0.95) -> Report:
        """How sure is "best"? From joint posterior draws of the reward GP: each evaluated
        feasible workflow's probability of being the best of them, and how many predicted-
        feasible workflows the best does not beat with probability `level`."""
        candidates = self.candidates()
        relations = self.relations()
        if not candidates:
            return Report(None, [], {}, [], int(self.predicted_feasible().sum()),
                          f"no visit reached compliance θ = {self.theta}: nothing to rank",
                          relations)
        reward, _ = self.models()
        rng = np.random.default_rng([self.seed, 0xB357])
        draws = reward.sample(n_samples, rng)                  # n × 120
        best = self.recommend()
        assert best is not None   # (there are candidates)
        sub = draws[:, candidates]
        winners = np.asarray(candidates)[np.argmax(sub, axis=1)]
        p_best = {w: float(np.mean(winners == w)) for w in candidates}
        predicted = self.predicted_feasible()
        feasible = [w for w in range(N_WORKFLOWS) if predicted[w] or w in candidates]
        beats = np.mean(draws[:, [best]] > draws[:, feasible], axis=0)
        # Worse than the best only where the model says so AND the measurements do: the
        # workflow's own compliant visits trail the best's by more than a Bonferroni margin over
        # the evaluated workflows. The model alone calls unvisited and equal workflows worse
        # (docs/search-choices.md; tests/test_optimizer.py).
        measured = {w: m for w, m in self.measured(reward).items() if w in feasible}
        worse = measured_worse(measured, best, level)
        tied = [w for w, b in zip(feasible, beats)
                if w != best and (b < level or w not in worse)]
        others = len(feasible) - 1
        evaluated = len(measured) - 1
        name = Workflow.from_index(best).arrow()
        if others == 0:
            sentence = f"{name} is the only workflow predicted feasible."
        elif len(tied) == others:
            sentence = (f"No workflow is distinguishable from the best: {name} is measured "
                        f"worse than none of the other {evaluated} evaluated workflows at "
                        f"{level:.0%}, and the other {others - evaluated} predicted-feasible "
                        f"ones were not measured (its own probability of being the best "
                        f"evaluated one: {p_best[best]:.2f}).")
        else:
            sentence = (f"{name} is the best evaluated workflow (probability {p_best[best]:.2f}); "
                        f"{others - len(tied)} of the other {evaluated} evaluated workflows "
                        f"{'is' if others - len(tied) == 1 else 'are'} worse at {level:.0%}, so "
                        f"{len(tied)} of the other {others} "
                        f"predicted-feasible workflows are not distinguishable from it.")
        return Report(best, candidates, p_best, sorted(tied), len(feasible), sentence, relations)

    def measured(self, reward=None) -> dict[int, tuple[float, float]]:
        """Each evaluated feasible workflow's measured reward and its standard error: its
        compliant visits combined by inverse variance (with detrend, moved to the reward GP's
        common lineage first)."""
        obs = self.feasible_observations()
        y = np.array([o["reward"] for o in obs], dtype=np.float64)
        if self.detrend and reward is not None:
            y = reward.adjusted(y, [math.log1p(o["lineage"] or 0) for o in obs])
        out: dict[int, list] = {}
        for o, v in zip(obs, y):
            out.setdefault(o["workflow"], []).append((v, max(o["se"], 1e-9)))
        res = {}
        for w, vs in out.items():
            wts = np.array([1.0 / s ** 2 for _, s in vs])
            res[w] = (float(np.dot(wts, [v for v, _ in vs]) / wts.sum()),
                      float(1.0 / math.sqrt(wts.sum())))
        return res

    def relations(self, top: int = 3) -> list[Relation]:
        """The pairwise order relations that separate visits that reached θ from those that did
        not, strongest first (only relations whose two sides were both visited)."""
        if not self.history:
            return []
        post = self.posterior()
        ok = np.array([h["compliance"] >= self.theta for h in self.history])
        X = ALL_EMBEDDED[[h["workflow"] for h in self.history]]
        out = []
        for k, (i, j) in enumerate(PAIRS):
            for sign, (a, b) in ((1.0, (i, j)), (-1.0, (j, i))):
                holds = X[:, k] == sign
                n, m = int(holds.sum()), int((~holds).sum())
                if n == 0 or m == 0:
                    continue
                f_in, f_out = int(ok[holds].sum()), int(ok[~holds].sum())
                mean_p = float(post.p_feasible[ALL_EMBEDDED[:, k] == sign].mean())
                out.append(Relation(a, b, n, f_in, m, f_out, mean_p))
        # the side that is worse for feasibility is named: "user before enterprise: 0 of 9"
        out = [r for r in out if r.feasible / r.visits < r.other_feasible / r.other_visits]
        out.sort(key=lambda r: (r.feasible / r.visits - r.other_feasible / r.other_visits,
                                -r.visits - r.other_visits))
        return out[:top]

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """JSON-serialisable; from_state(state_dict()) asks what this one would ask next."""
        return {"kind": STATE_KIND, "version": STATE_VERSION, "acquisition": self.acquisition,
                "theta": self.theta, "beta": self.beta, "seed": self.seed,
                "detrend": self.detrend, "history": [dict(h) for h in self.history],
                "rng": self.rng.bit_generator.state}

    @classmethod
    def from_state(cls, state: dict) -> WorkflowOptimizer:
        try:
            if state.get("kind") != STATE_KIND:
                raise ValueError("not a workflow-optimizer state")
            if state.get("version") != STATE_VERSION:
                raise ValueError(f"state version {state.get('version')}, expected {STATE_VERSION}")
            opt = cls(state["acquisition"], state["theta"], state["beta"], state["seed"],
                      state["detrend"])
            for h in state["history"]:
                opt.tell(h["workflow"], h["reward"], h["se"], h["compliance"], h["lineage"])
            opt.rng.bit_generator.state = state["rng"]
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 — any malformed state is one clear line
            raise UserError(f"bad optimizer state ({str(exc).splitlines()[0][:100]})") from None
        return opt


def measured_worse(measured: dict, best: int, level: float = 0.95) -> set[int]:
    """The evaluated workflows whose measured reward trails the best's by more than the one-sided
    Bonferroni margin at `level` over the other evaluated workflows (measured: {workflow:
    (reward, se)}, as WorkflowOptimizer.measured)."""
    from scipy.stats import norm
    others = [w for w in measured if w != best]
    if not others or best not in measured:
        return set()
    z = float(norm.ppf(1.0 - (1.0 - level) / len(others)))
    mb, sb = measured[best]
    return {w for w in others
            if mb - measured[w][0] > z * math.hypot(sb, measured[w][1])}


def original_scores(history: list[dict], theta: float = 0.95,
                    beta: float = ORIGINAL_BETA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The original system's acquisition over all 120 workflows: (UCB, mean, sd).

    A workflow with an observed reward (a visit that reached θ) has its FIRST observed reward as
    mean and 1 / (1 + visits) as sd. Any other workflow has as mean the average of the observed
    rewards weighted by exp(−2·d), d = Kendall distance / 10 to each observed workflow, and as sd
    10·min d + 1. UCB = mean + (β / (1 + 0.5·visits))·sd, β = 2. Before any observation every
    workflow scores 0 (the first pick is random)."""
    visits = np.zeros(N_WORKFLOWS)
    first: dict[int, float] = {}
    for h in history:
        visits[h["workflow"]] += 1
        if h["reward"] is not None and h["compliance"] >= theta and h["workflow"] not in first:
            first[h["workflow"]] = h["reward"]
    mean, sd = np.zeros(N_WORKFLOWS), np.ones(N_WORKFLOWS)
    if not first:
        return np.zeros(N_WORKFLOWS), mean, sd
    obs_w = list(first)
    obs_r = np.array([first[w] for w in obs_w])
    for w in range(N_WORKFLOWS):
        if w in first:
            mean[w], sd[w] = first[w], 1.0 / (1.0 + visits[w])
        else:
            d = np.array([discordant_pairs(w, o) / 10.0 for o in obs_w])
            wts = np.exp(-2.0 * d)
            mean[w] = float(np.sum(wts * obs_r) / np.sum(wts))
            sd[w] = 10.0 * float(d.min()) + 1.0
    return mean + beta / (1.0 + 0.5 * visits) * sd, mean, sd
