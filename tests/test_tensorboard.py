"""`wfrl train --tensorboard DIR`: the training curves as TensorBoard event files, read back with
TensorBoard's own reader — every key, one point per update at the global step, the values of
training_log.csv — for a single-workflow run and a search; without the package, one line."""
import csv
import sys

import pytest

from wfrl.cli import main
from wfrl.runlog import TB_STATS, TB_TAGS

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="the [tensorboard] extra (scripts/setup.sh installs it)")


def _curves(logdir):
    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_single_run_curves(tmp_path, capsys):
    run, tb = tmp_path / "run", tmp_path / "tb"
    assert main(["train", "--workflow", "critical_first", "--total-episodes", "600",
                 "--episodes-per-update", "200", "--out", str(run), "--tensorboard",
                 str(tb)]) == 0
    assert "ETA" in capsys.readouterr().err
    curves = _curves(tb)
    assert set(curves) == {*TB_TAGS.values(), *TB_STATS.values(), "charts/SPS"}
    rows = list(csv.DictReader(open(run / "training_log.csv")))
    assert len(rows) == 3
    for col, tag in TB_TAGS.items():
        assert [s for s, _ in curves[tag]] == [int(r["Episodes"]) * 100 for r in rows]
        assert [v for _, v in curves[tag]] == pytest.approx([float(r[col]) for r in rows],
                                                            rel=1e-5, abs=1e-6)
    lr = [v for _, v in curves["charts/learning_rate"]]
    assert all(0 < x < 1 for x in lr)
    assert all(-10 < v <= 1 for _, v in curves["losses/explained_variance"])
    assert all(0 <= v <= 1 for _, v in curves["losses/clipfrac"])


def test_search_curves_count_visits(tmp_path, capsys):
    tb = tmp_path / "tb"
    assert main(["train", "--base", "pretrain", "--pretrain-episodes", "400",
                 "--total-episodes", "1200", "--episodes-per-update", "200", "--min-episodes",
                 "200", "--max-episodes", "400", "--out", str(tmp_path / "s"),
                 "--tensorboard", str(tb)]) == 0
    capsys.readouterr()
    curves = _curves(tb)
    assert "search/visits" in curves and "charts/episodic_return" in curves
    visits = [v for _, v in curves["search/visits"]]
    assert visits[0] == 0 and visits == sorted(visits) and visits[-1] >= 1
    steps = [s for s, _ in curves["charts/episodic_return"]]
    assert steps == sorted(steps) and steps[-1] == 1200 * 100


def test_missing_tensorboard_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    assert main(["train", "--workflow", "critical_first", "--total-episodes", "10",
                 "--out", str(tmp_path / "r"), "--tensorboard", str(tmp_path / "tb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'wfrl[tensorboard]'" in err[0]
    assert not (tmp_path / "r" / "training_log.csv").exists()
