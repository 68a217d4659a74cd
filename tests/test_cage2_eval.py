"""The CAGE2 evaluation protocol (wfrl eval --cage2): its settings, episode lengths and seeds;
per-red checkpoints; bad checkpoints end in one line and exit 2; the periodic evaluation of
training (eval_log.csv, best.pt)."""
import json
import os

import numpy as np
import pytest
import torch

from wfrl.cli import main
from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
from wfrl.collect.rollout import make_policy, run_episodes
from wfrl.config.run import PPOConfig
from wfrl.envs import make_backend
from wfrl.evaluation.cage2 import CAGE2_LENGTHS, CAGE2_REDS, cage2_evaluate, format_table
from wfrl.evaluation.returns import play
from wfrl.ppo.learner import PPOLearner
from wfrl.rng import CAGE2_EPISODE_BASE, episode_block
from wfrl.runlog import read_csv, save_checkpoint
from wfrl.workflow import Workflow


def _checkpoint(path, memory=True, mask=True, seed=0, workflow="critical_first", scale=0.3):
    cfg = PPOConfig(hidden=16, memory=memory, mask=mask)
    learner = PPOLearner(cfg, seed=seed)
    with torch.no_grad():
        for p in learner.model.parameters():
            p.add_(torch.randn_like(p) * scale)
    save_checkpoint(path, {**learner.state(), "hidden": 16, "net": cfg.net().to_dict(),
                           "workflow": workflow, "config": {"alignment_lambda": 30.0}})
    return learner


def test_protocol_settings_lengths_and_seeds(tmp_path):
    ck = tmp_path / "p.pt"
    learner = _checkpoint(ck)
    res = cage2_evaluate({"all": str(ck)}, episodes=12, seed=5)
    rows = res["settings"]
    assert [(r["red_agent"], r["steps"]) for r in rows] == \
        [(red, L) for red in CAGE2_REDS for L in CAGE2_LENGTHS]
    assert all(r["n"] == 12 for r in rows)
    assert res["total"] == pytest.approx(sum(r["mean"] for r in rows), abs=1e-3)
    # each setting plays its own reserved episodes, L steps each, greedy
    wf = Workflow.parse("critical_first")
    net = PPOConfig(hidden=16, memory=True, mask=True).net()
    for k, r in enumerate(rows):
        backend = make_backend("sim", r["red_agent"])
        first = episode_block(CAGE2_EPISODE_BASE, k)
        eps = range(first, first + 12)
        stats = play(backend, learner.flat_weights(), net, wf, 30.0, False, eps, 5, True,
                     horizon=r["steps"])
        assert r["mean"] == pytest.approx(np.mean([s.env_return for s in stats]), abs=1e-3)
        assert r["fixes_per_episode"] <= r["steps"]
    # the same seed reproduces the table; another seed plays other episodes
    assert cage2_evaluate({"all": str(ck)}, episodes=12, seed=5) == res
    other = cage2_evaluate({"all": str(ck)}, episodes=12, seed=6)
    assert [r["mean"] for r in other["settings"]] != [r["mean"] for r in rows]
    text = format_table(res)
    assert "B_lineAgent" in text and "total" in text and "-36.84" in text   # installed code
    # some of the settings: the same episodes as in the full protocol, whatever their order
    part = cage2_evaluate({"all": str(ck)}, episodes=12, seed=5,
                          reds=("RedMeanderAgent", "B_lineAgent"), lengths=(100,))
    full = {(r["red_agent"], r["steps"]): r for r in rows}
    assert [(r["red_agent"], r["steps"]) for r in part["settings"]] == \
        [("RedMeanderAgent", 100), ("B_lineAgent", 100)]
    for r in part["settings"]:
        assert r == full[(r["red_agent"], r["steps"])]


def test_horizon_shortens_episodes():
    w = PPOLearner(PPOConfig(hidden=8)).flat_weights()
    buf = compiled_buffer(allocate_trajectory(3, 100))
    pol = make_policy(w, 8, Workflow.parse("balanced"), 1.0)
    run_episodes(make_backend("sim", "B_lineAgent"), pol, range(3), 0, buf, horizon=30)
    assert list(buf.arrays["lengths"]) == [30, 30, 30]
    assert buf.arrays["dones"][:, 29].all() and not buf.arrays["dones"][:, :29].any()
    # the first 30 steps of a 100-step episode are the 30-step episode
    full = compiled_buffer(allocate_trajectory(3, 100))
    run_episodes(make_backend("sim", "B_lineAgent"), pol, range(3), 0, full)
    np.testing.assert_array_equal(full.arrays["actions"][:, :30], buf.arrays["actions"][:, :30])


@pytest.mark.cyborg
def test_horizon_on_cyborg():
    w = PPOLearner(PPOConfig(hidden=8)).flat_weights()
    buf = compiled_buffer(allocate_trajectory(2, 100))
    pol = make_policy(w, 8, Workflow.parse("balanced"), 1.0)
    stats = run_episodes(make_backend("cyborg", "RedMeanderAgent"), pol, range(2), 0, buf,
                         horizon=30)
    assert list(buf.arrays["lengths"]) == [30, 30] and len(stats) == 2


def test_per_red_checkpoints(tmp_path, capsys):
    _checkpoint(tmp_path / "b.pt", seed=1)
    _checkpoint(tmp_path / "m.pt", seed=2, memory=False, mask=False)
    rc = main(["eval", "--cage2", "--checkpoint-b-line", str(tmp_path / "b.pt"),
               "--checkpoint-meander", str(tmp_path / "m.pt"), "--episodes", "4", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    by_red = {r["red_agent"]: r["checkpoint"] for r in res["settings"]}
    assert by_red["B_lineAgent"].endswith("b.pt") and by_red["RedMeanderAgent"].endswith("m.pt")
    assert by_red["SleepAgent"].endswith("b.pt")


def _err(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err


@pytest.mark.parametrize("case", ["missing", "corrupt", "other_features", "wrong_weights",
                                  "unknown_pretrained", "no_checkpoint"])
def test_bad_checkpoint_one_line_exit_2(tmp_path, capsys, case):
    path = tmp_path / "x.pt"
    if case == "corrupt":
        path.write_bytes(b"\x80not a checkpoint")
    elif case == "other_features":
        learner = PPOLearner(PPOConfig(hidden=8))
        save_checkpoint(path, {**learner.state(), "hidden": 8, "workflow": "balanced",
                               "net": {"hidden": 8, "memory": False, "mask": False,
                                       "graph_features": True}})
    elif case == "wrong_weights":   # says memory, holds an observation-only network
        learner = PPOLearner(PPOConfig(hidden=8))
        save_checkpoint(path, {**learner.state(), "hidden": 8, "workflow": "balanced",
                               "net": {"hidden": 8, "memory": True, "mask": True}})
    arg = {"unknown_pretrained": ["--checkpoint", "pretrained:nope"],
           "no_checkpoint": []}.get(case, ["--checkpoint", str(path)])
    for extra in (["--cage2", "--episodes", "2"], ["--episodes", "2"]):
        rc, err = _err(capsys, ["eval", *extra, *arg])
        assert rc == 2 and len(err) == 1 and err[0].startswith("wfrl: error:"), (case, err)


def test_training_keeps_the_best_evaluated_policy(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["train", "--workflow", "critical_first", "--total-episodes", "60",
               "--episodes-per-update", "20", "--memory", "--mask", "--hidden", "16",
               "--eval-every", "20", "--eval-episodes", "10", "--lr-final", "0.1",
               "--out", str(out)])
    assert rc == 0
    rows = read_csv(out / "eval_log.csv")
    assert [int(r["Episodes"]) for r in rows] == [20, 40, 60]
    rewards = [float(r["Reward"]) for r in rows]
    best = [r for r in rows if r["Best"] == "1"][-1]
    ck = torch.load(out / "best.pt", weights_only=True)
    assert ck["selection"]["Episodes"] == int(best["Episodes"])
    assert ck["net"] == {"hidden": 16, "memory": True, "mask": True, "truth_input": False,
                         "belief": 0, "belief_reds": 7}
    feasible = [float(r["Reward"]) for r in rows if float(r["Compliance"]) >= 0.95]
    assert float(best["Reward"]) == max(feasible or rewards)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_eval"]["Episodes"] == int(best["Episodes"])
    capsys.readouterr()
    assert main(["eval", "--cage2", "--checkpoint", str(out / "best.pt"), "--episodes", "3"]) == 0


@pytest.mark.parametrize("how", [["--checkpoint", "pretrained:critical_first"],
                                 ["--agent", "tests/agents/cage2_agents.py:restorer"]])
def test_sigterm_leaves_no_evaluation_worker(how):
    """SIGTERM mid-evaluation on 2 workers: exit 143 with its one line, no worker left behind
    (the checkpoint path's process pool was orphaned before python -m wfrl turned SIGTERM into
    an exit that unwinds)."""
    import signal
    import subprocess
    import time
    from pathlib import Path

    from _helpers import live_session_processes, popen_wfrl
    root = Path(__file__).resolve().parents[1]
    proc = popen_wfrl("eval", "--cage2", "--backend", "sim", *how, "--n-workers", "2",
                      "--episodes", "3000", "--json", cwd=root, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(live_session_processes(proc.pid, wait=0)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)              # the command and its two workers are up
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, err[-1000:]
    assert err.strip().splitlines()[-1] == "wfrl: terminated (signal 15)", err[-1000:]
    assert "Traceback" not in err
    assert live_session_processes(proc.pid) == []
