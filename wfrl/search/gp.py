"""A Gaussian process over the 120 workflows and the UCB acquisition.

Kernel. For permutations σ, τ of the five unit types the Mallows kernel is
    k(σ, τ) = s² · exp(−ℓ · d(σ, τ)),   d = number of discordant type pairs (0..10).
Write a permutation as its pairwise-order embedding x ∈ {−1, +1}^10 (one coordinate per pair
i < j of unit types: +1 if i comes before j). Two embeddings differ in exactly the discordant
pairs, each by 2, so ‖x_σ − x_τ‖² = 4·d and
    k(σ, τ) = s² · exp(−‖x_σ − x_τ‖² / (2 L²))   with   ℓ = 2 / L².
That is an ordinary RBF kernel on the embedding, hence positive definite, and scikit-learn's
GaussianProcessRegressor does the fitting (s², L and a white-noise level by maximum marginal
likelihood), the posterior and its standard deviation. Rewards are standardised before fitting.
The marginal likelihood it maximises is `Evidence`: scikit-learn's own arithmetic for this kernel,
bit for bit, without its generic kernel algebra (a fit takes about half the time).

Noise. Every observation is one visit's final-update mean reward; its standard error enters as a
per-observation noise variance (`alpha`), and a learned WhiteKernel term absorbs the rest (two
trainings of one workflow do not end at the same policy). Repeated visits of a workflow are kept as
separate noisy observations.

UCB. score = μ + √β_t · σ over all 120 workflows. Unless a constant β is given, β follows the
GP-UCB schedule for a finite domain (Srinivas et al., 2010), scaled down as is usual in practice:
    β_t = BETA_SCALE · 2 · log(|D| · t² · π² / (6 δ)),   |D| = 120, δ = 0.1, BETA_SCALE = 0.2,
t = the iteration (1-based): √β grows slowly from 1.74 at t = 1 to 2.33 at t = 20.
"""
from __future__ import annotations

import functools
import math
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from wfrl.workflow import ALL_WORKFLOWS, N_TYPES

if TYPE_CHECKING:
    from sklearn.gaussian_process import GaussianProcessRegressor

PAIRS = tuple((i, j) for i in range(N_TYPES) for j in range(i + 1, N_TYPES))
N_WORKFLOWS = len(ALL_WORKFLOWS)
BETA_SCALE = 0.2
BETA_DELTA = 0.1


def embed(indices) -> np.ndarray:
    """float64 [n, 10]: the ±1 pairwise-order embedding of workflows given by index."""
    out = np.empty((len(indices), len(PAIRS)))
    for r, idx in enumerate(indices):
        order = ALL_WORKFLOWS[int(idx)]
        rank = [0] * N_TYPES
        for pos, t in enumerate(order):
            rank[t] = pos
        out[r] = [1.0 if rank[i] < rank[j] else -1.0 for i, j in PAIRS]
    return out


ALL_EMBEDDED = embed(range(N_WORKFLOWS))


def discordant_pairs(a: int, b: int) -> int:
    """Kendall distance between workflows a and b as a count of discordant pairs (0..10)."""
    return int(np.sum(ALL_EMBEDDED[a] != ALL_EMBEDDED[b]))


def mallows_kernel(a_indices, b_indices, s2: float = 1.0, ell: float = 0.5) -> np.ndarray:
    """Reference: s²·exp(−ℓ·d) computed from discordant-pair counts directly."""
    return np.array([[s2 * math.exp(-ell * discordant_pairs(a, b)) for b in b_indices]
                     for a in a_indices])


def rbf_length_scale(ell: float) -> float:
    """The RBF length scale on the embedding equivalent to Mallows rate ℓ."""
    return math.sqrt(2.0 / ell)


def beta_schedule(t: int, n: int = N_WORKFLOWS, delta: float = BETA_DELTA,
                  scale: float = BETA_SCALE) -> float:
    return scale * 2.0 * math.log(n * t * t * math.pi ** 2 / (6.0 * delta))


# Lower bound of the fitted RBF length scale. At L = 1.5 (Mallows ℓ = 0.89) workflows one swap
# apart still correlate 0.41; below it the GP may decide that neighbours say nothing about each
# other, and then every unobserved workflow sits at the prior and an observed one that did well
# keeps the highest UCB for ever (the re-visiting the first search showed).
MIN_LENGTH_SCALE = 1.5
# Lower bound of the signal variance (standardised units). With a handful of observations whose
# spread is at the noise level, maximum likelihood says "no signal at all" (variance → 0), every
# posterior sd collapses and UCB stops exploring; the bound keeps the prior belief that workflows
# may differ by about half the standardisation scale.
MIN_SIGNAL = 0.25


class PermutationGP:
    """GP regression over workflows; `fit` then `predict` (all 120 by default).

    prior_mean / scale: by default the targets are standardised by their own mean and standard
    deviation (the prior mean is the data's mean). Given, they are fixed instead — the feasibility
    model centres its prior on the threshold, so a workflow far from every observation is a coin
    toss rather than "as (in)feasible as the average visit"."""

    def __init__(self, seed: int = 0, optimize: bool = True, length_scale: float = 2.0,
                 noise: float = 0.1, prior_mean: float | None = None, scale: float | None = None,
                 min_length_scale: float = MIN_LENGTH_SCALE, max_noise: float = 1.0,
                 min_signal: float | None = None, linear: bool | str = True,
                 max_length_scale: float = 20.0, bias: float | None = None):
        self.seed, self.optimize = seed, optimize
        self.bias = bias
        self.length_scale, self.noise = length_scale, noise
        self.prior_mean, self.scale = prior_mean, scale
        self.min_length_scale, self.max_noise = min_length_scale, max_noise
        self.min_signal = MIN_SIGNAL if min_signal is None else min_signal
        self.linear, self.max_length_scale = linear, max_length_scale
        self.gpr: GaussianProcessRegressor | None = None
        self.y_mean, self.y_std = 0.0, 1.0
        self.trend, self.z_ref = 0.0, 0.0

    def _kernel(self):
        ConstantKernel, RBF, DotProduct, WhiteKernel = _leaf_kernels()
        fixed = "fixed" if not self.optimize else None
        ls = min(max(self.length_scale, self.min_length_scale), self.max_length_scale)
        k = (ConstantKernel(1.0, fixed or (self.min_signal, 1e2))
             * RBF(ls, fixed or (self.min_length_scale, self.max_length_scale)))
        if self.linear == "ard":
            k = k + _ard_linear_class()(weights_bounds="fixed" if fixed else (1e-4, 10.0))
        elif self.linear:
            # Bayesian linear regression on the ±1 pairwise-order coordinates: effects of the
            # form "a before b is worth δ" (and a type's position, a sum of such terms) are
            # learned from a few observations, where the isotropic RBF term needs many.
            k = k + ConstantKernel(0.05, fixed or (1e-3, 1.0)) * DotProduct(0.0, "fixed")
        if self.bias:
            # a learned offset shared by every workflow (an unknown constant added to the fixed
            # prior mean, its variance at most `bias`): with ±1 relation coordinates and no
            # offset, two classes both on one side of the prior mean cannot both be fitted
            k = k + ConstantKernel(min(0.5, self.bias), fixed or (1e-3, self.bias))
        return k + WhiteKernel(self.noise, fixed or (1e-6, self.max_noise))

    def fit(self, indices, rewards, ses=None, covariate=None) -> PermutationGP:
        """covariate: optional per-observation number (log lineage episodes) with a linear effect
        on the reward; it is regressed out by least squares first and the GP models what is left,
        so predict() compares workflows at one common covariate value."""
        from sklearn.gaussian_process import GaussianProcessRegressor
        y = np.asarray(rewards, dtype=np.float64)
        self.trend = 0.0
        if len(y) == 0:
            self.gpr = None
            return self
        if covariate is not None and len(y) >= 3 and np.ptp(covariate) > 1e-9:
            z = np.asarray(covariate, dtype=np.float64)
            A = np.c_[np.ones_like(z), z - z.max()]
            coef = np.linalg.lstsq(A, y, rcond=None)[0]
            self.trend, self.z_ref = float(coef[1]), float(z.max())
            y = y - self.trend * (z - z.max())  # rewards as if trained as long as the longest
        ses = np.zeros_like(y) if ses is None else np.asarray(ses, dtype=np.float64)
        self.y_mean = float(y.mean()) if self.prior_mean is None else float(self.prior_mean)
        std = float(y.std())
        # One observation (or identical ones) says nothing about the scale: use the noise.
        # The scale is never below the typical observation noise: rewards that differ by noise
        # only must not look like a strong signal once standardised.
        typical_se = float(np.median(ses)) if len(ses) else 0.0
        self.y_std = (float(self.scale) if self.scale is not None else
                      max(std, typical_se) if max(std, typical_se) > 1e-9 else 1.0)
        z = (y - self.y_mean) / self.y_std
        alpha = (ses / self.y_std) ** 2 + 1e-8
        X = embed(indices)
        # scikit-learn's L-BFGS-B from the same starts, on the evidence written for this kernel
        self.gpr = GaussianProcessRegressor(
            self._kernel(), alpha=alpha, normalize_y=False,
            optimizer=(Evidence(X, z, alpha, self.linear, bool(self.bias)).minimise
                       if self.optimize and len(y) > 1 else None),
            n_restarts_optimizer=2, random_state=self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bound warnings on tiny data sets
            self.gpr.fit(X, z)
        return self

    def adjusted(self, rewards, covariate) -> np.ndarray:
        """Rewards moved to the common covariate value the GP compares workflows at."""
        y = np.asarray(rewards, dtype=np.float64)
        if covariate is None or self.trend == 0.0:
            return y
        return y - self.trend * (np.asarray(covariate, dtype=np.float64) - self.z_ref)

    def predict(self, indices=None, observation: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (target units) of the latent value, i.e.
        without the white-noise term; observation=True includes it (what one more visit would
        measure, apart from its own standard error)."""
        X = ALL_EMBEDDED if indices is None else embed(indices)
        if self.gpr is None:  # prior
            m = 0.0 if self.prior_mean is None else float(self.prior_mean)
            s = 1.0 if self.scale is None else float(self.scale)
            return np.full(len(X), m), np.full(len(X), s)
        noise = self.gpr.kernel_.k2.noise_level
        mu, sd = self.gpr.predict(X, return_std=True)
        var = sd ** 2 if observation else np.maximum(sd ** 2 - noise, 1e-12)
        return mu * self.y_std + self.y_mean, np.sqrt(np.maximum(var, 1e-12)) * self.y_std

    def predict_given(self, pending, pending_se: float = 0.0, indices=None,
                      observation: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """predict() after hallucinated observations at the workflows `pending` (visits asked
        for but not yet told), each equal to the posterior mean there with standard error
        pending_se, the fitted hyperparameters kept: the batch rule of GP-BUCB (Desautels,
        Krause & Burdick, JMLR 2014), the "kriging believer" of Ginsbourger et al. (2010). An
        observation at the mean leaves the mean where it was everywhere; only the standard
        deviation shrinks, at the pending workflows and around them."""
        mu, sd = self.predict(indices, observation)
        if len(pending) == 0:
            return mu, sd
        X = ALL_EMBEDDED if indices is None else embed(indices)
        Xp = embed(pending)
        alpha_p = np.full(len(Xp), (float(pending_se) / self.y_std) ** 2 + 1e-8)
        if self.gpr is None:   # the prior, at the kernel's starting hyperparameters
            kernel, Xa, alpha = self._kernel(), Xp, alpha_p
        else:
            kernel = self.gpr.kernel_
            alpha_t = np.broadcast_to(np.asarray(self.gpr.alpha, dtype=np.float64),
                                      (len(self.gpr.X_train_),))
            Xa = np.vstack([self.gpr.X_train_, Xp])
            alpha = np.concatenate([alpha_t, alpha_p])
        Ka = kernel(Xa) + np.diag(alpha)
        Kq = kernel(X, Xa)
        L = np.linalg.cholesky(Ka)
        V = np.linalg.solve(L, Kq.T)
        prior = kernel.diag(X) - (0.0 if observation else kernel.k2.noise_level)
        var = np.maximum(prior - np.einsum("ij,ij->j", V, V), 1e-12)
        if self.gpr is None:   # the prior's sd (predict) shrunk in the kernel's proportion
            return mu, sd * np.sqrt(var / np.maximum(prior, 1e-12))
        return mu, np.sqrt(var) * self.y_std

    def sample(self, n: int, rng: np.random.Generator, indices=None) -> np.ndarray:
        """n draws [n, len(indices)] of the latent values from the joint posterior (target
        units): the basis of "probability that this workflow is the best"."""
        X = ALL_EMBEDDED if indices is None else embed(indices)
        if self.gpr is None:
            mu, sd = self.predict(indices)
            return mu + sd * rng.standard_normal((n, len(X)))
        mu, cov = self.gpr.predict(X, return_cov=True)
        cov = cov - self.gpr.kernel_.k2.noise_level * np.eye(len(X))  # latent, not observed
        cov = 0.5 * (cov + cov.T)
        w, V = np.linalg.eigh(cov)
        root = V * np.sqrt(np.clip(w, 0.0, None))
        z = rng.standard_normal((n, len(X)))
        return (mu + z @ root.T) * self.y_std + self.y_mean

    def hyperparameters(self) -> dict:
        if self.gpr is None:
            return {}
        k = self.gpr.kernel_
        body = k.k1.k1 if self.bias else k.k1
        rbf = body.k1 if self.linear else body
        L = float(rbf.k2.length_scale)
        extra: dict[str, Any] = (
            {"relation_weights": [round(float(x), 4) for x in body.k2.weights]}
            if self.linear == "ard" else
            {"linear_var": float(body.k2.k1.constant_value)} if self.linear else {})
        if self.bias:
            extra["offset_var"] = float(k.k1.k2.constant_value)
        return {**extra, "signal_var": float(rbf.k1.constant_value), "rbf_length_scale": L,
                "mallows_ell": 2.0 / L ** 2, "noise_level": float(k.k2.noise_level),
                "trend_per_log_episode": self.trend,
                "y_mean": self.y_mean, "y_std": self.y_std}


class Evidence:
    """The negative log marginal likelihood of PermutationGP's kernel on data (X, y, alpha) and
    its gradient in the log hyperparameters (the kernel's theta order: signal, length scale, the
    linear part's variance or its ten weights, the offset, the noise). The same arithmetic,
    operation for operation, as scikit-learn's GaussianProcessRegressor.log_marginal_likelihood
    on that kernel, so the same numbers to the last bit (tests/test_gp.py), without the generic
    kernel algebra around it (setting and reading hyperparameters through the kernel tree costs
    several times the arithmetic on the searches' few dozen observations). `minimise` is the
    regressor's optimizer: scikit-learn's own L-BFGS-B call, from the starts it is given."""

    def __init__(self, X, y, alpha, linear: bool | str, bias: bool):
        self.X, self.y = np.atleast_2d(np.asarray(X, np.float64)), np.asarray(y, np.float64)
        self.alpha = alpha
        self.linear, self.bias = linear, bias
        self.n = len(self.y)
        self.inner = np.inner(self.X, self.X) + 0.0 ** 2          # DotProduct(sigma_0 = 0)
        self.n_theta = 2 + (len(PAIRS) if linear == "ard" else 1 if linear else 0) + bias + 1

    def kernel(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """K(X, X) and dK/dθ [n, n, len(θ)], as the kernel tree computes them."""
        from scipy.spatial.distance import pdist, squareform
        n, X = self.n, self.X
        signal, length = np.exp(theta[0]), np.squeeze(np.exp(theta[1])).astype(float)
        dists = pdist(X / length, metric="sqeuclidean")
        rbf = squareform(np.exp(-0.5 * dists))
        np.fill_diagonal(rbf, 1)
        c = np.full((n, n), signal)
        K = c * rbf                   # also d/d log signal, the kernel tree's c · rbf
        grads = [K[:, :, None], (rbf * squareform(dists))[:, :, None] * c[:, :, None]]
        i = 2
        if self.linear == "ard":
            w = np.asarray(np.exp(theta[i:i + len(PAIRS)]), dtype=np.float64)
            K = K + (X * w) @ X.T
            grads.append(X[:, None, :] * X[None, :, :] * w)
            i += len(PAIRS)
        elif self.linear:
            c = np.full((n, n), np.exp(theta[i]))
            K = K + c * self.inner
            grads.append(c[:, :, None] * self.inner[:, :, None])
            i += 1
        if self.bias:
            c = np.full((n, n), np.exp(theta[i]))
            K = K + c
            grads.append(c[:, :, None])
        noise = np.exp(theta[-1])
        K = K + noise * np.eye(n)
        grads.append(noise * np.eye(n)[:, :, None])
        return K, np.dstack(grads)

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        from scipy.linalg.lapack import dpotrf, dpotrs  # what cholesky and cho_solve call
        K, K_gradient = self.kernel(theta)
        K[np.diag_indices_from(K)] += self.alpha
        L, info = dpotrf(K, lower=1, clean=1)
        if info != 0:                       # not positive definite: scikit-learn's −∞
            return np.inf, -np.zeros_like(theta)
        y = self.y[:, None]
        a, _ = dpotrs(L, y, lower=1)
        lml = -0.5 * np.einsum("ik,ik->k", y, a)
        lml -= np.log(np.diag(L)).sum()
        lml -= K.shape[0] / 2 * np.log(2 * np.pi)
        inner = np.einsum("ik,jk->ijk", a, a)
        inner -= dpotrs(L, np.eye(K.shape[0]), lower=1)[0][..., None]
        grad = 0.5 * np.einsum("ijl,jik->kl", inner, K_gradient)
        return -lml.sum(axis=-1), -grad.sum(axis=-1)

    def minimise(self, obj_func, initial_theta, bounds) -> tuple[np.ndarray, float]:
        """The regressor's optimizer (obj_func, scikit-learn's own evidence, is not called)."""
        from scipy.optimize import minimize
        if len(initial_theta) != self.n_theta:
            raise ValueError(f"{len(initial_theta)} hyperparameters, the evidence has "
                             f"{self.n_theta}")
        res = minimize(self, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds)
        return res.x, res.fun


class _CachedParams:
    """Mixin for scikit-learn leaf kernels: the names of their hyperparameters and of their
    parameters found once per class instead of on every call (scikit-learn finds them with dir()
    and inspect.signature each time: most of a fit's time at the search's sizes, where the
    linear algebra is small). The same names in the same order — scikit-learn's own rules, held
    equal to its methods by tests/test_gp.py — so the same fits to the bit."""

    _cached_names: ClassVar[tuple[list[str], list[str]]]   # (set per class by _names)

    @classmethod
    def _names(cls) -> tuple[list[str], list[str]]:
        names = cls.__dict__.get("_cached_names")
        if names is None:
            import inspect
            init = getattr(cls.__init__, "deprecated_original", cls.__init__)
            params = [p.name for p in inspect.signature(init).parameters.values()
                      if p.kind != p.VAR_KEYWORD and p.name != "self"]
            hyper = [a for a in dir(cls) if a.startswith("hyperparameter_")]
            names = cls._cached_names = (hyper, params)
        return names

    @property
    def hyperparameters(self):
        return [getattr(self, a) for a in self._names()[0]]

    def get_params(self, deep=True):
        return {a: getattr(self, a) for a in self._names()[1]}


@functools.cache
def _leaf_kernels():
    """scikit-learn's ConstantKernel, RBF, DotProduct and WhiteKernel with _CachedParams."""
    from sklearn.gaussian_process import kernels as k
    return tuple(type(base.__name__, (_CachedParams, base), {"__module__": __name__})
                 for base in (k.ConstantKernel, k.RBF, k.DotProduct, k.WhiteKernel))


def _ard_linear_class():
    """scikit-learn kernel k(x, y) = Σ_i w_i·x_i·y_i with one weight per pairwise-order
    coordinate (automatic relevance determination). On ±1 coordinates any effect of one relation
    is linear in it, so this is an additive model over relations whose fitted weights say which
    relations matter; marginal likelihood drives irrelevant weights to their lower bound."""
    from sklearn.gaussian_process.kernels import Hyperparameter, Kernel

    class ARDLinear(_CachedParams, Kernel):
        def __init__(self, weights=None, weights_bounds=(1e-4, 10.0)):
            self.weights = np.full(len(PAIRS), 0.05) if weights is None else weights
            self.weights_bounds = weights_bounds

        @property
        def hyperparameter_weights(self):
            return Hyperparameter("weights", "numeric", self.weights_bounds, len(PAIRS))

        def __call__(self, X, Y=None, eval_gradient=False):
            X = np.atleast_2d(X)
            w = np.asarray(self.weights, dtype=np.float64)
            Z = X if Y is None else np.atleast_2d(Y)
            K = (X * w) @ Z.T
            if not eval_gradient:
                return K
            if Y is not None:
                raise ValueError("gradient only for Y = None")
            # d K / d log w_i = w_i · x_i · x'_i
            return K, X[:, None, :] * X[None, :, :] * w

        def diag(self, X):
            return (np.atleast_2d(X) ** 2) @ np.asarray(self.weights, dtype=np.float64)

        def is_stationary(self):
            return False

    return ARDLinear


def ucb_scores(mu: np.ndarray, sd: np.ndarray, beta: float) -> np.ndarray:
    return mu + math.sqrt(max(beta, 0.0)) * sd


def argmax_ucb(scores: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the highest score; exact ties (to a relative 1e-12) are broken at random
    (seeded)."""
    top = float(scores.max())
    best = np.flatnonzero(scores >= top - 1e-12 * max(1.0, abs(top)))
    return int(best[0] if len(best) == 1 else rng.choice(best))
