"""The settings of the duel's runs: red's learner (AttackConfig, `wfrl attack`) and population
training (PopulationConfig, `wfrl population`). Declared with wfrl.config.fields; nothing here
imports torch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wfrl.config.fields import (
    AUTO_COLLECTOR,
    COLLECTOR_METAVAR,
    Settings,
    flag_name,
    known_collector,
    known_workflow,
    non_negative,
    one_of,
    positive,
    ray_address,
    seed_range,
    setting,
    unit_interval,
)
from wfrl.config.names import DUEL_BACKENDS, POPULATION_MAX, expand_reds
from wfrl.config.run import PPOConfig, resolve_collector
from wfrl.errors import UserError

# ---------------------------------------------------------------------------------------------
# A red learner's run

# the red learner's starting point (wfrl.training.attack): each network clipped alone (the
# compiled steps apply), the rest PPOConfig's defaults
ATTACK_PPO: dict[str, Any] = {"clip_per_net": True}


@dataclass
class AttackConfig(Settings):
    """A red best response to a frozen defender (`wfrl attack`)."""
    checkpoint: str = setting("pretrained:any_workflow", metavar="CHECKPOINT")
    """The defender: a blue checkpoint (a file or pretrained:NAME), frozen and played greedily."""
    workflow: str | None = setting(None, check=known_workflow)
    """The workflow the defender follows (default: the checkpoint's own; an order-conditioned
    checkpoint needs one)."""
    backend: str = setting("sim", check=one_of(*DUEL_BACKENDS, what="attack backend"),
                           metavar="|".join(DUEL_BACKENDS))
    """The simulator, by the installed CybORG code or the leaderboard's (sim:leaderboard)."""
    total_episodes: int = setting(20_000, check=positive)
    """Episode budget of red's training."""
    episodes_per_update: int = setting(200, check=positive)
    """Episodes per PPO update."""
    eval_every: int = setting(5_000, check=non_negative)
    """Evaluate red greedily every N episodes on reserved episodes and keep the strongest as
    best.pt (0 = only at the end)."""
    eval_episodes: int = setting(500, check=positive)
    """Episodes of each evaluation and of the final score."""
    seed: int = setting(0, check=seed_range)
    """Seed of red's learner and of every episode."""
    out: str = "runs/attack"
    """Run directory for config, logs and checkpoints."""
    force: bool = False
    """Replace a run already in --out."""
    tensorboard: str | None = setting(None, metavar="DIR")
    """Also write red's training curves as TensorBoard event files to DIR."""
    threads: int = setting(2, check=positive)
    """Threads that play a batch's episodes side by side (each its share, without the GIL; the
    same episodes and records for any number)."""
    ppo: PPOConfig = setting(factory=lambda: PPOConfig(**ATTACK_PPO))
    """Red's PPO hyperparameters."""

    def _check_together(self) -> None:
        self.ppo._check_together()
        bad = [f for f in ("memory", "mask", "truth_input", "privileged_critic")
               if getattr(self.ppo, f)] + (["belief_input"] if self.ppo.belief_input else []) \
            + (["teacher"] if self.ppo.teacher is not None else [])
        if bad:
            raise UserError(f"{flag_name(bad[0])} is a defender's input or route; red's network "
                            "reads red's observation")


# ---------------------------------------------------------------------------------------------
# Population training: a defender against reds that learn

# the defender's learner in population training: the recipe's (memory, mask, the networks
# clipped apart) with the workflow search's base schedule, learning rate and entropy weight
# falling to a tenth over each round
POPULATION_PPO: dict[str, Any] = {"memory": True, "mask": True, "clip_per_net": True,
                                  "lr_final": 0.1, "entropy_final": 0.1}
META_SOLVERS = ("nash", "uniform")


@dataclass
class PopulationConfig(Settings):
    """A defender trained against a growing population of reds (`wfrl population`)."""
    rounds: int = setting(6, check=positive)
    """Rounds: each adds a red best response to the current defender to the population, then
    trains the defender on against the population's mixture."""
    init_from: str = setting("pretrained:any_workflow", metavar="CHECKPOINT")
    """The defender the loop starts from: an order-conditioned checkpoint (a file or
    pretrained:NAME) trained on the run's CybORG code."""
    backend: str = setting("sim", check=one_of(*DUEL_BACKENDS, what="population backend"),
                           metavar="|".join(DUEL_BACKENDS))
    """The simulator, by the installed CybORG code or the leaderboard's (sim:leaderboard)."""
    reds: str = setting("family-train", check=lambda n, v: expand_reds(v), metavar="RED[,RED...]")
    """The population's reds before any round: scripted reds, pools (their members) and
    learned reds (learned:PATH)."""
    meta_solver: str = setting("nash", check=one_of(*META_SOLVERS, what="meta-solver"))
    """How the defender's training mixes the population: nash (red's Nash mixture of the
    payoff matrix of the defenders so far against the population) or uniform."""
    scripted_share: float = setting(0.5, check=unit_interval)
    """The share of the defender's training episodes played against --reds (uniformly),
    whatever the meta-solver says; the rest follow its mixture over the whole population (0:
    the meta-solver alone, which forgets CAGE2's reds: docs/robustness.md)."""
    defender_episodes: int = setting(60_000, check=positive)
    """The defender's training episodes per round."""
    episodes_per_update: int = setting(200, check=positive)
    """The defender's episodes per PPO update (one random workflow each)."""
    attack_episodes: int = setting(50_000, check=positive)
    """Each red best response's training episodes (wfrl attack's --total-episodes)."""
    best_responses: int = setting(1, check=positive, metavar="K")
    """Fresh red best responses per round, each its own seed, run side by side (worker
    processes, or Ray tasks with --ray-address); all K join the population, and the strongest
    measures the defender's exploitability."""
    attack_eval_every: int = setting(5_000, check=non_negative)
    """A best response's evaluations (wfrl attack's --eval-every)."""
    eval_episodes: int = setting(500, check=positive)
    """Episodes of each score: a best response's evaluations and exploitability, the defender's
    held-out returns, each entry of the payoff matrix."""
    workflow: str = setting("critical_first", check=known_workflow)
    """The workflow the defender follows while red attacks it and in the payoff matrix (its
    training draws a random one per update)."""
    alignment_lambda: float = setting(30.0, check=non_negative)
    """λ: weight of the compliance alignment reward in the defender's training."""
    seed: int = setting(0, check=seed_range)
    """Seed of both learners and of every episode."""
    out: str = "runs/population"
    """Run directory for config, records and checkpoints."""
    force: bool = False
    """Replace a run already in --out."""
    tensorboard: str | None = setting(None, metavar="DIR")
    """Also write each round's scores as TensorBoard event files to DIR."""
    collector: str = setting(AUTO_COLLECTOR, check=known_collector, metavar=COLLECTOR_METAVAR)
    """How the defender's experience is collected (auto = async with ≥ 2 cores)."""
    n_workers: int = setting(2, check=positive)
    """Worker processes / actors of the parallel collectors."""
    ray_address: str | None = setting(None, check=ray_address, metavar="HOST:PORT")
    """Ray cluster (HOST:PORT) to join with --collector ray; with --best-responses K > 1 the
    best responses run there as Ray tasks."""
    threads: int = setting(2, check=positive)
    """Threads of a best response's duel loop and of the payoff matrix's episodes."""
    ppo: PPOConfig = setting(factory=lambda: PPOConfig(**POPULATION_PPO))
    """The defender's PPO hyperparameters (its network must be --init-from's)."""

    def resolved_collector(self) -> str:
        return resolve_collector(self.collector)

    def _check_together(self) -> None:
        self.ppo._check_together()
        bad = [f for f in ("truth_input", "privileged_critic") if getattr(self.ppo, f)] + \
            (["belief_input"] if self.ppo.belief_input else []) + \
            (["teacher"] if self.ppo.teacher is not None else [])
        if bad:
            raise UserError(f"{flag_name(bad[0])}: population training trains a deployable "
                            "defender that reads its own observation")
        size = len(expand_reds(self.reds)) + self.rounds * self.best_responses
        if size > POPULATION_MAX:
            raise UserError(f"--rounds {self.rounds} with --best-responses {self.best_responses} "
                            f"grows the population to {size} reds; it holds at most "
                            f"{POPULATION_MAX}")
