"""The Gaussian process over permutations behind the search: the Mallows kernel as an RBF on the
pair embedding, the posterior, UCB, the β schedule, and detrending by training length."""
import warnings

import numpy as np
import pytest

from wfrl.search import gp
from wfrl.workflow import all_workflows, kendall_distance

ALL = list(range(120))


def test_discordant_pairs_is_kendall_distance():
    wfs = all_workflows()
    rng = np.random.default_rng(0)
    for a, b in rng.integers(0, 120, size=(300, 2)):
        assert gp.discordant_pairs(a, b) == round(10 * kendall_distance(wfs[a], wfs[b]))
    assert gp.discordant_pairs(0, 119) == 10  # reversed order


@pytest.mark.parametrize("ell", [0.05, 0.3, 1.0, 3.0])
def test_mallows_kernel_is_psd_and_equals_rbf_on_embedding(ell):
    from sklearn.gaussian_process.kernels import RBF
    K = gp.mallows_kernel(ALL, ALL, s2=2.5, ell=ell)
    assert np.allclose(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-9
    rbf = 2.5 * RBF(gp.rbf_length_scale(ell))(gp.ALL_EMBEDDED)
    np.testing.assert_allclose(K, rbf, rtol=1e-12, atol=1e-12)
    # The embedding is ±1 with one coordinate per type pair, and distinct per workflow.
    assert gp.ALL_EMBEDDED.shape == (120, 10)
    assert len({tuple(r) for r in gp.ALL_EMBEDDED}) == 120


def test_posterior_interpolates_noise_free_observations():
    idx = [0, 7, 33, 64, 101, 119]
    y = np.array([-40.0, -55.0, -38.0, -70.0, -61.0, -45.0])
    model = gp.PermutationGP(optimize=False, length_scale=2.0, noise=1e-9).fit(idx, y)
    mu, sd = model.predict(idx)
    np.testing.assert_allclose(mu, y, atol=1e-3)
    assert sd.max() < 1e-2
    _, sd_all = model.predict()
    far = [i for i in ALL if min(gp.discordant_pairs(i, j) for j in idx) >= 3]
    assert far and sd_all[far].min() > 10 * sd.max()  # uncertainty away from the data


def test_repeated_observations_are_noisy_not_ignored():
    """Two different rewards for one workflow: the posterior sits between them, and a third
    observation moves it."""
    model = gp.PermutationGP(optimize=False, noise=0.05)
    mu2 = model.fit([5, 5, 90], [-50.0, -40.0, -80.0], [1.0, 1.0, 1.0]).predict([5])[0][0]
    assert -50.0 < mu2 < -40.0
    mu3 = model.fit([5, 5, 5, 90], [-50.0, -40.0, -40.0, -80.0], [1.0] * 4).predict([5])[0][0]
    assert mu3 > mu2


def test_ucb_explores_with_large_beta_and_exploits_with_zero():
    # Observations clustered around workflow 0 (the identity order); the best is at 1.
    near = [0, 1, 2, 6]
    y = [-50.0, -30.0, -45.0, -48.0]
    # the RBF (Mallows) part alone: its sd grows with the Kendall distance to the data
    model = gp.PermutationGP(optimize=False, length_scale=2.0, noise=1e-4,
                             linear=False).fit(near, y)
    mu, sd = model.predict()
    rng = np.random.default_rng(0)
    exploit = gp.argmax_ucb(gp.ucb_scores(mu, sd, 0.0), rng)
    assert exploit == 1
    explore = gp.argmax_ucb(gp.ucb_scores(mu, sd, 1e6), rng)
    assert explore not in near
    dist = min(gp.discordant_pairs(explore, j) for j in near)
    assert dist == max(min(gp.discordant_pairs(i, j) for j in near) for i in ALL)


def test_detrending_separates_training_length_from_the_workflow():
    """Later observations come from longer-trained policies: +20 reward per unit of log lineage.
    Raw, the GP credits the latest workflow; detrended, it finds the truly best one."""
    from wfrl.search.loop import fit_observations
    rng = np.random.default_rng(1)
    wfs = [3, 40, 77, 101, 8, 60, 119, 25]
    f = dict(zip(wfs, [-42.0, -45.0, -36.0, -44.0, -41.0, -46.0, -43.0, -40.0]))
    best = max(wfs, key=f.get)
    obs = []
    for i, w in enumerate(wfs):
        lineage = 10_000 + 1_500 * i
        obs.append({"workflow": w, "se": 0.3, "lineage": lineage,
                    "reward": f[w] + 20.0 * np.log1p(lineage) + rng.normal(0, 0.3)})
    mu_raw, _ = fit_observations(gp.PermutationGP(optimize=False), obs, False).predict()
    model = gp.PermutationGP(optimize=False)
    mu, _ = fit_observations(model, obs, True).predict()
    assert max(wfs, key=lambda w: mu[w]) == best
    assert max(wfs, key=lambda w: mu_raw[w]) != best
    assert model.trend == pytest.approx(20.0, rel=0.25)


def test_beta_schedule_grows_slowly():
    b = [gp.beta_schedule(t) for t in (1, 2, 10, 20)]
    assert all(x < y for x, y in zip(b, b[1:]))
    assert 1.5 < np.sqrt(b[0]) < 2.0 and np.sqrt(b[-1]) < 2.5


def test_cached_kernel_bookkeeping_equals_scikit_learns():
    # The leaf kernels with their hyperparameter and parameter names found once per class
    # (gp._CachedParams) report what scikit-learn's own methods report, in the same order ...
    from sklearn.gaussian_process.kernels import Kernel
    kernels = [cls() for cls in gp._leaf_kernels()] + [gp._ard_linear_class()()]
    for k in kernels:
        assert k.hyperparameters == Kernel.hyperparameters.fget(k)
        for deep in (False, True):
            assert k.get_params(deep) == Kernel.get_params(k, deep)
    # ... so a fit makes the same optimisation, to the bit, as with scikit-learn's kernels
    # (every linear variant, observations with their standard errors)
    from unittest import mock

    from sklearn.gaussian_process import kernels as plain
    rng = np.random.default_rng(4)
    idx = rng.choice(120, 14, replace=False)
    y, se = rng.normal(-15, 2, 14), rng.uniform(0.2, 1.0, 14)
    for linear in (False, True, "ard"):
        fast = gp.PermutationGP(linear=linear, seed=3).fit(idx, y, se)
        originals = (plain.ConstantKernel, plain.RBF, plain.DotProduct, plain.WhiteKernel)
        with mock.patch.object(gp, "_leaf_kernels", lambda originals=originals: originals), \
                mock.patch.object(gp, "_CachedParams", type("NoCache", (), {})):
            ref = gp.PermutationGP(linear=linear, seed=3).fit(idx, y, se)
        assert type(ref.gpr.kernel_.k2) is plain.WhiteKernel
        np.testing.assert_array_equal(fast.gpr.kernel_.theta, ref.gpr.kernel_.theta)
        np.testing.assert_array_equal(fast.predict()[0], ref.predict()[0])
        np.testing.assert_array_equal(fast.predict()[1], ref.predict()[1])


KERNELS = [{}, {"linear": False}, {"linear": "ard"}, {"bias": 0.5}, {"linear": "ard", "bias": 0.3}]


def _data(rng, n):
    idx = rng.integers(0, 120, n)     # repeats included: nearly singular kernels
    return idx, rng.normal(0, 1, n), rng.uniform(0, 0.3, n) ** 2 + 1e-8


@pytest.mark.parametrize("kw", KERNELS)
def test_the_evidence_is_scikit_learns_to_the_last_bit(kw):
    """gp.Evidence, the fit's objective: the same value and gradient as scikit-learn's
    log_marginal_likelihood on the same kernel, bit for bit, at starts across the bounds."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    rng = np.random.default_rng(len(str(kw)))
    for n in (2, 7, 31, 60):
        idx, y, alpha = _data(rng, n)
        model = gp.PermutationGP(**kw)
        X = gp.embed(idx)
        ref = GaussianProcessRegressor(model._kernel(), alpha=alpha, optimizer=None).fit(X, y)
        evidence = gp.Evidence(X, y, alpha, model.linear, bool(model.bias))
        bounds = ref.kernel_.bounds
        assert evidence.n_theta == len(bounds)
        for theta in [ref.kernel_.theta] + list(rng.uniform(bounds[:, 0], bounds[:, 1], (6, len(bounds)))):
            lml, grad = ref.log_marginal_likelihood(theta, eval_gradient=True)
            value, gradient = evidence(theta)
            assert np.isfinite(value)
            np.testing.assert_array_equal(value, -lml)
            np.testing.assert_array_equal(gradient, -grad)
    with pytest.raises(ValueError, match="hyperparameters"):
        evidence.minimise(None, np.zeros(evidence.n_theta + 1), None)


@pytest.mark.parametrize("kw", KERNELS)
def test_a_fit_is_scikit_learns_own_fit(kw):
    """PermutationGP.fit (scikit-learn's regressor, gp.Evidence as its optimizer) ends at the
    hyperparameters, evidence and posterior of scikit-learn's own L-BFGS-B fit, to the bit."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    rng = np.random.default_rng(7 + len(str(kw)))
    for n in (3, 12, 40):
        idx, y, _ = _data(rng, n)
        ses = rng.uniform(0.2, 1.0, n)
        model = gp.PermutationGP(seed=n, **kw).fit(idx, y, ses)
        ref = GaussianProcessRegressor(model._kernel(), alpha=model.gpr.alpha, normalize_y=False,
                                       optimizer="fmin_l_bfgs_b", n_restarts_optimizer=2,
                                       random_state=n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # bounds reached on small data sets
            ref.fit(gp.embed(idx), model.gpr.y_train_)
        np.testing.assert_array_equal(model.gpr.kernel_.theta, ref.kernel_.theta)
        assert model.gpr.log_marginal_likelihood_value_ == ref.log_marginal_likelihood_value_
        np.testing.assert_array_equal(model.gpr.predict(gp.ALL_EMBEDDED, return_std=True)[1],
                                      ref.predict(gp.ALL_EMBEDDED, return_std=True)[1])
