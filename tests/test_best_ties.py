"""Which workflows the ground truth calls not distinguishable from its best: the Dunnett critical
value against independent routes, and the multiple comparisons with the best on planted tables
(coverage of the true best, false exclusions under no effect, exclusion of a planted loss)."""
import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal, multivariate_t, t

from wfrl.search import effects


@pytest.mark.parametrize("df", [4, 10, 476])
def test_one_comparison_is_students_t(df):
    assert effects.dunnett_one_sided(1, df) == pytest.approx(t.ppf(0.95, df), abs=1e-4)


def test_known_values_from_a_multivariate_distribution():
    """P(all k equicorrelated (1/2) normals or t's ≤ d) = 0.95 at the returned d, by scipy's own
    multivariate CDFs."""
    k = 3
    corr = np.full((k, k), 0.5) + 0.5 * np.eye(k)
    d = effects.dunnett_one_sided(k, None)
    p = multivariate_normal(np.zeros(k), corr).cdf(np.full(k, d))
    assert p == pytest.approx(0.95, abs=1e-3)
    d = effects.dunnett_one_sided(4, 12)
    corr = np.full((4, 4), 0.5) + 0.5 * np.eye(4)
    p = multivariate_t(np.zeros(4), corr, df=12).cdf(np.full(4, d), random_state=0)
    assert p == pytest.approx(0.95, abs=3e-3)
    # one-sided Dunnett table value (5 comparisons, 20 df: 2.39) and the value the truth uses
    assert effects.dunnett_one_sided(5, 20) == pytest.approx(2.3888, abs=1e-3)
    assert effects.dunnett_one_sided(119, 476) == pytest.approx(3.0991, abs=1e-3)
    # more comparisons need a larger margin, more degrees of freedom a smaller one
    assert effects.dunnett_one_sided(119, 476) > effects.dunnett_one_sided(10, 476)
    assert effects.dunnett_one_sided(10, 20) > effects.dunnett_one_sided(10, 476)


def _tables(rng, effect, runs=5, noise=0.3):
    return effect[None, :] + rng.normal(0, noise, (runs, effect.size)) \
        + rng.normal(0, 1.0, (runs, 1))        # a common offset per run, as training gives


def test_no_effect_excludes_few_and_the_old_test_excluded_many():
    """With 120 equal workflows every one is a true best, kept with probability 0.95: 6 excluded
    per table on average (sd about 6 between tables, so 100 tables put the mean within 3-8).
    Uncorrected paired t-tests against the highest mean excluded a quarter."""
    rng = np.random.default_rng(0)
    feasible = np.ones(120, dtype=bool)
    excluded, naive = [], []
    for _ in range(100):
        y = _tables(rng, np.zeros(120))
        b = effects.best_and_ties(y, feasible)
        excluded.append(119 - b["indistinguishable"])
        d = y[:, [b["best_id"]]] - y
        half = t.ppf(0.975, 4) * d.std(axis=0, ddof=1) / math.sqrt(5)
        naive.append(int((d.mean(axis=0) > half).sum()))
    assert 3.0 <= np.mean(excluded) <= 8.0
    assert np.mean(naive) > 25


def test_the_true_best_stays_and_a_planted_loss_goes():
    """One workflow 0.1 better than 59 others, and 60 worse by 0.8 (a margin is about 0.59 here):
    the true best is in the set (the best or a tie) in at least 93 % of 200 tables, and of the
    worse 60 at most 3 of 12,000 are kept; a margin a fifth wider keeps dozens, Dunnett's value on
    runs − 1 degrees of freedom thousands."""
    rng = np.random.default_rng(1)
    effect = np.zeros(120)
    effect[7] = 0.1
    effect[60:] = -0.8
    feasible = np.ones(120, dtype=bool)
    kept, worse_kept = 0, 0
    for _ in range(200):
        b = effects.best_and_ties(_tables(rng, effect), feasible)
        in_set = {b["best_id"], *b["indistinguishable_ids"]}
        kept += 7 in in_set
        worse_kept += len(in_set & set(range(60, 120)))
    assert kept >= 186
    assert worse_kept <= 3


def test_the_residual_sd_is_over_followable_workflows_only():
    """An unfollowable workflow whose runs scatter widely must not widen the margin."""
    rng = np.random.default_rng(4)
    y = _tables(rng, np.zeros(120))
    feasible = np.ones(120, dtype=bool)
    feasible[0] = False
    y[:, 0] += rng.normal(0, 20.0, y.shape[0])
    noisy = effects.best_and_ties(y, feasible)["tie_margin"]
    y[:, 0] = y[:, 1]
    assert noisy == pytest.approx(effects.best_and_ties(y, feasible)["tie_margin"], rel=1e-9)


def test_only_followable_workflows_and_one_run():
    rng = np.random.default_rng(2)
    effect = np.zeros(120)
    effect[3] = 5.0                                   # best of all, but not followable
    feasible = np.ones(120, dtype=bool)
    feasible[3] = False
    b = effects.best_and_ties(_tables(rng, effect), feasible)
    assert b["best_id"] != 3 and 3 not in b["indistinguishable_ids"]
    assert b["followable"] == 119 and b["tie_margin"] > 0
    one = effects.best_and_ties(_tables(rng, effect, runs=1), feasible)
    assert one["indistinguishable"] == 0 and one["tie_margin"] is None
