"""Exact effects of the simulator where they are deterministic (docs/simulator.md: reward per step,
observation, Remove, Restore, decoys, Impact and quirk B1), on both codes: the installed CybORG's
("sim") and the leaderboard's ("sim:leaderboard"). Each expectation follows from the documented
rule, not from a recorded run."""
import numpy as np
import pytest

import wfrl.envs as envs

CODES = ("sim", "sim:leaderboard")
H = {h: i for i, h in enumerate(
    ["Defender", "Enterprise0", "Enterprise1", "Enterprise2", "Op_Host0", "Op_Host1", "Op_Host2",
     "Op_Server0", "User0", "User1", "User2", "User3", "User4"])}
SLEEP, REMOVE, DECOY, RESTORE = 0, 15, 28, 132
# Documented reward (tenths): −1 per enterprise host or Op_Server0 and −0.1 per other host (User0
# excluded) with a privileged red session, −10 while the OT service is stopped, −1 per Restore.
PRIV_COST10 = np.array([1, 10, 10, 10, 1, 1, 1, 10, 0, 1, 1, 1, 1])
UNKNOWN, USER, NO = [1, 0], [0, 1], [0, 0]


def flags(obs, h):
    """The host's sticky compromised flag as its two bits: No [0,0], Unknown [1,0], User [0,1],
    Privileged [1,1]."""
    return obs.reshape(13, 4)[h, 2:].astype(int).tolist()


def run(code, red, seed, actions):
    be = envs.make_backend(code, red, seed)
    obs, ra = be.reset()
    out = [(obs, 0.0, ra, be.sim.ot_running(0))]
    for a in actions:
        obs, r, ra = be.step(int(a))
        out.append((obs, r, ra, be.sim.ot_running(0)))
    return out


def same(a, b):
    return all(np.array_equal(x[0], y[0]) and x[1] == y[1] and np.array_equal(x[2], y[2])
               and x[3] == y[3] for x, y in zip(a, b))


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
def test_every_reward_is_the_documented_sum(code, red):
    """Random blue actions (Restores included): every step's reward equals, exactly, the sum the
    docs give from the state the step leaves (red's access per host, the OT service) and the
    action."""
    rng = np.random.default_rng(5)
    be = envs.make_backend(code, red, 11)
    n_priv = n_stopped = n_restore = 0
    for _ in range(30):
        be.reset()
        for a in rng.integers(0, 145, 100):
            _, r, ra = be.step(int(a))
            ot = be.sim.ot_running(0)
            want10 = (-int(PRIV_COST10[ra == 2].sum()) - (0 if ot else 100)
                      - (10 if a >= RESTORE else 0))
            assert round(r * 10) == want10 and abs(r * 10 - want10) < 1e-3
            n_priv += int((ra[np.arange(13) != H["User0"]] == 2).any())
            n_stopped += not ot
            n_restore += a >= RESTORE
    assert n_priv > 100 and n_restore > 100   # every term was exercised
    if red == "B_lineAgent":
        assert n_stopped > 0


@pytest.mark.parametrize("code", CODES)
def test_remove_marks_unknown_and_restore_clears(code):
    """B_line: the first host flagged User (red's first exploit that showed as one). Remove turns the flag
    into Unknown; B_line's next step (the escalation) shows nothing; Restore then clears the flag,
    takes every red session off the host and costs exactly 1 beyond the privileged hosts.
    Seed 3 is the case of the review: exactly Unknown after Remove, No after Restore."""
    reexploited = 0
    for seed in range(40):
        be = envs.make_backend(code, "B_lineAgent", seed)
        be.reset()
        for _t in range(40):
            obs, _, _ = be.step(SLEEP)
            hit = [h for h in range(13) if flags(obs, h) == USER]
            if hit:
                break
        assert len(hit) == 1, seed
        h = hit[0]
        obs, _, _ = be.step(REMOVE + h)
        assert flags(obs, h) == UNKNOWN, seed
        obs, r, ra = be.step(RESTORE + h)
        # red acts after blue: its exploit of the clean host in the same step shows as Exploit
        # and sets the flag to User again (B_line's jump table sends it back there at times)
        if obs.reshape(13, 4)[h, 1]:
            assert flags(obs, h) == USER, seed
            reexploited += 1
        else:
            assert flags(obs, h) == NO, seed
            assert ra[h] == 0, seed
        assert round(r * 10) == -int(PRIV_COST10[ra == 2].sum()) - 10, seed
    assert reexploited <= 10


@pytest.mark.parametrize("code", CODES)
def test_impact_stops_the_ot_service_until_a_restore_and_never_again(code):
    """B_line against Sleep: the first step the OT service is down, red holds Op_Server0
    privileged; it stays down to the end. Restore(Op_Server0) in the next step brings it back and
    it stays up for the rest of the episode although B_line re-takes the host (quirk B1);
    Restore(Op_Server0) at step 0 keeps it up all episode."""
    downs = []
    for seed in range(30):
        ep = run(code, "B_lineAgent", seed, [SLEEP] * 100)
        ot = [x[3] for x in ep]
        first = ot.index(False)
        downs.append(first)
        assert ep[first][2][H["Op_Server0"]] == 2, seed
        assert not any(ot[first:]), seed
        assert ot[:first] == [True] * first
        # ep[k] is the state after action k - 1: the service went down in action first - 1's
        # step; Restore it in the next one
        ep2 = run(code, "B_lineAgent", seed, [SLEEP] * first + [RESTORE + H["Op_Server0"]]
                  + [SLEEP] * (99 - first))
        assert same(ep[:first + 1], ep2[:first + 1]), seed   # the same episode up to the Restore
        assert not ep2[first][3] and all(x[3] for x in ep2[first + 1:]), seed
        assert any(x[2][H["Op_Server0"]] == 2 for x in ep2[first + 2:]), seed   # re-taken
        ep3 = run(code, "B_lineAgent", seed, [RESTORE + H["Op_Server0"]] + [SLEEP] * 99)
        assert all(x[3] for x in ep3), seed
    assert min(downs) == 15          # step index 14 of the actions, after the reset row


@pytest.mark.parametrize("code", CODES)
def test_decoys_matter_and_restore_takes_them_away(code):
    """Every decoy kind on Op_Server0 in the first steps (before B_line reaches the operational
    subnet), then Sleep: some episodes change (the decoys catch exploits). The same
    decoys followed by a Restore of the host, before red can see them, give exactly the
    episode of Sleeps followed by the same Restores: a Restore leaves no decoy behind."""
    targets = [H["Op_Server0"]]
    decoys = [DECOY + 13 * k + h for h in targets for k in range(8)]
    restores = [RESTORE + h for h in targets]
    n = len(decoys) + len(restores)
    changed = 0
    for seed in range(60):
        base = run(code, "B_lineAgent", seed, [SLEEP] * 100)
        with_decoys = run(code, "B_lineAgent", seed, decoys + [SLEEP] * (100 - len(decoys)))
        changed += not same(base, with_decoys)
        a = run(code, "B_lineAgent", seed, decoys + restores + [SLEEP] * (100 - n))
        b = run(code, "B_lineAgent", seed, [SLEEP] * len(decoys) + restores + [SLEEP] * (100 - n))
        # red never reached those hosts before the Restores: nothing of its own to take away
        assert all(x[2][targets].max() == 0 for x in b[:n + 1]), seed
        assert same(a, b), seed
    assert changed >= 10
