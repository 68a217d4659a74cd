"""The memory and action-mask wrappers (wfrl.envs.memory_env) against the plain memory
(wfrl.features.MemoryTracker), the registered ids, max_steps, and MaskablePPO on the mask."""
from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import wfrl.envs as envs
from wfrl.envs.memory_env import ActionMaskWrapper, MemoryWrapper, VecActionMaskWrapper, VecMemoryWrapper
from wfrl.errors import UserError
from wfrl.features import MEM_DIM, MemoryTracker
from wfrl.workflow import Workflow


def _masked_choice(rng, allowed):
    return int(rng.choice(np.flatnonzero(allowed)))


def test_single_env_wrappers_equal_the_plain_memory_step_by_step():
    env = ActionMaskWrapper(MemoryWrapper(envs.make(seed=3)))
    rng = np.random.default_rng(0)
    for _ in range(3):
        obs, info = env.reset()
        twin = MemoryTracker()
        for t in range(envs.EP_LEN):
            twin.update(obs[:52])
            np.testing.assert_array_equal(obs[52:], twin.features(), err_msg=f"step {t}")
            np.testing.assert_array_equal(info["action_mask"], twin.mask(), err_msg=f"step {t}")
            np.testing.assert_array_equal(env.action_masks(), twin.mask())
            # mostly decoys and restores, so the mask and the decoy shares move
            a = _masked_choice(rng, info["action_mask"]) if rng.random() < 0.8 else 1
            twin.acted(a)
            obs, _, _, truncated, info = env.step(a)
        assert truncated


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_vector_wrappers_equal_the_plain_memory_under_each_autoreset_mode(mode):
    n, steps = 5, 260
    venv = VecActionMaskWrapper(VecMemoryWrapper(envs.make_vec(n, "mixed", 11,
                                                               autoreset_mode=mode, max_steps=50)))
    rng = np.random.default_rng(1)
    obs, info = venv.reset()
    twins = [MemoryTracker() for _ in range(n)]
    resets_next = np.zeros(n, bool)  # NEXT_STEP: the coming step resets these envs
    ended = 0
    for t in range(steps):
        for i in range(n):
            twins[i].update(obs[i, :52])
            np.testing.assert_array_equal(obs[i, 52:], twins[i].features(),
                                          err_msg=f"{mode} env {i} step {t}")
            np.testing.assert_array_equal(info["action_mask"][i], twins[i].mask())
        np.testing.assert_array_equal(venv.action_masks(), info["action_mask"])
        acts = np.array([_masked_choice(rng, info["action_mask"][i]) for i in range(n)], np.int32)
        for i in range(n):
            twins[i].acted(acts[i])
        obs, _, term, trunc, info = venv.step(acts)
        done = term | trunc
        ended += int(done.sum())
        if mode == "NextStep":
            for i in np.flatnonzero(resets_next):  # this step started a new episode
                twins[i] = MemoryTracker()
            resets_next = done
        elif mode == "SameStep":
            for i in np.flatnonzero(done):
                last = copy.deepcopy(twins[i])
                last.update(info["final_obs"][i][:52])
                np.testing.assert_array_equal(info["final_obs"][i][52:], last.features())
                twins[i] = MemoryTracker()
        elif done.any():
            obs, info = venv.reset(options={"reset_mask": done})
            for i in np.flatnonzero(done):
                twins[i] = MemoryTracker()
    assert ended >= 4 * n  # several episodes of every env went through a reset


def test_recipe_input_is_the_trainers_input_layout():
    env = envs.make_recipe(seed=5, workflow="reverse")
    obs, info = env.reset()
    assert obs.shape == (52 + MEM_DIM + 25,)
    np.testing.assert_array_equal(obs[52 + MEM_DIM:], Workflow.parse("reverse").onehot())
    assert env.action_masks().dtype == np.bool_ and not env.action_masks()[1]  # Monitor masked


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("env_id", [envs.ENV_ID, envs.MASKED_ID, envs.MEMORY_ID, envs.RECIPE_ID])
def test_registered_ids_pass_gymnasiums_checker_and_take_max_steps(env_id):
    env = gym.make(env_id, max_steps=30)
    check_env(env.unwrapped, skip_render_check=True)
    check_env(env, skip_render_check=True)
    env.reset(seed=0)
    n = 1
    while not env.step(0)[3]:
        n += 1
    assert n == 30
    venv = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point", max_steps=50)
    obs, info = venv.reset(seed=1)
    assert obs.shape == (3,) + env.observation_space.shape
    assert ("action_mask" in info) == (env_id != envs.ENV_ID)


@pytest.mark.parametrize("steps", [30, 50])
def test_a_short_episode_is_the_start_of_the_full_one(steps):
    a = envs.make(seed=9, max_steps=steps)
    b = envs.make(seed=9)
    oa, _ = a.reset()
    ob, _ = b.reset()
    rng = np.random.default_rng(2)
    for t in range(steps):
        act = int(rng.integers(145))
        ra, rb = a.step(act), b.step(act)
        np.testing.assert_array_equal(ra[0], rb[0])
        assert ra[1] == rb[1] and ra[3] == (t == steps - 1) and not rb[3]
    with pytest.raises(RuntimeError, match="truncated"):
        a.step(0)
    v = envs.make_vec(2, seed=9, max_steps=steps, autoreset_mode="Disabled")
    v.reset()
    for _ in range(steps):
        trunc = v.step(np.zeros(2, np.int32))[3]
    assert trunc.all()


@pytest.mark.parametrize("bad", [0, 101, 2.5, "30"])
def test_a_bad_max_steps_is_one_line(bad):
    with pytest.raises(ValueError, match="max_steps") as e:
        envs.make(max_steps=bad)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="max_steps"):
        envs.make_vec(2, max_steps=bad)


class _NotCage2Actions(gym.Env):
    observation_space = gym.spaces.Box(0.0, 1.0, (52,), np.float32)
    action_space = gym.spaces.Discrete(2)


def test_wrappers_refuse_an_env_that_is_not_cage2():
    with pytest.raises(UserError, match="CAGE2"):
        MemoryWrapper(gym.make("CartPole-v1"))
    with pytest.raises(UserError, match="CAGE2"):
        ActionMaskWrapper(_NotCage2Actions())
    with pytest.raises(UserError, match="CAGE2"):
        VecMemoryWrapper(gym.make_vec("CartPole-v1", num_envs=2))


@pytest.mark.sb3
def test_maskable_ppo_learns_on_the_vector_mask_and_never_takes_a_masked_action(tmp_path,
                                                                                monkeypatch):
    sb3_contrib = pytest.importorskip("sb3_contrib")
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # SB3's SB3-<date> logger folder
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    from wfrl.envs.sb3 import SB3VecEnv
    venv = envs.make_vec_recipe(4, seed=0, autoreset_mode="SameStep")
    model = sb3_contrib.MaskablePPO("MlpPolicy", SB3VecEnv(venv), n_steps=32, batch_size=64,
                                    n_epochs=1, seed=0, device="cpu")
    model.learn(256)
    obs, info = venv.reset(seed=4)
    for _ in range(40):
        masks = venv.action_masks()
        acts, _ = model.predict(obs, action_masks=masks, deterministic=False)
        assert masks[np.arange(4), acts].all()
        obs, _, _, _, info = venv.step(acts.astype(np.int32))


def test_a_masked_reset_restarts_only_its_envs_on_gymnasiums_vector_env():
    # gymnasium's own vector envs take "reset_mask" out of the options they are given: the
    # wrappers read it first (the memory of the envs not reset goes on, so do their fix counts)
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    from wfrl.envs.workflow_env import VecWorkflowWrapper
    inner = SyncVectorEnv([lambda i=i: envs.make(seed=i) for i in range(3)],
                          autoreset_mode=AutoresetMode.DISABLED)
    venv = VecActionMaskWrapper(VecWorkflowWrapper(VecMemoryWrapper(inner), "critical_first"))
    obs, info = venv.reset(seed=0)
    twins = [MemoryTracker() for _ in range(3)]
    for _t in range(12):
        for i in range(3):
            twins[i].update(obs[i, :52])
        acts = np.full(3, 132 + 9, np.int32)        # Restore User1: a fix every step
        for i in range(3):
            twins[i].acted(acts[i])
        obs, _, _, _, info = venv.step(acts)
    fixes = info["fixes"].copy()
    mask = np.array([True, False, False])
    obs, info = venv.reset(options={"reset_mask": mask})
    twins[0] = MemoryTracker()
    for i in range(3):
        twins[i].update(obs[i, :52])
        np.testing.assert_array_equal(obs[i, 52:52 + 66], twins[i].features(), err_msg=f"env {i}")
    assert obs[1, 52 + 65] == pytest.approx(0.12) and obs[0, 52 + 65] == 0.0    # t / 100
    np.testing.assert_array_equal(info["fixes"], [0, fixes[1], fixes[2]])
