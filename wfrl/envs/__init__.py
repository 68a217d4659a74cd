"""CAGE2 environments: backends behind one contract (wfrl.envs.base) and their gymnasium view."""
from __future__ import annotations

from wfrl.envs.base import (BACKENDS, EP_LEN, N_ACTIONS, N_HOSTS, OBS_DIM, RED_AGENTS,
                            backend_engine, check_red_agent, is_leaderboard)

ENV_ID = "wfrl/CAGE2-v0"


def make_backend(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None):
    """The lean backend object that collectors drive: `sim` (compiled, default) or `cyborg`,
    each also as NAME:leaderboard (wfrl.envs.base.BACKENDS). red_agent "mixed": each episode's
    attacker is B_line or Meander, chosen by its seed."""
    leaderboard = is_leaderboard(backend)
    check_red_agent(red_agent)
    if backend_engine(backend) == "sim":
        from wfrl.envs.sim import SimBackend
        return SimBackend(red_agent=red_agent, seed=seed, leaderboard=leaderboard)
    from wfrl.envs.base import MIXED
    from wfrl.envs.cyborg import CybORGBackend, MixedCybORGBackend
    if red_agent == MIXED:
        return MixedCybORGBackend(seed=seed, leaderboard=leaderboard)
    return CybORGBackend(red_agent=red_agent, seed=seed, leaderboard=leaderboard)


def make(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None):
    """A gymnasium.Env for CAGE2 blue on the chosen backend."""
    from wfrl.envs.gym_env import Cage2Env
    return Cage2Env(make_backend(backend, red_agent, seed))


def make_vec(num_envs: int = 1, red_agent="B_lineAgent", seed: int | None = None, *,
             backend: str = "sim", autoreset_mode="NextStep", copy: bool = True):
    """A gymnasium VectorEnv of num_envs CAGE2 envs (also gymnasium.make_vec(ENV_ID, num_envs=n)).

    backend "sim": the native vector env (wfrl.envs.vector.Cage2VectorEnv), one compiled call per
    step for all envs. backend "cyborg": gymnasium's AsyncVectorEnv over real-CybORG envs, one
    process each, with the same spaces, seeding, autoreset mode and info["red_access"] [n, 13].
    red_agent: one name for all envs (incl. "mixed") or a sequence of num_envs names. seed: env i
    starts from seed + i. autoreset_mode: gymnasium's AutoresetMode or its value ("NextStep",
    "SameStep", "Disabled"). copy: return fresh arrays (True) or the env's own buffers.
    """
    from wfrl.envs.vector import (Cage2VectorEnv, check_autoreset_mode, check_num_envs,
                                  red_agents_per_env)
    leaderboard = is_leaderboard(backend)
    n = check_num_envs(num_envs)
    reds = red_agents_per_env(red_agent, n)
    mode = check_autoreset_mode(autoreset_mode)
    if backend_engine(backend) == "sim":
        return Cage2VectorEnv(n, reds, seed, autoreset_mode=mode, copy=copy,
                              leaderboard=leaderboard)
    import functools

    import gymnasium

    from wfrl.envs.cyborg import _load
    _load()  # a missing extra fails here, in one line, not in n worker processes
    seeds = [None if seed is None else seed + i for i in range(n)]
    fns = [functools.partial(make, backend, r, s) for r, s in zip(reds, seeds)]
    return gymnasium.vector.AsyncVectorEnv(fns, autoreset_mode=mode, copy=copy)


def _register():
    import gymnasium
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="wfrl.envs:make",
                           vector_entry_point="wfrl.envs:make_vec")


_register()

__all__ = ["BACKENDS", "EP_LEN", "ENV_ID", "N_ACTIONS", "N_HOSTS", "OBS_DIM", "RED_AGENTS",
           "make", "make_backend", "make_vec"]
