"""The CybORG backend against the contract: spaces, truncation, red_access, seeding."""
import numpy as np
import pytest

pytestmark = pytest.mark.cyborg


def _episode(env, seed, actions):
    obs, info = env.reset(seed=seed)
    out = [(obs.copy(), 0.0, info["red_access"].copy())]
    for a in actions:
        obs, r, term, trunc, info = env.step(int(a))
        out.append((obs.copy(), r, info["red_access"].copy()))
    return out


def _same(e1, e2):
    return all(np.array_equal(a[0], b[0]) and a[1] == b[1] and np.array_equal(a[2], b[2])
               for a, b in zip(e1, e2))


def test_check_env_and_spaces():
    from gymnasium.utils.env_checker import check_env

    import wfrl.envs as envs
    env = envs.make(backend="cyborg", red_agent="B_lineAgent", seed=0)
    check_env(env, skip_render_check=True)
    assert env.observation_space.shape == (52,) and env.observation_space.dtype == np.float32
    assert env.action_space.n == 145


def test_gymnasium_registration():
    import gymnasium

    import wfrl.envs  # noqa: F401
    env = gymnasium.make("wfrl/CAGE2-v0", red_agent="RedMeanderAgent", seed=1)
    obs, info = env.reset()
    assert obs.shape == (52,) and info["red_access"].dtype == np.uint8
    env.close()


def test_truncation_at_100_and_reward_range():
    import wfrl.envs as envs
    env = envs.make(backend="cyborg", red_agent="B_lineAgent", seed=3)
    obs, info = env.reset()
    assert not obs.any()
    assert info["red_access"].tolist() == [0] * 8 + [2] + [0] * 4  # only the User0 foothold
    rng = np.random.default_rng(0)
    total = 0.0
    for t in range(100):
        obs, r, term, trunc, info = env.step(int(rng.integers(145)))
        assert obs.dtype == np.float32 and set(np.unique(obs)) <= {0.0, 1.0}
        assert not term and trunc == (t == 99)
        assert -15.0 <= r <= 0.0  # worst case: OT down (-10), every priv host, a restore
        total += r
    assert total < 0
    with pytest.raises(RuntimeError, match=r"step\(\) after the episode was truncated; call reset\(\)"):
        env.step(0)


def test_red_access_matches_true_state():
    """The cheap session-table read equals what the (slow) true-state query says."""
    import wfrl.envs as envs
    from wfrl.envs.actions import HOSTS
    for red in ("B_lineAgent", "RedMeanderAgent"):
        env = envs.make(backend="cyborg", red_agent=red, seed=7)
        env.reset()
        cy = env.unwrapped.backend._cyborg
        rng = np.random.default_rng(1)
        seen = set()
        for t in range(100):
            _, _, _, _, info = env.step(int(rng.choice([0, 0, 0, 1, 17, 133, 24, 140])))
            true = cy.get_agent_state("True")
            expected = np.zeros(13, np.uint8)
            for h, name in enumerate(HOSTS):
                for s in true[name].get("Sessions", []):
                    if s.get("Agent") != "Red":
                        continue
                    priv = s.get("Username") in ("root", "SYSTEM")
                    expected[h] = max(expected[h], 2 if priv else 1)
            np.testing.assert_array_equal(info["red_access"], expected, err_msg=f"{red} t={t}")
            seen.update(int(v) for v in info["red_access"])
        assert seen == {0, 1, 2} or seen == {0, 2}


def test_same_seed_same_episode_different_seed_different():
    import wfrl.envs as envs
    actions = np.random.default_rng(2).integers(0, 145, 100)
    env = envs.make(backend="cyborg", red_agent="RedMeanderAgent", seed=0)
    a = _episode(env, 11, actions)
    b = _episode(env, 11, actions)
    c = _episode(env, 12, actions)
    assert _same(a, b)
    assert not _same(a, c)


def test_two_envs_in_one_process_do_not_share_randomness():
    import random

    import wfrl.envs as envs
    actions = np.random.default_rng(3).integers(0, 145, 100)
    alone = _episode(envs.make(backend="cyborg", red_agent="RedMeanderAgent"), 5, actions)
    e1 = envs.make(backend="cyborg", red_agent="RedMeanderAgent")
    e2 = envs.make(backend="cyborg", red_agent="RedMeanderAgent")
    o1, i1 = e1.reset(seed=5)
    e2.reset(seed=99)
    inter = [(o1, 0.0, i1["red_access"])]
    for a in actions:
        random.random()  # other users of the global RNG do not disturb the env either
        o, r, _, _, info = e1.step(int(a))
        e2.step(int(a))
        inter.append((o.copy(), r, info["red_access"].copy()))
    assert _same(alone, inter)


def test_sleep_red_never_gains_access():
    import wfrl.envs as envs
    env = envs.make(backend="cyborg", red_agent="SleepAgent", seed=0)
    env.reset()
    for _ in range(100):
        obs, r, _, _, info = env.step(0)
        assert r == 0.0 and not obs.any()
        assert info["red_access"].tolist() == [0] * 8 + [2] + [0] * 4


_NO_TORCH = r"""
import json, sys
from wfrl.collect.rollout import make_policy  # what a collector's worker loads
from wfrl.envs import make_backend
from wfrl.tools.parity import REFERENCE_SEED, run_episodes, summarise
out = {}
for red in ("B_lineAgent", "RedMeanderAgent", "ScoutingB_lineAgent"):
    be = make_backend("cyborg", red)
    played = run_episodes(be, "react-restore", 2, REFERENCE_SEED, 0, False)
    out[red] = summarise(played).digest.tolist()
out["torch"] = sorted(m for m in ("torch", "stable_baselines3") if m in sys.modules)
if out["torch"]:
    print(json.dumps(out))
    sys.exit(0)
import csle_cyborg.agents as lazy
names = list(lazy.__all__)
got = {n: getattr(lazy, n) for n in names}                 # BlueLoadAgent brings torch now
import importlib.util
spec = importlib.util.find_spec("csle_cyborg.agents")
real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(real)                              # the package's own __init__.py
out["names"] = names
out["same"] = all(got[n] is getattr(real, n) for n in names)
out["public"] = sorted(n for n in vars(real) if not n.startswith("_"))
print(json.dumps(out))
"""


def test_a_cyborg_process_does_not_import_torch_and_plays_the_same():
    """csle_cyborg.agents' names load on first use (wfrl.envs.reds.cyborg_agents_on_demand):
    a process that plays CybORG episodes, scripted reds and a variant, never imports torch or
    Stable-Baselines3; its episodes are the recorded ones (tests/data's parity references,
    recorded with the package imported as it is); and every name of the package is the object
    its own __init__.py binds."""
    import json
    import os
    import subprocess
    import sys

    from wfrl.tools.parity import REFERENCES, load_reference, pair_key
    res = subprocess.run([sys.executable, "-c", _NO_TORCH], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert out["torch"] == []
    data = os.path.join(os.path.dirname(__file__), "data")
    recorded = {ref: load_reference(os.path.join(data, REFERENCES[ref].file))[1]
                for ref in ("installed", "family")}
    for red, ref in (("B_lineAgent", "installed"), ("RedMeanderAgent", "installed"),
                     ("ScoutingB_lineAgent", "family")):
        digest = recorded[ref][pair_key(red, "react-restore")].digest
        assert out[red] == digest[:2].tolist(), red
    assert out["same"] and set(out["names"]) == set(out["public"]) >= {
        "B_lineAgent", "RedMeanderAgent", "SleepAgent", "GreenAgent", "BlueLoadAgent"}
