"""The compiled CAGE2 simulator on its own: contract, seeding, batching, and documented CAGE2 facts (docs/simulator.md) that
hold exactly (CybORG comparisons are in test_parity.py)."""
import numpy as np
import pytest
from wfrl._core import Cage2Sim

import wfrl.envs as envs

HOST = {h: i for i, h in enumerate(
    ["Defender", "Enterprise0", "Enterprise1", "Enterprise2", "Op_Host0", "Op_Host1", "Op_Host2",
     "Op_Server0", "User0", "User1", "User2", "User3", "User4"])}
FOOTHOLD_ONLY = [0] * 8 + [2] + [0] * 4


def episode(backend, actions):
    obs, ra = backend.reset()
    out = [(obs, 0.0, ra)]
    for a in actions:
        out.append(backend.step(int(a)))
    return out


def same(a, b):
    return all(np.array_equal(x[0], y[0]) and x[1] == y[1] and np.array_equal(x[2], y[2])
               for x, y in zip(a, b))


def test_check_env_and_truncation():
    from gymnasium.utils.env_checker import check_env
    env = envs.make(backend="sim", red_agent="RedMeanderAgent", seed=0)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=1)
    assert not obs.any() and info["red_access"].tolist() == FOOTHOLD_ONLY
    for t in range(100):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert obs.dtype == np.float32 and not term and trunc == (t == 99)
        assert set(np.unique(obs)) <= {0.0, 1.0} and -15.8 <= r <= 0
    with pytest.raises(RuntimeError, match=r"step\(\) after the episode was truncated; call reset\(\)"):
        env.step(0)


def test_default_backend_is_sim():
    assert type(envs.make_backend()).__name__ == "SimBackend"


def test_seeding():
    actions = np.random.default_rng(0).integers(0, 145, 100)
    be = envs.make_backend("sim", "RedMeanderAgent")
    be.seed(5)
    a = episode(be, actions)
    be.seed(5)
    b = episode(be, actions)
    be.seed(6)
    c = episode(be, actions)
    assert same(a, b) and not same(a, c)
    # Two backends do not share state.
    x, y = envs.make_backend("sim", "RedMeanderAgent", 5), envs.make_backend("sim", "B_lineAgent", 9)
    x.reset()
    y.reset()
    inter = [(np.zeros(52, np.float32), 0.0, np.array(FOOTHOLD_ONLY, np.uint8))]
    for act in actions:
        inter.append(x.step(int(act)))
        y.step(int(act))
    assert same(a, inter)


def test_sleeping_red_does_nothing():
    be = envs.make_backend("sim", "SleepAgent", 0)
    be.reset()
    for _t in range(100):
        obs, r, ra = be.step(0)
        assert r == 0 and not obs.any() and ra.tolist() == FOOTHOLD_ONLY


def test_bline_vs_sleep_canonical_run():
    """B_line's plan (docs/simulator.md): first Impact at step index 14 in the canonical run, −1140.8 as its return; once
    OTService is down the reward is −10 − confidentiality every step."""
    be = envs.make_backend("sim", "B_lineAgent")
    returns, first = [], []
    for s in range(400):
        be.seed(s)
        be.reset()
        rs = [be.step(0)[1] for _ in range(100)]
        returns.append(round(sum(rs), 1))
        first.append(next(t for t, r in enumerate(rs) if r <= -10))
        assert all(r <= -10 for r in rs[first[-1]:])
    assert min(first) == 14
    values, counts = np.unique(returns, return_counts=True)
    assert values[counts.argmax()] == -1140.8
    assert -1138 < np.mean(returns) < -1130  # CybORG: −1134.7 ± 0.7


@pytest.mark.parametrize("red,expected", [("B_lineAgent", -280.8), ("RedMeanderAgent", -313.8)])
def test_restore_op_server_first_disarms_impact(red, expected):
    """Quirk B1 (docs/simulator.md): Restore(Op_Server0) at step 0, then Sleep — never −10; CybORG scores
    −280.8 ± 0.2 vs B_line and −313.8 ± 1.8 vs Meander (n=300)."""
    be = envs.make_backend("sim", red)
    returns = []
    for s in range(600):
        be.seed(s)
        be.reset()
        rs = [be.step(139 if t == 0 else 0)[1] for t in range(100)]
        assert min(rs) > -10
        returns.append(sum(rs))
    se = np.std(returns) / np.sqrt(len(returns))
    assert abs(np.mean(returns) - expected) < max(3.0, 4 * se)


def test_meander_vs_sleep_mean():
    """CybORG's RedMeanderAgent vs always-Sleep scores −977.2 ± 2.2 (n=1000)."""
    be = envs.make_backend("sim", "RedMeanderAgent")
    returns = []
    for s in range(2000):
        be.seed(s)
        be.reset()
        returns.append(sum(be.step(0)[1] for _ in range(100)))
    assert abs(np.mean(returns) - (-977.2)) < 4 * np.hypot(2.2, np.std(returns) / np.sqrt(2000))


def test_batched_step_equals_single_env_steps():
    n = 64
    rng = np.random.default_rng(1)
    batch = Cage2Sim(n, "RedMeanderAgent")
    single = Cage2Sim(1, "RedMeanderAgent")
    seeds = np.arange(100, 100 + n, dtype=np.uint64)
    obs = np.empty((n, 52), np.float32)
    ra = np.empty((n, 13), np.uint8)
    rew = np.empty(n, np.float32)
    done = np.empty(n, np.uint8)
    batch.reset_batch(seeds, obs, ra)
    actions = rng.integers(0, 145, (100, n)).astype(np.int32)
    traj = []
    for t in range(100):
        batch.step_batch(actions[t], obs, rew, done, ra)
        traj.append((obs.copy(), rew.copy(), ra.copy(), done.copy()))
    assert traj[-1][3].all() and not traj[-2][3].any()
    for i in range(0, n, 7):
        single.reset(0, int(seeds[i]))
        for t in range(100):
            o, r, a = single.step(0, int(actions[t, i]))
            np.testing.assert_array_equal(o, traj[t][0][i])
            assert np.float32(r) == traj[t][1][i]
            np.testing.assert_array_equal(a, traj[t][2][i])


def test_bad_arguments_are_rejected():
    sim = Cage2Sim(2, "B_lineAgent")
    with pytest.raises(ValueError, match=r"action 145 outside \[0, 145\)"):
        sim.step(0, 145)
    with pytest.raises(IndexError, match=r"env 2 outside \[0, 2\)"):
        sim.step(2, 0)
    with pytest.raises(ValueError, match="unknown red agent 'EvilAgent'"):
        Cage2Sim(1, "EvilAgent")
    with pytest.raises(ValueError, match=r"step_batch: arrays must have n rows \(obs \[n, 52\], "
                                         r"red_access \[n, 13\]\)"):
        sim.step_batch(np.zeros(3, np.int32), np.zeros((2, 52), np.float32), np.zeros(2, np.float32),
                       np.zeros(2, np.uint8), np.zeros((2, 13), np.uint8))
