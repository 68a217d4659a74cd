"""Settings of the tool commands: `wfrl parity` (the simulator against the real CybORG) and
`wfrl bench` (collector throughput, training time, search quality). Declared like every other
setting (wfrl.config: a dataclass field, its default, its check and its help text)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from wfrl.config.fields import (
    AUTO_COLLECTOR,
    BACKEND_METAVAR,
    COLLECTOR_METAVAR,
    RED_METAVAR,
    Settings,
    batch_list,
    belief_particles,
    flag_name,
    known_backend,
    known_collector,
    known_red_agent,
    positive,
    seed_range,
    setting,
)
from wfrl.config.names import CAGE2_REDS
from wfrl.errors import UserError, check_choice


def _parity_red(name, value):
    from wfrl.envs.base import check_red_agent
    check_red_agent(value, allow_mixed=False)


PARITY_RED_METAVAR = "|".join(CAGE2_REDS + ("VARIANT",))   # one red at a time


# the built-in blue policies of `wfrl parity` (wfrl.tools.parity plays them)
BLUE_POLICIES = ("sleep", "random", "react-restore", "react-remove", "decoy", "decoy-restore")


def check_blue_policy(name: str) -> str:
    """A built-in blue policy, or a learned one: a checkpoint (a file or pretrained:NAME) with a
    workflow of its own, played greedily."""
    if name in BLUE_POLICIES:
        return name
    from wfrl.runlog import PRETRAINED_PREFIX, load_checkpoint
    if name.startswith(PRETRAINED_PREFIX) or os.path.exists(name):
        load_checkpoint(name)   # a missing or damaged file: one line here
        return name
    return check_choice("blue policy (built in, or a checkpoint file or pretrained:NAME)", name,
                        BLUE_POLICIES)


def _blue_policy(name, value):
    check_blue_policy(value)


def _at_least_two(name, value):
    if value < 2:
        raise UserError(f"{flag_name(name)} must be at least 2 (got {value})")


@dataclass
class ParityConfig(Settings):
    """The simulator against the real CybORG under one blue policy (`wfrl parity`)."""
    red_agent: str = setting("B_lineAgent", check=_parity_red,
                             metavar=PARITY_RED_METAVAR)
    """Red attacker."""
    blue: str = setting("sleep", check=_blue_policy,
                        metavar="sleep|random|react-restore|react-remove|decoy|decoy-restore|"
                                "CHECKPOINT")
    """Blue policy played on both backends: a built-in one, or a learned one (a checkpoint file
    or pretrained:NAME, played greedily)."""
    episodes: int = setting(300, check=_at_least_two)
    """CybORG episodes."""
    sim_episodes: int | None = setting(None, check=_at_least_two)
    """Simulator episodes (default: max(episodes, 3000))."""
    seed: int = setting(0, check=seed_range)
    """Seed of the episodes."""


@dataclass
class BenchCollectorsConfig(Settings):
    """Every collector on the same workload (`wfrl bench collectors`)."""
    backend: str = setting("sim", check=known_backend, metavar=BACKEND_METAVAR)
    """Environment backend."""
    red_agent: str = setting("B_lineAgent", check=known_red_agent,
                             metavar=RED_METAVAR)
    """Red attacker."""
    n_workers: int = setting(2, check=positive)
    """Workers of the parallel collectors."""
    episodes: int | None = setting(None, check=positive)
    """Episodes per collector (default: 2000 on sim, 40 on cyborg)."""


@dataclass
class BenchTrainConfig(Settings):
    """Where a training run's time goes (`wfrl bench train`), on the simulator."""
    collector: str = setting(AUTO_COLLECTOR, check=known_collector, metavar=COLLECTOR_METAVAR)
    """Collector (auto: the one `wfrl train` picks on this machine)."""
    n_workers: int = setting(2, check=positive)
    """Workers of the parallel collectors."""
    red_agent: str = setting("B_lineAgent", check=known_red_agent, metavar=RED_METAVAR)
    """Red attacker."""
    episodes_per_update: int = setting(50, check=positive)
    """Episodes per batch (the search's default)."""
    batches: int = setting(12, check=positive)
    """Batches timed for the collect-only and update-only rates."""
    e2e_episodes: int = setting(2000, check=positive)
    """Episodes of each end-to-end training run."""
    repeats: int = setting(3, check=positive)
    """End-to-end runs with and without overlap (alternated)."""
    seed: int = setting(0, check=seed_range)
    """Seed of the learner and the episodes."""
    belief_input: int = setting(0, check=belief_particles, metavar="N")
    """Time only training with the belief block of N particles against the same training without
    it (collect alone and end to end, alternated); 0: the other measurements."""
    privileged: bool = False
    """Time only training with the privileged routes (--privileged-critic, and --teacher with
    the teacher given here) against the recipe, end to end, alternated run by run."""
    teacher: str | None = setting(None, metavar="CHECKPOINT")
    """The teacher of --privileged's teacher routes (a --truth-input checkpoint)."""
    attack: str | None = setting(None, metavar="DEFENDER")
    """Time only red's training against this defender (wfrl attack) against the blue recipe's,
    end to end, alternated run by run (--episodes-per-update 200 unless given)."""

    def _check_together(self) -> None:
        if self.teacher is not None and not self.privileged:
            raise UserError("--teacher applies to wfrl bench train --privileged")
        if sum((self.privileged, bool(self.belief_input), self.attack is not None)) > 1:
            raise UserError("--privileged, --belief-input and --attack time different things: "
                            "give one")


@dataclass
class BenchSearchConfig(Settings):
    """Search quality on planted ground truths (`wfrl bench search --planted`)."""
    planted: bool = False
    """Synthetic objectives over the 120 workflows (pairwise-order and position effects,
    feasibility by order constraints, noisy visits)."""
    instances: int = setting(5, check=positive)
    """Random problem instances."""
    seeds: int = setting(20, check=positive)
    """Optimizer runs per instance and acquisition."""
    batches: str = setting("1", check=batch_list, metavar="K[,K...]")
    """Visits in flight at once (--concurrent-visits), each size run as its own method: the
    acquisitions with K − 1 visits pending at every ask, results told in visit order."""
    out: str | None = None
    """Also write every run's record to this JSON file."""

    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.batches.split(","))

    def _check_together(self) -> None:
        if not self.planted:
            raise UserError("wfrl bench search needs --planted (the real-data quality benchmark "
                            "is bench/test_bench_search.py)")
