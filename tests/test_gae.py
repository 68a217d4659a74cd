import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wfrl import _core
from wfrl.ppo.gae import gae, gae_reference


@st.composite
def trajectories(draw):
    n = draw(st.integers(1, 8))
    T = draw(st.integers(1, 120))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    rewards = rng.normal(0, 5, (n, T)).astype(np.float32)
    values = rng.normal(0, 5, (n, T)).astype(np.float32)
    dones = (rng.random((n, T)) < draw(st.sampled_from([0.0, 0.05, 0.3]))).astype(np.uint8)
    lengths = rng.integers(0, T + 1, n).astype(np.int32)
    last = rng.normal(0, 5, n).astype(np.float32)
    gamma = draw(st.floats(0.0, 1.0))
    lam = draw(st.floats(0.0, 1.0))
    return rewards, values, dones, lengths, last, gamma, lam


@settings(max_examples=200, deadline=None)
@given(trajectories())
def test_compiled_gae_equals_reference(traj):
    adv_c, ret_c = gae(*traj)
    adv_r, ret_r = gae_reference(*traj)
    np.testing.assert_allclose(adv_c, adv_r, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(adv_r).max()))
    np.testing.assert_allclose(ret_c, ret_r, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(ret_r).max()))


def test_gae_hand_example():
    # Row 0: episode ends at t=1 (done), new one t=2 bootstrapped by last value 10.
    r = np.array([[1, 2, 3]], np.float32)
    v = np.array([[0.5, 1.0, 2.0]], np.float32)
    d = np.array([[0, 1, 0]], np.uint8)
    g, lam = 0.9, 0.8
    adv, ret = gae(r, v, d, np.array([3], np.int32), np.array([10.0], np.float32), g, lam)
    d2 = 3 + g * 10 - 2.0
    d1 = 2 - 1.0
    d0 = 1 + g * 1.0 - 0.5
    np.testing.assert_allclose(adv[0], [d0 + g * lam * d1, d1, d2], rtol=1e-6)
    np.testing.assert_allclose(ret[0], adv[0] + v[0], rtol=1e-6)


def test_gae_ignores_steps_past_length_and_done_blocks_bootstrap():
    r = np.ones((2, 4), np.float32)
    v = np.zeros((2, 4), np.float32)
    d = np.zeros((2, 4), np.uint8)
    d[1, 1] = 1
    lengths = np.array([2, 2], np.int32)
    adv, _ = gae(r, v, d, lengths, np.array([100.0, 100.0], np.float32), 1.0, 1.0)
    assert adv[0, 0] == pytest.approx(102.0) and adv[0, 1] == pytest.approx(101.0)
    assert adv[1, 0] == pytest.approx(2.0) and adv[1, 1] == pytest.approx(1.0)
    assert not adv[:, 2:].any()


def test_gae_binding_rejects_bad_shapes():
    z = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="shape"):
        _core.gae(z, np.zeros((2, 4), np.float32), np.zeros((2, 3), np.uint8),
                  np.zeros(2, np.int32), np.zeros(2, np.float32), 0.9, 0.9, z.copy(), z.copy())
    with pytest.raises(ValueError, match="lengths"):
        _core.gae(z, z, np.zeros((2, 3), np.uint8), np.array([1, 4], np.int32),
                  np.zeros(2, np.float32), 0.9, 0.9, z.copy(), z.copy())
    with pytest.raises(ValueError, match="Buffer dtype mismatch, expected 'const float'"):  # wrong dtype never reaches C
        _core.gae(z.astype(np.float64), z, np.zeros((2, 3), np.uint8), np.zeros(2, np.int32),
                  np.zeros(2, np.float32), 0.9, 0.9, z.copy(), z.copy())
