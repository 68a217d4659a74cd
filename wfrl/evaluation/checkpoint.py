"""A checkpoint's policy: its network description, its flat weights, and what the evaluation
protocol plays it with. Below the evaluation and the planner, so both can load policies without
importing each other."""
from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np

from wfrl._core import FILTER_MAX_PARTICLES
from wfrl.errors import UserError
from wfrl.ppo.netspec import NetSpec
from wfrl.ppo.policy import ActorCritic
from wfrl.runlog import load_checkpoint
from wfrl.workflow import Workflow


def net_from_checkpoint(ck: dict) -> NetSpec:
    """The network a checkpoint's weights belong to: its recorded NetSpec (checkpoints written
    before memory and masks existed record only the hidden width: the observation-only net; those
    written before the truth input or the belief existed have neither)."""
    spec = ck.get("net", {"hidden": ck.get("hidden")})
    if not isinstance(spec, dict):
        raise UserError("checkpoint's 'net' entry is not a mapping")
    known = {f.name for f in dataclasses.fields(NetSpec)}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise UserError(f"the checkpoint's policy expects input features this wfrl does not "
                        f"provide: {', '.join(unknown)}")
    try:
        net = NetSpec(hidden=int(spec["hidden"]), memory=bool(spec.get("memory", False)),
                      mask=bool(spec.get("mask", False)),
                      truth_input=bool(spec.get("truth_input", False)),
                      belief=int(spec.get("belief", 0)), belief_reds=int(spec.get("belief_reds", 7)),
                      red=bool(spec.get("red", False)))
    except (KeyError, TypeError, ValueError):
        raise UserError("checkpoint's network description is damaged") from None
    if net.hidden < 1:
        raise UserError(f"checkpoint's network has hidden width {net.hidden}")
    if not 0 <= net.belief <= FILTER_MAX_PARTICLES or not 0 < net.belief_reds < 8:
        raise UserError("checkpoint's network description is damaged (its belief block)")
    return net


def weights_from_checkpoint(ck: dict) -> tuple[np.ndarray, NetSpec]:
    """(flat weights, NetSpec) of a checkpoint's actor-critic."""
    net = net_from_checkpoint(ck)
    model = ActorCritic(net.hidden, net.in_dim)
    try:
        model.load_state_dict(ck["model"])
    except (RuntimeError, KeyError, TypeError, AttributeError) as exc:
        raise UserError("checkpoint weights do not fit the policy it describes "
                        f"({net.in_dim} inputs, hidden {net.hidden}): "
                        f"{str(exc).splitlines()[0][:160]}") from None
    return model.flat_weights(), net


def policy_of_checkpoint(path: str, workflow: str | None = None
                         ) -> tuple[np.ndarray, NetSpec, str, float, bool]:
    """(weights, net, workflow, alignment λ, count_foothold) of a checkpoint, as the protocol plays
    it: its own workflow unless `workflow` is given (checked either way)."""
    ck = load_checkpoint(path)
    weights, net = weights_from_checkpoint(ck)
    if net.red:
        raise UserError(f"{path} is a red attacker's checkpoint (wfrl attack); a defender's is "
                        "wanted here")
    cfg = ck.get("config", {}) if isinstance(ck.get("config"), dict) else {}
    wf = workflow or ck.get("workflow")
    if wf is None:   # an order-conditioned policy (a search's base, pretrained:any_workflow)
        raise UserError(f"{path} follows any workflow and names none of its own: give "
                        "--workflow W (a name such as critical_first, or an order such as "
                        "user,enterprise,op_server,op_host,defender)")
    Workflow.parse(wf)
    return (weights, net, wf, float(cfg.get("alignment_lambda", 30.0)),
            bool(cfg.get("count_foothold", False)))


def trained_on_other_code(ck: dict, backend: str) -> str | None:
    """The backend a checkpoint records it was trained on, when that plays the other CybORG code
    than `backend` does (None: the same code, or none recorded)."""
    from wfrl.envs.base import is_leaderboard
    cfg = cast(dict, ck.get("config")) if isinstance(ck.get("config"), dict) else {}
    theirs = cfg.get("backend")
    if isinstance(theirs, str) and is_leaderboard(theirs) != is_leaderboard(backend):
        return theirs
    return None

