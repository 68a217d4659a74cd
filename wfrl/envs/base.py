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

from wfrl.envs.reds import FAMILY, POOLS
from wfrl.errors import check_choice

OBS_DIM = 52
EP_LEN = 100

CAGE2_REDS = ("B_lineAgent", "RedMeanderAgent", "SleepAgent")   # in this order: the C codes 0-2
RED_AGENTS = CAGE2_REDS + FAMILY   # and the variants (wfrl.envs.reds)
MIXED = "mixed"  # each episode's attacker drawn from MIXED_REDS by its env seed
MIXED_REDS = ("B_lineAgent", "RedMeanderAgent")
TRAIN_RED_AGENTS = RED_AGENTS + (MIXED,) + tuple(POOLS)   # an episode's red drawn by its seed
POOLED = (MIXED,) + tuple(POOLS)
LEADERBOARD = ":leaderboard"
# sim: the compiled simulator; cyborg: the installed CybORG (csle-cyborg 0.0.3, the challenge
# repository's final code). NAME:leaderboard: the same played by the code the CAGE2 final
# leaderboard was scored on, before the repository's fixes of 16 and 19 August 2022 (a restored
# User3/User4 no longer falls to HarakaRCE; red's port memory of an IP only grows).
ENGINES = ("sim", "cyborg")
BACKENDS = ENGINES + tuple(e + LEADERBOARD for e in ENGINES)


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
    return check_choice("red agent", name, TRAIN_RED_AGENTS if allow_mixed else RED_AGENTS)


def mixed_red_kind(env_seed: int) -> str:
    """The attacker of the mixed red's episode with this env seed (B_line or Meander, one half
    each); the twin of wfrl_mixed_red_kind in csrc/wfrl_cage2.h, so both backends agree."""
    from wfrl.rng import MASK, splitmix64
    _, out = splitmix64((int(env_seed) ^ 0x6D69786564726564) & MASK)
    return MIXED_REDS[out >> 63]


def episode_red(red_agent: str, env_seed: int) -> str:
    """The red agent an episode with this env seed is played against: red_agent itself, or for
    mixed and the pools (wfrl.envs.reds.POOLS) the member the seed draws."""
    if red_agent == MIXED:
        return mixed_red_kind(env_seed)
    if red_agent in POOLS:
        from wfrl.envs.reds import pool_member
        return pool_member(red_agent, env_seed)
    return red_agent


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
