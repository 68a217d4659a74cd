"""Red as an agent (wfrl.envs.duel, csrc/wfrl_cage2.h WFRL_RED_EXTERNAL): every scripted red
driven through the external interface plays the built-in episodes bit for bit, red's mask and
observation follow what red has learned, a masked action does nothing and fails, the zero-sum
rewards, PettingZoo's API test, and the single-agent views."""
import numpy as np
import pytest

from wfrl.envs import duel
from wfrl.envs.reds import POOL_SPECS, RED_SPECS

ALL_REDS = [s.name for s in RED_SPECS] + [p.name for p in POOL_SPECS]


@pytest.mark.parametrize("leaderboard", [False, True])
@pytest.mark.parametrize("red", ALL_REDS)
def test_a_scripted_red_driven_from_outside_plays_the_built_in_episodes(red, leaderboard):
    # Two envs from the same seeds under the same blue (uniform random, restores included): the
    # built-in red, and the same red's compiled decision given through the external interface.
    # Every observation, reward, red access, red action and red observation is the same.
    from wfrl._core import Cage2Sim
    inside = Cage2Sim(1, red, leaderboard)
    outside = Cage2Sim(1, red, leaderboard, external=True)
    rng = np.random.default_rng(7)
    moved = 0
    for ep in range(12):
        a, b = inside.reset(0, 1000 + ep), outside.reset(0, 1000 + ep)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        for t in range(100):
            blue = int(rng.integers(145)) if t % 3 else 0
            given = outside.scripted_red(0)
            assert outside.red_mask(0)[given] or given == 0
            sa, sb = inside.step(0, blue), outside.step(0, blue)
            np.testing.assert_array_equal(sa[0], sb[0])
            assert sa[1] == sb[1]
            np.testing.assert_array_equal(sa[2], sb[2])
            assert inside.last_red_action(0)[:2] == outside.last_red_action(0)[:2]
            np.testing.assert_array_equal(inside.red_obs(0), outside.red_obs(0))
            moved += given != 0
    assert (moved == 0) == (red == "SleepAgent") and (red == "SleepAgent" or moved > 300)


def test_the_external_interface_refuses_what_it_cannot_take():
    from wfrl._core import Cage2Sim
    sim = Cage2Sim(1, "B_lineAgent")
    with pytest.raises(ValueError, match="not external"):
        sim.set_red_action(0, 0)
    with pytest.raises(ValueError, match="not external"):
        sim.scripted_red(0)
    ext = Cage2Sim(1, "SleepAgent", external=True)
    with pytest.raises(ValueError, match=r"red action 56 outside \[0, 56\)"):
        ext.set_red_action(0, 56)
    with pytest.raises(ValueError, match="red action -1 outside"):
        ext.set_red_action(0, -1)


def _index(name):
    return duel.RED_ACTION_NAMES.index(name)


def test_red_knows_what_its_actions_revealed():
    from wfrl._core import Cage2Sim
    sim = Cage2Sim(1, "SleepAgent", external=True)
    sim.reset(0, 5)
    mask, obs = sim.red_mask(0), sim.red_obs(0)
    # at the start: the User subnet, User0's IP and hostname (its foothold, root)
    allowed = {duel.RED_ACTION_NAMES[i] for i in np.flatnonzero(mask)}
    assert allowed == {"Sleep", "DiscoverRemoteSystems User", "DiscoverNetworkServices User0",
                       "ExploitRemoteService User0", "PrivilegeEscalate User0", "Impact User0"}
    host = {h: obs[5 * i:5 * i + 5] for i, h in enumerate(duel.HOSTS)}
    np.testing.assert_array_equal(host["User0"], [1, 1, 0, 0, 1])
    assert obs[-6:].tolist() == [1, 0, 0, 0, 0, 0.0]     # User known; no outcome yet; step 0
    # discover the user subnet: the scans and exploits of User1-4 open
    assert sim.set_red_action(0, _index("DiscoverRemoteSystems User"))
    sim.step(0, 0)
    mask, obs = sim.red_mask(0), sim.red_obs(0)
    for h in ("User1", "User2", "User3", "User4"):
        assert mask[_index(f"DiscoverNetworkServices {h}")] and mask[_index(
            f"ExploitRemoteService {h}")] and not mask[_index(f"PrivilegeEscalate {h}")]
    assert obs[-3:].tolist() == [1, 0, np.float32(0.01)]  # it succeeded; step 1
    # an exploit before a scan fails (CybORG: no ports stored); after the scan it lands on
    # User1's femitter as SYSTEM, and the hostname is learned; red sees a new foothold whose
    # level CybORG's observation does not show (user, as far as red knows)
    assert sim.set_red_action(0, _index("ExploitRemoteService User1"))
    sim.step(0, 0)
    assert sim.red_obs(0)[-3:].tolist() == [0, 1, np.float32(0.02)]
    sim.set_red_action(0, _index("DiscoverNetworkServices User1"))
    sim.step(0, 0)
    assert sim.red_obs(0)[5 * duel.HOSTS.index("User1") + 2] == 1    # scanned
    sim.set_red_action(0, _index("ExploitRemoteService User1"))
    _, _, access = sim.step(0, 0)
    obs, mask = sim.red_obs(0), sim.red_mask(0)
    u1 = duel.HOSTS.index("User1")
    assert access[u1] == 2 and obs[5 * u1:5 * u1 + 5].tolist() == [1, 1, 1, 1, 0]
    assert mask[_index("PrivilegeEscalate User1")] and mask[_index("Impact User1")]
    # escalating there shows root; blue restores User1: red does not see it until an action
    # there fails
    sim.set_red_action(0, _index("PrivilegeEscalate User1"))
    sim.step(0, 0)
    assert sim.red_obs(0)[5 * u1 + 3:5 * u1 + 5].tolist() == [0, 1]
    from wfrl.envs.actions import RESTORE_FIRST
    sim.set_red_action(0, 0)
    sim.step(0, RESTORE_FIRST + u1)
    assert sim.red_obs(0)[5 * u1 + 4] == 1 and sim.red_obs(0)[-3:-1].tolist() == [0, 0]
    sim.set_red_action(0, _index("PrivilegeEscalate User1"))
    sim.step(0, 0)
    assert sim.red_obs(0)[5 * u1 + 3:5 * u1 + 5].tolist() == [0, 0]
    assert sim.last_red_action(0) == (4, u1, 0)


def test_a_masked_action_does_nothing_and_fails():
    from wfrl._core import Cage2Sim, cage2_state
    a = Cage2Sim(1, "SleepAgent", external=True)
    b = Cage2Sim(1, "SleepAgent", external=True)
    a.reset(0, 9), b.reset(0, 9)
    # Op_Server0 is unknown at the start: its exploit is masked, played as nothing
    assert not a.set_red_action(0, _index("ExploitRemoteService Op_Server0"))
    ra, rb = a.step(0, 0), b.step(0, 0)           # b: red sleeps
    for x, y in zip(ra, rb):
        np.testing.assert_array_equal(x, y)
    assert a.red_obs(0)[-3:-1].tolist() == [0, 1] and b.red_obs(0)[-3:-1].tolist() == [0, 0]
    assert a.last_red_action(0) == (0, 0, 0)
    # and the rest of the state is the same (the RNG was not drawn)
    sa, sb = cage2_state(a, 0), cage2_state(b, 0)
    assert sa[-40:] == sb[-40:]


@pytest.mark.duel
def test_the_duel_is_zero_sum_and_blue_sees_what_the_plain_env_shows():
    env = duel.make_duel(seed=3)
    obs, infos = env.reset(seed=3)
    assert set(obs) == {"blue", "red"} and obs["red"].shape == (duel.RED_OBS_DIM,)
    assert infos["red"]["action_mask"].dtype == np.int8
    rng = np.random.default_rng(0)
    total = {"blue": 0.0, "red": 0.0}
    steps = 0
    while env.agents:
        mask = infos["red"]["action_mask"]
        acts = {"blue": int(rng.integers(145)), "red": int(rng.choice(np.flatnonzero(mask)))}
        obs, rew, term, trunc, infos = env.step(acts)
        assert rew["red"] == -rew["blue"] and not any(term.values())
        total = {k: total[k] + rew[k] for k in total}
        steps += 1
    assert steps == 100 and trunc == {"blue": True, "red": True}
    assert total["blue"] < 0 < total["red"]


@pytest.mark.duel
def test_pettingzoo_parallel_api_test_passes():
    from pettingzoo.test import parallel_api_test
    parallel_api_test(duel.make_duel(seed=1), num_cycles=300)


def test_the_views_fix_one_side():
    # red against a sleeping blue; blue against B_line through the external interface plays the
    # plain env's episodes
    from gymnasium.utils.env_checker import check_env

    from wfrl.envs import make
    red = duel.red_env("sleep", seed=4)
    check_env(red, skip_render_check=True)
    obs, info = red.reset(seed=4)
    assert red.action_masks().tolist() == info["action_mask"].tolist()
    blue = duel.blue_env("B_lineAgent", seed=11)
    plain = make(backend="sim", red_agent="B_lineAgent")
    o1, _ = blue.reset(seed=11)
    o2, _ = plain.reset(seed=11)
    np.testing.assert_array_equal(o1, o2)
    rng = np.random.default_rng(2)
    for _ in range(100):
        a = int(rng.integers(145))
        s1, s2 = blue.step(a), plain.step(a)
        np.testing.assert_array_equal(s1[0], s2[0])
        assert s1[1] == s2[1] and s1[3] == s2[3]


@pytest.mark.duel
def test_bad_input_is_one_line():
    from wfrl.errors import UserError
    with pytest.raises(UserError, match="the two-player env plays on sim or sim:leaderboard"):
        duel.make_duel(backend="cyborg")
    env = duel.make_duel(seed=0)
    env.reset()
    with pytest.raises(ValueError, match=r"red action 99 outside \[0, 56\)"):
        env.step({"blue": 0, "red": 99})
    with pytest.raises(ValueError, match="missing"):
        env.step({"blue": 0})
    with pytest.raises(UserError, match="unknown red agent"):
        duel.blue_env("EvilAgent")
    with pytest.raises(UserError, match="a fixed blue is 'sleep' or an agent"):
        duel.red_env("pretrained:any_workflow")
