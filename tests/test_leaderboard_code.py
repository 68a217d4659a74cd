"""The backends that play by the CybORG code the CAGE2 leaderboard was scored on
(sim:leaderboard, cyborg:leaderboard): the two differences from the installed code, on both
engines, and that the installed code is left alone. Statistical equality of the two engines under
this code is in tests/test_parity.py (the "leaderboard" reference)."""

import numpy as np
import pytest
from _helpers import run_wfrl

from wfrl.envs import make_backend
from wfrl.envs.base import BACKENDS, backend_engine, is_leaderboard
from wfrl.errors import UserError

USER3 = 11
RESTORE, REMOVE = 132, 15


def test_backend_names():
    assert {"sim", "cyborg", "sim:leaderboard", "cyborg:leaderboard"} == set(BACKENDS)
    assert [backend_engine(b) for b in BACKENDS] == ["sim", "cyborg", "sim", "cyborg"]
    assert [is_leaderboard(b) for b in BACKENDS] == [False, False, True, True]
    for bad in ("sim:", "leaderboard", "cyborg:2022", "sim:leaderboard:leaderboard"):
        with pytest.raises(UserError, match=f"unknown backend '{bad}' \\(choose from sim, cyborg, "
                                            "sim:leaderboard, cyborg:leaderboard\\)"):
            backend_engine(bad)


def test_bad_backend_on_the_command_line_is_one_line():
    p = run_wfrl("train", "--backend", "sim:leaderbord", timeout=60)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "sim:leaderboard" in p.stderr   # the choices are named


def _restores_to_hold_user3(backend, episodes, steps=30):
    """B_line episodes whose user host is User3, played for `steps` steps by a defender that
    sleeps, restores User3 whenever red is privileged there and removes red from it whenever it
    sees an exploit there (red's escalation then fails and it goes back to exploiting User3):
    the Restores each episode needed."""
    out = []
    seed = 0
    while len(out) < episodes:
        backend.seed(seed)
        seed += 1
        obs, ra = backend.reset()
        first, restores = None, 0
        for _t in range(steps):
            a = 0
            if first == USER3:
                if ra[USER3] == 2:
                    a = RESTORE + USER3
                    restores += 1
                elif obs[4 * USER3] == 1 and obs[4 * USER3 + 1] == 1:
                    a = REMOVE + USER3
            obs, _, ra = backend.step(a)
            if first is None and ra[9:13].any():
                first = 9 + int(np.flatnonzero(ra[9:13])[0])
        if first == USER3:
            out.append(restores)
    return np.array(out)


def test_sim_a_restored_user3_no_longer_falls_to_haraka():
    """Under the leaderboard's code a restored User3 is held with free Removes (HarakaRCE, red's
    usual exploit there, fails; the web exploits give removable user-level sessions); under the
    installed code HarakaRCE makes red root there again at once, and every Restore is paid again
    (about every second step)."""
    leaderboard = _restores_to_hold_user3(make_backend("sim:leaderboard", "B_lineAgent"), 200)
    installed = _restores_to_hold_user3(make_backend("sim", "B_lineAgent"), 200)
    assert installed.mean() > 8 and leaderboard.mean() < installed.mean() / 4, (
        leaderboard.mean(), installed.mean())
    # and the leaderboard's code changes nothing for a defender that never restores
    a, b = make_backend("sim:leaderboard", "B_lineAgent"), make_backend("sim", "B_lineAgent")
    for be in (a, b):
        be.seed(5)
    for _ in range(50):
        (oa, _), (ob, _) = a.reset(), b.reset()
        for t in range(100):
            act = 28 + (37 * t) % 104          # decoys only
            oa, ra_, aa = a.step(act)
            ob, rb, ab = b.step(act)
            assert (oa == ob).all() and ra_ == rb and (aa == ab).all()


@pytest.mark.cyborg
def test_cyborg_leaderboard_code_is_swapped_in_only_around_its_own_calls():
    pytest.importorskip("csle_cyborg")
    from csle_cyborg.shared.enums import ProcessVersion
    from csle_cyborg.simulator.session import RedAbstractSession
    installed = (ProcessVersion.__dict__["parse_string"], RedAbstractSession.__dict__["clearports"])

    def smtp_version(backend):
        host = backend._cyborg.environment_controller.state.hosts["User3"]
        return next(p.version for p in host.processes if p.name == "smtp")

    versions = {}
    for name in ("cyborg:leaderboard", "cyborg"):
        be = make_backend(name, "B_lineAgent", seed=1)
        be.reset()
        assert smtp_version(be) == ProcessVersion.HARAKA_2_7_0
        be.step(RESTORE + USER3)
        versions[name] = smtp_version(be)
        assert (ProcessVersion.__dict__["parse_string"],
                RedAbstractSession.__dict__["clearports"]) == installed
    assert versions == {"cyborg:leaderboard": ProcessVersion.UNKNOWN,
                        "cyborg": ProcessVersion.HARAKA_2_7_0}


@pytest.mark.cyborg
def test_cyborg_leaderboard_code_keeps_the_ports_of_every_scan():
    """B_line scans its Enterprise target again after each failed exploit; the leaderboard's code
    appends each scan's ports to what red remembered (so they repeat), the installed code
    replaces them."""
    pytest.importorskip("csle_cyborg")
    repeats = {}
    for name in ("cyborg:leaderboard", "cyborg"):
        be = make_backend(name, "B_lineAgent", seed=2)
        worst = 0
        for _ in range(3):
            be.reset()
            for t in range(60):
                be.step(41 + 2 if t == 0 else 0)   # Femitter on Enterprise1, then sleep
            ports = be._state.sessions["Red"][0].ports
            worst = max([worst] + [len(p) - len(set(p)) for p in ports.values()])
        repeats[name] = worst
    assert repeats["cyborg"] == 0 and repeats["cyborg:leaderboard"] > 0, repeats
