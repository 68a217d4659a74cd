"""The gymnasium views of the simulator: the lean single env (gymnasium's check_env, and the same
returns as the backend contract's step), the native vector env (its own checks, and the same
episodes as n single envs in gymnasium's SyncVectorEnv, in every autoreset mode), make_vec for
both backends, and bad input as one-line errors."""
import shutil

import gymnasium
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env
from gymnasium.utils.passive_env_checker import data_shares_objects
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from wfrl._core import next_episode_seed as c_next_episode_seed

import wfrl.envs as envs
from wfrl.envs.gym_env import Cage2Env
from wfrl.envs.sim import SimBackend, next_episode_seed
from wfrl.envs.vector import Cage2VectorEnv
from wfrl.errors import UserError

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


class _PlainSim(SimBackend):
    """The simulator backend as any other backend: Cage2Env steps it through the contract."""


def _actions(seed, shape):
    return np.random.default_rng(seed).integers(0, envs.N_ACTIONS, shape)


# -- single env ------------------------------------------------------------------------------

def test_check_env_on_the_registered_single_env():
    env = gymnasium.make(envs.ENV_ID, red_agent="RedMeanderAgent", seed=0)
    check_env(env.unwrapped)
    check_env(envs.make("sim", "mixed", 3))
    env.close()


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent", "mixed"])
def test_lean_step_returns_what_the_contract_path_returns(red):
    lean, plain = envs.make("sim", red, 7), Cage2Env(_PlainSim(red, 7))
    assert lean._fast is not None and plain._fast is None
    acts = _actions(1, (3, 100)).tolist()
    for seed, episode in zip((None, None, 40), acts):  # reset() continues the chain; then seeded
        (o1, i1), (o2, i2) = lean.reset(seed=seed), plain.reset(seed=seed)
        assert np.array_equal(o1, o2) and np.array_equal(i1["red_access"], i2["red_access"])
        for a in episode:
            o1, r1, tm1, tr1, i1 = lean.step(a)
            o2, r2, tm2, tr2, i2 = plain.step(a)
            assert type(r1) is float and r1 == r2 and tm1 is tm2 is False and tr1 is tr2
            assert o1.dtype == o2.dtype == np.float32 and np.array_equal(o1, o2)
            assert i1.keys() == i2.keys() == {"red_access"}
            assert i1["red_access"].dtype == np.uint8
            assert np.array_equal(i1["red_access"], i2["red_access"])
        assert tr1 is True


def test_lean_step_keeps_every_returned_array():
    env = envs.make(seed=1)
    first, info = env.reset()
    kept = [(first.copy(), first, info["red_access"].copy(), info["red_access"])]
    for a in _actions(2, 100).tolist():
        o, _, _, _, i = env.step(a)
        kept.append((o.copy(), o, i["red_access"].copy(), i["red_access"]))
    env.reset()
    env.step(0)
    assert all(np.array_equal(c, o) and np.array_equal(rc, r) for c, o, rc, r in kept)
    assert not any(data_shares_objects(a[1], b[1]) for a, b in zip(kept, kept[1:]))


@pytest.mark.parametrize("make", [lambda: envs.make(seed=0), lambda: Cage2Env(_PlainSim(seed=0))])
def test_single_env_errors(make):
    env = make()
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(0)
    env.reset()
    for bad in (1.5, "3", np.array([3]), None):
        with pytest.raises(ValueError, match="one integer"):
            env.step(bad)
    for bad in (-1, 145, np.int64(1000)):
        with pytest.raises(ValueError, match="outside"):
            env.step(bad)
    env.step(np.int64(3))
    env.step(np.array(4))
    for _ in range(98):
        env.step(0)
    with pytest.raises(RuntimeError, match="truncated"):
        env.step(0)


def test_seed_chain_twins():
    for s in (0, 1, 2**64 - 1, 123456789):
        assert next_episode_seed(s) == c_next_episode_seed(s)


# -- vector env: its own checks --------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_vector_env_checks(mode):
    n = 5
    v = envs.make_vec(n, "mixed", 3, autoreset_mode=mode)
    assert isinstance(v, gymnasium.vector.VectorEnv) and v.num_envs == n
    assert v.metadata["autoreset_mode"] is mode
    assert v.single_observation_space == gymnasium.spaces.Box(0, 1, (52,), np.float32)
    assert v.single_action_space == gymnasium.spaces.Discrete(145)
    assert v.observation_space.shape == (n, 52)
    assert v.action_space == gymnasium.spaces.MultiDiscrete([145] * n)
    obs, info = v.reset(seed=11)
    assert obs in v.observation_space and not obs.any()
    assert info["red_access"].shape == (n, 13) and info["red_access"].dtype == np.uint8
    assert info["_red_access"].dtype == np.bool_ and info["_red_access"].all()
    v.action_space.seed(0)
    calls = [(obs, info)]
    for t in range(100):
        obs, rew, term, trunc, info = v.step(v.action_space.sample())
        assert obs in v.observation_space
        assert rew.dtype == np.float64 and rew.shape == (n,) and (rew <= 0).all()
        assert term.dtype == trunc.dtype == np.bool_ and not term.any()
        assert trunc.all() == (t == 99) and trunc.any() == (t == 99)
        assert info["red_access"].shape == (n, 13) and (info["red_access"][:, 8] == 2).all()
        calls.append((obs, info))
    assert not any(data_shares_objects(a[0], b[0]) or data_shares_objects(a[1], b[1])
                   for a, b in zip(calls, calls[1:]))
    if mode is AutoresetMode.SAME_STEP:
        assert not obs.any()  # already the next episode's first observation
        assert info["_final_obs"].all() and info["final_obs"].dtype == object
        assert all(o.shape == (52,) for o in info["final_obs"])
        assert info["final_info"]["red_access"].shape == (n, 13)
    else:
        assert obs.any()
    if mode is AutoresetMode.NEXT_STEP:
        obs, rew, _, trunc, info = v.step(np.zeros(n, np.int64))
        assert not obs.any() and not rew.any() and not trunc.any()
    if mode is AutoresetMode.DISABLED:
        with pytest.raises(RuntimeError, match="autoreset is disabled"):
            v.step(np.zeros(n, np.int32))
        obs, info = v.reset(options={"reset_mask": np.array([True] + [False] * (n - 1))})
        assert info["_red_access"].tolist() == [True] + [False] * (n - 1)
    v.close()


def test_vector_env_reset_and_step_are_deterministic_in_the_seed():
    def run(seed, copy):
        v = envs.make_vec(4, "RedMeanderAgent", autoreset_mode="SameStep", copy=copy)
        out = [v.reset(seed=seed)[0].copy()]
        for a in _actions(5, (150, 4)):
            o, r, _, _, i = v.step(a)
            out += [o.copy(), r.copy(), i["red_access"].copy()]
        return out

    a, b, c = run(3, True), run(3, False), run(4, True)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_copy_false_returns_the_env_buffers():
    v = envs.make_vec(3, seed=0, copy=False)
    o1, _ = v.reset()
    o2, r2, _, _, i2 = v.step(np.zeros(3, np.int32))
    o3, r3, _, _, i3 = v.step(np.zeros(3, np.int32))
    assert o2 is o3 and r2 is r3 and i2["red_access"] is i3["red_access"]


@pytest.mark.parametrize("mode", MODES)
def test_large_copying_env_equals_the_buffer_env(mode):
    """From 1,024 envs on, copy=True hands each step new arrays to write into: same values as
    copy=False, nothing returned is written again, a masked reset keeps the other rows."""
    n = 1024
    fresh = envs.make_vec(n, "mixed", 9, autoreset_mode=mode)
    buf = envs.make_vec(n, "mixed", 9, autoreset_mode=mode, copy=False)
    assert fresh._fresh and not buf._fresh
    kept = []
    mask = np.arange(n) % 3 == 0
    for t, a in enumerate(_actions(4, (201, n))):
        resets = [None] if t == 0 else [mask, ~mask] if (
            t % 100 == 0 and mode is AutoresetMode.DISABLED) else []
        for m in resets:
            opts = None if m is None else {"reset_mask": m}
            (o1, i1), (o2, i2) = fresh.reset(options=opts), buf.reset(options=opts)
            assert np.array_equal(o1, o2) and np.array_equal(i1["red_access"], i2["red_access"])
            kept.append((o1.copy(), o1))
        s1, s2 = fresh.step(a), buf.step(a)
        for x, y in zip(s1[:4], s2[:4]):
            assert x.dtype == y.dtype and np.array_equal(x, y)
        assert np.array_equal(s1[4]["red_access"], s2[4]["red_access"])
        kept += [(s1[0].copy(), s1[0]), (s1[4]["red_access"].copy(), s1[4]["red_access"])]
    assert all(np.array_equal(c, o) for c, o in kept)


def test_masked_reset_keeps_the_other_rows():
    for n in (4, 1024):
        v = envs.make_vec(n, seed=1, autoreset_mode="Disabled")
        v.reset()
        for a in _actions(6, (100, n)):
            obs, *_, info = v.step(a)
        mask = np.arange(n) % 2 == 0
        o, i = v.reset(options={"reset_mask": mask})
        assert not o[mask].any() and np.array_equal(o[~mask], obs[~mask])
        assert np.array_equal(i["red_access"][~mask], info["red_access"][~mask])


def test_gymnasium_make_vec_and_its_wrappers():
    v = gymnasium.make_vec(envs.ENV_ID, num_envs=3, red_agent="RedMeanderAgent", seed=2)
    assert isinstance(v, Cage2VectorEnv) and v.spec.id == envs.ENV_ID
    assert v.red_agents == ("RedMeanderAgent",) * 3
    # gymnasium's own vector wrappers run on it (they need NEXT_STEP)
    v = gymnasium.wrappers.vector.RecordEpisodeStatistics(v)
    v = gymnasium.wrappers.vector.NormalizeObservation(v)
    v.reset(seed=1)
    total = np.zeros(3)
    for a in _actions(0, (100, 3)):
        _, r, _, _, info = v.step(a)
        total += r
    assert info["_episode"].all() and np.allclose(info["episode"]["r"], total)
    assert (info["episode"]["l"] == 100).all()


def test_mixed_red_is_chosen_per_env_and_episode():
    v = envs.make_vec(16, "mixed", 0)
    v.reset(seed=100)
    first = v.playing()
    assert set(first) == {"B_lineAgent", "RedMeanderAgent"}
    from wfrl.envs.base import mixed_red_kind
    assert list(first) == [mixed_red_kind(100 + i) for i in range(16)]
    per_env = envs.make_vec(3, ["SleepAgent", "B_lineAgent", "mixed"], 0)
    per_env.reset(seed=5)
    assert per_env.playing()[:2] == ("SleepAgent", "B_lineAgent")


# -- vector env = n single envs --------------------------------------------------------------

def _sync(reds, seed, mode):
    """The reference: gymnasium's own SyncVectorEnv (autoreset in Python) over single envs that
    step through the backend contract, one Cage2Sim.step call per env and step."""
    fns = [lambda r=r, i=i: Cage2Env(_PlainSim(r, seed + i)) for i, r in enumerate(reds)]
    return SyncVectorEnv(fns, autoreset_mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reds", [("mixed",) * 6,
                                  ("B_lineAgent", "RedMeanderAgent", "SleepAgent", "mixed")])
def test_vector_env_plays_the_episodes_of_n_single_envs(mode, reds):
    n, seed = len(reds), 1000
    native = envs.make_vec(n, list(reds), seed, autoreset_mode=mode)
    ref = _sync(reds, seed, mode)
    # first reset without a seed (the constructor's seed + i), later ones seeded and masked
    (o1, i1), (o2, i2) = native.reset(), ref.reset()
    assert np.array_equal(o1, o2) and np.array_equal(i1["red_access"], i2["red_access"])
    acts = _actions(9, (320, n))
    for t, a in enumerate(acts):
        if mode is AutoresetMode.DISABLED and t % 100 == 0 and t:
            mask = np.zeros(n, np.bool_)
            mask[: n // 2] = True  # a masked reset, then the rest
            seeds = [7 * t + i for i in range(n)] if t == 200 else None
            for m in (mask, ~mask):
                (o1, i1), (o2, i2) = (native.reset(seed=seeds, options={"reset_mask": m}),
                                      ref.reset(seed=seeds, options={"reset_mask": m}))
                assert np.array_equal(o1[m], o2[m])
                assert np.array_equal(i1["red_access"][m], i2["red_access"][m])
        s1, s2 = native.step(a), ref.step(a)
        for x, y in zip(s1[:4], s2[:4]):
            assert x.dtype == y.dtype and np.array_equal(x, y), t
        assert np.array_equal(s1[4]["red_access"], s2[4]["red_access"])
        if "final_obs" in s2[4]:
            f1, f2 = s1[4], s2[4]
            assert np.array_equal(f1["_final_obs"], f2["_final_obs"])
            for i in np.flatnonzero(f2["_final_obs"]):
                assert np.array_equal(f1["final_obs"][i], f2["final_obs"][i])
                assert np.array_equal(f1["final_info"]["red_access"][i],
                                      f2["final_info"]["red_access"][i])
        else:
            assert "final_obs" not in s1[4]
    native.close()
    ref.close()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_vector_core_is_clean_under_asan_and_ubsan(tmp_path):
    from conftest import run_sanitized
    run_sanitized("check_vec", tmp_path, [37, 1000, 5])


# -- bad input -------------------------------------------------------------------------------

def test_bad_vector_input_is_one_clear_error():
    for n in (0, -3, 2.5, "4", None):
        with pytest.raises(UserError, match="num_envs"):
            envs.make_vec(n)
    with pytest.raises(UserError, match="unknown red agent"):
        envs.make_vec(2, "Blue")
    with pytest.raises(UserError, match="3 names for 2 envs"):
        envs.make_vec(2, ["B_lineAgent"] * 3)
    with pytest.raises(UserError, match="autoreset mode"):
        envs.make_vec(2, autoreset_mode="sometimes")
    with pytest.raises(UserError, match="backend"):
        envs.make_vec(2, backend="gpu")
    v = envs.make_vec(3, seed=0)
    with pytest.raises(ResetNeeded):
        v.step(np.zeros(3, np.int32))
    v.reset()
    for bad, msg in ((np.zeros(2, np.int32), r"shape \(3,\)"), (np.zeros((3, 1)), r"shape \(3,\)"),
                     (0, r"shape \(3,\)"), (np.zeros(3), "integers"),
                     (np.array([0, 145, 0]), r"actions\[1\]=145"),
                     (np.array([0, 0, -1], np.int32), r"actions\[2\]=-1"),
                     (np.array([2**32, 0, 0]), r"actions\[0\]")):
        with pytest.raises(ValueError, match=msg):
            v.step(bad)
    v.step([1, 2, 3])  # lists are fine
    with pytest.raises(ValueError, match="reset_mask"):
        v.reset(options={"reset_mask": np.zeros(3, np.bool_)})
    with pytest.raises(ValueError, match="reset_mask"):
        v.reset(options={"reset_mask": np.ones(2, np.bool_)})
    with pytest.raises(ValueError, match="2 seeds for 3 envs"):
        v.reset(seed=[1, 2])


# -- the CybORG backend behind the same interface --------------------------------------------

@pytest.mark.cyborg
def test_cyborg_vector_env_has_the_same_interface_and_episodes():
    n, seed = 2, 21
    cy = envs.make_vec(n, "B_lineAgent", seed, backend="cyborg", autoreset_mode="SameStep")
    try:
        sim = envs.make_vec(n, "B_lineAgent", seed, autoreset_mode="SameStep")
        assert type(cy).__name__ == "AsyncVectorEnv"
        assert cy.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        for attr in ("single_observation_space", "single_action_space", "observation_space",
                     "action_space", "num_envs"):
            assert getattr(cy, attr) == getattr(sim, attr), attr
        singles = [envs.make("cyborg", "B_lineAgent", seed + i) for i in range(n)]
        (oc, ic), (os_, is_) = cy.reset(), sim.reset()
        assert oc.shape == os_.shape and oc.dtype == os_.dtype
        assert ic["red_access"].shape == is_["red_access"].shape == (n, 13)
        refs = [e.reset()[0] for e in singles]
        assert np.array_equal(oc, np.stack(refs))
        for a in _actions(3, (100, n)):
            out, ref = cy.step(a), sim.step(a)
            for x, y in zip(out[:4], ref[:4]):
                assert x.shape == y.shape and x.dtype == y.dtype
            assert set(out[4]) == set(ref[4])
            steps = [e.step(int(ai)) for e, ai in zip(singles, a)]
            assert np.array_equal(out[1], [s[1] for s in steps])
            assert np.array_equal(out[4].get("final_info", out[4])["red_access"],
                                  np.stack([s[4]["red_access"] for s in steps]))
        assert out[3].all() and set(out[4]["final_info"]) == set(ref[4]["final_info"])
        from wfrl.envs.workflow_env import VecWorkflowWrapper
        wrapped = VecWorkflowWrapper(cy, "critical_first")
        obs, info = wrapped.reset()
        obs, _, _, _, info = wrapped.step(np.full(n, 15 + 8))  # Remove User0: a fix
        assert obs.shape == (n, 77) and (info["fixes"] == 1).all()
    finally:
        cy.close()


def test_cyborg_vector_env_without_the_extra_fails_in_one_line(monkeypatch):
    import wfrl.envs.cyborg as cyborg_mod
    from wfrl.errors import BackendUnavailable

    def missing():
        raise BackendUnavailable("the cyborg backend needs the [cyborg] extra")

    monkeypatch.setattr(cyborg_mod, "load_cyborg", missing)
    with pytest.raises(BackendUnavailable, match="extra"):
        envs.make_vec(2, backend="cyborg")
