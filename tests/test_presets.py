"""--ppo-preset: the command line starts from the recipe, `original` gives back the original
system's learner exactly, and flags given override either."""
import json

import pytest

from wfrl.cli import main
from wfrl.config.run import PPO_PRESETS, PPOConfig, TrainConfig
from wfrl.runlog import read_csv
from wfrl.training.run import train
from wfrl.training.steps import TIMING_COLUMNS

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
    train(TrainConfig(workflow="critical_first", total_episodes=40, seed=3, overlap=False,
                      out=str(tmp_path / "api"), ppo=PPOConfig(hidden=16)),
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


@pytest.mark.parametrize("overlap", [False, True])
def test_first_fix_bonus_reaches_the_learner_and_the_log(tmp_path, overlap):
    """--no-first-fix-bonus changes what the learner trains on (the first update's losses) and
    the alignment the log reports (λ/2 less per episode with a fix), not the episodes played."""
    rows = {}
    for bonus in (False, True):
        out = tmp_path / f"bonus{bonus}"
        train(TrainConfig(workflow="critical_first", total_episodes=40, episodes_per_update=20,
                          seed=3, overlap=overlap, collector="sequential", out=str(out),
                          ppo=PPOConfig(hidden=16, first_fix_bonus=bonus)),
              progress=lambda line: None)
        rows[bonus] = read_csv(out / "training_log.csv")[0]
    off, on = rows[False], rows[True]
    assert off["Env_Reward"] == on["Env_Reward"] and off["Avg_Fixes"] == on["Avg_Fixes"]
    gap = float(on["Alignment_Bonus"]) - float(off["Alignment_Bonus"])
    assert 0.0 < gap <= 15.0 + 1e-3                 # λ = 30: +15 per episode with a fix
    assert off["Value_Loss"] != on["Value_Loss"]


def test_ppo_step_applies_the_first_fix_bonus():
    """The plain collect-then-update step (the exhaustive protocol's) trains on the bonus too."""
    import numpy as np

    from wfrl.collect.base import make_collector
    from wfrl.ppo.learner import PPOLearner
    from wfrl.training.steps import ppo_step
    from wfrl.workflow import Workflow
    wf = Workflow.parse("critical_first")
    losses = []
    for bonus in (False, True):
        cfg = PPOConfig(hidden=16, first_fix_bonus=bonus)
        col = make_collector("sequential", "sim", "B_lineAgent", cfg.net(), 3, 30.0, False, 1, 20)
        try:
            eps, ustats, _, _ = ppo_step(col, PPOLearner(cfg, seed=1), wf,
                                         np.tile(wf.onehot(), (20, 1)), 0, 20, cfg)
        finally:
            col.close()
        losses.append((sum(e.env_return for e in eps), ustats["value_loss"]))
    assert losses[0][0] == losses[1][0] and losses[0][1] != losses[1][1]


def test_bare_train_resolves_to_the_shipped_recipe():
    """`wfrl train --workflow critical_first --red-agent mixed` trains with the settings of the
    command recorded in the shipped checkpoint's provenance, its budget, evaluation cadence,
    seed and collector aside; and with the alignment settings the checkpoint stores."""
    import dataclasses
    import shlex

    from wfrl.api import single_run_of, train_setting_names
    from wfrl.cli.parser import build_parser
    from wfrl.runlog import load_checkpoint

    def resolve(argv):
        a = build_parser().parse_args(argv)
        settings = {n: getattr(a, n) for n in train_setting_names()
                    if getattr(a, n, None) is not None}
        preset = settings.pop("ppo_preset", None)
        ppo_given = {k: v for k, v in settings.items() if k in PPOConfig.__dataclass_fields__}
        given = {k: v for k, v in settings.items() if k in TrainConfig.__dataclass_fields__}
        return single_run_of(given, ppo_given, preset)

    ck = load_checkpoint("pretrained:critical_first")
    command = ck["provenance"]["command"].split(";")[0]
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "wfrl"]
    shipped, bare = resolve(argv[3:]), resolve(["train", "--workflow", "critical_first",
                                                "--red-agent", "mixed"])
    aside = {"total_episodes", "min_episodes", "eval_every", "eval_episodes", "seed",
             "collector", "n_workers", "out"}
    assert {k: v for k, v in dataclasses.asdict(bare).items() if k not in aside} == \
        {k: v for k, v in dataclasses.asdict(shipped).items() if k not in aside}
    assert bare.ppo.lr_final == 0.1 and bare.ppo.first_fix_bonus is False   # not vacuous
    for key in ("alignment_lambda", "count_foothold", "compliance_threshold", "red_agent"):
        assert getattr(bare, key) == ck["config"][key], key
    net = bare.ppo.net().to_dict()     # the checkpoint predates the belief and truth inputs
    assert {k: net[k] for k in ck["net"]} == ck["net"] and not net["belief"]
