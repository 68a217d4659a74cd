"""The compiled simulator against the real CybORG, on every test run.

For each red agent × built-in blue policy: a TOST equivalence test of the mean 100-step return
(α = 0.05, margin max(5, 3 % |CybORG mean|, 0.15 × CybORG sd)), and checks on distributions a mean
can hide (step of the first Impact; per-host frequency of each red_access level; frequency of each
observation bit). Seeds are fixed, so a run is reproducible (CybORG is deterministic given its
random state, whatever PYTHONHASHSEED is); the CybORG episodes run on two worker processes.
"""
import collections
import math
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np
import pytest

from wfrl.parity import BLUE_POLICIES, concat_records, run_episodes, run_sim_episodes, tost

pytestmark = pytest.mark.cyborg

REDS = ("B_lineAgent", "RedMeanderAgent")
# CybORG episodes per pair (≥ 300); the high-variance policies get more for power.
# (A pair whose margin is 0.15 sd needs ~800 for the test to have ~99 % power at equal means.)
N_CYBORG = {"sleep": 300, "react-restore": 400, "random": 800, "react-remove": 800, "decoy": 800}
N_SIM = 10000
SEED_CYBORG, SEED_SIM = 20261126, 7
CHUNK = 50


def test_scalar_and_batched_blue_policies_agree():
    from wfrl.parity import blue_action, blue_actions
    obs = (np.random.default_rng(0).random((200, 52)) < 0.1).astype(np.float32)
    obs[:20] = 0
    for pol in BLUE_POLICIES:
        if pol == "random":
            continue
        for t in (0, 5, 99):
            batch = blue_actions(pol, obs, t, np.random.default_rng(1))
            single = [blue_action(pol, o, t, np.random.default_rng(1)) for o in obs]
            assert batch.tolist() == single, pol


def _cyborg_chunk(red, policy, start, n):
    from wfrl.envs import make_backend
    return red, policy, run_episodes(make_backend("cyborg", red), policy, n, SEED_CYBORG, start)


@pytest.fixture(scope="module")
def records():
    tasks = [(red, pol, s, min(CHUNK, N_CYBORG[pol] - s))
             for red in REDS for pol in BLUE_POLICIES for s in range(0, N_CYBORG[pol], CHUNK)]
    parts = collections.defaultdict(list)
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_cyborg_chunk, *t) for t in tasks]
        sim = {(red, pol): run_sim_episodes(red, pol, N_SIM, SEED_SIM)
               for red in REDS for pol in BLUE_POLICIES}
        for f in futures:
            red, pol, rec = f.result()
            parts[(red, pol)].append(rec)
    cy = {k: concat_records(v) for k, v in parts.items()}
    return cy, sim


PAIRS = [(r, p) for r in REDS for p in BLUE_POLICIES]


@pytest.mark.parametrize("red,policy", PAIRS)
def test_mean_return_equivalent(records, red, policy):
    cy, sim = records[0][(red, policy)], records[1][(red, policy)]
    assert cy.n == N_CYBORG[policy] and sim.n == N_SIM
    res = tost(sim.returns, cy.returns)
    assert res["equivalent"], (
        f"{red}/{policy}: sim {res['sim']['mean']:.1f}±{res['sim']['se']:.1f} vs cyborg "
        f"{res['cyborg']['mean']:.1f}±{res['cyborg']['se']:.1f}, margin {res['margin']:.1f}, "
        f"p {res['p']:.3f}")


def _ks(a, b):
    a, b = np.sort(a), np.sort(b)
    grid = np.union1d(a, b)
    fa = np.searchsorted(a, grid, side="right") / len(a)
    fb = np.searchsorted(b, grid, side="right") / len(b)
    return float(np.abs(fa - fb).max())


@pytest.mark.parametrize("red,policy", PAIRS)
def test_first_impact_step_distribution(records, red, policy):
    cy, sim = records[0][(red, policy)], records[1][(red, policy)]
    n, m = cy.n, sim.n
    d = _ks(cy.first_impact, sim.first_impact)
    critical = 1.63 * math.sqrt((n + m) / (n * m))  # two-sample KS, α = 0.01
    assert d <= critical, (f"{red}/{policy}: KS D={d:.3f} > {critical:.3f}; mean first Impact "
                           f"cyborg {cy.first_impact.mean():.2f} sim {sim.first_impact.mean():.2f}")


def _freq_mismatches(a, b, floor, z):
    """Cells whose per-episode mean frequency differs by more than max(floor, z standard errors)."""
    d = b.mean(0) - a.mean(0)
    se = np.sqrt(a.var(0, ddof=1) / len(a) + b.var(0, ddof=1) / len(b))
    return np.argwhere(np.abs(d) > np.maximum(floor, z * se)), a.mean(0), b.mean(0)


@pytest.mark.parametrize("red,policy", PAIRS)
def test_red_access_level_frequencies(records, red, policy):
    cy, sim = records[0][(red, policy)], records[1][(red, policy)]
    bad, fc, fs = _freq_mismatches(cy.access_freq, sim.access_freq, floor=0.02, z=4.5)
    assert not len(bad), "; ".join(f"host {h} level {lv}: cyborg {fc[h, lv]:.3f} sim {fs[h, lv]:.3f}"
                                   for h, lv in bad)


@pytest.mark.parametrize("red,policy", PAIRS)
def test_observation_bit_frequencies(records, red, policy):
    cy, sim = records[0][(red, policy)], records[1][(red, policy)]
    bad, fc, fs = _freq_mismatches(cy.obs_freq, sim.obs_freq, floor=0.01, z=4.5)
    assert not len(bad), "; ".join(f"bit {b} (host {b // 4}): cyborg {fc[b]:.3f} sim {fs[b]:.3f}"
                                   for (b,) in bad)


def _binned(rec, bins=10):
    """Per-episode frequency of each observation bit within each tenth of the episode:
    [n, bins, 52]."""
    return rec.obs.reshape(rec.n, bins, -1, 52).mean(axis=2)


@pytest.mark.parametrize("red,policy", PAIRS)
def test_observation_bits_over_time(records, red, policy):
    """The same frequencies resolved in time (ten 10-step windows): catches a simulator that is
    right on average but early or late."""
    cy, sim = records[0][(red, policy)], records[1][(red, policy)]
    bad, fc, fs = _freq_mismatches(_binned(cy), _binned(sim), floor=0.03, z=5.0)
    assert not len(bad), "; ".join(f"steps {10 * w}-{10 * w + 9} bit {b} (host {b // 4}): "
                                   f"cyborg {fc[w, b]:.3f} sim {fs[w, b]:.3f}" for w, b in bad[:10])


def test_bline_vs_sleep_trajectories_are_reproduced_step_by_step(records):
    """Under a sleeping blue, B_line's runs are few: every CybORG trajectory (the 100 rewards and
    the 100 observations) should appear verbatim among the simulator's."""
    cy, sim = records[0][("B_lineAgent", "sleep")], records[1][("B_lineAgent", "sleep")]

    def keys(r):
        return [(np.round(r.rewards[i] * 10).astype(np.int32).tobytes(), r.obs[i].tobytes())
                for i in range(r.n)]

    kc, ks = keys(cy), set(keys(sim))
    rewards_only = {k[0] for k in ks}
    assert np.mean([k[0] in rewards_only for k in kc]) >= 0.97
    assert np.mean([k in ks for k in kc]) >= 0.95
    # The most common run (U = a user host whose exploit succeeds first time) matches in frequency.
    top, count = collections.Counter(kc).most_common(1)[0]
    sim_count = collections.Counter(keys(sim))[top]
    p_c, p_s = count / cy.n, sim_count / sim.n
    assert abs(p_c - p_s) <= 4.5 * math.sqrt(p_c * (1 - p_c) / cy.n + p_s * (1 - p_s) / sim.n)


def test_restore_of_op_server_disarms_impact_on_both_backends():
    """Bug B1: after any Restore(Op_Server0) the OTService is never stopped again."""
    from wfrl.envs import make_backend
    for red in REDS:
        for name in ("cyborg", "sim"):
            be = make_backend(name, red, seed=3)
            for ep in range(5 if name == "cyborg" else 100):
                be.reset()
                rewards = [be.step(132 + 7 if t == 0 else 0)[1] for t in range(100)]
                assert min(rewards) > -10, (red, name)
                assert rewards[0] <= -1.0  # the Restore's cost
