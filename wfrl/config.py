"""Validated run configurations. The command line only parses into these; all checks live here."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from wfrl.collect.base import check_collector
from wfrl.envs.base import check_backend, check_red_agent
from wfrl.errors import UserError, check_choice
from wfrl.ppo.learner import PPOConfig
from wfrl.workflow import Workflow


def _positive(name: str, value) -> None:
    if value <= 0:
        raise UserError(f"--{name.replace('_', '-')} must be positive (got {value})")


def _non_negative(name: str, value) -> None:
    if value < 0:
        raise UserError(f"--{name.replace('_', '-')} must be non-negative (got {value})")


def _check_compliance_settings(cfg) -> None:
    """θ and λ, shared by the single-workflow and the search configuration."""
    if not 0.0 <= cfg.compliance_threshold <= 1.0:
        raise UserError(f"--compliance-threshold must lie in [0, 1] (got {cfg.compliance_threshold})")
    _non_negative("alignment_lambda", cfg.alignment_lambda)


# Named starting points for the learner; flags given on the command line override them.
#   recipe   (default) what the ablations in docs/learner.md support: 200 episodes per update,
#            the memory block and the action mask, the greedy policy evaluated every 5,000
#            episodes (best.pt). Learning rate and entropy weight stay constant: annealing them
#            (--lr-final, --entropy-final) did not help in the ablation.
#   original the original system's learner: 10 episodes per update, observation and workflow
#            only, constant learning rate and entropy weight, no periodic evaluation.
PPO_PRESETS = {
    "recipe": {"train": {"episodes_per_update": 200, "eval_every": 5000},
               "ppo": {"memory": True, "mask": True, "lr_final": 1.0, "entropy_final": 1.0}},
    "original": {"train": {"episodes_per_update": 10, "eval_every": 0},
                 "ppo": {"memory": False, "mask": False, "lr_final": 1.0, "entropy_final": 1.0}},
}
DEFAULT_PRESET = "recipe"


def preset_settings(name: str) -> tuple[dict, dict]:
    """(run settings, PPO settings) of a preset."""
    check_choice("--ppo-preset", name, tuple(PPO_PRESETS))
    p = PPO_PRESETS[name]
    return dict(p["train"]), dict(p["ppo"])


@dataclass
class TrainConfig:
    workflow: str = "balanced"
    """Priority order of the unit types (comma or arrow separated) or a canonical name."""
    backend: str = "sim"
    """Environment backend: sim (compiled CAGE2) or cyborg (real CybORG)."""
    collector: str = "sequential"
    """How experience is collected: sequential, sync, async or ray."""
    n_workers: int = 2
    """Worker processes of the sync and async collectors."""
    red_agent: str = "B_lineAgent"
    """Red attacker: B_lineAgent, RedMeanderAgent or SleepAgent."""
    total_episodes: int = 1000
    """Episode budget of the run."""
    episodes_per_update: int = 10
    """Episodes collected for each PPO update."""
    min_episodes: int = 0
    """Episodes before compliance may stop training early."""
    alignment_lambda: float = 30.0
    """λ: weight of the compliance alignment reward (see README: why 30)."""
    compliance_threshold: float = 0.95
    """θ: stop once an update's mean compliance reaches it (after min_episodes)."""
    count_foothold: bool = False
    """Count red's permanent User0 foothold as compromised (the original system's rule)."""
    seed: int = 0
    """Seed of the learner and of every episode (env and action sampling)."""
    out: str = "runs/latest"
    """Run directory for config, logs and checkpoints."""
    force: bool = False
    """Allow writing into a directory that already holds a run (its files are replaced)."""
    ray_address: str | None = None
    """Ray cluster to join with --collector ray (default: a private local instance)."""
    eval_every: int = 0
    """Evaluate the greedy policy every this many training episodes on reserved episodes and
    keep the best as best.pt (0: never)."""
    eval_episodes: int = 500
    """Episodes of each periodic evaluation."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO hyperparameters."""

    def validate(self) -> "TrainConfig":
        check_backend(self.backend)
        if self.collector == AUTO_COLLECTOR:
            self.collector = best_collector()
        check_collector(self.collector)
        check_red_agent(self.red_agent)
        self.parsed_workflow()
        for name in ("total_episodes", "episodes_per_update", "n_workers", "eval_episodes"):
            _positive(name, getattr(self, name))
        _non_negative("min_episodes", self.min_episodes)
        _non_negative("eval_every", self.eval_every)
        _check_compliance_settings(self)
        _check_ppo(self.ppo)
        return self

    def parsed_workflow(self) -> Workflow:
        return Workflow.parse(self.workflow)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        wf = self.parsed_workflow()
        d["workflow_order"] = str(wf)
        d["workflow_id"] = wf.index
        return d


def _check_ppo(p: PPOConfig) -> None:
    for name in ("lr", "epochs", "minibatches", "hidden", "max_grad_norm"):
        _positive(name, getattr(p, name))
    for name in ("lr_final", "entropy_final"):
        _non_negative(name, getattr(p, name))
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(p, name) <= 1.0:
            raise UserError(f"--{name.replace('_', '-')} must lie in [0, 1]")
    if not 0.0 < p.clip < 1.0:
        raise UserError(f"--clip must lie in (0, 1) (got {p.clip})")


AUTO_COLLECTOR = "auto"
ACQUISITIONS = ("constrained", "ucb", "random", "original")
INHERIT = ("closest", "base", "scratch")


def best_collector() -> str:
    """The collector `auto` stands for: async when the machine has a second core for its workers
    (collection then overlaps between workers while the PPO update runs here), else sequential."""
    import os
    return "async" if (os.cpu_count() or 1) >= 2 else "sequential"


@dataclass
class SearchConfig:
    """A GP-UCB workflow search (`wfrl train` without --workflow)."""
    backend: str = "sim"
    """Environment backend: sim (compiled CAGE2) or cyborg (real CybORG)."""
    collector: str = AUTO_COLLECTOR
    """sequential, sync, async, ray, or auto (the best for this machine)."""
    n_workers: int = 2
    """Worker processes / actors of the parallel collectors."""
    red_agent: str = "B_lineAgent"
    """Red attacker."""
    total_episodes: int = 40_000
    """Episode budget of the whole search (never exceeded)."""
    max_episodes: int = 6_000
    """Episodes one visit of a workflow may use."""
    min_episodes: int = 1_000
    """Episodes of a visit before compliance may end it (compliance comes long before the reward
    settles; see README)."""
    pretrain_episodes: int = 10_000
    """Warm-up before the first visit (part of the budget): each update on a workflow drawn at
    random, so every visit starts from a policy that already defends and follows orders and the
    visits' rewards are comparable. 0 = none (the original system: the first visit starts from
    scratch)."""
    episodes_per_update: int = 50
    """Episodes collected for each PPO update."""
    compliance_threshold: float = 0.95
    """θ: a visit ends successfully once its compliance (the mean over its last
    `compliance_window` updates) reaches it."""
    compliance_window: int = 3
    """Updates averaged into a visit's compliance. 1 = the last update alone (the first search):
    then a workflow whose policy complies 93 % of the time is called feasible as soon as one
    update of 50 episodes crosses 0.95 by chance."""
    alignment_lambda: float = 30.0
    """λ: weight of the compliance alignment reward."""
    patience: int = 20
    """Updates without a new best compliance before a visit gives up."""
    inherit: str = "base"
    """Where a visit starts: base (default: every visit, a repeated one too, trains from the
    pretrained base, so each visit is an independent measurement of "base + training on this
    workflow" and visits are comparable); closest (a first visit from the closest trained workflow
    by Kendall distance, a repeated one from the workflow's own policy: later visits inherit
    longer training, which is what made the first search re-train one workflow again and again);
    scratch (a fresh policy)."""
    detrend: bool = False
    """Regress the rewards on log(training episodes behind the policy) before the GP models them
    (only needed with --inherit closest, where later visits inherit longer-trained policies)."""
    beta: float | None = None
    """Constant UCB β; None = the GP-UCB schedule (wfrl.search.gp)."""
    gp_eval_episodes: int = 0
    """0 (the reference): the GP gets the mean env reward of the visit's final training update.
    N > 0: it gets the mean over N extra episodes of the final policy (sampling, as in training;
    evaluation episode numbers, not counted in --total-episodes), a less noisy measurement."""
    acquisition: str = "constrained"
    """How the next workflow is chosen: constrained (GP-UCB of reward × probability of reaching θ,
    from a second GP on every visit's compliance), ucb (reward-only GP-UCB, the first search),
    random (uniformly among the workflows not yet visited: the control that shows what the models
    add) or original (the original system's rule); training, gating and reporting stay the same."""
    max_evaluations: int = 0
    """Stop after this many workflow visits (0: only the episode budget stops the search)."""
    count_foothold: bool = False
    """Count red's permanent User0 foothold as compromised (the original system's rule)."""
    seed: int = 0
    """Seed of the search, the learners and every episode."""
    out: str = "runs/latest"
    """Run directory."""
    force: bool = False
    """Replace a run already in --out."""
    ray_address: str | None = None
    """Ray cluster to join with --collector ray (default: a private local instance)."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO hyperparameters."""

    def validate(self) -> "SearchConfig":
        check_backend(self.backend)
        if self.collector != AUTO_COLLECTOR:
            check_collector(self.collector)
        check_red_agent(self.red_agent)
        for name in ("total_episodes", "max_episodes", "episodes_per_update", "n_workers",
                     "patience", "compliance_window"):
            _positive(name, getattr(self, name))
        for name in ("min_episodes", "max_evaluations", "pretrain_episodes", "gp_eval_episodes"):
            _non_negative(name, getattr(self, name))
        _check_compliance_settings(self)
        check_choice("inheritance", self.inherit, INHERIT)
        check_choice("acquisition", self.acquisition, ACQUISITIONS)
        if self.beta is not None:
            _non_negative("beta", self.beta)
        _check_ppo(self.ppo)
        return self

    def resolved_collector(self) -> str:
        return best_collector() if self.collector == AUTO_COLLECTOR else self.collector

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SearchConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise UserError(f"unknown setting {unknown[0]!r} in the run's experiment_config.json")
        d = dict(d)
        ppo = d.pop("ppo", {}) or {}
        if not isinstance(ppo, dict):
            raise UserError("'ppo' in the run's experiment_config.json is not an object")
        ppo_names = {f.name for f in dataclasses.fields(PPOConfig)}
        bad = sorted(set(ppo) - ppo_names)
        if bad:
            raise UserError(f"unknown PPO setting {bad[0]!r} in the run's experiment_config.json")
        try:
            return cls(**d, ppo=PPOConfig(**ppo))
        except TypeError as exc:
            raise UserError(f"bad experiment_config.json: {exc}") from None


@dataclass
class EvalConfig:
    checkpoint: str
    """Checkpoint written by `wfrl train`."""
    backend: str = "sim"
    """Environment backend to evaluate on."""
    red_agent: str = "B_lineAgent"
    """Red attacker."""
    episodes: int = 100
    """Episodes per policy mode (greedy and sampling)."""
    seed: int = 12345
    """Seed of the evaluation episodes."""
    workflow: str | None = None
    """Workflow to condition on; default: the one the checkpoint was trained on."""

    def validate(self) -> "EvalConfig":
        check_backend(self.backend)
        check_red_agent(self.red_agent)
        _positive("episodes", self.episodes)
        if self.workflow is not None:
            Workflow.parse(self.workflow)
        return self
