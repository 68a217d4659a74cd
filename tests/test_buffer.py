import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wfrl.collect.buffer import ReferenceTrajectoryBuffer, allocate_flat, allocate_trajectory, compiled_buffer


def _fill(buf, plan, rng_seed, obs_dim, n_hosts):
    rng = np.random.default_rng(rng_seed)
    for row in plan:
        buf.push(int(row), rng.random(obs_dim).astype(np.float32), int(rng.integers(0, 145)),
                 float(rng.normal()), float(rng.normal()), float(rng.normal()),
                 bool(rng.random() < 0.1), rng.integers(0, 3, n_hosts).astype(np.uint8))


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 6), T=st.integers(1, 40), seed=st.integers(0, 2**31),
       fill=st.floats(0.0, 1.0))
def test_compiled_buffer_equals_reference(n, T, seed, fill):
    rng = np.random.default_rng(seed)
    # Each row gets a random number of steps (dones can fall mid-row).
    counts = (rng.random(n) * fill * (T + 1)).astype(int).clip(0, T)
    plan = np.concatenate([np.full(c, r) for r, c in enumerate(counts)] + [np.zeros(0, int)])
    rng.shuffle(plan)
    a_c, a_r = allocate_trajectory(n, T), allocate_trajectory(n, T)
    b_c, b_r = compiled_buffer(a_c), ReferenceTrajectoryBuffer(a_r)
    _fill(b_c, plan, seed, 52, 13)
    _fill(b_r, plan, seed, 52, 13)
    for name in a_c:
        np.testing.assert_array_equal(a_c[name], a_r[name], err_msg=name)
    assert b_c.count() == b_r.count() == counts.sum()

    adv = rng.normal(size=(n, T)).astype(np.float32)
    ret = rng.normal(size=(n, T)).astype(np.float32)
    f_c, f_r = allocate_flat(b_c.count()), allocate_flat(b_r.count())
    assert b_c.flatten(adv, ret, f_c) == b_r.flatten(adv, ret, f_r) == counts.sum()
    for name in f_c:
        np.testing.assert_allclose(f_c[name], f_r[name], rtol=0, atol=1e-6, err_msg=name)
    b_c.clear()
    assert b_c.count() == 0 and not a_c["lengths"].any()


def test_full_row_and_bad_row_raise():
    buf = compiled_buffer(allocate_trajectory(2, 3))
    obs, ra = np.zeros(52, np.float32), np.zeros(13, np.uint8)
    for t in range(3):
        assert buf.push(1, obs, 0, 0.0, 0.0, 0.0, False, ra) == t
    with pytest.raises(IndexError, match="full"):
        buf.push(1, obs, 0, 0.0, 0.0, 0.0, False, ra)
    with pytest.raises(IndexError, match=r"row 2 outside \[0, 2\)"):
        buf.push(2, obs, 0, 0.0, 0.0, 0.0, False, ra)
    with pytest.raises(ValueError, match="push: obs or red_access has the wrong length"):
        buf.push(0, np.zeros(51, np.float32), 0, 0.0, 0.0, 0.0, False, ra)


def test_buffer_rejects_mismatched_arrays():
    arrays = allocate_trajectory(2, 3)
    arrays["rewards"] = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match="rewards"):
        compiled_buffer(arrays)
    arrays = allocate_trajectory(2, 3)
    arrays["actions"] = arrays["actions"].astype(np.int64)
    with pytest.raises(ValueError, match="Buffer dtype mismatch, expected 'int32_t'"):
        compiled_buffer(arrays)


def test_flatten_requires_room():
    buf = compiled_buffer(allocate_trajectory(1, 4))
    buf.push(0, np.zeros(52, np.float32), 1, 0.0, 0.0, 0.0, False, np.zeros(13, np.uint8))
    buf.push(0, np.zeros(52, np.float32), 1, 0.0, 0.0, 0.0, True, np.zeros(13, np.uint8))
    z = np.zeros((1, 4), np.float32)
    with pytest.raises(ValueError, match="fewer"):
        buf.flatten(z, z, allocate_flat(1))
