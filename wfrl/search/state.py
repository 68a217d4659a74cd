"""The search's state: what `search_state.pt` holds, as dataclasses, and the one function pair
that writes and reads it.

The file is a torch.save archive (read back with weights_only=True) of {"format",
"format_version", "meta", "learner"}: "meta" is the SearchState as JSON, "learner" the state of
the learner in training (weights, optimiser, shuffle RNG) or None between visits. It is replaced
atomically (write, fsync, rename).
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from wfrl.config.run import SearchConfig, with_older_runs_ppo
from wfrl.errors import UserError
from wfrl.runlog import atomic_write_bytes

STATE_FILE = "search_state.pt"
STATE_FORMAT = "wfrl/search-state"
# 3: typed state (this module); 2: the optimizer holds the observations; 1: the first format
STATE_VERSION = 3


@dataclass
class Pretraining:
    """Progress of the warm-up before the first visit (one random workflow per update)."""
    episodes: int = 0
    updates: int = 0
    done: bool = False        # finished and the base policy saved


@dataclass
class Pick:
    """The optimizer's numbers for the workflow it picked, at the moment it picked it."""
    workflow: int             # workflow index
    score: float              # the acquisition score it maximised (UCB_Score in the log)
    mean: float               # reward posterior mean (NaN in the initial design)
    sd: float                 # reward posterior standard deviation
    ucb: float                # mean + √β·sd, before any feasibility weighting
    beta: float
    p_feasible: float | None  # probability of reaching θ (feasibility model)


@dataclass
class Measurement:
    """A reward (mean env return) with its standard error, and a compliance."""
    reward: float
    se: float
    compliance: float


@dataclass
class Visit:
    """One visit: a workflow trained from a starting policy until a stop rule fires. While it
    trains it is SearchState.active; when it ends its outcome is filled in and it joins
    SearchState.visits."""
    iteration: int                       # visit number, from 1
    pick: Pick
    inherited_from: int | None           # a workflow index, BASE_POLICY, or None (scratch)
    lineage_start: int                   # training episodes behind the starting policy
    episodes: int = 0                    # trained in this visit
    updates: int = 0
    recent_compliance: list[float] = field(default_factory=list)  # the last window's updates
    best_compliance: float = -1.0
    updates_since_best: int = 0
    last_update: Measurement | None = None  # latest update (compliance: the window's mean)
    last_update_episodes: int = 0
    # the outcome
    stop: str | None = None              # compliant | max_episodes | plateau | budget
    result: Measurement | None = None    # what the visit reports (the evaluation's reward if any)
    gp_updated: bool = False             # the reward model was told its reward
    evaluation: dict | None = None       # evaluate_policy's result (--compliance-eval-episodes,
                                         # --gp-eval-episodes)

    @property
    def workflow(self) -> int:
        return self.pick.workflow


@dataclass
class Pending:
    """A visit in flight (--concurrent-visits K > 1): asked for, trained elsewhere, not yet
    told. Its episodes are numbered first_episode.., at most `budget` of them (its share of
    the search's budget, reserved when it was asked); start: the file in checkpoints/ it starts
    from (None: scratch), own: that file is the workflow's own policy (learner state) rather
    than a parent's weights."""
    visit: Visit
    first_episode: int
    budget: int
    start: str | None
    own: bool = False


@dataclass
class SearchState:
    """Everything a search needs to continue exactly where its last commit left it."""
    iteration: int = 0                   # visits started
    episodes_used: int = 0               # training episodes of the budget (pretraining included)
    updates: int = 0                     # PPO updates
    eval_episodes: int = 0               # evaluation episodes (outside the budget)
    pretraining: Pretraining = field(default_factory=Pretraining)
    active: Visit | None = None          # the visit in training
    visits: list[Visit] = field(default_factory=list)       # ended visits, in order
    trained: dict[int, int] = field(default_factory=dict)   # workflow → episodes trained on it
    lineage: dict[int, int] = field(default_factory=dict)   # workflow → episodes behind its policy
    training_log_rows: int = 0           # rows of training_log.csv this state accounts for
    gp_log_rows: int = 0                 # rows of gp_sampling_log.csv likewise
    wall_time: float = 0.0               # seconds over all sessions
    finished: bool = False
    optimizer: dict | None = None        # WorkflowOptimizer.state_dict()
    # concurrent visits (--concurrent-visits K > 1): the visits in flight, in visit order, and
    # one past the highest episode number a told visit used (serially: episodes_used)
    pending: list[Pending] = field(default_factory=list)
    episode_mark: int = 0


def _fields_of(cls, data) -> dict:
    """`data` as keyword arguments of dataclass `cls`: exactly its fields, no more, no fewer."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__} is not an object")
    names = [f.name for f in fields(cls)]
    missing = [n for n in names if n not in data]
    if missing:
        raise ValueError(f"{cls.__name__} lacks {missing[0]!r}")
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"{cls.__name__} has an unknown {unknown[0]!r}")
    return dict(data)


def _measurement(data) -> Measurement | None:
    return None if data is None else Measurement(**_fields_of(Measurement, data))


def _visit(data) -> Visit:
    kw = _fields_of(Visit, data)
    kw["pick"] = Pick(**_fields_of(Pick, kw["pick"]))
    kw["last_update"] = _measurement(kw["last_update"])
    kw["result"] = _measurement(kw["result"])
    return Visit(**kw)


visit_from_json = _visit


def _pending(data) -> Pending:
    kw = _fields_of(Pending, data)
    kw["visit"] = _visit(kw["visit"])
    return Pending(**kw)


def _search_state(data) -> SearchState:
    if isinstance(data, dict):   # a state from before concurrent visits: none in flight
        data = {"pending": [], "episode_mark": data.get("episodes_used", 0), **data}
    kw = _fields_of(SearchState, data)
    kw["pending"] = [_pending(p) for p in kw["pending"]]
    kw["pretraining"] = Pretraining(**_fields_of(Pretraining, kw["pretraining"]))
    kw["active"] = None if kw["active"] is None else _visit(kw["active"])
    kw["visits"] = [_visit(v) for v in kw["visits"]]
    kw["trained"] = {int(k): int(v) for k, v in kw["trained"].items()}  # JSON keys are strings
    kw["lineage"] = {int(k): int(v) for k, v in kw["lineage"].items()}
    return SearchState(**kw)


def as_plain(obj):
    """dataclasses.asdict for the state's types, for json.dumps: dataclasses become dicts and
    lists are walked; everything else — the dicts too (the optimizer's state, trained, lineage:
    JSON values only; a dataclass in one would make json.dumps fail, not write something else)
    — is passed as it is. asdict deep-copies every value, which made it most of a commit's
    time (the search commits after every update); json.dumps only reads, so the same JSON
    (tests/test_search_resume.py)."""
    if isinstance(obj, list):
        return [as_plain(x) for x in obj]
    fields_of = getattr(type(obj), "__dataclass_fields__", None)
    if fields_of is not None:
        return {name: as_plain(getattr(obj, name)) for name in fields_of}
    return obj


def save_state(path: Path, state: SearchState, learner_state: dict | None) -> None:
    """Replace the state file at `path` atomically with `state` and the learner's state."""
    _write_state(path, json.dumps(as_plain(state)), learner_state)


def _write_state(path: Path, meta: str, learner_state: dict | None) -> None:
    import torch
    buf = io.BytesIO()
    torch.save({"format": STATE_FORMAT, "format_version": STATE_VERSION,
                "meta": meta, "learner": learner_state}, buf)
    atomic_write_bytes(path, buf.getvalue())


def _detached(obj):
    """obj with every tensor in it (nested in dicts and lists) replaced by a copy."""
    if isinstance(obj, dict):
        return {k: _detached(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_detached(v) for v in obj]
    clone = getattr(obj, "clone", None)
    return clone() if clone is not None else obj


class StateWriter:
    """save_state with the serialising and the writing on a background thread, one commit at a
    time and in order. write() takes the snapshot on the caller's thread — the state's JSON and
    a copy of every tensor of the learner's state, which the learner goes on changing in place —
    waits for the commit before it (submitted an update earlier: done by then) and returns,
    raising that commit's error if it had one. A kill (even SIGKILL) mid-write leaves the file
    before it, as with save_state (atomic replace): the run loses at most the update being
    committed, which resume treats like one never committed. flush() waits until everything
    submitted is on disk (and raises a write's error); settle() waits without raising, for an
    exception already on its way out."""

    def __init__(self):
        self._pool = None
        self._pending = None

    def write(self, path: Path, state: SearchState, learner_state: dict | None) -> None:
        meta, learner_state = json.dumps(as_plain(state)), _detached(learner_state)
        self.flush()
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="wfrl-commit")
        self._pending = self._pool.submit(_write_state, path, meta, learner_state)

    def flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def settle(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.exception()


def load_state(path: Path) -> tuple[SearchState, dict | None]:
    """(search state, learner state or None) from a state file; UserError, in one line, for a
    file of another version or a damaged one."""
    import torch
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(blob, dict) or blob.get("format") != STATE_FORMAT:
            raise ValueError("not a wfrl search state")
        version = blob.get("format_version")
        if version != STATE_VERSION:
            age = "a newer" if isinstance(version, int) and version > STATE_VERSION else "an older"
            raise UserError(f"cannot resume: {path} was written by {age} wfrl (search state "
                            f"version {version}, this wfrl reads {STATE_VERSION}); start a new "
                            "search")
        state = _search_state(json.loads(blob["meta"]))
    except UserError:
        raise
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"cannot resume: {path} is damaged ({reason[:100]})") from None
    return state, blob["learner"]


def resume_config(run_dir: str, overrides: dict | None = None) -> SearchConfig:
    """The configuration stored in a run directory (with runtime-only overrides such as the
    collector, which do not change results)."""
    path = Path(run_dir) / "experiment_config.json"
    if not Path(run_dir).is_dir():
        raise UserError(f"cannot resume: {run_dir} is not a directory")
    if not path.exists():
        raise UserError(f"cannot resume: {run_dir} holds no experiment_config.json")
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot resume: {path} is unreadable or not JSON ({exc})") from None
    if not isinstance(d, dict) or d.get("mode") != "search":
        raise UserError(f"cannot resume: {run_dir} is not a workflow-search run")
    d = {k: v for k, v in d.items() if k not in ("mode", "wfrl_version", "update_step")}
    d.setdefault("overlap", False)   # a search started before --overlap existed ran without it
    # one started before --learner-threads existed updated with torch's default: every core
    d.setdefault("learner_threads", os.cpu_count() or 1)
    # one started before --compliance-eval-episodes existed judged its visits by their window
    d.setdefault("compliance_eval_episodes", 0)
    # one started before --visit-eval existed measured its visits on its training (and sampled
    # evaluation episodes), against the red it named (B_line by default then)
    d.setdefault("visit_eval", "training")
    d.setdefault("gp_eval_episodes", 0)
    d.setdefault("pretrain_warmup", 0)  # and one before --pretrain-warmup, without a warm-up
    if isinstance(d.get("ppo"), dict):
        # e.g. one started before --decoupled existed took the ratio of its stale batches
        # against the behaviour policy: it continues as it began
        d["ppo"] = with_older_runs_ppo(d["ppo"])
    d["out"] = os.fspath(run_dir)
    d.update(overrides or {})
    return SearchConfig.from_dict(d)
