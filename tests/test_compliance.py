import numpy as np
import pytest

from wfrl.envs.actions import HOSTS, N_HOSTS
from wfrl.workflow import ComplianceTracker, Workflow, compromised_hosts, fix_target, is_compliant

H = {h: i for i, h in enumerate(HOSTS)}
REMOVE = lambda h: 15 + H[h]  # noqa: E731
RESTORE = lambda h: 132 + H[h]  # noqa: E731
WF = Workflow.parse("op_server,enterprise,defender,op_host,user")


def access(**hosts):
    ra = np.zeros(N_HOSTS, dtype=np.uint8)
    ra[H["User0"]] = 2  # red's permanent foothold is always there
    for h, level in hosts.items():
        ra[H[h]] = level
    return ra


def test_fix_targets():
    assert fix_target(15) == 0 and fix_target(27) == 12
    assert fix_target(132) == 0 and fix_target(144) == 12
    for a in list(range(0, 15)) + list(range(28, 132)):
        assert fix_target(a) == -1


def test_no_compromise_is_compliant():
    assert compromised_hosts(access()) == []
    assert is_compliant(WF, access(), H["User3"])
    assert is_compliant(WF, access(), H["Defender"])


def test_highest_priority_type_is_compliant_lower_is_violation():
    ra = access(Enterprise1=1, User2=2, Op_Host0=1)
    assert is_compliant(WF, ra, H["Enterprise1"])
    assert is_compliant(WF, ra, H["Enterprise0"])  # same unit type, not compromised itself
    assert not is_compliant(WF, ra, H["User2"])
    assert not is_compliant(WF, ra, H["Op_Host0"])
    ra = access(Op_Server0=2, Enterprise1=1)
    assert is_compliant(WF, ra, H["Op_Server0"])
    assert not is_compliant(WF, ra, H["Enterprise1"])


def test_user0_foothold_excluded_by_default_and_counted_on_request():
    ra = access()
    assert compromised_hosts(ra) == []
    assert compromised_hosts(ra, count_foothold=True) == [H["User0"]]
    # Original rule: the foothold makes `user` a compromised type, so a fix elsewhere violates
    # unless it targets a user host.
    assert not is_compliant(WF, ra, H["Enterprise0"], count_foothold=True)
    assert is_compliant(WF, ra, H["User1"], count_foothold=True)
    assert is_compliant(WF, ra, H["Enterprise0"])


def test_no_fix_episode_scores_half_and_end_penalty():
    tr = ComplianceTracker(WF, lam=2.0)
    total = sum(tr.step(a, access(Enterprise0=1)) for a in [0, 1, 2, 30, 100] * 20)
    assert total == 0.0 and tr.fixes == 0
    assert tr.rate == 0.5
    assert tr.finish() == pytest.approx(-0.4)


def _after_two_fixes(tr, lam, ra):
    """The same from the third fix on, with or without the first-fix bonus: a compliant fix after
    one compliant and one not earns λ·(2/3 − 1/2); no fix, no reward."""
    assert tr.step(RESTORE("Enterprise0"), ra) == pytest.approx(lam * (2 / 3 - 0.5))
    assert tr.step(0, ra) == 0.0
    assert tr.finish() == 0.0
    assert (tr.fixes, tr.compliant) == (3, 2)
    assert tr.rate == pytest.approx(2 / 3)


def test_without_first_fix_bonus_a_fix_earns_nothing_by_itself():
    """first_fix_bonus=False: the rate before the first fix counts as 1 — a compliant first fix
    earns nothing, a non-compliant one costs λ; later fixes as with the bonus."""
    lam = 3.0
    tr = ComplianceTracker(WF, lam, first_fix_bonus=False)
    ra = access(Enterprise0=1, User1=1)
    assert tr.step(REMOVE("Enterprise0"), ra) == 0.0
    assert tr.step(RESTORE("User1"), ra) == pytest.approx(lam * (0.5 - 1.0))
    _after_two_fixes(tr, lam, ra)
    first = ComplianceTracker(WF, lam, first_fix_bonus=False)
    assert first.step(RESTORE("User1"), ra) == pytest.approx(-lam)


def test_alignment_is_lambda_times_rate_change():
    """The default rule (the original system's): the rate before the first fix counts as 0.5,
    so a compliant first fix earns λ/2, whatever the step it is made at; every fix earns λ times
    the change of the rate."""
    lam = 3.0
    tr = ComplianceTracker(WF, lam)
    ra = access(Enterprise0=1, User1=1)
    assert tr.step(REMOVE("Enterprise0"), ra) == pytest.approx(lam * (1.0 - 0.5))
    assert tr.step(RESTORE("User1"), ra) == pytest.approx(lam * (0.5 - 1.0))
    _after_two_fixes(tr, lam, ra)


def test_alignment_sum_telescopes():
    rng = np.random.default_rng(5)
    for _ in range(50):
        lam = float(rng.uniform(0.1, 5))
        bonus = bool(rng.integers(0, 2))
        tr = ComplianceTracker(WF, lam, first_fix_bonus=bonus)
        total = 0.0
        for _ in range(100):
            ra = access(**{h: int(rng.integers(0, 3)) for h in rng.choice(HOSTS[:8], 3)})
            total += tr.step(int(rng.integers(0, 145)), ra)
        total += tr.finish()
        start = 0.5 if bonus else 1.0
        expected = lam * (tr.rate - start) if tr.fixes else -0.2 * lam
        assert total == pytest.approx(expected, abs=1e-9)
