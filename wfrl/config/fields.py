"""How a setting is declared and checked: the field machinery every config of wfrl uses.

A setting is a dataclass field: its type, its default, the check its values must pass
(`setting(..., check=...)`) and, as the attribute docstring under it, its help. The command line
(wfrl.cli) generates its flags, defaults and help from these fields, and `validate()` applies the
declared checks without changing the config. Nothing here imports torch, so `wfrl --help` and
argument errors stay fast.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import textwrap
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol, cast

from wfrl.config.names import AUTO_COLLECTOR, COLLECTORS, ENGINES, LEADERBOARD, RED_METAVAR  # noqa: F401
from wfrl.errors import UserError, check_choice

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# ---------------------------------------------------------------------------------------------
# Declaring and checking settings


def field_names(cls, exclude=("ppo",)) -> list[str]:
    """The settings of a config class as its command's flags name them (nested PPO aside)."""
    return [f.name for f in dataclasses.fields(cls) if f.name not in exclude]


def flag_name(name: str) -> str:
    """The command-line flag of a setting: seed -> --seed, alignment_lambda -> --alignment-lambda."""
    return "--" + name.replace("_", "-")


def positive(name: str, value) -> None:
    if value <= 0:
        raise UserError(f"{flag_name(name)} must be positive (got {value})")


def non_negative(name: str, value) -> None:
    if value < 0:
        raise UserError(f"{flag_name(name)} must be non-negative (got {value})")


def unit_interval(name: str, value) -> None:
    if not 0.0 <= value <= 1.0:
        raise UserError(f"{flag_name(name)} must lie in [0, 1] (got {value})")


def open_unit_interval(name: str, value) -> None:
    if not 0.0 < value < 1.0:
        raise UserError(f"{flag_name(name)} must lie in (0, 1) (got {value})")


def belief_particles(name: str, value) -> None:
    """Particles of the belief filter: 0 (off) up to the compiled core's bound."""
    from wfrl._core import FILTER_MAX_PARTICLES  # lazily: `wfrl --help` needs no core
    if not 0 <= value <= FILTER_MAX_PARTICLES:
        raise UserError(f"{flag_name(name)} must lie in 0..{FILTER_MAX_PARTICLES} (got {value})")


SEED_LIMIT = 2 ** 63


def seed_range(name: str, value) -> None:
    """Seeds feed numpy's SeedSequence and 64-bit C generators: whole numbers in [0, 2^63)."""
    if not 0 <= value < SEED_LIMIT:
        raise UserError(f"{flag_name(name)} must be a whole number in [0, 2^63) (got {value})")


class ChoiceCheck(Protocol):
    """What one_of returns: a check that also carries the choices it accepts."""
    choices: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None: ...


def one_of(*choices: str, what: str | None = None) -> ChoiceCheck:
    def check(name: str, value) -> None:
        check_choice(what or name.replace("_", " "), value, choices)
    checker = cast(ChoiceCheck, check)   # the function itself, once it carries .choices
    checker.choices = choices
    return checker


def known_backend(name, value):
    from wfrl.envs.base import check_backend
    check_backend(value)


# the metavars come from wfrl.config.names, which declares each name once (the reds' VARIANT
# and POOL: docs/robustness.md)
BACKEND_METAVAR = "|".join(ENGINES) + f"[{LEADERBOARD}]"
COLLECTOR_METAVAR = "|".join(COLLECTORS + (AUTO_COLLECTOR,))


def known_red_agent(name, value):
    from wfrl.envs.base import check_red_agent
    check_red_agent(value)


def red_list(name, value):
    from wfrl.envs.base import check_red_agent
    reds = [r.strip() for r in str(value).split(",")]
    if not reds or len(set(reds)) != len(reds):
        raise UserError(f"{flag_name(name)}: a comma-separated list of distinct reds, got {value!r}")
    for r in reds:
        check_red_agent(r, allow_mixed=False)

def batch_list(name, value):
    """Comma-separated distinct whole numbers ≥ 1 (visits in flight: `wfrl bench search
    --batches`)."""
    try:
        items = [int(x) for x in str(value).split(",")]
    except ValueError:
        items = []
    if not items or min(items) < 1 or len(set(items)) != len(items):
        raise UserError(f"{flag_name(name)}: a comma-separated list of distinct whole numbers "
                        f"≥ 1, got {value!r}")


def ray_address(name, value):
    if value is None:
        return
    from wfrl.collect.ray.address import check_ray_address  # imports neither ray nor torch
    try:
        check_ray_address(value)
    except ValueError as exc:
        raise UserError(f"{flag_name(name)}: {exc}") from None


def known_collector(name, value):
    from wfrl.collect.base import check_collector
    if value != AUTO_COLLECTOR:
        check_collector(value)


def known_workflow(name, value):
    from wfrl.workflow import Workflow
    Workflow.parse(value)


def setting(default=dataclasses.MISSING, *, check=None, metavar=None, factory=None):
    """A config field: its default, the check every value must pass and the flag's metavar.
    The help text is the attribute docstring written under the field."""
    meta = {"check": check, "metavar": metavar}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """{field name: its attribute docstring, whitespace-normalised} from the source of the class
    and of the config classes it inherits fields from."""
    out = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        body = cast(ast.ClassDef, tree.body[0]).body   # the source of a class is its definition
        for node, nxt in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) \
                    and isinstance(nxt.value.value, str):
                out[node.target.id] = " ".join(nxt.value.value.split())
    return out


def field_kind(f: dataclasses.Field) -> tuple[str, bool]:
    """(base type name, optional) of a field from its annotation: ('int', False), ('float', True)…"""
    text = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    parts = [p.strip() for p in text.split("|")]
    optional = "None" in parts
    base = [p for p in parts if p != "None"]
    return (base[0] if base else "None"), optional


def _check_fields(cfg) -> None:
    """Types and declared checks of every field (nested configs too); changes nothing."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        kind, optional = field_kind(f)
        if value is None:
            if optional:
                continue
            raise UserError(f"{flag_name(f.name)} needs a value")
        if dataclasses.is_dataclass(value):
            _check_fields(value)
            continue
        if kind == "bool":
            ok = isinstance(value, bool)
        elif kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if ok and not math.isfinite(value):
                raise UserError(f"{flag_name(f.name)} must be a finite number (got {value})")
        elif kind == "str":
            ok = isinstance(value, str)
        else:
            ok = True
        if not ok:
            raise UserError(f"{flag_name(f.name)} must be {kind} (got {value!r})")
        check = f.metadata.get("check")
        if check is not None:
            check(f.name, value)


class Settings:
    """Behaviour every config shares: validate() checks and returns the config unchanged;
    to_dict() / from_dict() for experiment_config.json."""

    def validate(self):
        _check_fields(self)
        self._check_together()
        return self

    def _check_together(self) -> None:
        """Checks that involve more than one field (none by default)."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(cast("DataclassInstance", self))   # (only dataclasses are Settings)

    @classmethod
    def from_dict(cls, d: dict, where: str = "the run's experiment_config.json"):
        if not isinstance(d, dict):
            raise UserError(f"{where} is not a JSON object")
        names = {f.name: f for f in dataclasses.fields(cast("type[DataclassInstance]", cls))}
        unknown = sorted(set(d) - set(names))
        if unknown:
            raise UserError(f"unknown setting {unknown[0]!r} in {where}")
        kw = dict(d)
        for name, f in names.items():
            sub = f.default_factory if f.default_factory is not dataclasses.MISSING else None
            if name in kw and isinstance(sub, type) and issubclass(sub, Settings):
                kw[name] = sub.from_dict(kw[name] or {}, where)
        try:
            return cls(**kw)
        except TypeError as exc:
            raise UserError(f"bad settings in {where}: {exc}") from None
