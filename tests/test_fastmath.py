"""The branch-free exp and tanh of the compiled loops (csrc/wfrl_fastmath.h) against numpy's, in
float64: the error bounds their comments state, exact zeros and signs where they matter."""
import numpy as np

from wfrl import _core


def test_exp_nonpos_is_within_its_stated_relative_error():
    x = np.concatenate([np.linspace(-87.0, 0.0, 400_001, dtype=np.float32),
                        -np.logspace(-8, 0, 2001).astype(np.float32),
                        np.float32([0.0, -0.0, -86.999, -1e-30])])
    got = _core.fastmath(x, "exp").astype(np.float64)
    want = np.exp(x.astype(np.float64))
    assert np.max(np.abs(got - want) / want) < 2.5e-7
    # below -87 exactly 0 (no subnormals), above 0 clamped to exp(0) = 1, NaN → 0
    below = _core.fastmath(np.float32([-87.5, -100.0, -1e9, -np.inf]), "exp")
    assert np.array_equal(below, np.zeros(4, np.float32))
    assert np.array_equal(_core.fastmath(np.float32([0.5, np.inf, np.nan]), "exp"),
                          np.float32([1.0, 1.0, 0.0]))


def test_tanh_is_within_its_stated_absolute_error_and_odd():
    x = np.concatenate([np.linspace(-20.0, 20.0, 800_001, dtype=np.float32),
                        np.logspace(-12, 1, 4001).astype(np.float32),
                        np.float32([0.04999, 0.05, 0.05001, 1e-38, 3e-45])])
    x = np.concatenate([x, -x])
    got = _core.fastmath(x, "tanh")
    want = np.tanh(x.astype(np.float64))
    assert np.max(np.abs(got.astype(np.float64) - want)) < 2e-7
    small = np.abs(x) < 0.05                    # the Taylor branch: relative accuracy too
    nz = small & (x != 0)
    assert np.max(np.abs(got[nz] / want[nz] - 1.0)) < 2e-7
    assert np.array_equal(got, -_core.fastmath(-x, "tanh"))   # odd, bit for bit
    assert np.all(np.abs(got) <= 1.0)
    special = _core.fastmath(np.float32([0.0, -0.0, np.inf, -np.inf, np.nan]), "tanh")
    assert special[0] == 0.0 and not np.signbit(special[0])
    assert special[1] == 0.0 and np.signbit(special[1])
    assert special[2] == 1.0 and special[3] == -1.0 and np.isnan(special[4])
