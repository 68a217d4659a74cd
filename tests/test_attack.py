"""Red as a learner (wfrl.training.attack, csrc/wfrl_duel.h): the compiled duel loop against its
Python twin, red's masks from its observation against the simulator's, a short `wfrl attack`
that learns and keeps honest records, its resume after SIGKILL, and bad input in one line."""
import csv
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
from _helpers import popen_wfrl, run_wfrl

from wfrl.training import attack as att

DEFENDER = "pretrained:critical_first"


@pytest.fixture(scope="module")
def defender():
    return att.load_defender(DEFENDER, None)


def _red_weights(hidden=32, seed=0):
    import torch

    from wfrl.envs.duel import RED_OBS_DIM
    from wfrl.ppo.policy import ActorCritic
    torch.manual_seed(seed)
    m = ActorCritic(hidden, RED_OBS_DIM)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.3)    # far from uniform: the choices matter
    return m.flat_weights()


@pytest.mark.parametrize("greedy", [False, True])
def test_the_duel_loop_equals_its_python_twin(defender, greedy):
    # Six episodes through DuelSlots (into a red buffer) and through duel_episode_reference: the
    # same red actions and rewards, the same blue returns, log-probabilities and values to
    # float rounding, on both codes.
    from wfrl._core import DuelSlots

    from wfrl.rng import episode_seeds
    w = _red_weights()
    for leaderboard in (False, True):
        buf = att.red_buffer(6)
        slots = DuelSlots(1, leaderboard)
        blue = att.play(slots, defender, w, 32, range(6), 11, greedy, buf)
        env_seeds, act_seeds = episode_seeds(11, np.arange(6))
        a = buf.arrays
        moved = 0
        for k in range(6):
            ret, steps = att.duel_episode_reference(defender, w, 32, env_seeds[k], act_seeds[k],
                                                    leaderboard, greedy)
            assert blue[k] == pytest.approx(ret, abs=1e-9)
            assert a["lengths"][k] == 100
            np.testing.assert_array_equal(a["actions"][k], [s[1] for s in steps])
            np.testing.assert_array_equal(a["obs"][k], np.stack([s[0] for s in steps]))
            np.testing.assert_array_equal(a["rewards"][k], np.float32([s[4] for s in steps]))
            np.testing.assert_allclose(a["logprobs"][k], [s[2] for s in steps], atol=2e-5)
            np.testing.assert_allclose(a["values"][k], [s[3] for s in steps], atol=2e-5)
            assert a["dones"][k].tolist() == [0] * 99 + [1]
            moved += len(set(a["actions"][k].tolist()))
        assert moved > (12 if greedy else 30)      # red does many different things


def test_red_masks_read_from_the_observation_equal_the_simulators():
    from wfrl._core import Cage2Sim

    from wfrl.envs.duel import RED_N_ACTIONS
    sim = Cage2Sim(1, "SleepAgent", external=True)
    rng = np.random.default_rng(3)
    obs, masks = [], []
    for ep in range(20):
        sim.reset(0, ep)
        for _ in range(100):
            obs.append(sim.red_obs(0))
            masks.append(sim.red_mask(0))
            sim.set_red_action(0, int(rng.choice(np.flatnonzero(masks[-1]))))
            sim.step(0, int(rng.integers(145)) if rng.random() < 0.3 else 0)
    from wfrl.envs.duel import red_masks
    got = red_masks(np.stack(obs))
    np.testing.assert_array_equal(got[:, :RED_N_ACTIONS], np.stack(masks))
    assert not got[:, RED_N_ACTIONS:].any()
    assert len({m.tobytes() for m in masks}) > 20        # the mask moved with what red learned


def _log(path):
    with open(path) as f:
        return list(csv.DictReader(f))


TIMING = {"Collection_Time", "Update_Time", "Episodes_Per_Second"}


@pytest.fixture(scope="module")
def short_attack(tmp_path_factory):
    out = tmp_path_factory.mktemp("attack") / "run"
    res = run_wfrl("attack", "--checkpoint", DEFENDER, "--total-episodes", 1200,
                   "--episodes-per-update", 200, "--eval-every", 600, "--eval-episodes", 100,
                   "--hidden", 32, "--seed", 5, "--out", out)
    assert res.returncode == 0, res.stderr
    return out


def test_a_short_attack_learns_and_keeps_its_records(short_attack):
    out = short_attack
    rows = _log(out / "training_log.csv")
    assert [int(r["Update"]) for r in rows] == [1, 2, 3, 4, 5, 6]
    first, last = float(rows[0]["Blue_Return"]), float(rows[-1]["Blue_Return"])
    assert last < first - 5          # red learned: blue loses more against it
    evals = _log(out / "eval_log.csv")
    assert [int(r["Episodes"]) for r in evals] == [600, 1200]
    s = json.loads((out / "summary.json").read_text())
    assert s["episodes"] == 1200 and s["vs_red"]["n"] == 100
    assert s["vs_red"]["mean"] == min(s["vs_red_greedy"]["mean"], s["vs_red_sampling"]["mean"])
    assert s["exploitability"] == pytest.approx(s["vs_b_line"]["mean"] - s["vs_red"]["mean"],
                                                abs=1e-3)
    assert s["exploitability"] > 0
    cfg = json.loads((out / "experiment_config.json").read_text())
    assert cfg["mode"] == "attack" and cfg["checkpoint"] == DEFENDER
    # the CybORG agent reads the same weights the learner saved (without torch's module)
    import wfrl.envs.duel as duel
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.runlog import load_checkpoint
    w, hidden = duel.red_weights(str(out / "best.pt"))
    np.testing.assert_array_equal(w, weights_from_checkpoint(load_checkpoint(out / "best.pt"))[0])
    with pytest.raises(att.UserError, match="is a defender's checkpoint"):
        duel.red_weights(DEFENDER)
    # the red checkpoint is a red's: a defender's command refuses it in one line
    res = run_wfrl("eval", "--checkpoint", out / "best.pt", "--episodes", 2)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "is a red attacker's checkpoint" in res.stderr


def test_an_attack_killed_mid_run_resumes_to_its_twin(short_attack, tmp_path):
    # The same run killed (SIGKILL) after its second commit, then resumed: the same log (timing
    # aside), the same evaluations and the same red, bit for bit.
    out = tmp_path / "killed"
    proc = popen_wfrl("attack", "--checkpoint", DEFENDER, "--total-episodes", "1200",
                      "--episodes-per-update", "200", "--eval-every", "600", "--eval-episodes",
                      "100", "--hidden", "32", "--seed", "5", "--out", out,
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                      start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if (out / "training_log.csv").exists() and len(_log(out / "training_log.csv")) >= 2:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists()
    res = run_wfrl("attack", "--resume", out)
    assert res.returncode == 0, res.stderr
    want, got = _log(short_attack / "training_log.csv"), _log(out / "training_log.csv")
    assert [{k: v for k, v in r.items() if k not in TIMING} for r in got] == \
        [{k: v for k, v in r.items() if k not in TIMING} for r in want]
    assert _log(out / "eval_log.csv") == _log(short_attack / "eval_log.csv")
    import torch
    a = torch.load(out / "best.pt", weights_only=True)["model"]
    b = torch.load(short_attack / "best.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_bad_attack_input_is_one_line(short_attack, tmp_path):
    cases = [
        (("--checkpoint", short_attack / "best.pt"), "is a red attacker's checkpoint"),
        (("--checkpoint", tmp_path / "nope.pt"), "does not exist"),
        (("--backend", "cyborg"), "unknown attack backend 'cyborg'"),
        (("--memory",), "--memory is a defender's input"),
        (("--checkpoint", "pretrained:any_workflow"), "follows any workflow"),
        (("--total-episodes", 0), "--total-episodes must be"),
    ]
    for flags, match in cases:
        res = run_wfrl("attack", *flags, "--out", tmp_path / "x")
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (flags, res.stderr)
        assert match in res.stderr, (flags, res.stderr)
    res = run_wfrl("attack", "--resume", tmp_path)
    assert res.returncode == 2 and "cannot resume" in res.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.cyborg
def test_red_knowledge_from_cybORG_names_every_host_rightly_and_only_offers_valid_actions(
        short_attack):
    # The learned red played in CybORG (learned_red_class) against a sleeping blue: at every step
    # the addresses RedKnowledge has put names to are the hosts' true ones, the observation it
    # builds says known exactly what CybORG's action space offers, and every action it takes is
    # one that space allows.
    from wfrl.envs.actions import HOSTS
    from wfrl.envs.cyborg import CybORGBackend
    from wfrl.envs.duel import RED_ACTION_NAMES
    be = CybORGBackend(f"learned:{short_attack / 'best.pt'}", seed=4)
    checked = 0
    for ep in range(4):
        be.seed(100 + ep)
        be.reset()
        agent = be._cyborg.environment_controller.agent_interfaces["Red"].agent
        truth = {h: str(ip) for h, ip in be._cyborg.environment_controller.hostname_ip_map.items()}
        for _ in range(40):
            be.step(0)
            k = agent.knowledge
            assert {HOSTS[h]: str(ip) for h, ip in k.ip_of.items()} == \
                {h: truth[h] for h in (HOSTS[i] for i in k.ip_of)}
            name = RED_ACTION_NAMES[k.last]
            space = be._cyborg.get_action_space("Red")
            kind, *rest = name.split(" ")
            if kind in ("DiscoverNetworkServices", "ExploitRemoteService"):
                ip = k.ip_of[HOSTS.index(rest[0])]
                assert space["ip_address"][ip], name
            elif kind in ("PrivilegeEscalate", "Impact"):
                assert space["hostname"][rest[0]], name
            checked += kind != "Sleep"
    assert checked > 60


@pytest.mark.cyborg
def test_the_red_agent_class_takes_the_cyborg_package_that_is_there():
    # csle-cyborg's classes where it is installed; the cage-challenge-2 repository's package
    # (`CybORG`) by name where that is importable, else one line; an unknown name, one line.
    import importlib.util

    from csle_cyborg.agents.simple_agents.base_agent import BaseAgent
    from csle_cyborg.shared.actions.abstract_actions.impact import Impact

    from wfrl.envs.duel import RedKnowledge, cyborg_red_classes, learned_red_class
    from wfrl.errors import BackendUnavailable, UserError
    c = cyborg_red_classes()
    assert (c.package, c.BaseAgent, c.Impact) == ("csle_cyborg", BaseAgent, Impact)
    agent = learned_red_class("vs_any_workflow")()
    assert isinstance(agent, BaseAgent) and agent.knowledge.classes.package == "csle_cyborg"
    k = RedKnowledge("csle_cyborg")
    k.cidr_of[0] = "10.0.0.0/28"
    from wfrl.envs.duel import RED_ACTION_NAMES
    act = k.action(RED_ACTION_NAMES.index("DiscoverRemoteSystems User"))
    assert type(act).__name__ == "DiscoverRemoteSystems" and act.subnet == "10.0.0.0/28"
    with pytest.raises(UserError, match="unknown CybORG package 'cyborg2'"):
        cyborg_red_classes("cyborg2")
    if importlib.util.find_spec("CybORG") is None:
        with pytest.raises(BackendUnavailable, match="cage-challenge-2"):
            cyborg_red_classes("CybORG")
    else:
        assert cyborg_red_classes("CybORG").BaseAgent.__module__.startswith("CybORG.")


@pytest.mark.cyborg
def test_a_learned_red_scores_on_cybORG_as_on_the_simulator(short_attack, defender):
    # The short attack's red against the shipped specialist: its return on CybORG (30 episodes)
    # within the parity tolerance of the simulator's (300), far below B_line's.
    from wfrl._core import DuelSlots

    from wfrl.collect.rollout import run_episodes
    from wfrl.envs import make_backend
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.runlog import load_checkpoint
    from wfrl.stats import standard_error
    w, net = weights_from_checkpoint(load_checkpoint(short_attack / "best.pt"))
    sim = att.play(DuelSlots(1), defender, w, net.hidden, range(300), 9, False)
    be = make_backend("cyborg", f"learned:{short_attack / 'best.pt'}", seed=0)
    cy = np.array([s.env_return for s in run_episodes(be, defender.policy, range(30), 9)])
    tol = 3 * np.hypot(standard_error(cy), standard_error(sim)) + 2.0
    assert abs(cy.mean() - sim.mean()) < tol, (cy.mean(), sim.mean())
    assert cy.mean() < -20 and sim.mean() < -20        # (B_line: about -13)


def test_a_learned_red_plays_the_same_episodes_in_every_loop(short_attack, defender):
    # learned:PATH on the simulator: the compiled rollout loop (SimSlots), the per-step path
    # (SimBackend.step, the gymnasium env) and red's own duel loop play the same episodes, so a
    # defender's score against a learned red is one number whoever computes it.
    from wfrl._core import DuelSlots

    from wfrl.collect.rollout import run_episodes
    from wfrl.envs import make_backend
    from wfrl.evaluation.checkpoint import weights_from_checkpoint
    from wfrl.runlog import load_checkpoint
    red = f"learned:{short_attack / 'best.pt'}"
    be = make_backend("sim", red, seed=0)
    eps = range(40)
    fast = [s.env_return for s in run_episodes(be, defender.policy, eps, 21)]

    class Seen:
        def step(self, *a):
            pass

        def end_episode(self):
            pass
    slow = [s.env_return for s in run_episodes(be, defender.policy, eps, 21, observer=Seen())]
    np.testing.assert_allclose(fast, slow, atol=1e-4)      # (float32 sums against float64)
    w, net = weights_from_checkpoint(load_checkpoint(short_attack / "best.pt"))
    duel = att.play(DuelSlots(1), defender, w, net.hidden, eps, 21, False)
    np.testing.assert_allclose(fast, duel, atol=1e-4)
    assert np.mean(fast) < -20


def test_blue_trains_against_a_learned_red_with_any_collector(short_attack, tmp_path):
    red = f"learned:{short_attack / 'best.pt'}"
    logs = {}
    for collector in ("sequential", "async"):
        res = run_wfrl("train", "--workflow", "critical_first", "--red-agent", red,
                       "--collector", collector, "--total-episodes", 40,
                       "--episodes-per-update", 20, "--eval-every", 0,
                       "--out", tmp_path / collector)
        assert res.returncode == 0, res.stderr
        logs[collector] = [r["Env_Reward"] for r in _log(tmp_path / collector / "training_log.csv")]
    assert logs["sequential"] == logs["async"]      # the same episodes, whoever collects them
    res = run_wfrl("train", "--workflow", "critical_first", "--red-agent",
                   f"learned:{tmp_path / 'nope.pt'}", "--total-episodes", 20,
                   "--out", tmp_path / "bad")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "does not exist" in res.stderr
    from wfrl.envs import make_vec
    from wfrl.errors import UserError
    with pytest.raises(UserError, match="the vector env plays the scripted reds"):
        make_vec(2, red_agent=red)
    # a red learned on the installed code, played by the leaderboard's: one line (the CybORG
    # agent class and the simulator's compiled loop check it alike)
    res = run_wfrl("eval", "--checkpoint", "pretrained:critical_first_leaderboard",
                   "--backend", "sim:leaderboard", "--red-agent", red, "--episodes", 2)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "learned to attack on the installed CybORG code" in res.stderr
    from wfrl._core import SimSlots

    from wfrl.envs.duel import red_weights
    for make in (lambda: SimSlots(1, red, True), lambda: red_weights(red[8:], True)):
        with pytest.raises(UserError, match="learned to attack on the installed CybORG code"):
            make()


def test_a_batch_split_over_threads_is_the_same_batch(defender):
    from concurrent.futures import ThreadPoolExecutor

    from wfrl._core import DuelSlots
    w = _red_weights()
    one, two = att.red_buffer(9), att.red_buffer(9)
    a = att.play(DuelSlots(1), defender, w, 32, range(30, 39), 4, False, one)
    with ThreadPoolExecutor(3) as pool:
        b = att.play(DuelSlots(3), defender, w, 32, range(30, 39), 4, False, two, pool)
    np.testing.assert_array_equal(a, b)
    for k in one.arrays:
        np.testing.assert_array_equal(one.arrays[k], two.arrays[k])


def test_the_shipped_reds_are_strong_against_their_defenders():
    # learned:vs_NAME is the strongest red found against the shipped defender NAME (its record:
    # docs/duel.md); each names its defender and how it was made, and against it, on episodes
    # none of them trained on, takes far more than B_line does (about -13; the leaderboard
    # code's about -11).
    from wfrl._core import DuelSlots

    import wfrl.envs.duel as duel
    from wfrl.runlog import load_checkpoint
    names = duel.shipped_reds()
    assert names == ["vs_any_workflow", "vs_critical_first", "vs_critical_first_leaderboard",
                     "vs_generalising"]
    for name in names:
        ck = load_checkpoint(duel.red_checkpoint_path(name))
        assert ck["side"] == "red" and ck["provenance"]["command"]
        d = ck["defender"]
        defender = att.load_defender(d["checkpoint"], d["workflow"])
        leaderboard = ck["config"]["backend"] == "sim:leaderboard"
        w, hidden = duel.red_weights(name, leaderboard)
        blue = att.play(DuelSlots(1, leaderboard), defender, w, hidden, range(60), 777, False)
        assert blue.mean() < -50, (name, blue.mean())


@pytest.mark.cyborg
def test_red_observes_the_same_on_cybORG_as_on_the_simulator():
    # The shipped red against the shipped specialist, 30 episodes per backend: the mean of each
    # of red's 71 features at steps 5, 25 and 99 agrees within sampling noise (one feature that
    # CybORG's reading got wrong, red's root at its User0 foothold, was 0.98 apart).
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "red_obs_parity", att.Path(__file__).resolve().parents[1] / "experiments" /
        "red_obs_parity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = att.load_defender(DEFENDER, None)
    sim = mod.play("sim", d, "vs_critical_first", 30, 31)
    cy = mod.play("cyborg", d, "vs_critical_first", 30, 31)
    for t in (5, 25, 99):
        gap = np.abs(sim[:, t].mean(0) - cy[:, t].mean(0))
        assert gap.max() < 0.3 and gap.mean() < 0.02, (t, mod.names()[int(gap.argmax())],
                                                       gap.max())


def test_the_attack_bench_times_both_sides_run_by_run():
    """`wfrl bench train --attack`: red's and the blue recipe's runs alternated, each side's
    runs numbered 1..repeats in what it says, and red's rate over blue's from the medians."""
    from wfrl.tools.benchmarks import bench_attack_train
    said: list = []
    out = bench_attack_train("pretrained:critical_first", episodes_per_update=20,
                             e2e_episodes=40, repeats=2, collector="sequential", n_workers=1,
                             progress=said.append)
    runs = [ln.split(", run ")[0].split(", ", 1)[1] + ln.split(", run ")[1].split(":")[0]
            for ln in said if ", run " in ln]
    assert runs == ["recipe1", "red against pretrained:critical_first1",
                    "recipe2", "red against pretrained:critical_first2"], said
    assert len(out["e2e_red_runs_s"]) == len(out["e2e_recipe_runs_s"]) == 2
    assert out["red_vs_recipe"] == pytest.approx(
        out["e2e_red_episodes_per_s"] / out["e2e_recipe_episodes_per_s"])
