"""The red agents beyond CAGE2's (wfrl.envs.reds): each variant's schedule on the compiled
simulator and on CybORG (the twins), the pools' per-episode draws on both, and bad names. Their
statistical parity with CybORG under the built-in blue policies is tests/test_parity.py's
"family" reference."""
import numpy as np
import pytest

from wfrl.envs import make_backend
from wfrl.envs.reds import DELAY, FAMILY, PAUSE, POOLS, pool_member


def _red_actions(backend, episodes: int, seed: int = 0, ok: bool = False) -> list[list[tuple]]:
    """Red's (action, target) per step of each episode against a sleeping blue (ok: and
    whether it succeeded)."""
    out = []
    for ep in range(episodes):
        backend.seed(seed + ep)
        backend.reset()
        acts = []
        for _ in range(100):
            backend.step(0)
            name, target, success = backend.last_red_action()
            acts.append((name, target, success) if ok else (name, target))
        out.append(acts)
    return out


def _runs(flags):
    """Lengths of the runs of equal values in a list of booleans, as (value, length)."""
    runs, prev, n = [], None, 0
    for f in flags:
        if f == prev:
            n += 1
        else:
            if prev is not None:
                runs.append((prev, n))
            prev, n = f, 1
    runs.append((prev, n))
    return runs


def check_delayed(episodes):
    starts = []
    for acts in episodes:
        sleeping = [a == "Sleep" for a, _ in acts]
        first = sleeping.index(False)
        assert DELAY[0] <= first <= DELAY[1], first
        assert not any(sleeping[first:first + 10])   # then B_line / Meander act every step
        starts.append(first)
    return starts


def check_bursty(episodes):
    for acts in episodes:
        runs = _runs([a == "Sleep" for a, _ in acts])
        for _k, (sleep, n) in enumerate(runs[:-1]):
            if sleep:
                assert PAUSE[0] <= n <= PAUSE[1], runs
            else:
                assert n == 3, runs


def scans_per_exploit(episodes):
    """DiscoverNetworkServices actions per ExploitRemoteService action, over all episodes."""
    flat = [a for acts in episodes for a, _ in acts]
    return flat.count("DiscoverNetworkServices") / max(flat.count("ExploitRemoteService"), 1)


def scan_pairs(episodes, base: str):
    """Exploits preceded by the extra scan: for B_line, which scans a host once right before
    exploiting it, two scans of the target in a row; for Meander, which scans every host first
    and exploits later, one scan of the target right before."""
    n = 0
    for acts in episodes:
        for a, b, c in zip(acts, acts[1:], acts[2:]):
            if c[0] != "ExploitRemoteService" or b != ("DiscoverNetworkServices", c[1]):
                continue
            n += a == b if base == "B_line" else 1
    return n


def check_schedules(engine: str, base: str, episodes: tuple, scan_margin: float,
                    pair_floor: int) -> list[int]:
    """The three variants of `base` on backend `engine`, `episodes` = (delayed, bursty, noisy)
    episodes each: the delayed and bursty schedules hold; the noisy variant scans more than
    `scan_margin` more per exploit than the base red, and adds more than `pair_floor` + three
    times the base red's extra-scan signatures (about half the exploits get one more scan
    first). Returns the delayed variant's starts."""
    def play(red, n):
        return _red_actions(make_backend(engine, red, seed=1), n)
    starts = check_delayed(play(f"Delayed{base}Agent", episodes[0]))
    check_bursty(play(f"Bursty{base}Agent", episodes[1]))
    noisy = play(f"Noisy{base}Agent", episodes[2])
    own = play("B_lineAgent" if base == "B_line" else "RedMeanderAgent", episodes[2])
    assert scans_per_exploit(noisy) > scans_per_exploit(own) + scan_margin
    assert scan_pairs(noisy, base) > pair_floor + 3 * scan_pairs(own, base)
    return starts


@pytest.mark.parametrize("base", ["B_line", "Meander"])
def test_variant_schedules_on_the_simulator(base):
    starts = check_schedules("sim", base, (300, 100, 200), 0.3, 50)
    assert min(starts) <= DELAY[0] + 1 and max(starts) >= DELAY[1] - 1   # the whole range


@pytest.mark.cyborg
@pytest.mark.slow
@pytest.mark.parametrize("base", ["B_line", "Meander"])
def test_variant_schedules_on_cyborg(base):
    """The CybORG classes keep the same schedules (their statistics: tests/test_parity.py)."""
    check_schedules("cyborg", base, (6, 4, 10), 0.2, 3)


def _play(engine: str, red: str, episodes: int):
    """Red's (action, target, success) per step of each episode against a sleeping blue."""
    return _red_actions(make_backend(engine, red, seed=1), episodes, ok=True)


USERS = ("User1", "User2", "User3", "User4")


def check_scouting(episodes) -> set:
    """Right after listing the user subnet red scans User1-4 once each, then B_line scans and
    exploits a Linux one (User3/User4) and goes on to Enterprise0, never Enterprise1. Returns
    the entry hosts seen."""
    entries = set()
    for acts in episodes:
        assert acts[0][:2] == ("DiscoverRemoteSystems", "User")
        assert [a for a, _, _ in acts[1:5]] == ["DiscoverNetworkServices"] * 4
        assert sorted(t for _, t, _ in acts[1:5]) == list(USERS)
        assert acts[5][0] == "DiscoverNetworkServices" and acts[5][1] in ("User3", "User4")
        entries.add(acts[5][1])
        targets = {t for _, t, _ in acts}
        assert "Enterprise1" not in targets
        assert "Enterprise0" in targets
    return entries


def check_persistent(calm):
    """Against a sleeping blue: once B_line has escalated on its user host, about half the steps
    are checks, escalations on hosts already escalated on, and B_line still reaches Impact."""
    steps, checks, impacts = 0, 0, 0
    for acts in calm:
        taken: set = set()
        for a, t, ok in acts:
            if taken:
                steps += 1
                checks += a == "PrivilegeEscalate" and t in taken
            if a == "PrivilegeEscalate" and ok:
                taken.add(t)
        impacts += any(a == "Impact" for a, _, _ in acts)
    assert 0.3 < checks / steps < 0.6, (checks, steps)
    assert impacts >= len(calm) // 2


def retake_rate(engine: str, red: str, episodes: int) -> tuple[float, int]:
    """Blue restores red's user foothold three steps after B_line escalated there, and sleeps
    otherwise: the share of episodes in which red exploits that host again within 12 steps
    (B_line alone has moved on; only a failure sends it back), and the episodes tried."""
    from wfrl.envs.actions import HOSTS
    backend = make_backend(engine, red, seed=1)
    hits = tried = 0
    for ep in range(episodes):
        backend.seed(ep)
        backend.reset()
        user, t_esc = None, -1
        for t in range(40):
            if user is not None and t == t_esc + 3:
                backend.step(132 + HOSTS.index(user))   # Restore
                break
            backend.step(0)
            a, target, ok = backend.last_red_action()
            if user is None and a == "PrivilegeEscalate" and ok and target != "User0":
                user, t_esc = target, t
        if user is None:
            continue
        tried += 1
        for _ in range(12):
            backend.step(0)
            a, target, _ok = backend.last_red_action()
            if (a, target) == ("ExploitRemoteService", user):
                hits += 1
                break
    return hits / max(tried, 1), tried


def check_enterprise(episodes):
    """Never an action in the operational subnet; the enterprise hosts are taken."""
    escalated = set()
    for acts in episodes:
        for a, t, ok in acts:
            assert not t.startswith("Op_") and t != "Operational", (a, t)
            if a == "PrivilegeEscalate" and ok:
                escalated.add(t)
    assert {"Enterprise0", "Enterprise1", "Enterprise2"} <= escalated


@pytest.mark.parametrize("engine", ["sim", pytest.param("cyborg", marks=[pytest.mark.cyborg,
                                                                         pytest.mark.slow])])
def test_path_persistence_and_target_variants(engine):
    n = 60 if engine == "sim" else 4
    entries = check_scouting(_play(engine, "ScoutingB_lineAgent", n))
    if engine == "sim":
        assert entries == {"User3", "User4"}
    check_persistent(_play(engine, "PersistentB_lineAgent", n))
    # a restored foothold is taken back at once (0.99 on the simulator; B_line alone 0.01)
    rate, tried = retake_rate(engine, "PersistentB_lineAgent", 3 * n)
    assert tried >= 2 * n and rate > 0.8, (rate, tried)
    if engine == "sim":
        assert retake_rate(engine, "B_lineAgent", 3 * n)[0] < 0.1
    check_enterprise(_play(engine, "EnterpriseMeanderAgent", n))


def test_a_variant_resumes_its_base_agent_where_it_stopped():
    """Sleeps do not reach the base agent: against a sleeping blue, a bursty B_line's own actions
    are B_line's whole kill chain in order (its Impact comes once its 15 stages are done)."""
    for acts in _red_actions(make_backend("sim", "BurstyB_lineAgent", seed=3), 30):
        own = [a for a in acts if a[0] != "Sleep"]
        kinds = [a for a, _ in own]
        assert kinds[:2] == ["DiscoverRemoteSystems", "DiscoverNetworkServices"]
        assert "Impact" in kinds and kinds.index("Impact") >= 14


def test_pools_draw_the_same_member_on_both_sides():
    """The C draw (the vector env's playing()) and its Python twin (pool_member) agree, and every
    member of each pool is drawn."""
    from wfrl.envs.vector import Cage2VectorEnv
    for pool, members in POOLS.items():
        env = Cage2VectorEnv(64, red_agent=pool, seed=100)
        env.reset(seed=100)
        playing = env.playing()
        assert list(playing) == [pool_member(pool, 100 + i) for i in range(64)]
        assert set(playing) == set(members)


def test_family_names_and_bad_names():
    from wfrl.errors import UserError
    for red in FAMILY + tuple(POOLS):
        make_backend("sim", red, seed=0).close()
    with pytest.raises(UserError, match="red agent"):
        make_backend("sim", "DelayedSleepAgent")
    from _search_helpers import run_cli
    res = run_cli("eval", "--cage2", "--checkpoint", "pretrained:critical_first",
                  "--reds", "B_lineAgent,NopeAgent")
    assert res.returncode != 0 and "NopeAgent" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    res = run_cli("train", "--red-agent", "family-nope", "--out", "/nonexistent/x")
    assert res.returncode != 0 and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_robustness_rows_and_drop():
    from wfrl.evaluation.cage2 import cage2_evaluate, format_robustness, robustness_rows
    res = cage2_evaluate({"all": "pretrained:critical_first"}, episodes=40,
                         reds=("B_lineAgent", "NoisyB_lineAgent"), lengths=(30,))
    rows = robustness_rows(res)
    assert [(r["red_agent"], r["base"], r["steps"]) for r in rows] == \
        [("NoisyB_lineAgent", "B_lineAgent", 30)]
    by = {s["red_agent"]: s["mean"] for s in res["settings"]}
    assert rows[0]["drop"] == pytest.approx(by["NoisyB_lineAgent"] - by["B_lineAgent"], abs=1e-3)
    assert "NoisyB_lineAgent" in format_robustness(res)
    assert np.isfinite(rows[0]["drop_se"]) and rows[0]["drop_se"] > 0


PROBE = '''
import importlib.util, sys
import wfrl, wfrl.errors
path = sys.argv[1]
src = open(path).read()
# one more red, declared in its spec alone (a schedule of B_line's, for the simulator; its name
# does not say so), which makes it a member of the family pool: every list must name it, and it
# must be scored against its own base red
src = src.replace("RED_SPECS: tuple[RedSpec, ...] = (\\n", "RED_SPECS: tuple[RedSpec, ...] = (\\n"
                  "    RedSpec('ProbeAgent', B_LINE, 'bursty', 'timing', 'a probe'),\\n", 1)
spec = importlib.util.spec_from_loader("wfrl.config.names", loader=None, origin=path)
mod = importlib.util.module_from_spec(spec)
mod.__file__ = path
sys.modules["wfrl.config.names"] = mod
exec(compile(src, path, "exec"), mod.__dict__)
import wfrl.envs as envs
from wfrl.envs import base
from wfrl.config.eval import EvalConfig, parse_reds
from wfrl.config.run import TrainConfig
from wfrl.config.fields import RED_METAVAR
from wfrl.evaluation.cage2 import _policy_for, base_red
from wfrl.tools.parity import REFERENCES
from wfrl.cli.parser import build_parser
name = "ProbeAgent"
assert name in base.RED_AGENTS and name in base.TRAIN_RED_AGENTS and name in envs.RED_AGENTS
assert base.check_red_agent(name) == name
TrainConfig(red_agent=name).validate(); EvalConfig(red_agent=name, checkpoint="x").validate()
assert name in parse_reds("family") and parse_reds(name) == (name,)
import wfrl.envs.reds as reds
assert name in reds.FAMILY and name in reds.POOLS["family"] and reds.red_spec(name).base == "B_lineAgent"
assert name in REFERENCES["family"].reds and name in REFERENCES["learned"].reds
assert base_red(name) == "B_lineAgent"      # (a name without "B_line" in it)
assert _policy_for(name, {"b_line": "B", "meander": "M"}) == "B"
a = build_parser().parse_args(["train", "--red-agent", name])
assert a.red_agent == name
from wfrl._core import Cage2Sim, red_kind_code
assert red_kind_code(name) == 0 | 2 << 5 and Cage2Sim(1, name).red_kind == red_kind_code(name)
print("ok")
'''


def test_a_red_declared_in_one_spec_is_named_everywhere(tmp_path):
    """A red added to wfrl.config.names.RED_SPECS alone (and to a pool's members) is a choice of the
    command line and every config, a pool member, in parity's lists, played by the simulator by
    its code and scored against its own base red (no name is tested for a substring)."""
    import subprocess
    import sys

    import wfrl.config.names as names
    import wfrl.envs.reds as reds
    res = subprocess.run([sys.executable, "-c", PROBE, names.__file__], capture_output=True,
                         text=True)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]
    # and a name that only looks like a B_line variant is not one
    from wfrl.errors import UserError
    from wfrl.evaluation.cage2 import base_red
    with pytest.raises(UserError, match="unknown red agent 'FakeB_lineAgent'"):
        base_red("FakeB_lineAgent")
    assert [reds.base_red(n) for n in reds.FAMILY] == [
        "B_lineAgent" if "B_line" in n else "RedMeanderAgent" for n in reds.FAMILY]
