"""The workflow wrappers against wfrl's own trainer: the compiled batch compliance step equals the
Python reference (ComplianceTracker), and on the same episodes the wrappers report the same
per-step rewards, alignment and compliance as the compiled rollout loop the trainer collects
with (SimSlots.run_episodes), for the single env and the vector env in every autoreset mode."""
import gymnasium
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode
from wfrl._core import IN_DIM, Policy, SimSlots, TrajectoryBuffer, compliance_step_batch, mlp_n_params

import wfrl.envs as envs
from wfrl.envs.sim import next_episode_seed
from wfrl.envs.workflow_env import VecWorkflowWrapper, WorkflowWrapper, compliance_rate
from wfrl.errors import UserError
from wfrl.workflow import ComplianceTracker, Workflow, all_workflows

HIDDEN = 16
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


# -- compiled batch step = reference ---------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_compliance_step_batch_equals_the_reference(seed):
    rng = np.random.default_rng(seed)
    n = 12
    wfs = [all_workflows()[k] for k in rng.integers(0, 120, n)]
    foothold = rng.random(n) < 0.5
    lam = rng.uniform(0, 40, n).astype(np.float32)
    refs = [ComplianceTracker(w, float(l), bool(f)) for w, l, f in zip(wfs, lam, foothold)]
    rank = np.array([w.rank for w in wfs], np.uint8)
    fixes, compliant = np.zeros(n, np.int32), np.zeros(n, np.int32)
    bonus = np.zeros(n, np.float32)
    for t in range(300):
        # fixes are frequent; -1 and other actions change nothing
        acts = np.where(rng.random(n) < 0.5, rng.choice([15, 132], n) + rng.integers(0, 13, n),
                        rng.integers(-1, 145, n)).astype(np.int32)
        ra = (rng.integers(0, 3, (n, 13)) * (rng.random((n, 13)) < 0.25)).astype(np.uint8)
        ra[:, 8] = rng.integers(0, 3, n)
        done = (rng.random(n) < 0.05).astype(np.uint8)
        compliance_step_batch(acts, ra, rank, foothold.astype(np.uint8), lam, done, fixes,
                              compliant, bonus)
        for i, ref in enumerate(refs):
            want = np.float32(ref.step(int(acts[i]), ra[i]))
            if done[i]:
                want = np.float32(want + np.float32(ref.finish()))
            assert bonus[i] == want, (t, i)
            assert (fixes[i], compliant[i]) == (ref.fixes, ref.compliant)
            assert compliance_rate(fixes[i], compliant[i]) == ref.rate
            if done[i]:
                ref.reset()
                fixes[i] = compliant[i] = 0


def test_compliance_step_batch_rejects_bad_arrays():
    n = 2
    ok = dict(actions=np.zeros(n, np.int32), red_access=np.zeros((n, 13), np.uint8),
              rank=np.array([[0, 1, 2, 3, 4]] * n, np.uint8), count_foothold=np.zeros(n, np.uint8),
              lam=np.ones(n, np.float32), done=np.zeros(n, np.uint8),
              fixes=np.zeros(n, np.int32), compliant=np.zeros(n, np.int32),
              bonus=np.zeros(n, np.float32))
    compliance_step_batch(**ok)
    for key, bad, msg in (("rank", np.array([[0, 1, 2, 3, 3]] * n, np.uint8), "permutation"),
                          ("rank", np.zeros((n, 4), np.uint8), "shape"),
                          ("red_access", np.zeros((n, 12), np.uint8), "shape"),
                          ("lam", np.ones(n + 1, np.float32), "lam"),
                          ("fixes", np.zeros(1, np.int32), "fixes")):
        with pytest.raises(ValueError, match=msg):
            compliance_step_batch(**{**ok, key: bad})


# -- wrappers = the trainer's rollout loop ---------------------------------------------------

def _policy(workflow, lam, foothold, seed):
    w = (np.random.default_rng(seed).standard_normal(mlp_n_params(HIDDEN, IN_DIM)) * 0.4)
    return Policy(w.astype(np.float32), HIDDEN, workflow.onehot(), workflow.rank, lam, foothold)


def _trainer_episodes(red, workflows, lam, foothold, seeds, episodes):
    """What the trainer's compiled loop records: env i plays `episodes` episodes from seeds[i]
    and its chain; returns per (env, episode) the buffer row arrays and the episode stats."""
    n = len(workflows)
    rows = n * episodes
    arrays = {"obs": np.zeros((rows, 100, 52), np.float32),
              "actions": np.zeros((rows, 100), np.int32),
              "logprobs": np.zeros((rows, 100), np.float32),
              "values": np.zeros((rows, 100), np.float32),
              "rewards": np.zeros((rows, 100), np.float32),
              "dones": np.zeros((rows, 100), np.uint8),
              "red_access": np.zeros((rows, 100, 13), np.uint8),
              "lengths": np.zeros(rows, np.int32)}
    buf = TrajectoryBuffer(arrays)
    stats = {k: np.zeros(rows, np.float32) for k in ("env_return", "alignment", "compliance")}
    stats.update({k: np.zeros(rows, np.int32) for k in ("fixes", "compliant")})
    slots = SimSlots(1, red)
    for i, wf in enumerate(workflows):
        env_seeds = [seeds[i]]
        for _ in range(episodes - 1):
            env_seeds.append(next_episode_seed(env_seeds[-1]))
        part = {k: np.zeros(episodes, v.dtype) for k, v in stats.items()}
        slots.run_episodes(0, _policy(wf, lam, foothold, i), np.array(env_seeds, np.uint64),
                           np.arange(episodes, dtype=np.uint64) + 77 * i,
                           np.arange(i * episodes, (i + 1) * episodes, dtype=np.int64), buf, part)
        for k, v in part.items():
            stats[k][i * episodes:(i + 1) * episodes] = v
    return arrays, stats


def _check_episode_end(got, stats, row, env_return):
    assert np.float32(got["compliance"]) == stats["compliance"][row]
    assert (got["fixes"], got["compliant"]) == (stats["fixes"][row], stats["compliant"][row])
    assert np.float32(got["episode_alignment"]) == stats["alignment"][row]
    assert env_return == pytest.approx(stats["env_return"][row], abs=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("red,foothold", [("B_lineAgent", False), ("mixed", True)])
def test_vector_wrapper_equals_the_trainer(mode, red, foothold):
    n, seed, lam, episodes = 6, 500, 30.0, 2
    workflows = [Workflow.parse(w) for w in ("critical_first", "enterprise_focus", "user_priority",
                                             "operational_focus", "balanced", "reverse")]
    arrays, stats = _trainer_episodes(red, workflows, lam, foothold,
                                      [seed + i for i in range(n)], episodes)
    assert stats["fixes"].min() > 0 and (stats["compliant"] < stats["fixes"]).any()
    env = VecWorkflowWrapper(envs.make_vec(n, red, seed, autoreset_mode=mode), workflows, lam,
                             foothold)
    obs, info = env.reset()
    cond = np.stack([w.onehot() for w in workflows])
    for e in range(episodes):
        rows = np.arange(n) * episodes + e
        if e and mode is AutoresetMode.NEXT_STEP:
            obs, r, _, _, info = env.step(np.zeros(n, np.int64))  # the reset step scores nothing
            assert not r.any() and not info["alignment"].any() and not info["fixes"].any()
        if e and mode is AutoresetMode.DISABLED:
            obs, info = env.reset()
        env_return = np.zeros(n)
        for t in range(100):
            assert np.array_equal(obs[:, :52], arrays["obs"][rows, t])
            assert np.array_equal(obs[:, 52:], cond)
            obs, reward, _, trunc, info = env.step(arrays["actions"][rows, t])
            env_return += info["env_reward"]
            # the trainer's reward: float32 env reward + float32 alignment bonus
            trainer = arrays["rewards"][rows, t]
            assert np.array_equal((info["env_reward"].astype(np.float32) + info["alignment"]),
                                  trainer), (e, t)
            assert np.allclose(reward, trainer, atol=1e-5)
        assert trunc.all()
        end = info["final_info"] if mode is AutoresetMode.SAME_STEP else info
        for i in range(n):
            _check_episode_end({k: end[k][i] for k in ("compliance", "fixes", "compliant",
                                                      "episode_alignment")},
                               stats, rows[i], env_return[i])
        if mode is AutoresetMode.SAME_STEP:
            assert not info["fixes"].any() and (info["compliance"] == 0.5).all()
            assert all(o.shape == (77,) and np.array_equal(o[52:], cond[i])
                       for i, o in enumerate(info["final_obs"]))


def test_single_wrapper_equals_the_trainer():
    wf, lam, seed = Workflow.parse("critical_first"), 12.5, 31
    arrays, stats = _trainer_episodes("RedMeanderAgent", [wf], lam, False, [seed], 3)
    env = WorkflowWrapper(gymnasium.make(envs.ENV_ID, red_agent="RedMeanderAgent", seed=seed),
                          wf, lam)
    for e in range(3):
        obs, info = env.reset()
        assert info["fixes"] == 0 and info["compliance"] == 0.5
        env_return = 0.0
        for t in range(100):
            assert np.array_equal(obs[:52], arrays["obs"][e, t])
            assert np.array_equal(obs[52:], wf.onehot())
            obs, reward, _, trunc, info = env.step(int(arrays["actions"][e, t]))
            assert np.float32(info["env_reward"]) + np.float32(info["alignment"]) == \
                arrays["rewards"][e, t]
            assert reward == info["env_reward"] + info["alignment"]
            env_return += info["env_reward"]
        assert trunc
        _check_episode_end(info, stats, e, env_return)


def test_no_fix_episode_gets_the_end_term():
    env = VecWorkflowWrapper(envs.make_vec(2, seed=0), "balanced", lam=10.0)
    env.reset()
    for _ in range(100):
        _, r, _, trunc, info = env.step(np.zeros(2, np.int32))  # Sleep only
    assert trunc.all() and np.allclose(info["alignment"], -2.0)
    assert np.allclose(info["episode_alignment"], -2.0) and (info["compliance"] == 0.5).all()
    assert np.allclose(r, info["env_reward"] - 2.0)


# -- gymnasium checks, per-env workflows, bad input ------------------------------------------

def test_check_env_on_the_single_wrapper():
    env = WorkflowWrapper(envs.make(seed=0), "reverse", 5.0)
    check_env(env, skip_render_check=True)
    assert env.observation_space.shape == (77,)


def test_vector_wrapper_spaces_and_set_workflow():
    base = envs.make_vec(3, seed=1)
    env = VecWorkflowWrapper(base, "balanced")
    assert env.single_observation_space.shape == (77,) and env.observation_space.shape == (3, 77)
    assert env.action_space == base.action_space
    obs, _ = env.reset()
    assert obs in env.observation_space
    env.set_workflow(1, "reverse")
    env.set_workflow(np.array([True, False, False]), 7)
    obs, *_ = env.step(np.zeros(3, np.int32))
    assert np.array_equal(obs[1, 52:], Workflow.parse("reverse").onehot())
    assert np.array_equal(obs[0, 52:], Workflow.from_index(7).onehot())
    assert env.workflows[2] == Workflow.parse("balanced")


def test_wrapper_bad_input_is_one_clear_error():
    with pytest.raises(UserError, match="unknown unit type"):
        WorkflowWrapper(envs.make(), "op_server,nope")
    with pytest.raises(UserError, match="lam"):
        WorkflowWrapper(envs.make(), "balanced", lam=-1)
    with pytest.raises(UserError, match="not a workflow"):
        VecWorkflowWrapper(envs.make_vec(2), 1.5)
    with pytest.raises(UserError, match="3 workflows for 2 envs"):
        VecWorkflowWrapper(envs.make_vec(2), ["balanced"] * 3)
    with pytest.raises(UserError, match="already conditioned on a workflow"):
        WorkflowWrapper(WorkflowWrapper(envs.make(), "balanced"), "balanced")
    with pytest.raises(UserError, match="already conditioned on a workflow"):
        VecWorkflowWrapper(VecWorkflowWrapper(envs.make_vec(2), "balanced"), "reverse")
    with pytest.raises(UserError, match="Box observations"):
        WorkflowWrapper(gym.make("CartPole-v1"), "balanced")
    with pytest.raises(UserError, match="outside"):
        VecWorkflowWrapper(envs.make_vec(2), "balanced").set_workflow(2, "reverse")
