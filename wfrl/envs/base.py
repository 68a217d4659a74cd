"""The backend contract every CAGE2 environment of wfrl fulfils.

A backend is the lean object collectors drive; `wfrl.envs.Cage2Env` wraps any backend in the
gymnasium API. Contract (hosts in wfrl.workflow.HOSTS order, actions in CybORG's order):

    reset() -> (obs, red_access)
        obs          float32[52] of 0/1, all zeros at the start of an episode
        red_access   uint8[13], red's access per host (0 none, 1 user, 2 privileged), a fresh copy
    step(action) -> (obs, reward, red_access)
        reward       float, CAGE2's blue reward for the step
        red_access   as above, after the step
    seed(seed)                          reseeds the backend's own random state for the next reset

Episodes are EP_LEN blue steps; the backend never ends one early, the caller counts steps.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

# the red agents and pools, declared once in wfrl.config.names (RED_SPECS, POOL_SPECS)
from wfrl.config.names import (  # noqa: F401
    CAGE2_REDS,
    FAMILY,
    MIXED,
    MIXED_REDS,
    POOLED,
    POOLS,
    RED_AGENTS,
    TRAIN_RED_AGENTS,
    episode_red,
    pool_member,
)
from wfrl.errors import check_choice

OBS_DIM = 52
EP_LEN = 100

# the backends (sim, cyborg, and each by the leaderboard's code), declared in wfrl.config.names
from wfrl.config.names import BACKENDS, LEADERBOARD  # noqa: E402

# What a viewer reads from a backend after a step (wfrl.evaluation.replay), where the backend offers it:
# last_red_action() -> (one of RED_ACTIONS, target: a subnet of RED_SUBNETS, a host or "", success)
# and decoys() -> uint8[13], bit k set when decoy kind k (wfrl.envs.actions.DECOY_KINDS) is in
# place.
RED_ACTIONS = ("Sleep", "DiscoverRemoteSystems", "DiscoverNetworkServices", "ExploitRemoteService",
               "PrivilegeEscalate", "Impact")
RED_SUBNETS = ("User", "Enterprise", "Operational")


class Backend(Protocol):
    red_agent: str

    def seed(self, seed: int | None) -> None: ...

    def reset(self) -> tuple[np.ndarray, np.ndarray]: ...

    def step(self, action: int) -> tuple[np.ndarray, float, np.ndarray]: ...

    def close(self) -> None: ...


def check_red_agent(name: str, allow_mixed: bool = True) -> str:
    """`name` if it names a red agent (or, allow_mixed, a pool: mixed or one of POOLS), else a
    one-line UserError."""
    from wfrl.config.names import check_red_agent as check
    return check(name, allow_mixed)


def mixed_red_kind(env_seed: int) -> str:
    """The attacker of the mixed red's episode with this env seed (B_line or Meander, one half
    each); the twin of wfrl_mixed_red_kind in csrc/wfrl_cage2.h, so both backends agree."""
    return pool_member(MIXED, env_seed)


def check_backend(name: str) -> str:
    return check_choice("backend", name, BACKENDS)


def backend_engine(name: str) -> str:
    """"sim" or "cyborg": what plays a backend's episodes, whichever code it plays by."""
    return check_backend(name).removesuffix(LEADERBOARD)


def is_leaderboard(name: str) -> bool:
    """The backend plays by the code the CAGE2 leaderboard was scored on."""
    return check_backend(name).endswith(LEADERBOARD)


def check_cage2_box(space, what: str) -> int:
    """The width d of a Box observation whose first 52 floats are CAGE2's (the bare env's, or
    one the memory, belief or workflow wrappers extended); else a UserError naming `what`."""
    from gymnasium import spaces

    from wfrl.errors import UserError
    if not isinstance(space, spaces.Box) or len(space.shape) != 1 or space.shape[0] < OBS_DIM:
        raise UserError(f"{what} needs Box observations whose first {OBS_DIM} floats are CAGE2's, "
                        f"got {space}")
    return space.shape[0]
