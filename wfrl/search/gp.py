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

import math
import warnings

import numpy as np

from wfrl.workflow import ALL_WORKFLOWS, N_TYPES

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


class PermutationGP:
    """GP regression of reward over workflows; `fit` then `predict` (all 120 by default)."""

    def __init__(self, seed: int = 0, optimize: bool = True, length_scale: float = 2.0,
                 noise: float = 0.1):
        self.seed, self.optimize = seed, optimize
        self.length_scale, self.noise = length_scale, noise
        self.gpr = None
        self.y_mean, self.y_std = 0.0, 1.0
        self.trend, self.z_ref = 0.0, 0.0

    def _kernel(self):
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
        fixed = "fixed" if not self.optimize else None
        return (ConstantKernel(1.0, fixed or (1e-2, 1e2))
                * RBF(self.length_scale, fixed or (0.5, 20.0))
                + WhiteKernel(self.noise, fixed or (1e-6, 1.0)))

    def fit(self, indices, rewards, ses=None, covariate=None) -> "PermutationGP":
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
        self.y_mean = float(y.mean())
        std = float(y.std())
        # One observation (or identical ones) says nothing about the scale: use the noise.
        self.y_std = std if std > 1e-9 else max(float(np.max(ses)), 1.0)
        z = (y - self.y_mean) / self.y_std
        alpha = (ses / self.y_std) ** 2 + 1e-8
        self.gpr = GaussianProcessRegressor(
            self._kernel(), alpha=alpha, normalize_y=False,
            optimizer="fmin_l_bfgs_b" if self.optimize and len(y) > 1 else None,
            n_restarts_optimizer=2, random_state=self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bound warnings on tiny data sets
            self.gpr.fit(embed(indices), z)
        return self

    def adjusted(self, rewards, covariate) -> np.ndarray:
        """Rewards moved to the common covariate value the GP compares workflows at."""
        y = np.asarray(rewards, dtype=np.float64)
        if covariate is None or self.trend == 0.0:
            return y
        return y - self.trend * (np.asarray(covariate, dtype=np.float64) - self.z_ref)

    def predict(self, indices=None) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (reward units) of the latent reward, i.e.
        without the white-noise term."""
        X = ALL_EMBEDDED if indices is None else embed(indices)
        if self.gpr is None:  # prior
            return np.zeros(len(X)), np.ones(len(X))
        kernel = self.gpr.kernel_
        noise = kernel.k2.noise_level
        mu, sd = self.gpr.predict(X, return_std=True)
        var = np.maximum(sd ** 2 - noise, 1e-12)
        return mu * self.y_std + self.y_mean, np.sqrt(var) * self.y_std

    def hyperparameters(self) -> dict:
        if self.gpr is None:
            return {}
        k = self.gpr.kernel_
        L = float(k.k1.k2.length_scale)
        return {"signal_var": float(k.k1.k1.constant_value), "rbf_length_scale": L,
                "mallows_ell": 2.0 / L ** 2, "noise_level": float(k.k2.noise_level),
                "trend_per_log_episode": self.trend,
                "y_mean": self.y_mean, "y_std": self.y_std}


def ucb_scores(mu: np.ndarray, sd: np.ndarray, beta: float) -> np.ndarray:
    return mu + math.sqrt(max(beta, 0.0)) * sd


def argmax_ucb(scores: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the highest score; exact ties are broken at random (seeded)."""
    best = np.flatnonzero(scores >= scores.max() - 1e-12)
    return int(best[0] if len(best) == 1 else rng.choice(best))
