"""--ppo-preset: the command line starts from the recipe, `original` gives back the original
system's learner exactly, and flags given override either."""
import json

import pytest

from wfrl.cli import main
from wfrl.config import PPO_PRESETS, TrainConfig
from wfrl.ppo.learner import PPOConfig
from wfrl.protocol import TIMING_COLUMNS
from wfrl.runlog import read_csv
from wfrl.train import train

ARGS = ["train", "--workflow", "critical_first", "--total-episodes", "40", "--hidden", "16",
        "--seed", "3"]


def _log(path):
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS}
            for r in read_csv(path / "training_log.csv")]


@pytest.mark.slow
def test_original_preset_reproduces_the_original_learner(tmp_path, capsys):
    assert main([*ARGS, "--ppo-preset", "original", "--out", str(tmp_path / "cli")]) == 0
    cfg = json.loads((tmp_path / "cli" / "experiment_config.json").read_text())
    assert cfg["episodes_per_update"] == 10 and cfg["eval_every"] == 0
    assert cfg["overlap"] is False              # the original trainer: collect, update, collect
    assert not cfg["ppo"]["memory"] and not cfg["ppo"]["mask"]
    assert cfg["ppo"]["lr_final"] == cfg["ppo"]["entropy_final"] == 1.0
    assert cfg["ppo"]["first_fix_bonus"] is True   # the original alignment rule
    # the same run through the dataclass defaults, i.e. the learner as it was before presets
    # (and before the alignment rule lost its first-fix bonus)
    train(TrainConfig(workflow="critical_first", total_episodes=40, seed=3, overlap=False,
                      out=str(tmp_path / "api"), ppo=PPOConfig(hidden=16, first_fix_bonus=True)),
          progress=lambda line: None)
    assert _log(tmp_path / "cli") == _log(tmp_path / "api")
    assert not (tmp_path / "cli" / "eval_log.csv").exists()


def test_recipe_is_the_default_and_flags_override_it(tmp_path, capsys):
    assert main([*ARGS, "--episodes-per-update", "20", "--no-mask", "--eval-every", "40",
                 "--eval-episodes", "5", "--out", str(tmp_path / "r")]) == 0
    cfg = json.loads((tmp_path / "r" / "experiment_config.json").read_text())
    recipe = PPO_PRESETS["recipe"]["ppo"]
    assert cfg["episodes_per_update"] == 20 and cfg["eval_every"] == 40
    assert cfg["ppo"]["memory"] == recipe["memory"] is True
    assert cfg["ppo"]["mask"] is False
    assert cfg["ppo"]["lr_final"] == recipe["lr_final"]
    assert [int(r["Update"]) for r in read_csv(tmp_path / "r" / "training_log.csv")] == [1, 2]
    assert len(read_csv(tmp_path / "r" / "eval_log.csv")) == 1


@pytest.mark.parametrize("argv", [["--ppo-preset", "fast"], ["--lr-final", "-1"],
                                  ["--eval-every", "-5"]])
def test_bad_preset_flags_one_line(tmp_path, capsys, argv):
    assert main([*ARGS, *argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("wfrl: error:")


def test_search_rejects_single_workflow_flags(capsys):
    assert main(["train", "--eval-every", "100", "--total-episodes", "10"]) == 2
    assert "--workflow" in capsys.readouterr().err
