"""`wfrl eval --cage2 --agent MODULE:FACTORY`: any Python agent with CAGE2's evaluation interface,
defined outside wfrl (tests/agents/cage2_agents.py), scored on every backend exactly as the same
policy scored as a checkpoint; a bad agent ends in one line, exit 2, with its finished settings
kept; the reference columns belong to the backend's CybORG code."""
import json
from pathlib import Path

import numpy as np
import pytest

from wfrl.cli import main
from wfrl.errors import UserError
from wfrl.evaluation.cage2 import cage2_evaluate, format_table

AGENTS = Path(__file__).resolve().parent / "agents" / "cage2_agents.py"
SHIPPED = "pretrained:critical_first"
SHIPPED_WF = "op_server,enterprise,defender,op_host,user"   # its workflow


def _cli(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err.strip().splitlines()


def _scores(res):
    return [(r["red_agent"], r["steps"], r["n"], r["mean"], r["sd"], r["compliance"],
             r["fixes_per_episode"]) for r in res["settings"]]


@pytest.mark.parametrize("backend", ["sim", "sim:leaderboard"])
def test_agent_scores_equal_the_checkpoint(backend, capsys):
    common = ["eval", "--cage2", "--backend", backend, "--episodes", "6", "--json"]
    rc, out, _ = _cli(capsys, [*common, "--checkpoint", SHIPPED])
    assert rc == 0
    ck = json.loads(out)
    rc, out, _ = _cli(capsys, [*common, "--agent", f"{AGENTS}:critical_first",
                               "--workflow", SHIPPED_WF])
    assert rc == 0
    ag = json.loads(out)
    assert ag["complete"] and ag["policy"] == "agent" and len(ag["settings"]) == 9
    assert _scores(ag) == _scores(ck)
    assert ag["total"] == ck["total"]
    assert any(r["mean"] < 0 for r in ag["settings"])     # the episodes were really played


@pytest.mark.cyborg
@pytest.mark.parametrize("backend", ["cyborg", "cyborg:leaderboard"])
def test_agent_scores_equal_the_checkpoint_on_cyborg(backend):
    """The same on CybORG, two settings of one episode each (CybORG is slow; the command is the
    function called here)."""
    kw = dict(backend=backend, episodes=1, reds=("B_lineAgent", "RedMeanderAgent"),
              lengths=(30,), n_workers=1)
    ck = cage2_evaluate({"all": SHIPPED}, **kw)
    ag = cage2_evaluate(agent=f"{AGENTS}:critical_first", workflow=SHIPPED_WF, **kw)
    assert _scores(ag) == _scores(ck) and ag["complete"]
    assert any(r["mean"] < 0 for r in ag["settings"])


def test_workers_and_module_form_give_the_same_scores(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(AGENTS.parent.parent))
    monkeypatch.chdir(tmp_path)
    one = cage2_evaluate(agent="agents.cage2_agents:restorer", episodes=5, seed=3, n_workers=1)
    two = cage2_evaluate(agent=f"{AGENTS}:restorer", episodes=5, seed=3, n_workers=2)
    assert _scores(one) == _scores(two)
    other = cage2_evaluate(agent=f"{AGENTS}:restorer", episodes=5, seed=4, n_workers=1)
    assert _scores(other) != _scores(one)
    # no workflow given: fixes counted, compliance not measured
    assert all(r["compliance"] is None for r in one["settings"])
    assert one["settings"][2]["fixes_per_episode"] > 0


def test_reference_columns_belong_to_the_backends_code():
    installed = cage2_evaluate(agent=f"{AGENTS}:restorer", episodes=2, reds=("B_lineAgent",),
                               lengths=(30, 100))
    board = cage2_evaluate(agent=f"{AGENTS}:restorer", episodes=2, backend="sim:leaderboard",
                           reds=("B_lineAgent",), lengths=(30, 100))
    assert [r["winner"] for r in installed["settings"]] == [None, -36.84]
    assert [r["winner"] for r in board["settings"]] == [-3.47, -13.76]
    assert [r["best_entry"] for r in board["settings"]] == [-3.47, -11.39]
    t_inst, t_board = format_table(installed), format_table(board)
    assert "installed CybORG code" in t_inst and "re-run" in t_inst and "-13.76" not in t_inst
    assert "leaderboard's CybORG code" in t_board and "-13.76" in t_board
    assert "leaderboard winner: -54.57" not in t_board     # (a total over 2 of the 9 settings)


BAD = {  # factory: (extra flags, what the line must say)
    "crashing": ([], "crashed on B_lineAgent, 30 steps on sim (episode 3000000000, step 0): "
                     "ValueError: the agent's own bug"),
    "out_of_range": ([], "returned action 145 on B_lineAgent, 30 steps on sim"),
    "not_int": ([], "returned 3.0 (float) on B_lineAgent, 30 steps on sim"),
    "hanging": (["--action-timeout", "1"], "hung: no action within 1 s (--action-timeout) on "
                                           "B_lineAgent, 30 steps on sim"),
    "slow": (["--episode-timeout", "1"], "hung: the episode took over 1 s (--episode-timeout) "
                                         "on B_lineAgent, 30 steps on sim"),
    "exiting": ([], "its process died on B_lineAgent, 30 steps on sim (exit code 3)"),
    "broken_factory": ([], "crashed building the agent: RuntimeError: cannot load my model"),
    "no_get_action": ([], "NoGetAction has no get_action"),
    "missing": ([], "has no callable missing"),
}


@pytest.mark.parametrize("factory", list(BAD))
def test_bad_agent_one_line_exit_2(factory, capsys):
    extra, says = BAD[factory]
    rc, out, err = _cli(capsys, ["eval", "--cage2", "--agent", f"{AGENTS}:{factory}",
                                 "--episodes", "2", *extra])
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"wfrl: error: agent {AGENTS}:{factory}") and says in err[0], err[0]
    assert out == ""                                   # nothing finished, nothing printed


@pytest.mark.parametrize("factory,extra", [("crashing", []), ("hanging", ["--action-timeout", "1"]),
                                           ("exiting", [])])
def test_finished_settings_are_kept(factory, extra, tmp_path, capsys, monkeypatch):
    # 2 episodes of 30 steps and 2 of 50 pass (160 actions), then the agent fails in the third
    monkeypatch.setenv("WFRL_TEST_FAIL_AFTER", "170")
    out_file = tmp_path / "partial.json"
    rc, out, err = _cli(capsys, ["eval", "--cage2", "--agent", f"{AGENTS}:{factory}",
                                 "--episodes", "2", "--out", str(out_file), "--json", *extra])
    assert rc == 2 and len(err) == 1
    assert "B_lineAgent, 100 steps on sim" in err[0] and "(2 finished settings kept)" in err[0]
    saved = json.loads(out_file.read_text())
    assert saved == json.loads(out) and saved["complete"] is False
    assert [(r["red_agent"], r["steps"], r["n"]) for r in saved["settings"]] == \
        [("B_lineAgent", 30, 2), ("B_lineAgent", 50, 2)]
    # the kept rows are the scores of those settings: the agent slept through them
    monkeypatch.setenv("WFRL_TEST_FAIL_AFTER", "100000")
    full = cage2_evaluate(agent=f"{AGENTS}:{factory}", episodes=2, reds=("B_lineAgent",),
                          lengths=(30, 50))
    assert _scores(full) == _scores(saved)


def test_json_stays_json_when_the_agent_prints(capfd):
    assert main(["eval", "--cage2", "--agent", f"{AGENTS}:restorer", "--episodes", "1",
                 "--json"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["complete"] and "a line an agent prints" in err


def test_agent_flag_errors(capsys):
    for argv, says in (
            (["--agent", "no_colon"], "--agent takes MODULE:FACTORY"),
            (["--agent", "no_such_module_xyz:f"], "importing no_such_module_xyz failed"),
            (["--agent", f"{AGENTS}:restorer", "--checkpoint", SHIPPED], "exclude each other"),
            (["--agent", f"{AGENTS}:restorer", "--sampling"], "--sampling applies to checkpoints"),
            (["--agent", f"{AGENTS}:restorer", "--action-timeout", "0"], "must be positive")):
        rc, out, err = _cli(capsys, ["eval", "--cage2", *argv])
        assert rc == 2 and len(err) == 1 and says in err[0], (argv, err)


class _ClearedBetweenReads:
    """A worker's clock whose get_action ends (ACTION_T back to 0) right after ACTION_T is first
    read: what the watchdog meets when the worker writes while it reads."""

    def __init__(self, values):
        self.values = list(values)

    def __getitem__(self, i):
        seen = list(self.values)
        if i == 0 or isinstance(i, slice):
            self.values[0] = 0.0
        return seen[i]


def test_watchdog_reads_the_clock_once():
    """A get_action that ends between two reads of the clock is not 'hung' (read twice, its
    start looked `now` seconds old: the one-process fast tier's false 'no action within 30 s')."""
    from wfrl.evaluation.agents import overdue
    now = 5000.0
    running = [now - 0.01, now - 1.0, 2, 3002000013, 41]
    assert overdue(_ClearedBetweenReads(running), now, 30, 600, lambda k: f"setting {k}") is None
    # and a clock that is really late is still called so, with where it stands
    late = overdue(_ClearedBetweenReads([now - 31, now - 32, 2, 3002000013, 41]), now, 30, 600,
                   lambda k: f"setting {k}")
    assert late == ("no action within 30 s (--action-timeout) on setting 2 (episode 3002000013, "
                    "step 41)")
    assert overdue([0.0, now - 601, 0, 0, 0], now, 30, 600) == (
        "the episode took over 600 s (--episode-timeout) while being built")


@pytest.mark.parametrize("factory,stop,says", [
    ("stopping", "worker", None), ("stopping", "group", None),
    ("hanging", None, "hung: no action within 0.5 s (--action-timeout)"),
    ("slow", None, "hung: the episode took over 1 s (--episode-timeout)")])
def test_the_watchdog_counts_only_time_the_agent_could_run(factory, stop, says):
    """An agent stopped by SIGSTOP for 1.5 s in its 5th get_action, longer than both limits, then
    continued, finishes every setting: stopped alone (the watchdog sees its worker stopped) or
    with the whole evaluation, as by Ctrl-Z and fg (the watchdog was stopped too; run here in a
    session of its own). An agent that sleeps past a limit while it could run is still ended."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "WFRL_TEST_STOP_FOR": "1.5", **({"WFRL_TEST_STOP": stop} if stop else {})}
    res = subprocess.run([sys.executable, "-m", "wfrl", "eval", "--cage2", "--agent",
                          f"{AGENTS}:{factory}", "--episodes", "1", "--action-timeout", "0.5",
                          "--episode-timeout", "1", "--json"],
                         capture_output=True, text=True, timeout=120, env=env,
                         start_new_session=True)
    if says is None:
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["complete"]
    else:
        err = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(err) == 1 and says in err[0], res.stderr


def test_a_factory_with_a_workflow_parameter_gets_the_evaluations_workflow():
    """wfrl.evaluation.agents:follower follows --workflow: each of its fixes is a Restore of the
    highest-priority host its observation shows compromised (User0 never), decoys or Sleep
    otherwise; two orders play differently on the same episodes."""
    import numpy as np

    from wfrl.envs import make_backend
    from wfrl.evaluation.agents import make_agent, play_episodes
    from wfrl.workflow import HOST_TYPE, USER0, Workflow
    played, compliance = {}, {}
    for wf in ("critical_first", "reverse"):
        agent = make_agent("wfrl.evaluation.agents:follower", wf)
        assert agent.workflow == Workflow.parse(wf)
        rank = np.array(Workflow.parse(wf).rank)[HOST_TYPE]
        backend = make_backend("sim", "B_lineAgent", seed=5)
        _, fixes, _, comp = play_episodes("follower", agent, backend, "sim", "B_lineAgent", 100,
                                          range(4), 5, wf)
        assert fixes.sum() > 0
        compliance[wf] = comp.mean()
        played[wf] = []
        for seed in (11, 12, 13):
            agent.end_episode()
            backend.seed(seed)
            obs, _ = backend.reset()
            for t in range(100):
                a = agent.get_action(obs, 145)
                flagged = [h for h in range(13)
                           if h != USER0 and (obs[4 * h + 2] or obs[4 * h + 3])]
                if flagged:
                    assert a == 132 + min(flagged, key=lambda h: (rank[h], h)), (wf, t, a)
                else:
                    assert not 132 <= a < 145 and not 15 <= a < 28
                played[wf].append(a)
                obs, _, _ = backend.step(a)
    assert played["critical_first"] != played["reverse"]
    assert compliance["critical_first"] > 0.95
    # a factory without the parameter is built as before
    assert type(make_agent(f"{AGENTS}:restorer", "reverse")).__name__ != "WorkflowFollower"


def _official_loop(agent, red, episodes=2, steps=30):
    """CAGE2's evaluation.py loop for one red, its calls as it makes them: the mean return. (The
    installed CybORG's ChallengeWrapper returns (observation, info) from reset and five values
    from step; the challenge's code returned the observation and four: the loop takes the
    observation and reward from either.)"""
    from wfrl.envs.cyborg import challenge_env
    wrapped = challenge_env(red)

    def first(out):
        return out[0] if isinstance(out, tuple) else out
    observation = first(wrapped.reset())
    action_space = wrapped.get_action_space("Blue")
    totals = []
    for _ in range(episodes):
        r = []
        for _ in range(steps):
            action = agent.get_action(observation, action_space)
            assert 0 <= action < 145
            out = wrapped.step(action)
            observation = out[0]
            r.append(out[1])
        if hasattr(agent, "end_episode"):
            agent.end_episode()
        totals.append(sum(r))
        observation = first(wrapped.reset())
    return float(np.mean(totals))


@pytest.mark.cyborg
def test_cage2_evaluation_loop_runs_load_agent():
    """wfrl.load_agent in CAGE2's own evaluation loop on the real CybORG (ChallengeWrapper's
    reset, get_action_space and step; the agent's get_action and end_episode): its actions are
    ints, and it defends (far better than an agent that never acts, on B_line-30)."""
    import wfrl
    from wfrl.evaluation.agents import load_factory
    sleeper = load_factory(f"{AGENTS}:sleeper")
    agent = wfrl.load_agent(SHIPPED)
    assert isinstance(agent.get_action(np.zeros(52, np.int64), 145), int)
    assert _official_loop(agent, "SleepAgent") == 0.0
    assert _official_loop(agent, "B_lineAgent") > _official_loop(sleeper(), "B_lineAgent") + 5
    with pytest.raises(UserError, match="workflow"):
        wfrl.load_agent("pretrained:any_workflow")
