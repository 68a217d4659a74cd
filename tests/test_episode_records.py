"""`wfrl eval --cage2 --episodes-out FILE` (one JSON line per episode) and `wfrl compare A B`
(paired differences of two policies on the same episodes): the lines' means are the table's, on
checkpoints and agents, on the simulator and CybORG; each finished setting's lines are on disk
before the next starts; bad or unpairable files end in one line."""
import json
from pathlib import Path

import numpy as np
import pytest

from wfrl.cli import main
from wfrl.evaluation.cage2 import cage2_evaluate, compare_episodes
from wfrl.rng import episode_seeds

AGENTS = Path(__file__).resolve().parent / "agents" / "cage2_agents.py"
SHIPPED = "pretrained:critical_first"


def _lines(path):
    return [json.loads(x) for x in open(path)]


def _check_means(res, lines, steps_of_actions=True):
    assert len(lines) == sum(r["n"] for r in res["settings"])
    for r in res["settings"]:
        mine = [x for x in lines if (x["red_agent"], x["steps"]) == (r["red_agent"], r["steps"])]
        assert len(mine) == r["n"]
        assert np.mean([x["return"] for x in mine]) == pytest.approx(r["mean"], abs=1e-4)
        assert np.mean([x["fixes"] for x in mine]) == pytest.approx(r["fixes_per_episode"],
                                                                     abs=1e-3)
        eps = np.array([x["episode"] for x in mine])
        assert list(eps) == sorted(eps) and len(set(eps)) == len(eps)
        assert [x["env_seed"] for x in mine] == [int(s) for s in episode_seeds(res["seed"],
                                                                                eps)[0]]
        if steps_of_actions:
            assert all(len(x["actions"]) == r["steps"] for x in mine)
        if r["compliance"] is not None:
            fixes = sum(x["fixes"] for x in mine)
            assert sum(x["compliant_fixes"] for x in mine) / fixes == pytest.approx(
                r["compliance"], abs=1e-4)


@pytest.mark.parametrize("who", ["checkpoint", "agent"])
def test_episode_lines_hold_the_tables_means(tmp_path, capsys, who):
    out = tmp_path / "episodes.jsonl"
    flags = (["--checkpoint", SHIPPED] if who == "checkpoint" else
             ["--agent", "wfrl.evaluation.agents:follower", "--workflow", "critical_first",
              "--n-workers", "2"])
    rc = main(["eval", "--cage2", "--episodes", "7", "--json", "--episodes-out", str(out),
               *flags])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    lines = _lines(out)
    _check_means(res, lines)
    assert {x["policy"] for x in lines} == {SHIPPED if who == "checkpoint"
                                            else "wfrl.evaluation.agents:follower"}
    # the same policy replayed gives the same actions, episode by episode
    again = tmp_path / "again.jsonl"
    assert main(["eval", "--cage2", "--episodes", "7", "--json", "--episodes-out", str(again),
                 *flags]) == 0
    capsys.readouterr()
    # (settings appear in the order they finish: with 2 workers, not always the protocol's)
    def key(x):
        return x["red_agent"], x["steps"], x["episode"]
    assert [x["actions"] for x in sorted(_lines(again), key=key)] == \
        [x["actions"] for x in sorted(lines, key=key)]


@pytest.mark.cyborg
def test_episode_lines_on_cyborg(tmp_path):
    out = tmp_path / "e.jsonl"
    res = cage2_evaluate({"all": SHIPPED}, backend="cyborg", episodes=2, reds=("B_lineAgent",),
                         lengths=(30,), n_workers=1, episodes_out=out)
    _check_means(res, _lines(out))


def test_each_setting_is_on_disk_when_it_finishes(tmp_path):
    out = tmp_path / "e.jsonl"
    seen = []
    cage2_evaluate({"all": SHIPPED}, episodes=3, lengths=(30,), episodes_out=out,
                   on_setting=lambda partial: seen.append((len(partial["settings"]),
                                                           len(_lines(out)))))
    assert seen == [(1, 3), (2, 6), (3, 9)]


def test_compare_pairs_the_same_episodes(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ra = cage2_evaluate({"all": SHIPPED}, episodes=30, episodes_out=a)
    rb = cage2_evaluate(agent="wfrl.evaluation.agents:follower", workflow="critical_first", episodes=30,
                        episodes_out=b)
    res = compare_episodes(a, b)
    assert [(r["red_agent"], r["steps"], r["n"]) for r in res["settings"]] == \
        [(r["red_agent"], r["steps"], 30) for r in ra["settings"]]
    for r, x, y in zip(res["settings"], ra["settings"], rb["settings"]):
        assert r["diff"] == pytest.approx(x["mean"] - y["mean"], abs=2e-4)
        assert r["unpaired_se"] == pytest.approx(np.hypot(x["se"], y["se"]), abs=2e-4)
    assert res["total_diff"] == pytest.approx(ra["total"] - rb["total"], abs=2e-3)
    # a policy against itself: every difference exactly zero
    same = compare_episodes(a, a)
    assert all(r["diff"] == 0 and r["diff_se"] == 0 for r in same["settings"])
    assert main(["compare", str(a), str(b)]) == 0
    assert "total of the 9 differences" in capsys.readouterr().out


def test_compare_refuses_what_it_cannot_pair(tmp_path, capsys):
    a, b, c = (tmp_path / f"{n}.jsonl" for n in "abc")
    cage2_evaluate({"all": SHIPPED}, episodes=2, lengths=(30,), episodes_out=a)
    cage2_evaluate({"all": SHIPPED}, episodes=2, lengths=(30,), seed=154, episodes_out=b)
    c.write_text(a.read_text().splitlines()[0] + "\n{not json\n")
    d, e = tmp_path / "d.jsonl", tmp_path / "e.jsonl.gz"
    first = json.loads(a.read_text().splitlines()[0])
    d.write_text(json.dumps({k: v for k, v in first.items() if k != "backend"}) + "\n")
    e.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    cases = [([str(a), str(b)], "played on different env seeds"),
             ([str(a), str(c)], "c.jsonl, line 2: not an episode record"),
             ([str(a), str(d)], "d.jsonl, line 1: not an episode record"),
             ([str(a), str(e)], "not a text file"),
             ([str(a), str(tmp_path / "none.jsonl")], "cannot read it")]
    for argv, says in cases:
        assert main(["compare", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err


def test_episodes_out_that_cannot_be_written_is_one_line(tmp_path, capsys):
    (tmp_path / "adir").mkdir()
    rc = main(["eval", "--cage2", "--checkpoint", SHIPPED, "--episodes", "1",
               "--episodes-out", str(tmp_path / "adir")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "adir" in err[0], err
