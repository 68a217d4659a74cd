"""The names wfrl's settings take, each declared once: the red agents and pools (RED_SPECS,
POOL_SPECS), the backends and the collectors. The command line's choices and metavars, the
configs' checks, the simulator's red codes, the pools, CAGE2_REDS, the CybORG classes
(wfrl.envs.reds) and parity's lists all come from these tables; tests/test_constants.py holds
the C enums and pool arrays (csrc/wfrl_cage2.h) equal to them. Nothing here imports numpy.

A red is one RedSpec: its name, the CAGE2 red it varies and is scored against (`base`), its
variant in the compiled simulator (RV_* in csrc/wfrl_cage2.h: the simulator's red kind code is
the base's code with the variant in bits 5-7), what kind of change it is, and where it stands in
the particle belief (CAGE2's three only). A pool is one PoolSpec: its code in the simulator and
its members, in the order the episode's draw indexes them. Adding a red: a RedSpec here, its C
twin in csrc/wfrl_cage2.h, its CybORG class (a variant: wfrl.envs.reds) and its parity record
(scripts/record_parity.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from wfrl.errors import UserError, check_choice

# -- backends: an engine, and the CybORG code it plays by ---------------------------------------
LEADERBOARD = ":leaderboard"
# sim: the compiled simulator; cyborg: the installed CybORG (csle-cyborg 0.0.3, the challenge
# repository's final code). NAME:leaderboard: the same played by the code the CAGE2 final
# leaderboard was scored on, before the repository's fixes of 16 and 19 August 2022 (a restored
# User3/User4 no longer falls to HarakaRCE; red's port memory of an IP only grows).
ENGINES = ("sim", "cyborg")
BACKENDS = ENGINES + tuple(e + LEADERBOARD for e in ENGINES)
# where red can be an agent (wfrl.envs.duel, wfrl attack): the simulator, either code
DUEL_BACKENDS = ("sim", "sim" + LEADERBOARD)

# -- collectors (wfrl.collect.base.make_collector builds each) ----------------------------------
COLLECTORS = ("sequential", "sync", "async", "ray")
AUTO_COLLECTOR = "auto"   # the collector name that stands for best_collector() (wfrl.config.run)

# -- red agents and pools -----------------------------------------------------------------------
# The simulator's codes of CAGE2's three reds (RED_BLINE, RED_MEANDER, RED_SLEEP) and of the
# variants (RV_*), csrc/wfrl_cage2.h; a red's kind code is base | variant << VARIANT_SHIFT.
BASE_CODES = {"B_lineAgent": 0, "RedMeanderAgent": 1, "SleepAgent": 2}
VARIANTS = {"none": 0, "delayed": 1, "bursty": 2, "noisy": 3, "scouting": 4, "persistent": 5,
            "enterprise": 6}
VARIANT_SHIFT = 5
# What a red changes against CAGE2's (docs/robustness.md's family table)
CHANGES = ("cage2", "timing", "noise", "path", "persistence", "target")


@dataclass(frozen=True)
class RedSpec:
    name: str
    base: str           # the CAGE2 red it varies, and is scored against (itself for CAGE2's)
    variant: str        # its variant (VARIANTS; "none" for CAGE2's three)
    change: str         # what it changes (CHANGES)
    summary: str        # one line: what it does

    @property
    def code(self) -> int:
        """The compiled simulator's red kind code (without WFRL_RED_LEADERBOARD)."""
        return BASE_CODES[self.base] | VARIANTS[self.variant] << VARIANT_SHIFT

    @property
    def cage2(self) -> bool:
        """One of CAGE2's own reds."""
        return self.name == self.base

    @property
    def belief_bit(self) -> int:
        """Its bit among the particle belief's red kinds (csrc/wfrl_belief.h WFRL_PLAN_RED_*),
        0 for a red the belief does not model (the variants)."""
        return 1 << BASE_CODES[self.name] if self.cage2 else 0


def _variant(base: str, variant: str, change: str, summary: str) -> RedSpec:
    stem = base.removesuffix("Agent").removeprefix("Red")
    return RedSpec(f"{variant.capitalize()}{stem}Agent", base, variant, change, summary)


B_LINE, MEANDER, SLEEP = "B_lineAgent", "RedMeanderAgent", "SleepAgent"
RED_SPECS: tuple[RedSpec, ...] = (
    RedSpec(B_LINE, B_LINE, "none", "cage2", "CAGE2's B_line: straight for Op_Server0"),
    RedSpec(MEANDER, MEANDER, "none", "cage2", "CAGE2's Meander: every host, subnet by subnet"),
    RedSpec(SLEEP, SLEEP, "none", "cage2", "CAGE2's sleeper: does nothing"),
    _variant(B_LINE, "delayed", "timing", "sleeps 5-25 steps, then B_line"),
    _variant(B_LINE, "bursty", "timing", "B_line in bursts of 3 steps, 2-5 steps apart"),
    _variant(B_LINE, "noisy", "noise", "B_line, scanning again before half its exploits"),
    _variant(MEANDER, "delayed", "timing", "sleeps 5-25 steps, then Meander"),
    _variant(MEANDER, "bursty", "timing", "Meander in bursts of 3 steps, 2-5 steps apart"),
    _variant(MEANDER, "noisy", "noise", "Meander, scanning again before half its exploits"),
    _variant(B_LINE, "scouting", "path", "B_line entering through a Linux user host"),
    _variant(B_LINE, "persistent", "persistence", "B_line retaking the footholds it lost"),
    _variant(MEANDER, "enterprise", "target", "Meander that never touches the plant"),
)
REDS = {spec.name: spec for spec in RED_SPECS}
CAGE2_REDS = tuple(spec.name for spec in RED_SPECS if spec.cage2)   # the C codes 0-2, in order
FAMILY = tuple(spec.name for spec in RED_SPECS if not spec.cage2)


@dataclass(frozen=True)
class PoolSpec:
    """Reds of which each episode plays the one its env seed draws (pool_member; the twin of
    wfrl_mixed_red_kind and wfrl_pool_red_code in csrc/wfrl_cage2.h)."""
    name: str
    code: int           # the simulator's red kind code (RED_MIXED, RED_POOL_*)
    members: tuple      # in the order the draw indexes them
    summary: str


MIXED = "mixed"
POOL_SPECS: tuple[PoolSpec, ...] = (
    PoolSpec(MIXED, 3, (B_LINE, MEANDER), "B_line or Meander, one half each"),
    PoolSpec("family", 4, FAMILY, "the nine variants"),
    # CAGE2's two and one variant of each schedule
    PoolSpec("family-train", 5, (B_LINE, MEANDER, "DelayedB_lineAgent", "BurstyMeanderAgent",
                                 "NoisyB_lineAgent"),
             "B_line, Meander and one variant of each schedule"),
    # the other six: the three schedules, each seen in training on the other base red, and path,
    # persistence and target, never seen
    PoolSpec("family-heldout", 6, ("DelayedMeanderAgent", "BurstyB_lineAgent",
                                   "NoisyMeanderAgent", "ScoutingB_lineAgent",
                                   "PersistentB_lineAgent", "EnterpriseMeanderAgent"),
             "the six variants family-train leaves out"),
)
POOL_OF = {pool.name: pool for pool in POOL_SPECS}
MIXED_REDS = POOL_OF[MIXED].members
POOLS = {p.name: p.members for p in POOL_SPECS if p.name != MIXED}   # wfrl's own pools
POOL_CODES = {name: POOL_OF[name].code for name in POOLS}
POOLED = tuple(POOL_OF)                     # a name whose episodes' red is drawn by the seed
RED_AGENTS = tuple(REDS)                    # one red for every episode
TRAIN_RED_AGENTS = RED_AGENTS + POOLED      # what --red-agent takes
RED_METAVAR = "|".join(CAGE2_REDS + (MIXED, "VARIANT", "POOL"))
ATTACKERS = tuple(spec.name for spec in RED_SPECS if spec.cage2 and spec.name != SLEEP)
BELIEF_REDS = tuple(spec.name for spec in RED_SPECS if spec.belief_bit)   # the particles' kinds
# --reds family: CAGE2's two attackers and their variants
FAMILY_VIEW = tuple(spec.name for spec in RED_SPECS if spec.base != SLEEP)


class UnknownRed(UserError, ValueError):
    """A name that is no red agent nor pool."""


def red_spec(name: str) -> RedSpec:
    """The spec of a red agent (one-line UserError for an unknown name)."""
    return REDS[check_choice("red agent", name, RED_AGENTS)]


# a learned red: learned:PATH, a red's checkpoint (wfrl attack's best.pt), checked where it is
# loaded (wfrl.envs.reds.learned_red_class)
LEARNED_PREFIX = "learned:"


def is_learned(name) -> bool:
    return isinstance(name, str) and name.startswith(LEARNED_PREFIX) and len(name) > 8


# a population: population:PATH, a JSON file of reds (scripted or learned) and their weights, of
# which each episode plays the one its env seed draws (wfrl.envs.reds.Population; the simulator
# only), checked where it is loaded
POPULATION_PREFIX = "population:"
POPULATION_MAX = 64     # reds a population holds: csrc/wfrl_rollout.h WFRL_POP_MAX


def is_population(name) -> bool:
    return (isinstance(name, str) and name.startswith(POPULATION_PREFIX)
            and len(name) > len(POPULATION_PREFIX))


def check_red_agent(name: str, allow_pools: bool = True) -> str:
    """`name` if it names a red (or, allow_pools, a pool or a population) or a learned red:
    else a one-line UserError."""
    if is_learned(name) or (allow_pools and is_population(name)):
        return name
    return check_choice("red agent", name, TRAIN_RED_AGENTS if allow_pools else RED_AGENTS)


# OR-ed into a red kind code: red is an agent driven from outside (csrc/wfrl_cage2.h
# WFRL_RED_EXTERNAL); a learned red's code is SleepAgent's with it
RED_EXTERNAL = 0x100


def red_code(name) -> int:
    """The simulator's red kind code of a red or pool (an int is taken as a code already; a
    learned red's is an external red's)."""
    if isinstance(name, int):
        return name
    if is_learned(name) or is_population(name):   # (a population's episodes set their own)
        return BASE_CODES[SLEEP] | RED_EXTERNAL
    if name in POOL_OF:
        return POOL_OF[name].code
    if name in REDS:
        return REDS[name].code
    raise UnknownRed(f"unknown red agent {name!r} (choose from {', '.join(TRAIN_RED_AGENTS)})")


def red_codes() -> dict:
    """name -> simulator code of every red and pool."""
    return {name: red_code(name) for name in TRAIN_RED_AGENTS}


def base_red(name: str) -> str:
    """The CAGE2 red a red varies and is scored against (itself for CAGE2's)."""
    return red_spec(name).base


def pool_member(pool: str, env_seed: int) -> str:
    """The red of the pool's (or mixed's) episode with this env seed."""
    from wfrl.rng import MASK, splitmix64
    spec = POOL_OF[pool]
    if spec.name == MIXED:     # twin: wfrl_mixed_red_kind
        _, out = splitmix64((int(env_seed) ^ 0x6D69786564726564) & MASK)
        return spec.members[out >> 63]
    _, out = splitmix64((int(env_seed) ^ (0x706F6F6C00000000 + spec.code)) & MASK)
    return spec.members[(out >> 32) % len(spec.members)]


def episode_red(red_agent: str, env_seed: int) -> str:
    """The red agent an episode with this env seed is played against: red_agent itself, or for
    a pool (mixed among them) the member the seed draws."""
    return pool_member(red_agent, env_seed) if red_agent in POOL_OF else red_agent




def expand_reds(text: str) -> tuple[str, ...]:
    """The reds a comma-separated list names, a pool standing for its members (a population's
    reds): distinct, in order; one-line UserError for an unknown name or a population."""
    out: list[str] = []
    for item in (r.strip() for r in str(text).split(",")):
        if is_population(item):
            raise UserError(f"{item}: a population cannot be a member of another")
        check_red_agent(item)
        for r in (POOL_OF[item].members if item in POOL_OF else (item,)):
            if r not in out:
                out.append(r)
    return tuple(out)
