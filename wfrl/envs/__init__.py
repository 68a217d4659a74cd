"""CAGE2 environments: backends behind one contract (wfrl.envs.base) and their gymnasium view."""
from __future__ import annotations

from wfrl.envs.actions import N_ACTIONS, N_HOSTS
from wfrl.envs.base import (
    BACKENDS,
    EP_LEN,
    OBS_DIM,
    RED_AGENTS,
    backend_engine,
    check_red_agent,
    is_leaderboard,
)

ENV_ID = "wfrl/CAGE2-v0"
# the registered combinations of the recipe's parts (wfrl.envs.memory_env, workflow_env), each
# with a vector entry point: the action mask; the memory block and the mask; both and a workflow
MASKED_ID = "wfrl/CAGE2-Masked-v0"
MEMORY_ID = "wfrl/CAGE2-Memory-v0"
RECIPE_ID = "wfrl/CAGE2-Recipe-v0"


def make_backend(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None):
    """The lean backend object that collectors drive: `sim` (compiled, default) or `cyborg`,
    each also as NAME:leaderboard (wfrl.envs.base.BACKENDS). red_agent "mixed": each episode's
    attacker is B_line or Meander, chosen by its seed."""
    leaderboard = is_leaderboard(backend)
    check_red_agent(red_agent)
    if backend_engine(backend) == "sim":
        from wfrl.envs.sim import SimBackend
        return SimBackend(red_agent=red_agent, seed=seed, leaderboard=leaderboard)
    from wfrl.config.names import is_population
    if is_population(red_agent):
        from wfrl.errors import UserError
        raise UserError(f"{red_agent}: a population of reds plays on the simulator (sim, "
                        "sim:leaderboard); on CybORG, play its members one by one")
    from wfrl.envs.base import POOLED
    from wfrl.envs.cyborg import CybORGBackend, MixedCybORGBackend
    if red_agent in POOLED:
        return MixedCybORGBackend(seed=seed, leaderboard=leaderboard, red_agent=red_agent)
    return CybORGBackend(red_agent=red_agent, seed=seed, leaderboard=leaderboard)


def make(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None,
         max_steps: int = EP_LEN):
    """A gymnasium.Env for CAGE2 blue on the chosen backend, episodes of max_steps (CAGE2 scores
    30, 50 and 100)."""
    from wfrl.envs.gym_env import Cage2Env, check_max_steps
    steps = check_max_steps(max_steps)
    return Cage2Env(make_backend(backend, red_agent, seed), steps)


def make_duel(backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
    """CAGE2 as a two-player game: a PettingZoo ParallelEnv with agents blue and red
    (wfrl.envs.duel; red is an agent, its reward the negative of blue's)."""
    from wfrl.envs.duel import make_duel as make_parallel
    return make_parallel(backend, seed, max_steps)


def make_masked(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None,
                max_steps: int = EP_LEN):
    """make(...) with the action mask (info["action_mask"], action_masks()): MASKED_ID."""
    from wfrl.envs.memory_env import ActionMaskWrapper
    return ActionMaskWrapper(make(backend, red_agent, seed, max_steps))


def make_memory(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None,
                max_steps: int = EP_LEN):
    """make(...) with the memory block in the observation and the action mask: MEMORY_ID."""
    from wfrl.envs.memory_env import ActionMaskWrapper, MemoryWrapper
    return ActionMaskWrapper(MemoryWrapper(make(backend, red_agent, seed, max_steps)))


def make_recipe(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int | None = None,
                max_steps: int = EP_LEN, workflow="critical_first", lam: float | None = None,
                count_foothold: bool = False):
    """The memory block, a workflow (WorkflowWrapper, λ = lam, 30 by default) and the action mask
    outermost: the input (obs ⊕ memory ⊕ one-hot), mask and reward of wfrl's own trainer.
    RECIPE_ID."""
    from wfrl.envs.memory_env import ActionMaskWrapper, MemoryWrapper
    from wfrl.envs.workflow_env import DEFAULT_LAMBDA, WorkflowWrapper
    inner = WorkflowWrapper(MemoryWrapper(make(backend, red_agent, seed, max_steps)), workflow,
                            DEFAULT_LAMBDA if lam is None else lam, count_foothold)
    return ActionMaskWrapper(inner)


def make_vec(num_envs: int = 1, red_agent="B_lineAgent", seed: int | None = None, *,
             backend: str = "sim", autoreset_mode="NextStep", copy: bool = True,
             max_steps: int = EP_LEN):
    """A gymnasium VectorEnv of num_envs CAGE2 envs (also gymnasium.make_vec(ENV_ID, num_envs=n)).

    backend "sim": the native vector env (wfrl.envs.vector.Cage2VectorEnv), one compiled call per
    step for all envs. backend "cyborg": gymnasium's AsyncVectorEnv over real-CybORG envs, one
    process each, with the same spaces, seeding, autoreset mode and info["red_access"] [n, 13].
    red_agent: one name for all envs (incl. "mixed") or a sequence of num_envs names. seed: env i
    starts from seed + i. autoreset_mode: gymnasium's AutoresetMode or its value ("NextStep",
    "SameStep", "Disabled"). copy: return fresh arrays (True) or the env's own buffers.
    max_steps: episode length (CAGE2 scores 30, 50 and 100).
    """
    from wfrl.envs.gym_env import check_max_steps
    from wfrl.envs.vector import Cage2VectorEnv, check_autoreset_mode, check_num_envs, red_agents_per_env
    steps = check_max_steps(max_steps)
    leaderboard = is_leaderboard(backend)
    n = check_num_envs(num_envs)
    reds = red_agents_per_env(red_agent, n)
    mode = check_autoreset_mode(autoreset_mode)
    if backend_engine(backend) == "sim":
        return Cage2VectorEnv(n, reds, seed, autoreset_mode=mode, copy=copy,
                              leaderboard=leaderboard, max_steps=steps)
    import functools

    import gymnasium

    from wfrl.envs.cyborg import load_cyborg
    load_cyborg()  # a missing extra fails here, in one line, not in n worker processes
    seeds = [None if seed is None else seed + i for i in range(n)]
    fns = [functools.partial(make, backend, r, s, steps) for r, s in zip(reds, seeds)]
    return gymnasium.vector.AsyncVectorEnv(fns, autoreset_mode=mode, copy=copy)


def make_vec_masked(num_envs: int = 1, red_agent="B_lineAgent", seed: int | None = None, **kw):
    """make_vec(...) with the vector action mask (VecActionMaskWrapper): MASKED_ID's vector form."""
    from wfrl.envs.memory_env import VecActionMaskWrapper
    return VecActionMaskWrapper(make_vec(num_envs, red_agent, seed, **kw))


def make_vec_memory(num_envs: int = 1, red_agent="B_lineAgent", seed: int | None = None, **kw):
    """make_vec(...) with the memory block and the action mask: MEMORY_ID's vector form."""
    from wfrl.envs.memory_env import VecActionMaskWrapper, VecMemoryWrapper
    return VecActionMaskWrapper(VecMemoryWrapper(make_vec(num_envs, red_agent, seed, **kw)))


def make_vec_recipe(num_envs: int = 1, red_agent="B_lineAgent", seed: int | None = None, *,
                    workflow="critical_first", lam: float | None = None,
                    count_foothold: bool = False, **kw):
    """make_recipe's vector form (a workflow for all envs or one each): RECIPE_ID's."""
    from wfrl.envs.memory_env import VecActionMaskWrapper, VecMemoryWrapper
    from wfrl.envs.workflow_env import DEFAULT_LAMBDA, VecWorkflowWrapper
    inner = VecWorkflowWrapper(VecMemoryWrapper(make_vec(num_envs, red_agent, seed, **kw)),
                               workflow, DEFAULT_LAMBDA if lam is None else lam, count_foothold)
    return VecActionMaskWrapper(inner)


_REGISTERED = {ENV_ID: ("make", "make_vec"), MASKED_ID: ("make_masked", "make_vec_masked"),
               MEMORY_ID: ("make_memory", "make_vec_memory"),
               RECIPE_ID: ("make_recipe", "make_vec_recipe")}


def _register():
    import gymnasium
    for env_id, (single, vector) in _REGISTERED.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=f"wfrl.envs:{single}",
                               vector_entry_point=f"wfrl.envs:{vector}")


_register()

__all__ = ["BACKENDS", "EP_LEN", "ENV_ID", "MASKED_ID", "MEMORY_ID", "N_ACTIONS", "N_HOSTS",
           "OBS_DIM", "RECIPE_ID", "RED_AGENTS", "make", "make_backend", "make_duel", "make_masked",
           "make_memory", "make_recipe", "make_vec", "make_vec_masked", "make_vec_memory",
           "make_vec_recipe"]
