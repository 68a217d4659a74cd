"""CAGE2 environments: backends behind one contract (wfrl.envs.base) and their gymnasium view."""
from __future__ import annotations

from wfrl.envs.base import (BACKENDS, EP_LEN, N_ACTIONS, N_HOSTS, OBS_DIM, RED_AGENTS,
                            check_backend, check_red_agent)

ENV_ID = "wfrl/CAGE2-v0"


def make_backend(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None):
    """The lean backend object that collectors drive: `sim` (compiled, default) or `cyborg`.
    red_agent "mixed": each episode's attacker is B_line or Meander, chosen by its seed."""
    check_backend(backend)
    check_red_agent(red_agent)
    if backend == "sim":
        from wfrl.envs.sim import SimBackend
        return SimBackend(red_agent=red_agent, seed=seed)
    from wfrl.envs.base import MIXED
    from wfrl.envs.cyborg import CybORGBackend, MixedCybORGBackend
    if red_agent == MIXED:
        return MixedCybORGBackend(seed=seed)
    return CybORGBackend(red_agent=red_agent, seed=seed)


def make(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None):
    """A gymnasium.Env for CAGE2 blue on the chosen backend."""
    from wfrl.envs.gym_env import Cage2Env
    return Cage2Env(make_backend(backend, red_agent, seed))


def _register():
    import gymnasium
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="wfrl.envs:make")


_register()

__all__ = ["BACKENDS", "EP_LEN", "ENV_ID", "N_ACTIONS", "N_HOSTS", "OBS_DIM", "RED_AGENTS",
           "make", "make_backend"]
