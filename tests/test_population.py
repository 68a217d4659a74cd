"""Population training (wfrl.training.population) and the population red (population:PATH,
csrc/wfrl_rollout.h wfrl_population): the meta-solver on matrix games with known equilibria,
the compiled draw against its Python twin, a population's episodes against its members' own,
a short `wfrl population` with honest records, its determinism and resume after SIGKILL,
best responses side by side (worker processes, Ray tasks), and bad input in one line."""
import csv
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
from _helpers import popen_wfrl, run_wfrl

from wfrl.envs.duel import red_checkpoint_path
from wfrl.errors import UserError
from wfrl.training.population import meta_mixture, nash_mixture


# ------------------------------------------------------------------------------ meta-solver
def test_nash_mixture_of_known_matrix_games():
    # rock-paper-scissors: both uniform, value 0
    rps = [[0, -1, 1], [1, 0, -1], [-1, 1, 0]]
    blue, red, value = nash_mixture(rps)
    np.testing.assert_allclose(blue, [1 / 3] * 3, atol=1e-9)
    np.testing.assert_allclose(red, [1 / 3] * 3, atol=1e-9)
    assert value == pytest.approx(0.0, abs=1e-9)
    # a 2x2 game without a saddle point: blue (3/7, 4/7), red (2/7, 5/7), value 1/7
    blue, red, value = nash_mixture([[3, -1], [-2, 1]])
    np.testing.assert_allclose(blue, [3 / 7, 4 / 7], atol=1e-9)
    np.testing.assert_allclose(red, [2 / 7, 5 / 7], atol=1e-9)
    assert value == pytest.approx(1 / 7, abs=1e-9)
    # a saddle point: red's pure strategy (column 1), whatever the weak rows
    blue, red, value = nash_mixture([[-5, -9, -6], [-7, -10, -20]])
    np.testing.assert_allclose(red, [0, 1, 0], atol=1e-9)
    np.testing.assert_allclose(blue, [1, 0], atol=1e-9)
    assert value == pytest.approx(-9)
    # a column dominated for red (blue gains more against it everywhere) gets no weight
    _, red, _ = nash_mixture([[1, -1, 5], [-1, 1, 5]])
    np.testing.assert_allclose(red, [0.5, 0.5, 0], atol=1e-9)
    np.testing.assert_allclose(meta_mixture("uniform", np.zeros((2, 4))), [0.25] * 4)
    with pytest.raises(ValueError):
        nash_mixture([[1.0, np.nan]])


# ------------------------------------------------------------------------------ the population red
REDS = ["B_lineAgent", "learned:vs_any_workflow", "NoisyB_lineAgent", "RedMeanderAgent"]


@pytest.fixture(scope="module")
def pop_file(tmp_path_factory):
    from wfrl.envs.reds import write_population
    path = tmp_path_factory.mktemp("pop") / "population.json"
    write_population(path, REDS, [0.2, 0.5, 0.3, 0.0])
    return path


def test_the_compiled_draw_is_its_python_twin(pop_file):
    from wfrl._core import SimSlots

    from wfrl.envs.reds import load_population
    spec = load_population(f"population:{pop_file}")
    assert spec.members == tuple(REDS) and spec.weights == (0.2, 0.5, 0.3, 0.0)
    slots = SimSlots(1, f"population:{pop_file}")
    seeds = np.random.default_rng(3).integers(0, 2**64 - 1, 20_000, dtype=np.uint64)
    drawn = np.array([slots.population.draw(int(s)) for s in seeds])
    np.testing.assert_array_equal(drawn, [spec.member(int(s)) for s in seeds])
    share = np.bincount(drawn, minlength=4) / len(drawn)
    np.testing.assert_allclose(share, [0.2, 0.5, 0.3, 0.0], atol=0.012)
    assert share[3] == 0          # a member of weight 0 never plays
    assert [r is not None for r in slots.population.reds] == [False, True, False, False]


def test_a_population_plays_each_episode_as_its_member_does(pop_file):
    # Every episode against the population is the episode against the red its seed draws, in
    # the compiled loop and in the per-step path (SimBackend.step, the reference's).
    from wfrl.collect.rollout import run_episodes
    from wfrl.envs import make_backend
    from wfrl.envs.reds import load_population
    from wfrl.rng import episode_seeds
    from wfrl.training.attack import load_defender
    defender = load_defender("pretrained:critical_first", None)
    eps = np.arange(60)
    pop = f"population:{pop_file}"
    fast = [s.env_return for s in run_episodes(make_backend("sim", pop), defender.policy, eps, 4)]

    class Seen:
        def step(self, *a):
            pass

        def end_episode(self):
            pass
    slow = [s.env_return for s in run_episodes(make_backend("sim", pop), defender.policy, eps, 4,
                                               observer=Seen())]
    np.testing.assert_allclose(fast, slow, atol=1e-4)
    spec = load_population(pop)
    env_seeds, _ = episode_seeds(4, eps)
    drawn = [spec.episode_red(int(s)) for s in env_seeds]
    assert set(drawn) == set(REDS[:3])
    for red in set(drawn):
        own = [s.env_return for s in run_episodes(make_backend("sim", red), defender.policy,
                                                  eps, 4)]
        for k in np.flatnonzero([d == red for d in drawn]):
            assert fast[k] == pytest.approx(own[k], abs=1e-4), (red, k)


def test_a_bad_population_is_one_line(tmp_path, pop_file):
    from wfrl.envs import make_backend
    from wfrl.envs.reds import Population, load_population
    with pytest.raises(UserError, match="no such file"):
        load_population(f"population:{tmp_path / 'none.json'}")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not a population file"):
        load_population(f"population:{bad}")
    bad.write_text(json.dumps({"members": [{"red": "NoSuchAgent", "weight": 1}]}))
    with pytest.raises(UserError, match="unknown red agent"):
        load_population(str(bad))
    with pytest.raises(UserError, match="non-negative"):
        Population(["B_lineAgent", "RedMeanderAgent"], [1.0, -1.0])
    with pytest.raises(UserError, match="not all zero"):
        Population(["B_lineAgent"], [0.0])
    with pytest.raises(UserError, match="1 to 64 reds"):
        Population([], [])
    with pytest.raises(UserError, match="simulator"):
        make_backend("cyborg", f"population:{pop_file}")
    res = run_wfrl("train", "--workflow", "critical_first", "--red-agent",
                   f"population:{tmp_path / 'none.json'}", "--total-episodes", 20,
                   "--out", tmp_path / "r")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "no such file" in res.stderr


# ------------------------------------------------------------------------------ the loop
TINY = ["--rounds", "2", "--attack-episodes", "400", "--attack-eval-every", "200",
        "--defender-episodes", "600", "--episodes-per-update", "100", "--eval-episodes", "40",
        "--hidden", "64", "--seed", "3", "--collector", "sequential"]


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _records(out):
    """What two runs of the same settings must agree on: the curve, every round's payoff,
    mixture and held-out scores, the defenders' weights (wall times aside)."""
    import torch
    rec = {"curve": _csv(out / "curve.csv")}
    for k in (1, 2):
        r = out / "rounds" / f"{k:03d}"
        rec[f"payoff{k}"] = json.loads((r / "payoff.json").read_text())
        rec[f"pop{k}"] = json.loads((r / "population.json").read_text())
        rnd = json.loads((r / "round.json").read_text())
        rnd.pop("wall_time_s")
        rec[f"round{k}"] = rnd
        rec[f"log{k}"] = [{c: v for c, v in row.items()
                           if c not in ("Collection_Time", "Update_Time", "Episodes_Per_Second")}
                          for row in _csv(r / "defender" / "training_log.csv")]
    for d in (1, 2):
        m = torch.load(out / "defenders" / f"d{d:03d}.pt", weights_only=False)["model"]
        rec[f"d{d}"] = [t.numpy().tobytes() for t in m.values()]
    return rec


def _session_run(name, *flags, tensorboard=False):
    """A population run of TINY and `flags` (with TensorBoard files in the run's parent/tb),
    made once per test session (in its directory) and shared by the test processes."""
    from _helpers import made_once, session_folder

    def make():
        out = session_folder(name) / "run"
        tb = ("--tensorboard", out.parent / "tb") if tensorboard else ()
        res = run_wfrl("population", *TINY, *flags, *tb, "--out", out)
        assert res.returncode == 0, res.stderr
        return out, res.stderr
    return made_once(name, make)


@pytest.fixture(scope="module")
def short_run():
    out, _ = _session_run("population_short", tensorboard=True)
    return out


def test_a_short_population_run_keeps_honest_records(short_run):
    out = short_run
    curve = _csv(out / "curve.csv")
    assert [int(r["Defender"]) for r in curve] == [0, 1, 2]
    s = json.loads((out / "summary.json").read_text())
    assert s["exploitability"] == [float(r["Exploitability"]) for r in curve]
    for r in curve:    # each defender's exploitability: its B_line return minus the red's
        assert float(r["Exploitability"]) == pytest.approx(
            float(r["Vs_B_line"]) - float(r["Vs_Strongest_Red"]), abs=1e-3)
    p2 = json.loads((out / "rounds" / "002" / "payoff.json").read_text())
    # rows: D0, D1; columns: family-train's five and the two best responses
    assert p2["rows"] == ["D0", "D1"] and len(p2["columns"]) == 7
    assert p2["columns"][-2:] == ["BR1", "BR2"] and np.shape(p2["payoff"]) == (2, 7)
    assert sum(p2["mixture"]) == pytest.approx(1.0, abs=1e-5)
    blue, red, value = nash_mixture(p2["payoff"])
    np.testing.assert_allclose(p2["meta_mixture"], red, atol=1e-6)   # the default solver: Nash
    # training: half on family-train's five (uniform), half on the Nash mixture
    floor = np.r_[np.full(5, 0.1), 0, 0]
    np.testing.assert_allclose(p2["mixture"], floor + 0.5 * red, atol=1e-5)
    assert p2["value"] == pytest.approx(value, abs=1e-3)
    pop = json.loads((out / "rounds" / "002" / "population.json").read_text())
    assert [m["red"] for m in pop["members"]][-1] == "learned:attack/best.pt"
    assert pop["members"][5]["red"] == "learned:../001/attack/best.pt"
    # D1 is D0 trained on: weights moved; it follows any workflow as a checkpoint does
    res = run_wfrl("eval", "--checkpoint", out / "defenders" / "d002.pt", "--workflow",
                   "reverse", "--episodes", 5)
    assert res.returncode == 0, res.stderr
    log = _csv(out / "rounds" / "002" / "defender" / "training_log.csv")
    assert len(log) == 6 and len({r["Workflow_ID"] for r in log}) > 1
    assert not (out / "rounds" / "002" / "defender" / "checkpoint.pt").exists()
    # each round's scores in TensorBoard: exploitability of D0..D2, held-out returns of D1, D2
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ev = EventAccumulator(str(out.parent / "tb"))
    ev.Reload()
    steps = [e.step for e in ev.Scalars("population/exploitability")]
    assert steps == [0, 1, 2]
    assert [e.value for e in ev.Scalars("population/exploitability")] == pytest.approx(
        s["exploitability"], abs=1e-3)
    assert [e.step for e in ev.Scalars("population/b_line")] == [1, 2]


def test_a_population_run_killed_mid_round_resumes_to_its_twin(short_run, tmp_path):
    # The same settings again, killed (SIGKILL) in round 2's defender training, then resumed:
    # every record the uninterrupted run wrote, bit for bit (so also: two runs, same records).
    out = tmp_path / "killed"
    proc = popen_wfrl("population", *TINY, "--out", out, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True, start_new_session=True)
    log = out / "rounds" / "002" / "defender" / "training_log.csv"
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(_csv(log)) >= 2:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists()
    res = run_wfrl("population", "--resume", out)
    assert res.returncode == 0, res.stderr
    assert _records(out) == _records(short_run)
    res = run_wfrl("population", "--resume", out)
    assert res.returncode == 2 and "is finished" in res.stderr


def _attack_records(folder):
    """A best response's records, wall-clock figures, the thread count and the folders'
    paths aside."""
    summary = json.loads((folder / "summary.json").read_text())
    for key in ("wall_time_s", "episodes_per_s", "defender"):
        summary.pop(key)
    config = json.loads((folder / "experiment_config.json").read_text())
    for key in ("threads", "checkpoint", "defender", "out"):
        config.pop(key)
    import torch
    model = torch.load(folder / "best.pt", weights_only=False)["model"]
    return summary, config, (folder / "eval_log.csv").read_text(), \
        [t.numpy().tobytes() for t in model.values()]


@pytest.fixture(scope="module")
def two_per_round():
    out, stderr = _session_run("population_k2", "--rounds", "1", "--best-responses", "2")
    assert "[attack 2]" in stderr       # the second best response ran in a worker
    return out


@pytest.mark.slow
def test_best_responses_side_by_side_join_the_population(two_per_round, short_run, tmp_path):
    out = two_per_round
    rnd = json.loads((out / "rounds" / "001" / "round.json").read_text())
    each = rnd["exploitability_each"]
    assert len(each) == 2 and rnd["exploitability_before"] == max(each)
    p1 = json.loads((out / "rounds" / "001" / "payoff.json").read_text())
    assert p1["columns"][-2:] == ["BR1.1", "BR1.2"] and np.shape(p1["payoff"]) == (1, 7)
    pop = json.loads((out / "rounds" / "001" / "population.json").read_text())
    assert [m["red"] for m in pop["members"]][-2:] == ["learned:attack/best.pt",
                                                        "learned:attack-2/best.pt"]
    curve = _csv(out / "curve.csv")
    assert float(curve[0]["Exploitability"]) == pytest.approx(max(each), abs=1e-3)
    assert [int(r["Population"]) for r in curve] == [0, 7]
    assert (out / "final" / "attack-2" / "summary.json").exists()
    # the first best response is the one a run of one per round trains (the same seed), and
    # the second is `wfrl attack` with its own seed, alone
    a, b = out / "rounds" / "001" / "attack", short_run / "rounds" / "001" / "attack"
    assert _attack_records(a) == _attack_records(b)
    solo = tmp_path / "solo"
    res = run_wfrl("attack", "--checkpoint", out / "defenders" / "d000.pt", "--workflow",
                   "critical_first", "--seed", 3 + 1 + 1000, "--total-episodes", 400,
                   "--eval-every", 200, "--eval-episodes", 40, "--out", solo, "--force")
    assert res.returncode == 0, res.stderr
    assert _attack_records(out / "rounds" / "001" / "attack-2") == _attack_records(solo)
    # the final best responses run in the same worker processes as round 1's (the pool is kept
    # for the run): the second one's records are still those of `wfrl attack` alone
    solo = tmp_path / "solo-final"
    res = run_wfrl("attack", "--checkpoint", out / "defenders" / "d001.pt", "--workflow",
                   "critical_first", "--seed", 3 + 1 + 1 + 1000, "--total-episodes", 400,
                   "--eval-every", 200, "--eval-episodes", 40, "--out", solo, "--force")
    assert res.returncode == 0, res.stderr
    assert _attack_records(out / "final" / "attack-2") == _attack_records(solo)


@pytest.mark.ray
@pytest.mark.slow
def test_best_responses_as_ray_tasks_are_the_local_ones(two_per_round, tmp_path):
    """--ray-address: the round's best responses run as Ray tasks (a private local instance the
    test process has joined), their folders shipped back whole; the records are the ones of
    worker processes."""
    from wfrl.collect.ray.local import LocalRay
    from wfrl.config.duel import PopulationConfig
    from wfrl.training.population import population
    argv = dict(zip(TINY[::2], TINY[1::2]))
    cfg = PopulationConfig(rounds=1, best_responses=2, attack_episodes=400, attack_eval_every=200,
                           defender_episodes=600, episodes_per_update=100, eval_episodes=40,
                           seed=int(argv["--seed"]), collector="sequential",
                           out=str(tmp_path / "ray"), ray_address="127.0.0.1:6379")
    local = LocalRay(num_cpus=2)
    try:
        population(cfg, progress=lambda line: None)
    finally:
        local.shutdown()
    for sub in ("rounds/001/attack", "rounds/001/attack-2", "final/attack-2"):
        assert _attack_records(tmp_path / "ray" / sub) == _attack_records(two_per_round / sub)
        config = json.loads((tmp_path / "ray" / sub / "experiment_config.json").read_text())
        assert config["out"] == str(tmp_path / "ray" / sub), sub
        assert (tmp_path / "ray" / sub / "evals").is_dir()
    assert (tmp_path / "ray" / "curve.csv").read_text() == \
        (two_per_round / "curve.csv").read_text()


@pytest.mark.parametrize("flags, message", [
    (["--rounds", "0"], "--rounds must be"),
    (["--reds", "B_lineAgent,learned:missing.pt"], "does not exist"),
    (["--init-from", "nope.pt"], "does not exist"),
    (["--init-from", "pretrained:any_workflow_leaderboard"], "other CybORG code"),
    (["--init-from", "pretrained:critical_first"], "trained on one workflow"),
    (["--init-from", str(red_checkpoint_path("vs_any_workflow"))], "is a red's checkpoint"),
    (["--backend", "cyborg"], "population backend"),
    (["--meta-solver", "best"], "meta-solver"),
    (["--rounds", "30", "--best-responses", "2"], "holds at most 64"),
    (["--best-responses", "0"], "--best-responses must be"),
])
def test_bad_input_is_one_line(tmp_path, flags, message):
    res = run_wfrl("population", *flags, "--out", tmp_path / "r")
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and message in res.stderr, res.stderr
    assert not (tmp_path / "r").exists()
    res = run_wfrl("population", "--resume", tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
