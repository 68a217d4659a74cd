"""The settings of the runs: the learner (PPOConfig and its presets), one workflow's training
(TrainConfig), the workflow search (SearchConfig) and the exhaustive ground truth
(ExhaustiveConfig); the duel's runs are wfrl.config.duel's. Declared with wfrl.config.fields;
nothing here imports torch."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

from wfrl.config.fields import (
    AUTO_COLLECTOR,
    BACKEND_METAVAR,
    COLLECTOR_METAVAR,
    RED_METAVAR,
    Settings,
    belief_particles,
    known_backend,
    known_collector,
    known_red_agent,
    known_workflow,
    non_negative,
    one_of,
    open_unit_interval,
    positive,
    ray_address,
    red_list,
    seed_range,
    setting,
    unit_interval,
)
from wfrl.config.names import BELIEF_REDS
from wfrl.errors import UserError, check_choice

# ---------------------------------------------------------------------------------------------
# The learner


@dataclass
class PPOConfig(Settings):
    lr: float = setting(0.002, check=positive)
    """Adam learning rate."""
    gamma: float = setting(0.99, check=unit_interval)
    """Discount factor."""
    gae_lambda: float = setting(0.95, check=unit_interval)
    """GAE λ."""
    clip: float = setting(0.2, check=open_unit_interval)
    """PPO ratio clip ε."""
    epochs: int = setting(6, check=positive)
    """Passes over each batch."""
    minibatches: int = setting(4, check=positive)
    """Minibatches per epoch."""
    entropy_coef: float = setting(0.01, check=non_negative)
    """Weight of the entropy bonus."""
    value_coef: float = setting(0.5, check=non_negative)
    """Weight of the value loss."""
    max_grad_norm: float = setting(0.5, check=positive)
    """Global gradient-norm clip."""
    clip_per_net: bool = False
    """Clip the actor's and the critic's gradient norms separately (each to --max-grad-norm),
    so that a critic whose loss explodes does not shrink the actor's step."""
    target_kl: float = setting(0.0, check=non_negative)
    """Early stop of an update: once a minibatch's approximate KL divergence from the policy
    that played the batch exceeds 1.5 × this, the update ends before its step (0 = off)."""
    hidden: int = setting(64, check=positive)
    """Units in each of the two hidden layers of actor and critic."""
    memory: bool = False
    """Add the defender's memory block (seen scans, compromises since my last restore, my
    restores and decoys, time) to the policy input."""
    mask: bool = False
    """Never choose actions that cannot do anything: Monitor, decoys a host cannot carry or has."""
    truth_input: bool = False
    """Add red's true access per host (none/user/privileged one-hot), which no defender can see,
    to the policy input: the full-information bound (docs/limit.md), not a deployable policy."""
    belief_input: int = setting(0, check=belief_particles, metavar="N")
    """Add the belief block of an N-particle filter (per host the share of particles in which red
    has no, user or privileged access, and the share of each red kind) to the policy input; the
    filter follows every episode inside the rollout loop, also on CybORG (0 = off)."""
    belief_red: str = setting("mixture", check=one_of("mixture", *BELIEF_REDS))
    """The red kinds the belief's particles may be: mixture (B_line, Meander and Sleep, a
    third of the particles each at reset) or one red agent."""
    decoupled: bool = True
    """On a batch played by older weights (collected during the previous update, --overlap):
    clip the ratio against the policy before this update, weighting each step by its probability
    under it over the behaviour one (decoupled PPO); without, against the behaviour policy."""
    first_fix_bonus: bool = True
    """The alignment rule's first-fix bonus (the original system's rule): the compliance rate
    starts each episode at 0.5, so the first compliant fix earns λ/2. It speeds early learning,
    but, earned soonest by a fix at step 1, it teaches a pointless fix there; without it
    (--no-first-fix-bonus, the recipe) long runs end better, short ones from scratch learn too
    slowly."""
    lr_final: float = setting(1.0, check=non_negative)
    """Final learning rate of a single-workflow run, a fraction of --lr (linear; 1 = constant)."""
    entropy_final: float = setting(1.0, check=non_negative)
    """Entropy weight at the end of a single-workflow run, as a fraction of --entropy-coef
    (linear; 1 = constant)."""
    privileged_critic: bool = False
    """Advantages from a value network of its own that also reads red's true access (recorded
    by the simulator at every step); the policy still sees only the defender's input
    (docs/limit.md)."""
    privileged_epochs: int = setting(6, check=positive)
    """Passes of the privileged critic over each batch (its minibatches are the update's)."""
    teacher: str | None = setting(None, metavar="CHECKPOINT")
    """A full-information policy (a --truth-input checkpoint) whose action distribution at every
    state the student plays pulls the student's actor toward it after each update (a KL term
    weighted per state; docs/limit.md). Single-workflow runs on the simulator."""
    teacher_coef: float = setting(1.0, check=non_negative)
    """Weight of the KL term toward --teacher at the start of the run."""
    teacher_anneal: float = setting(0.7, check=unit_interval)
    """Share of the run over which the teacher's weight falls linearly to --teacher-floor."""
    teacher_floor: float = setting(0.0, check=non_negative)
    """The teacher's weight after the anneal (0: the student ends on its own advantages)."""
    teacher_steps: int = setting(4, check=positive)
    """Minibatch steps of the teacher's pass after each update, each on one of the batch's
    --minibatches random shares (at most a whole pass; fewer: cheaper, fewer states)."""
    teacher_alpha: float = setting(4.0, check=non_negative)
    """Per-state weighting: exp(−α · KL(teacher ‖ a head that predicts the teacher from the
    student's input)), low where the student cannot infer what the teacher knows (0 = every
    state alike)."""

    def _check_together(self) -> None:
        if self.truth_input and (self.privileged_critic or self.teacher is not None):
            raise UserError("--privileged-critic and --teacher train a policy without the truth "
                            "input; with --truth-input the policy reads it itself")

    def net(self):
        from wfrl.features import MIXTURE_RED_BITS, PARTICLE_RED_BITS
        from wfrl.ppo.netspec import NetSpec
        reds = PARTICLE_RED_BITS.get(self.belief_red, MIXTURE_RED_BITS)
        return NetSpec(self.hidden, self.memory, self.mask, self.truth_input, self.belief_input,
                       reds)


# Named starting points for the learner; flags given on the command line override them. The one
# place presets are resolved: preset_settings() (every command that trains takes them from it).
#   recipe   (default) the shipped policies' command (docs/training.md): 200 episodes per update,
#            memory block and action mask, the two networks' gradient norms clipped apart,
#            learning rate and entropy weight annealed to a tenth, no first-fix bonus, the greedy
#            policy evaluated every 5,000 episodes (best.pt).
#   original the original system's learner: 10 episodes per update, observation and workflow
#            only, constant schedules, one joint gradient-norm clip, no periodic evaluation, no
#            overlap, and its alignment rule with the first-fix bonus (the dataclass defaults).
PPO_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "recipe": {"train": {"episodes_per_update": 200, "eval_every": 5000},
               "ppo": {"memory": True, "mask": True, "lr_final": 0.1, "entropy_final": 0.1,
                       "first_fix_bonus": False, "clip_per_net": True}},
    "original": {"train": {"episodes_per_update": 10, "eval_every": 0, "overlap": False},
                 "ppo": {"memory": False, "mask": False, "lr_final": 1.0, "entropy_final": 1.0,
                         "first_fix_bonus": True, "clip_per_net": False}},
}
# The learner's compiled minibatch steps, set by the environment (not a flag: it picks how the
# same update is computed, not what is learned; the run's record names the path taken).
COMPILED_STEP_ENV = "WFRL_COMPILED_STEP"
COMPILED_STEP_MODES = ("auto", "off", "on")


def compiled_step_setting(value: str | None = None) -> str:
    """WFRL_COMPILED_STEP (or `value`), checked: auto (the default: the compiled steps where the
    CPU has AVX-512), off (torch's steps, and the portable tiling for any compiled call: a
    machine with AVX-512 runs as one without) or on (the compiled steps on any CPU)."""
    import os
    raw = os.environ.get(COMPILED_STEP_ENV, "auto") if value is None else value
    mode = raw.strip().lower() or "auto"
    if mode not in COMPILED_STEP_MODES:
        raise UserError(f"{COMPILED_STEP_ENV} must be one of {', '.join(COMPILED_STEP_MODES)}, "
                        f"got {raw!r}")
    return mode


DEFAULT_PRESET = "recipe"


# PPO settings added after runs were already being stored, with the value a run stored before
# the setting existed ran with: a resumed search or a continued table goes on as it began.
PPO_SETTINGS_OF_OLDER_RUNS = {"decoupled": False, "first_fix_bonus": True,
                              "clip_per_net": False, "truth_input": False, "belief_input": 0,
                              "belief_red": "mixture", "privileged_critic": False,
                              "privileged_epochs": 6, "teacher": None, "teacher_coef": 1.0,
                              "teacher_anneal": 0.7, "teacher_steps": 4, "teacher_alpha": 4.0,
                              "teacher_floor": 0.0}


def with_older_runs_ppo(stored_ppo: dict) -> dict:
    """A stored run's PPO settings, the ones it predates filled in as it ran."""
    return {**PPO_SETTINGS_OF_OLDER_RUNS, **stored_ppo}


# The schedule `wfrl exhaustive`'s older protocols (finetune, conditioned) were measured with:
# constant, with the first-fix bonus. Under the recipe preset they keep it.
OLDER_PROTOCOL_SCHEDULE = {"lr_final": 1.0, "entropy_final": 1.0, "first_fix_bonus": True}


def preset_settings(name: str | None, protocol: str | None = None) -> tuple[dict, dict]:
    """(run settings, PPO settings) of a preset (None: the default, recipe) for `wfrl train`,
    `wfrl exhaustive --protocol recipe` and the benchmarks; with `protocol`, for that protocol
    of `wfrl exhaustive`."""
    name = name or DEFAULT_PRESET
    check_choice("--ppo-preset", name, tuple(PPO_PRESETS))
    p = PPO_PRESETS[name]
    ppo = dict(p["ppo"])
    if name == "recipe" and protocol in ("finetune", "conditioned"):
        ppo.update(OLDER_PROTOCOL_SCHEDULE)
    return dict(p["train"]), ppo


# ---------------------------------------------------------------------------------------------
# Runs

ACQUISITIONS = ("constrained", "ucb", "random", "original")
INHERIT = ("base", "closest", "scratch")
VISIT_EVALS = ("greedy", "training")
PROTOCOLS = ("finetune", "conditioned", "recipe")


def resolve_collector(name: str) -> str:
    """The collector a run uses: `auto` stands for best_collector(), any other name for itself."""
    return best_collector() if name == AUTO_COLLECTOR else name


def best_collector() -> str:
    """The collector `auto` stands for: async when the machine has a second core for its workers
    (collection then overlaps between workers while the PPO update runs here), else sequential."""
    import os
    return "async" if (os.cpu_count() or 1) >= 2 else "sequential"




class _HasCollector(Protocol):
    """A run's settings with the `collector` setting (declared by each _RunSettings subclass)."""
    collector: str


@dataclass
class _RunSettings(Settings):
    """Settings a single-workflow run and a search share, with the same defaults."""
    backend: str = setting("sim", check=known_backend, metavar=BACKEND_METAVAR)
    """Environment backend: sim (compiled CAGE2) or cyborg (real CybORG); with :leaderboard
    (sim:leaderboard, cyborg:leaderboard), played by the CybORG code the CAGE2 final leaderboard
    was scored on (docs/evaluation.md, "The leaderboard's CybORG")."""
    n_workers: int = setting(2, check=positive)
    """Worker processes / actors of the parallel collectors."""
    red_agent: str = setting("B_lineAgent", check=known_red_agent, metavar=RED_METAVAR)
    """Red attacker (mixed: each episode B_line or Meander)."""
    alignment_lambda: float = setting(30.0, check=non_negative)
    """λ: weight of the compliance alignment reward."""
    count_foothold: bool = False
    """Count red's permanent User0 foothold as compromised (the original system's rule)."""
    seed: int = setting(0, check=seed_range)
    """Seed of the learners and of every episode (env and action sampling)."""
    out: str = "runs/latest"
    """Run directory for config, logs and checkpoints."""
    force: bool = False
    """Replace a run already in --out (its files are replaced)."""
    tensorboard: str | None = setting(None, metavar="DIR")
    """Also write the training curves as TensorBoard event files to DIR (`tensorboard --logdir
    DIR`; needs the tensorboard package, the [tensorboard] extra)."""
    ray_address: str | None = setting(None, check=ray_address, metavar="HOST:PORT")
    """Ray cluster (HOST:PORT) to join with --collector ray (default: a private local instance)."""
    overlap: bool = True
    """Collect the next batch while the learner updates on this one (with the weights from
    before the update: one version stale); deterministic either way."""
    learner_threads: int = setting(1, check=positive)
    """torch threads of the PPO update (results depend on it, as torch's sums do; more than one
    pays only for larger networks, and spins idle threads when other processes hold the cores)."""
    ppo: PPOConfig = setting(factory=PPOConfig)
    """PPO hyperparameters."""

    def resolved_collector(self: _HasCollector) -> str:
        return resolve_collector(self.collector)

    def _check_together(self) -> None:
        self.ppo._check_together()
        if self.ppo.privileged_critic or self.ppo.teacher is not None:
            from wfrl.envs.base import backend_engine
            if backend_engine(self.backend) == "cyborg":
                raise UserError("--privileged-critic and --teacher learn from the simulator's "
                                "truth rows: train with --backend sim (or sim:leaderboard)")


@dataclass
class TrainConfig(_RunSettings):
    """Training one workflow (`wfrl train --workflow W`)."""
    workflow: str = setting("balanced", check=known_workflow)
    """Priority order of the unit types (comma or arrow separated) or a canonical name."""
    collector: str = setting("sequential", check=known_collector, metavar=COLLECTOR_METAVAR)
    """How experience is collected (auto = async with ≥ 2 cores, else sequential)."""
    total_episodes: int = setting(1000, check=positive)
    """Episode budget of the run."""
    episodes_per_update: int = setting(10, check=positive)
    """Episodes collected for each PPO update."""
    min_episodes: int = setting(0, check=non_negative)
    """Episodes before compliance may stop training early."""
    warmup: int = setting(0, check=non_negative)
    """Episodes at the start played without the compliance reward (λ = 0), as the search's
    base warms up: the policy learns to defend, then to follow its order (0: none)."""
    compliance_threshold: float = setting(0.95, check=unit_interval)
    """θ: stop once an update's mean compliance reaches it (after --min-episodes)."""
    eval_every: int = setting(0, check=non_negative)
    """Evaluate the greedy policy every this many training episodes on reserved episodes and
    keep the best as best.pt (0: never)."""
    eval_episodes: int = setting(500, check=positive)
    """Episodes of each periodic evaluation."""
    init_from: str | None = setting(None, metavar="CHECKPOINT")
    """Start from this policy's weights (a checkpoint file or pretrained:NAME) with a fresh
    optimiser — fine-tuning, e.g. a shipped policy on another backend. Its network (hidden width,
    memory, mask) must be this run's."""

    def parsed_workflow(self):
        from wfrl.workflow import Workflow
        return Workflow.parse(self.workflow)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        wf = self.parsed_workflow()
        d["workflow_order"] = str(wf)
        d["workflow_id"] = wf.index
        return d


@dataclass
class SearchConfig(_RunSettings):
    """A GP-UCB workflow search (`wfrl train` without --workflow)."""
    collector: str = setting(AUTO_COLLECTOR, check=known_collector, metavar=COLLECTOR_METAVAR)
    """How experience is collected (auto = async with ≥ 2 cores, else sequential)."""
    red_agent: str = setting("mixed", check=known_red_agent, metavar=RED_METAVAR)
    """Red attacker of training (mixed: each episode B_line or Meander); the visits are measured
    against each red it stands for (--visit-eval greedy)."""
    total_episodes: int = setting(75_000, check=positive)
    """Episode budget of the whole search (never exceeded; on the leaderboard's code the default
    is 135,000, the longer base's 60,000 more)."""
    max_episodes: int = setting(3_000, check=positive)
    """Episodes one visit of a workflow may use."""
    min_episodes: int = setting(1_000, check=non_negative)
    """Episodes of a visit before compliance may end it (it comes long before reward settles)."""
    pretrain_episodes: int = setting(60_000, check=non_negative)
    """Training of the base before the first visit (part of the budget), one random workflow
    per update, so every visit starts from a policy that already defends and follows orders;
    the learner's schedules (--lr-final, --entropy-final) run over it and the visits train at
    their end values. 0 = none (the original system). 120,000 on the leaderboard's code."""
    base: str = setting("auto", metavar="pretrain|auto|CHECKPOINT")
    """Where the visits start: pretrain (a base pretrained here, --pretrain-episodes), auto (the
    order-conditioned policy shipped for this CybORG code, pretrained:any_workflow or
    pretrained:any_workflow_leaderboard, when the search's backend code, λ, foothold rule and
    input blocks are the ones it was trained with and --pretrain-episodes is not given; then
    the budget is all visits, 30,000 by default; otherwise a base pretrained here, and the run
    says why) or a conditioned policy to start from (a file or pretrained:NAME, refused unless
    those settings match)."""
    pretrain_warmup: int | None = setting(None, check=non_negative)
    """Episodes at the start of the pretraining played without the compliance reward (λ = 0):
    the base learns to defend, then to follow orders (default: a third of --pretrain-episodes;
    0: none, as `wfrl exhaustive --protocol recipe` trains the ground truth's policies)."""
    episodes_per_update: int = setting(200, check=positive)
    """Episodes collected for each PPO update."""
    compliance_threshold: float = setting(0.95, check=unit_interval)
    """θ: a visit ends successfully once its compliance (the mean over its last
    --compliance-window updates) reaches it."""
    compliance_window: int = setting(3, check=positive)
    """Updates averaged into a visit's compliance (1 = the last update alone, the first search)."""
    patience: int = setting(5, check=positive)
    """Updates without a new best compliance before a visit gives up."""
    inherit: str = setting("base", check=one_of(*INHERIT, what="inheritance"),
                           metavar="|".join(INHERIT))
    """Where a visit starts: base (every visit, a repeated one too, from the pretrained base:
    independent, comparable measurements), closest (a first visit from the closest trained
    workflow, a repeat from its own policy: the first search) or scratch."""
    detrend: bool = False
    """Regress the rewards on log(training episodes behind the policy) before the GP models them
    (only needed with --inherit closest)."""
    beta: float | None = setting(None, check=non_negative)
    """Constant UCB β (default: the GP-UCB schedule)."""
    visit_eval: str = setting("greedy", check=one_of(*VISIT_EVALS), metavar="|".join(VISIT_EVALS))
    """How a finished visit is measured. greedy: its final policy plays --gp-eval-episodes
    greedy episodes (reserved, outside the budget) against each red the search trains on (B_line
    and Meander for mixed); reward, its SE and compliance are the means over those reds (equal
    weight, as the CAGE2 score sums them). training: the earlier rule (the last update's reward,
    compliance from --compliance-eval-episodes sampled episodes)."""
    gp_eval_episodes: int = setting(200, check=non_negative)
    """Episodes of a visit's evaluation: per red with --visit-eval greedy; with training, 0 = the
    mean env reward of the final training update, N > 0 = the mean of N sampled episodes of the
    final policy (of --compliance-eval-episodes when that is larger: one evaluation serves
    both)."""
    compliance_eval_episodes: int = setting(200, check=non_negative)
    """With --visit-eval training, N > 0: a finished visit's compliance (what decides θ and what
    the feasibility model learns) is measured on N extra episodes of its final policy (reserved,
    outside the budget); the window that ended the visit, the first to cross θ, reads high.
    0: that window (the first searches)."""
    acquisition: str = setting("constrained", check=one_of(*ACQUISITIONS),
                               metavar="|".join(ACQUISITIONS))
    """How the next workflow is chosen: constrained (UCB of reward × probability of reaching θ),
    ucb (reward only, the first search), random (uniformly among the unvisited: the control) or
    original (the original system's rule)."""
    max_evaluations: int = setting(0, check=non_negative)
    """Stop after this many workflow visits (0: only the episode budget stops the search)."""
    concurrent_visits: int = setting(1, check=positive, metavar="K")
    """Visits trained at once, each its own learner with its own collector (a worker process
    here, or a Ray task with --ray-address): the optimizer asks for visit i once visit i − K is
    told, the visits in flight pending (believed at their posterior means), and results are
    told in visit order, so the records depend on the seed and K alone. Each visit reserves its
    share of the budget when asked (at most --max-episodes). 1: one visit after another."""

    def _check_together(self) -> None:
        super()._check_together()
        if self.ppo.teacher is not None:
            raise UserError("--teacher trains one workflow's policy: give --workflow")
        if self.concurrent_visits > 1 and self.collector == "ray":
            raise UserError("--concurrent-visits runs each visit with a collector of its own, "
                            "on the node its task is placed on: choose --collector sequential, "
                            "sync, async or auto (--ray-address places the visits on the "
                            "cluster)")
        if self.visit_eval == "greedy" and self.gp_eval_episodes < 2:
            raise UserError("--visit-eval greedy needs --gp-eval-episodes ≥ 2 (its episodes per "
                            "red)")

    def warmup_episodes(self) -> int:
        """Pretraining episodes without the compliance reward (--pretrain-warmup, resolved)."""
        pretrain = min(self.pretrain_episodes, self.total_episodes)
        given = self.pretrain_warmup
        return min(pretrain // 3 if given is None else given, pretrain)

    def eval_reds(self) -> list[str]:
        """The reds a greedy visit evaluation plays: the training red, or both of mixed."""
        from wfrl.config.names import MIXED, MIXED_REDS
        return list(MIXED_REDS) if self.red_agent == MIXED else [self.red_agent]


@dataclass
class ExhaustiveConfig(Settings):
    """Every workflow trained and evaluated under one protocol (`wfrl exhaustive`)."""
    red_agent: str | None = setting(None, check=known_red_agent,
                                    metavar=RED_METAVAR)
    """Red attacker of training (default: mixed with --protocol recipe, else B_lineAgent)."""
    protocol: str = setting("finetune", check=one_of(*PROTOCOLS), metavar="|".join(PROTOCOLS))
    """finetune: each workflow trains from a pretrained base; conditioned: one order-conditioned
    policy, evaluated on each workflow; recipe: one order-conditioned policy trained with the
    single-workflow recipe's settings, every workflow evaluated greedy against each of
    --eval-reds (the ground truth at the learner's strength)."""
    pretrain_episodes: int | None = setting(None, check=non_negative)
    """finetune: episodes of the pretraining that gives the base (0: from scratch; default
    10000); conditioned: training episodes of the conditioned policy (default 40000); recipe:
    the same (default 60000)."""
    eval_reds: str | None = setting(None, check=red_list, metavar="RED[,RED]")
    """recipe: the red attackers every workflow is evaluated against, comma separated (default
    B_lineAgent,RedMeanderAgent)."""
    episodes_per_workflow: int = setting(1000, check=positive)
    """finetune: training episodes of each workflow."""
    episodes_per_update: int = setting(50, check=positive)
    """Episodes collected for each PPO update."""
    eval_episodes: int | None = setting(None, check=positive)
    """Evaluation episodes per workflow (and red, with --protocol recipe; default 500 there,
    200 otherwise)."""
    alignment_lambda: float = setting(30.0, check=non_negative)
    """λ: weight of the compliance alignment reward."""
    backend: str = setting("sim", check=known_backend, metavar=BACKEND_METAVAR)
    """Environment backend."""
    collector: str = setting("sequential", check=known_collector,
                             metavar="sequential|sync|async|ray|auto")
    """How experience is collected."""
    n_workers: int = setting(2, check=positive)
    """Worker processes of the parallel collectors."""
    seed: int = setting(0, check=seed_range)
    """Seed of the first training run."""
    repeats: int = setting(1, check=positive)
    """Training runs per workflow (seeds seed, seed+1, …), combined into one table whose
    standard errors include training randomness."""
    concurrent: int = setting(1, check=positive, metavar="K")
    """Training runs (--repeats) carried out at once, each in a worker process of its own; the
    tables are the same whatever K (each run depends on its seed alone)."""
    ray_address: str | None = setting(None, check=ray_address, metavar="HOST:PORT")
    """Run every training run (--repeats) as a Ray task on the cluster at HOST:PORT, all at once
    (Ray places them by the CPUs they declare); each run's folder is shipped to its task and
    written back here when it ends."""
    out: str = "runs/exhaustive"
    """Directory for exhaustive.csv (an unfinished table there is continued)."""
    ppo: PPOConfig = setting(factory=PPOConfig)
    """PPO hyperparameters."""

    def resolved(self) -> ExhaustiveConfig:
        """This config with the protocol's defaults filled in."""
        recipe = self.protocol == "recipe"
        fill: dict[str, Any] = {"pretrain_episodes": DEFAULT_PRETRAIN.get(self.protocol, 0),
                                "red_agent": "mixed" if recipe else "B_lineAgent",
                                "eval_episodes": 500 if recipe else 200,
                                "eval_reds": "B_lineAgent,RedMeanderAgent" if recipe else None}
        return dataclasses.replace(self, **{k: v for k, v in fill.items()
                                            if getattr(self, k) is None})

    def eval_red_list(self) -> list[str]:
        """The reds the recipe protocol evaluates against."""
        reds = self.resolved().eval_reds
        return [] if reds is None else [r.strip() for r in reds.split(",")]

    def resolved_collector(self) -> str:
        return resolve_collector(self.collector)

    def _check_together(self) -> None:
        self.ppo._check_together()
        if self.ppo.teacher is not None:
            raise UserError("--teacher trains one workflow's policy: use wfrl train --workflow")
        if self.protocol in ("conditioned", "recipe") and self.resolved().pretrain_episodes == 0:
            raise UserError(f"--protocol {self.protocol} needs --pretrain-episodes > 0 (the "
                            "conditioned policy's training)")
        if self.eval_reds is not None and self.protocol != "recipe":
            raise UserError("--eval-reds applies to --protocol recipe")


DEFAULT_PRETRAIN = {"finetune": 10_000, "conditioned": 40_000, "recipe": 60_000}
