"""Settings of `wfrl eval` (a checkpoint's returns, and the CAGE2 protocol with --cage2) and of
the decision-time planner that eval, replay and the planner's experiments share. Declared like
every other setting (wfrl.config: a dataclass field, its default, its check and its help text)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from wfrl.config.fields import (
    BACKEND_METAVAR,
    RED_METAVAR,
    Settings,
    flag_name,
    known_backend,
    known_red_agent,
    known_workflow,
    positive,
    seed_range,
    setting,
)
from wfrl.config.names import BELIEF_REDS
from wfrl.errors import UserError, check_choice

# --plan-red names beside the red agents: a mixture of the three reds, or the red the evaluation
# plays (wfrl.evaluation.planner)
PLAN_REDS = ("mixture", "known")


def _plan_red(name, value):
    check_choice("plan red", value, PLAN_REDS + BELIEF_REDS)   # the reds the belief models


FAMILY_VIEW = "family"   # --reds family: CAGE2's two attackers and their variants


def parse_reds(value: str | None) -> tuple:
    """--reds as a tuple of red agents (None: CAGE2's three)."""
    from wfrl.config import names as table
    if value is None:
        return table.CAGE2_REDS
    if value == FAMILY_VIEW:
        return table.FAMILY_VIEW
    reds = tuple(r.strip() for r in str(value).split(","))
    if len(set(reds)) != len(reds):
        raise UserError(f"--reds names a red twice: {value!r}")
    for r in reds:
        check_choice("red agent", r, table.RED_AGENTS)
    return reds


def _reds(name, value):
    if value is not None:
        parse_reds(value)


def _plan_limit(key: str, low: int):
    def check(name, value):
        from wfrl._core import PLAN_LIMITS
        if not low <= value <= PLAN_LIMITS[key]:
            raise UserError(f"{flag_name(name)} must lie in {low}..{PLAN_LIMITS[key]} "
                            f"(got {value})")
    return check


def _plan_time(name, value):
    if not 0 <= value <= 1e7:
        raise UserError(f"{flag_name(name)} must lie in [0, 1e7] ms, 0 for no limit (got {value})")


@dataclass
class PlanSettings(Settings):
    """Decision-time search (wfrl.evaluation.planner): the budget of every decision."""
    plan: bool = False
    """Improve the greedy policy by decision-time search: a particle belief over the simulator's
    state and paired rollouts of the policy's top candidates (wfrl.evaluation.planner)."""
    plan_particles: int = setting(1000, check=_plan_limit("particles", 1))
    """Particles of the belief."""
    plan_candidates: int = setting(4, check=_plan_limit("candidates", 1))
    """Candidate actions searched per decision (the policy's top ones; 1: greedy only)."""
    plan_rollouts: int = setting(64, check=_plan_limit("rollouts", 0))
    """Rollouts per candidate per decision (paired across candidates)."""
    plan_depth: int = setting(15, check=_plan_limit("depth", 1))
    """Steps per rollout, the candidate included."""
    plan_time_ms: float = setting(45.0, check=_plan_time, metavar="MS")
    """Time limit of one decision in milliseconds (0: none); rollouts stop there."""
    plan_seed: int = setting(0, check=seed_range)
    """Seed of the planner's random streams (with each episode's own seed)."""
    plan_red: str = setting("mixture", check=_plan_red,
                            metavar="|".join(PLAN_REDS + BELIEF_REDS))
    """Red kinds of the particles: mixture (B_line, Meander, Sleep in equal shares), known (the
    episode's red, as the evaluation names it) or one red agent."""
    plan_leaf_value: bool = True
    """Add the critic's value at a rollout's last observation."""
    plan_hold: bool = False
    """When the greedy action is a fix, the rollouts of the other candidates never take it (they
    weigh fixing now against not fixing for the rollout's depth, rather than fixing a step later)."""


@dataclass
class EvalConfig(PlanSettings):
    """Evaluating a checkpoint (`wfrl eval`)."""
    checkpoint: str | None = None
    """Checkpoint file, or pretrained:NAME for a policy shipped with wfrl."""
    backend: str = setting("sim", check=known_backend, metavar=BACKEND_METAVAR)
    """Environment backend to evaluate on."""
    red_agent: str = setting("B_lineAgent", check=known_red_agent,
                             metavar=RED_METAVAR)
    """Red attacker."""
    episodes: int = setting(100, check=positive)
    """Episodes per policy mode (greedy and sampling)."""
    seed: int = setting(12345, check=seed_range)
    """Seed of the evaluation episodes."""
    workflow: str | None = setting(None, check=known_workflow)
    """Condition on this workflow instead of the checkpoint's."""

    def _check_together(self) -> None:
        if self.checkpoint is None:
            raise UserError("eval needs --checkpoint")


@dataclass
class Cage2EvalConfig(PlanSettings):
    """The CAGE Challenge 2 evaluation protocol (`wfrl eval --cage2`)."""
    checkpoint: str | None = None
    """The policy for every red (a file or pretrained:NAME)."""
    checkpoint_b_line: str | None = None
    """The policy that plays B_lineAgent (default: --checkpoint)."""
    checkpoint_meander: str | None = None
    """The policy that plays RedMeanderAgent (default: --checkpoint)."""
    backend: str = setting("sim", check=known_backend, metavar=BACKEND_METAVAR)
    """Environment backend."""
    episodes: int = setting(1000, check=positive)
    """Episodes per setting (episode length × red)."""
    seed: int = setting(153, check=seed_range)
    """Seed of the evaluation episodes."""
    n_workers: int | None = setting(None, check=positive)
    """Evaluation processes (default: 2 on cyborg, 1 on sim)."""
    sampling: bool = False
    """Sample actions instead of taking the greedy (argmax) action."""
    workflow: str | None = setting(None, check=known_workflow)
    """Condition on this workflow instead of the checkpoint's (with --agent: the workflow its
    fixes' compliance is measured under; none by default)."""
    agent: str | None = setting(None, metavar="MODULE:FACTORY")
    """Score any Python agent instead of a checkpoint: FACTORY() builds an object with
    get_action(observation, action_space) and end_episode(), as CAGE2's evaluation calls them."""
    action_timeout: float = setting(30.0, check=positive, metavar="S")
    """The longest one get_action call of an --agent may take, in seconds."""
    episode_timeout: float = setting(600.0, check=positive, metavar="S")
    """The longest one episode of an --agent (or building it) may take, in seconds."""
    agent_output: str | None = setting(None, metavar="FILE")
    """Append what an --agent prints to FILE (default: stderr, each line prefixed with its
    worker; lines a slowly read stderr cannot take are dropped and counted, never waited for)."""
    out: str | None = setting(None, metavar="FILE")
    """Also write the result as JSON to FILE, rewritten after every finished setting (a failed
    evaluation leaves its finished settings there, "complete": false)."""
    episodes_out: str | None = setting(None, metavar="FILE")
    """Also write one JSON line per episode to FILE (setting, episode, env seed, return, fixes,
    compliance, actions), each setting's lines added as it finishes: `wfrl compare` pairs two
    such files episode by episode."""
    attribute: bool = False
    """Also split each setting's mean return by host and cause (privileged red sessions,
    Restores, Op_Server0's impact), on the same episodes (the simulator then plays step by step:
    slower)."""
    reds: str | None = setting(None, check=_reds, metavar="RED[,RED]|family")
    """The red agents played, comma separated, or `family`: B_line, Meander and their nine
    variants (wfrl.envs.reds), with each variant's drop from its base red (default: CAGE2's
    B_line, Meander and Sleep)."""

    def red_tuple(self) -> tuple:
        """The reds the protocol plays."""
        return parse_reds(self.reds)

    def _check_together(self) -> None:
        has_ck = self.checkpoint or self.checkpoint_b_line or self.checkpoint_meander
        if self.agent and has_ck:
            raise UserError("--agent and --checkpoint exclude each other")
        for flag, path in (("--out", self.out), ("--agent-output", self.agent_output),
                           ("--episodes-out", self.episodes_out)):
            if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise UserError(f"{flag} {path}: its directory does not exist")
        if self.agent_output and not self.agent:
            raise UserError("--agent-output applies to --agent")
        if self.agent and self.sampling:
            raise UserError("--sampling applies to checkpoints; an agent chooses its own actions")
        if self.plan and (self.agent or self.sampling):
            raise UserError("--plan searches around a checkpoint's greedy policy: not with "
                            "--agent or --sampling")
        if not (has_ck or self.agent):
            raise UserError("--cage2 needs --checkpoint (or --checkpoint-b-line and "
                            "--checkpoint-meander) or --agent MODULE:FACTORY")


