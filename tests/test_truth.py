"""The ground truth at the learner's strength (`wfrl exhaustive --protocol recipe`) and the
statistics that read it (wfrl.search.effects)."""
import dataclasses

import numpy as np
import pytest

from wfrl.config.run import ExhaustiveConfig, PPOConfig
from wfrl.errors import UserError
from wfrl.runlog import read_csv
from wfrl.search import effects, truth
from wfrl.training.steps import TIMING_COLUMNS
from wfrl.workflow import UNIT_TYPES, Workflow

PPO = PPOConfig(hidden=16, epochs=1, minibatches=2, memory=True, mask=True, clip_per_net=True,
                lr_final=0.1, entropy_final=0.1, first_fix_bonus=False)


def cfg(out, **kw):
    base = dict(protocol="recipe", pretrain_episodes=300, episodes_per_update=100,
                eval_episodes=4, seed=5, out=str(out), ppo=PPO)
    base.update(kw)
    return ExhaustiveConfig(**base)


def quiet(_line):
    pass


def comparable(rows):
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """One uninterrupted run: the reference the interrupted ones must equal."""
    out = tmp_path_factory.mktemp("truth_twin")
    paths = truth.truth(cfg(out), quiet)
    return out, paths


def test_recipe_protocol_defaults():
    c = ExhaustiveConfig(protocol="recipe").validate().resolved()
    assert (c.red_agent, c.pretrain_episodes, c.eval_episodes) == ("mixed", 60_000, 500)
    assert c.eval_red_list() == ["B_lineAgent", "RedMeanderAgent"]
    old = ExhaustiveConfig().validate().resolved()      # the earlier protocols keep theirs
    assert (old.red_agent, old.eval_episodes, old.eval_reds) == ("B_lineAgent", 200, None)


def test_table_shape_and_tables(twin):
    out, paths = twin
    rows = truth.load_truth(out / "seed5" / "truth.csv")
    assert len(rows) == 240
    assert {r["Red"] for r in rows} == {"B_lineAgent", "RedMeanderAgent"}
    assert sorted({r["Workflow_ID"] for r in rows}) == list(range(120))
    assert all(r["Episodes"] == "4" for r in rows)
    # the mean-of-reds table is the mean of the two reds' rows, workflow by workflow
    mean = {int(r["Workflow_ID"]): float(r["Reward"])
            for r in read_csv(out / "seed5" / "exhaustive_mean_of_reds.csv")}
    for wid in (0, 57, 119):
        both = [r["Reward"] for r in rows if r["Workflow_ID"] == wid]
        assert mean[wid] == pytest.approx(sum(both) / 2, abs=1e-4)
    assert set(paths) == {"B_lineAgent", "RedMeanderAgent", "mean_of_reds"}
    a = (out / "B_lineAgent" / "analysis.json").read_text()
    assert "can be followed" in a
    # the stored settings name no machine path
    assert str(out) not in (out / "seed5" / "experiment_config.json").read_text()


def test_training_follows_the_recipe_schedule(twin):
    """Each update is made at the share of the run already trained on: lr and entropy weight
    end at a tenth, and the schedule is in the policy's log (its entropy falls)."""
    from wfrl.ppo.learner import PPOLearner
    learner = PPOLearner(PPO, seed=0)
    learner.set_progress(200 / 300)
    assert learner.opt.param_groups[0]["lr"] == pytest.approx(PPO.lr * (1 - 0.9 * 2 / 3))
    assert learner.entropy_coef == pytest.approx(PPO.entropy_coef * (1 - 0.9 * 2 / 3))
    out, _ = twin
    log = read_csv(out / "seed5" / "training_log.csv")
    assert [int(r["Episodes"]) for r in log] == [100, 200, 300]
    assert {r["Phase"] for r in log} == {"pretrain"}


def _interrupt_after(monkeypatch, module, name, calls):
    """module.name raises KeyboardInterrupt (as if the run were killed) after `calls` calls."""
    real = getattr(module, name)
    count = [0]

    def flaky(*a, **kw):
        count[0] += 1
        if count[0] > calls:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(module, name, flaky)


@pytest.mark.parametrize("where,calls", [("save_checkpoint", 2), ("play", 130)])
def test_interrupted_run_resumes_to_the_twins_tables(tmp_path, monkeypatch, twin, where, calls):
    """Killed mid-training (after the second update's state) or mid-evaluation (10 workflows
    into the second red), then started again: the same training log and the same truth.csv as
    the uninterrupted twin, to the last digit."""
    import wfrl.evaluation.returns
    _interrupt_after(monkeypatch, wfrl.evaluation.returns if where == "play" else truth, where, calls)
    with pytest.raises(KeyboardInterrupt):
        truth.truth(cfg(tmp_path), quiet)
    monkeypatch.undo()
    seed_dir = tmp_path / "seed5"
    if where == "save_checkpoint":
        assert not (seed_dir / "policy.pt").exists()
        assert len(read_csv(seed_dir / "training_log.csv")) == 3   # the 3rd: not saved
    else:
        assert 120 <= len(read_csv(seed_dir / "truth.csv")) < 240
    truth.truth(cfg(tmp_path), quiet)
    ref = twin[0] / "seed5"
    assert comparable(read_csv(seed_dir / "training_log.csv")) == \
        comparable(read_csv(ref / "training_log.csv"))
    assert read_csv(seed_dir / "truth.csv") == read_csv(ref / "truth.csv")


def test_refuses_to_continue_under_other_settings(tmp_path, twin):
    out, _ = twin
    with pytest.raises(UserError, match=r"was started with ppo = .* use the same settings"):
        truth.truth(cfg(out, ppo=dataclasses.replace(PPO, lr=0.001)), quiet)
    with pytest.raises(UserError, match="was started with eval_episodes = 4, not 5"):
        truth.truth(cfg(out, eval_episodes=5), quiet)
    # a folder with files but no stored settings is not taken over
    (tmp_path / "seed5").mkdir()
    (tmp_path / "seed5" / "truth.csv").write_text("junk\n")
    with pytest.raises(UserError, match="holds files but no experiment_config.json"):
        truth.truth(cfg(tmp_path), quiet)


def test_eval_reds_checked():
    with pytest.raises(UserError, match="--eval-reds applies to --protocol recipe"):
        ExhaustiveConfig(eval_reds="B_lineAgent").validate()
    with pytest.raises(UserError, match="unknown red agent 'Nobody'"):
        ExhaustiveConfig(protocol="recipe", eval_reds="B_lineAgent,Nobody").validate()


# ------------------------------------------------------------------------------ statistics
def _relation_index(a, b):
    import itertools
    return list(itertools.combinations(UNIT_TYPES, 2)).index((a, b))


def planted(effect: float, runs: int = 6, seed: int = 0):
    """Rewards runs × 120: run offsets (sd 1), noise (sd 0.4) and `effect` added to every
    workflow that puts defender before user."""
    rng = np.random.default_rng(seed)
    B = effects.before_matrix()
    y = rng.normal(-14.0, 0.4, (runs, 120)) + rng.normal(0, 1.0, (runs, 1))
    return y + effect * B[_relation_index("defender", "user")]


def test_statistics_find_a_planted_relation():
    y = planted(0.5)
    comp = np.where(effects.before_matrix()[_relation_index("enterprise", "user")], 0.99, 0.7)
    a = effects.analyse(y, np.tile(comp, (y.shape[0], 1)))
    top = a["relations_reward"][0]
    assert top["relation"] == "defender before user" and top["significant"]
    assert top["ci_low"] < 0.5 < top["ci_high"]
    assert sum(r["significant"] for r in a["relations_reward"]) <= 2   # no others, but chance
    assert a["effect_followable"]["p_value"] < 0.001
    assert a["run_sd"]["residual_sd"] == pytest.approx(0.4, abs=0.06)
    # feasibility: 60 unfollowable, all putting user before enterprise, explained by it
    assert a["feasibility"]["followable"] == 60
    shared = [e["relation"] for e in a["feasibility"]["shared_by_unfollowable"]]
    assert "user before enterprise" in shared
    assert "user before enterprise" in a["sentence"]
    assert "matters for reward" in a["sentence"]
    # the best is a followable workflow with defender before user
    best = Workflow.from_index(a["best"]["best_id"]).names
    assert best.index("defender") < best.index("user") and best.index("enterprise") < best.index("user")


def test_statistics_on_a_table_without_effect():
    y = planted(0.0, seed=1)
    a = effects.analyse(y, np.ones_like(y))
    assert a["effect"]["p_value"] > 0.05
    assert a["effect"]["workflow_sd_upper95"] < 0.25      # the bound an absent effect leaves
    assert not a["relations_reward"][0]["significant"] or a["relations_reward"][0]["ci_low"] * \
        a["relations_reward"][0]["ci_high"] > 0
    assert a["feasibility"]["followable"] == 120 and a["feasibility"]["unfollowable"] == []
    assert "does not detectably change reward" in a["sentence"]
    assert a["best"]["indistinguishable"] > 60     # most are ties with the best


def test_statistics_fail_on_a_flipped_sign():
    """The interval is of the stated relation's direction: a planted effect of −0.5 must not
    read as +0.5."""
    top = effects.analyse(planted(-0.5), np.ones((6, 120)))["relations_reward"][0]
    assert top["relation"] == "defender before user" and top["ci_high"] < 0


def test_workflow_sd_bound_covers_a_planted_spread():
    """With a real workflow spread (sd 0.5), the 95 % upper bound is above it."""
    rng = np.random.default_rng(3)
    y = rng.normal(0, 0.5, 120)[None, :] + rng.normal(0, 0.4, (6, 120))
    e = effects.analyse(y, np.ones_like(y))["effect"]
    assert e["workflow_sd_upper95"] > 0.5 > e["workflow_sd"] * 0.6


@pytest.mark.slow
def test_concurrent_runs_give_the_serial_tables(tmp_path):
    """--concurrent 2: the seeds' runs in two worker processes give the tables of the runs one
    after another, file for file (but for wall-clock columns)."""
    serial, both = tmp_path / "serial", tmp_path / "both"
    truth.truth(cfg(serial, repeats=2, pretrain_episodes=200), quiet)
    lines = []
    truth.truth(cfg(both, repeats=2, pretrain_episodes=200, concurrent=2), lines.append)
    assert any("2 at a time" in ln for ln in lines)
    for seed in ("seed5", "seed6"):
        for name in ("truth.csv", "training_log.csv", "exhaustive_mean_of_reds.csv"):
            assert comparable(read_csv(both / seed / name)) == \
                comparable(read_csv(serial / seed / name)), (seed, name)
    for red in ("B_lineAgent", "RedMeanderAgent", "mean_of_reds"):
        assert (both / red / "exhaustive.csv").read_bytes() == \
            (serial / red / "exhaustive.csv").read_bytes()
    # a run's folder continued later is the same whatever K made it
    again = truth.truth(cfg(both, repeats=2, pretrain_episodes=200), quiet)
    assert again["mean_of_reds"] == both / "mean_of_reds" / "exhaustive.csv"


@pytest.mark.ray
@pytest.mark.slow
def test_runs_as_ray_tasks_give_the_serial_tables(tmp_path):
    """--ray-address: each seed's run is a Ray task (here on a private local instance the test
    process has joined) that gets its folder shipped and hands it back; the tables are the
    serial ones, and the stored settings name the driver's folder."""
    from wfrl.collect.ray.local import LocalRay
    serial, ray_out = tmp_path / "serial", tmp_path / "ray"
    truth.truth(cfg(serial, repeats=2, pretrain_episodes=200), quiet)
    local = LocalRay(num_cpus=2)
    try:
        lines = []
        truth.truth(cfg(ray_out, repeats=2, pretrain_episodes=200,
                        ray_address="127.0.0.1:6379"), lines.append)
    finally:
        local.shutdown()
    assert any("as Ray tasks" in ln for ln in lines)
    for seed in ("seed5", "seed6"):
        for name in ("truth.csv", "training_log.csv"):
            assert comparable(read_csv(ray_out / seed / name)) == \
                comparable(read_csv(serial / seed / name)), (seed, name)
        assert "wfrl-seed-" not in (ray_out / seed / "experiment_config.json").read_text()
    for red in ("B_lineAgent", "RedMeanderAgent", "mean_of_reds"):
        assert (ray_out / red / "exhaustive.csv").read_bytes() == \
            (serial / red / "exhaustive.csv").read_bytes()
