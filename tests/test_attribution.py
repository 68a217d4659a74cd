"""`wfrl eval --cage2 --attribute`: every step's reward split by host and cause
(wfrl.evaluation.attribution). The split of one step follows CAGE2's scoring; over real episodes on the
simulator and on CybORG nothing is left unexplained ("other" is 0), the columns add up to each
episode's return, and asking for the split does not change a single score."""
import json
from pathlib import Path

import numpy as np
import pytest

from wfrl.cli import main
from wfrl.envs.actions import N_HOSTS
from wfrl.evaluation.attribution import (
    IMPACT,
    N_COLUMNS,
    OTHER,
    PRIVILEGED_COST,
    CostRecorder,
    format_costs,
    step_costs,
    summarise,
)
from wfrl.evaluation.cage2 import cage2_evaluate, format_table
from wfrl.evaluation.planner import PlanBudget

AGENTS = Path(__file__).resolve().parent / "agents" / "cage2_agents.py"
SHIPPED = "pretrained:critical_first"


def _split(action, reward, access):
    out = np.zeros(N_COLUMNS)
    step_costs(action, reward, np.asarray(access, np.uint8), out)
    return out


def test_one_step_split_follows_the_scoring_rule():
    access = np.zeros(13, np.uint8)
    access[[1, 9, 8]] = 2            # Enterprise0, User1, User0 (the foothold: free) privileged
    access[10] = 1                   # user-level access costs nothing
    out = _split(132 + 11, -2.1, access)   # Restore User3 on the same step
    assert out[1] == -1.0 and out[9] == pytest.approx(-0.1) and out[8] == 0 and out[10] == 0
    assert out[N_HOSTS + 11] == -1.0 and out[IMPACT] == 0 and out[OTHER] == 0
    assert out.sum() == pytest.approx(-2.1)
    # Op_Server0 privileged and its service stopped: -1 privileged, -10 impact
    access[:] = 0
    access[7] = 2
    out = _split(1, -11.0, access)
    assert out[7] == -1.0 and out[IMPACT] == -10.0 and out[OTHER] == 0
    # what the rule does not explain is kept, not hidden
    out = _split(0, -0.5, np.zeros(13, np.uint8))
    assert out[OTHER] == pytest.approx(-0.5) and out[IMPACT] == 0
    assert PRIVILEGED_COST.shape == (13,)


def test_summary_adds_up_and_names_every_host():
    rec = CostRecorder()
    access = np.zeros(13, np.uint8)
    access[2] = 2
    for _ep in range(3):
        for t in range(4):
            rec.step(132 + 2 if t == 0 else 0, -2.0 if t == 0 else -1.0, access)
        rec.end_episode()
    s = summarise(rec.costs)
    assert rec.costs.shape == (3, N_COLUMNS) and s["n"] == 3
    assert s["by_host"]["Enterprise1"]["privileged"]["mean"] == -4.0
    assert s["by_host"]["Enterprise1"]["restore"]["mean"] == -1.0
    assert s["by_host"]["Enterprise1"]["total"]["mean"] == -5.0
    assert s["total"]["mean"] == -5.0 and s["total"]["se"] == 0
    assert "privileged" not in s["by_host"]["User0"]      # red's foothold costs nothing
    text = format_costs({"a": s, "b": s})
    assert "Enterprise1" in text and text.count("-5.00 ± 0.00") == 4   # host row and total


def _check_split(res):
    for r in res["settings"]:
        c = r["cost"]
        assert c["n"] == r["n"]
        assert c["by_cause"]["other"]["mean"] == 0, (r["red_agent"], r["steps"])
        assert c["total"]["mean"] == pytest.approx(r["mean"], abs=1e-3)
        parts = sum(c["by_cause"][k]["mean"] for k in ("privileged", "restore", "impact"))
        assert parts == pytest.approx(r["mean"], abs=2e-3)


@pytest.mark.parametrize("backend", ["sim", "sim:leaderboard"])
def test_split_explains_every_return_and_leaves_scores_unchanged(backend):
    kw = dict(backend=backend, episodes=40, reds=("B_lineAgent", "RedMeanderAgent"),
              lengths=(30, 100))
    plain = cage2_evaluate({"all": SHIPPED}, **kw)
    split = cage2_evaluate({"all": SHIPPED}, attribute=True, **kw)
    assert all("cost" not in r for r in plain["settings"])
    for a, b in zip(plain["settings"], split["settings"]):
        assert {k: v for k, v in b.items() if k != "cost"} == a
    _check_split(split)
    b100 = split["settings"][1]["cost"]
    assert b100["by_cause"]["privileged"]["mean"] < 0 and b100["by_cause"]["restore"]["mean"] < 0
    assert "where the cost comes from" in format_table(split)


def test_impact_is_charged_to_op_server0():
    res = cage2_evaluate(agent=f"{AGENTS}:sleeper", episodes=3, reds=("B_lineAgent",),
                         lengths=(100,), attribute=True, n_workers=1)
    c = res["settings"][0]["cost"]
    assert c["by_host"]["Op_Server0"]["impact"]["mean"] < -100     # a blue that never acts
    assert c["by_cause"]["impact"]["mean"] == c["by_host"]["Op_Server0"]["impact"]["mean"]
    _check_split(res)


@pytest.mark.cyborg
@pytest.mark.parametrize("backend", ["cyborg", "cyborg:leaderboard"])
def test_split_explains_every_return_on_cyborg(backend):
    res = cage2_evaluate({"all": SHIPPED}, backend=backend, episodes=1,
                         reds=("B_lineAgent", "RedMeanderAgent"), lengths=(30,), n_workers=1,
                         attribute=True)
    _check_split(res)
    agent = cage2_evaluate(agent=f"{AGENTS}:sleeper", backend=backend, episodes=1,
                           reds=("B_lineAgent",), lengths=(100,), attribute=True, n_workers=1)
    _check_split(agent)
    assert agent["settings"][0]["cost"]["by_cause"]["impact"]["mean"] < 0


def test_cli_flag(capsys):
    rc = main(["eval", "--cage2", "--checkpoint", SHIPPED, "--episodes", "3", "--attribute",
               "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0
    res = json.loads(out)
    assert all("cost" in r for r in res["settings"])
    _check_split(res)


def test_split_of_planned_episodes():
    res = cage2_evaluate({"all": SHIPPED}, episodes=2, reds=("B_lineAgent",), lengths=(30,),
                         attribute=True, plan=(PlanBudget(particles=50, rollouts=4, depth=3),
                                               "mixture"))
    assert res["policy"] == "plan" and "decision_ms" in res["settings"][0]
    _check_split(res)
