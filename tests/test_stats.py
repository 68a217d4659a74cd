"""wfrl.stats: the mean ± standard error every report uses, against the textbook formula."""
import math

import numpy as np
import pytest

from wfrl.stats import mean_se, standard_error


def test_mean_se_is_the_sample_formula():
    x = [1.0, 2.0, 4.0, 8.0]
    m = sum(x) / 4
    sd = math.sqrt(sum((v - m) ** 2 for v in x) / 3)
    assert mean_se(x) == pytest.approx((m, sd / 2), rel=1e-15)


def test_fewer_than_two_values_have_no_spread():
    assert mean_se([3.5]) == (3.5, 0.0)
    assert standard_error(np.array([], dtype=np.float64)) == 0.0


def test_standard_error_keeps_the_dtype_it_is_given():
    x = np.array([0.1, 0.7, 0.3], dtype=np.float32)
    assert standard_error(x) == float(x.std(ddof=1) / np.sqrt(3))
    assert standard_error(x) != standard_error(x.astype(np.float64))
