"""Workflows (priority orders over the five unit types) and the compliance reference.

A workflow is a permutation of UNIT_TYPES; position 0 is the highest priority. This module is the
plain-Python reference for everything the rollout loop computes about compliance.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from wfrl.envs.actions import HOSTS, N_HOSTS, REMOVE_FIRST, RESTORE_FIRST
from wfrl.errors import UserError

UNIT_TYPES: tuple[str, ...] = ("defender", "enterprise", "op_server", "op_host", "user")
N_TYPES = len(UNIT_TYPES)
COND_DIM = N_TYPES * N_TYPES

USER0 = HOSTS.index("User0")


def _host_type(host: str) -> int:
    if host == "Defender":
        return 0
    if host.startswith("Enterprise"):
        return 1
    if host == "Op_Server0":
        return 2
    if host.startswith("Op_Host"):
        return 3
    return 4


# HOST_TYPE[h] = unit-type index of host h (order of HOSTS, which is the observation/action order).
HOST_TYPE = np.array([_host_type(h) for h in HOSTS], dtype=np.int32)

def fix_target(action: int) -> int:
    """Host index a fix action targets, or -1 if the action is not a fix."""
    if REMOVE_FIRST <= action < REMOVE_FIRST + N_HOSTS:
        return action - REMOVE_FIRST
    if RESTORE_FIRST <= action < RESTORE_FIRST + N_HOSTS:
        return action - RESTORE_FIRST
    return -1


def is_fix(actions) -> np.ndarray:
    """fix_target(a) >= 0, elementwise over an array of actions."""
    a = np.asarray(actions)
    return (((a >= REMOVE_FIRST) & (a < REMOVE_FIRST + N_HOSTS))
            | ((a >= RESTORE_FIRST) & (a < RESTORE_FIRST + N_HOSTS)))


ALL_WORKFLOWS: tuple[tuple[int, ...], ...] = tuple(itertools.permutations(range(N_TYPES)))
_INDEX = {p: i for i, p in enumerate(ALL_WORKFLOWS)}

CANONICAL: dict[str, tuple[str, ...]] = {
    "critical_first": ("op_server", "enterprise", "defender", "op_host", "user"),
    "enterprise_focus": ("enterprise", "op_server", "defender", "op_host", "user"),
    "user_priority": ("user", "op_host", "enterprise", "op_server", "defender"),
    "operational_focus": ("op_server", "op_host", "enterprise", "defender", "user"),
    "balanced": ("defender", "enterprise", "op_server", "op_host", "user"),
    "reverse": ("user", "op_host", "op_server", "enterprise", "defender"),
}


@dataclass(frozen=True)
class Workflow:
    """A priority order: order[k] is the unit-type index at priority position k (0 = first)."""

    order: tuple[int, ...]
    # rank[t] = priority position of unit type t (lower = more urgent).
    rank: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if sorted(self.order) != list(range(N_TYPES)):
            raise UserError(f"a workflow orders each of the {N_TYPES} unit types exactly once")
        rank = [0] * N_TYPES
        for pos, t in enumerate(self.order):
            rank[t] = pos
        object.__setattr__(self, "rank", tuple(rank))

    @classmethod
    def parse(cls, text: str) -> Workflow:
        """Parse `a,b,c,d,e`, `a → b → …` / `a -> b -> …`, or a canonical name."""
        s = text.strip()
        if s in CANONICAL:
            return cls.from_names(CANONICAL[s])
        for sep in ("→", "->", ">"):
            s = s.replace(sep, ",")
        names = [p.strip() for p in s.split(",") if p.strip()]
        return cls.from_names(names)

    @classmethod
    def from_names(cls, names) -> Workflow:
        names = list(names)
        unknown = [n for n in names if n not in UNIT_TYPES]
        if unknown:
            raise UserError(
                f"unknown unit type {unknown[0]!r} in workflow (known: {', '.join(UNIT_TYPES)};"
                f" or a name: {', '.join(CANONICAL)})")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise UserError(f"unit type {repeated[0]!r} appears more than once in the workflow")
        if len(names) != N_TYPES:
            raise UserError(f"a workflow orders all {N_TYPES} unit types; got {len(names)}")
        return cls(tuple(UNIT_TYPES.index(n) for n in names))

    @classmethod
    def from_index(cls, index: int) -> Workflow:
        if not 0 <= index < len(ALL_WORKFLOWS):
            raise UserError(f"workflow index {index} outside [0, {len(ALL_WORKFLOWS)})")
        return cls(ALL_WORKFLOWS[index])

    @property
    def index(self) -> int:
        """Stable index 0..119 (lexicographic order of the type-index permutation)."""
        return _INDEX[self.order]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(UNIT_TYPES[t] for t in self.order)

    def __str__(self) -> str:
        return ",".join(self.names)

    def arrow(self) -> str:
        return " → ".join(self.names)

    def onehot(self) -> np.ndarray:
        """25-dim float32 conditioning vector: v[5*position + type] = 1."""
        v = np.zeros(COND_DIM, dtype=np.float32)
        for pos, t in enumerate(self.order):
            v[N_TYPES * pos + t] = 1.0
        return v

    def host_priority(self) -> np.ndarray:
        """int32[13]: priority position of each host's unit type."""
        return np.array([self.rank[t] for t in HOST_TYPE], dtype=np.int32)


def all_workflows() -> list[Workflow]:
    return [Workflow(p) for p in ALL_WORKFLOWS]


def kendall_distance(a: Workflow, b: Workflow) -> float:
    """Normalised Kendall tau distance in [0, 1]: discordant type pairs / 10."""
    n_pairs = N_TYPES * (N_TYPES - 1) // 2
    discordant = 0
    for i in range(N_TYPES):
        for j in range(i + 1, N_TYPES):
            if (a.rank[i] - a.rank[j]) * (b.rank[i] - b.rank[j]) < 0:
                discordant += 1
    return discordant / n_pairs


# --------------------------------------------------------------------------------------------
# Compliance reference: the semantics the rollout loop must reproduce.

def compromised_hosts(red_access, count_foothold: bool = False) -> list[int]:
    """Hosts red has any session on. By default User0 is left out: red's permanent foothold there
    can never be fixed (red_access cannot tell the foothold from extra User0 sessions, so the host
    as a whole is ignored). count_foothold=True reproduces the original system, which counted it."""
    return [h for h in range(N_HOSTS)
            if red_access[h] > 0 and (count_foothold or h != USER0)]


def is_compliant(workflow: Workflow, red_access, target: int, count_foothold: bool = False) -> bool:
    """Whether fixing host `target` is compliant given red's access at the moment of the fix."""
    comp = compromised_hosts(red_access, count_foothold)
    if not comp:
        return True
    top = min(workflow.rank[HOST_TYPE[h]] for h in comp)
    return workflow.rank[HOST_TYPE[target]] == top


NO_FIX_COMPLIANCE = 0.5
NO_FIX_PENALTY = -0.2
# The first-fix bonus: the alignment reward counts the rate before an episode's first fix as
# NO_FIX_COMPLIANCE, so the first compliant fix earns λ/2 (the original system's rule, the
# default). Without it (PPOConfig.first_fix_bonus=False) the rate before the first fix counts as
# FIRST_FIX_BASELINE = 1 and a fix earns nothing by itself; the compiled loop computes the rule
# with the bonus, and the learner takes FIRST_FIX_BONUS·λ off at each episode's first fix.
FIRST_FIX_BASELINE = 1.0
FIRST_FIX_BONUS = FIRST_FIX_BASELINE - NO_FIX_COMPLIANCE


class ComplianceTracker:
    """Per-episode compliance and alignment reward (reference implementation).

    Call step(action, red_access_before) for every blue step, with red's access as it was when the
    action was chosen; it returns that step's alignment reward, λ·(rate after − rate before), the
    rate before the first fix counting as NO_FIX_COMPLIANCE (first_fix_bonus=False: as
    FIRST_FIX_BASELINE). Call finish() after the last step; it returns the end-of-episode term
    (−0.2·λ if the episode had no fix, else 0).
    """

    def __init__(self, workflow: Workflow, lam: float, count_foothold: bool = False,
                 first_fix_bonus: bool = True):
        self.workflow = workflow
        self.lam = float(lam)
        self.count_foothold = count_foothold
        self.first_fix_bonus = first_fix_bonus
        self.reset()

    def reset(self):
        self.fixes = 0
        self.compliant = 0

    @property
    def rate(self) -> float:
        return self.compliant / self.fixes if self.fixes else NO_FIX_COMPLIANCE

    def step(self, action: int, red_access) -> float:
        target = fix_target(int(action))
        if target < 0:
            return 0.0
        before = self.rate if self.fixes or self.first_fix_bonus else FIRST_FIX_BASELINE
        self.fixes += 1
        if is_compliant(self.workflow, red_access, target, self.count_foothold):
            self.compliant += 1
        return self.lam * (self.rate - before)

    def finish(self) -> float:
        return self.lam * NO_FIX_PENALTY if self.fixes == 0 else 0.0
