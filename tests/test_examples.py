"""The examples in examples/ run, each with a small budget: Stable-Baselines3's PPO through the
SB3 adapter learns a better-than-random defence (measured on fixed evaluation episodes), and the
CleanRL-style script trains on the vector env with and without a workflow."""
import importlib.util
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import wfrl.envs as envs

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # the dataclass in cleanrl_ppo looks its module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.sb3
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sb3_ppo_beats_the_random_policy(seed, one_thread, tmp_path, monkeypatch):
    ex = _load("sb3_ppo")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # where SB3 would make its folder
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    out = ex.main(["--total-timesteps", "8192", "--seed", str(seed), "--eval-episodes", "40"])
    # no SB3-<date> logger folder left in the temp directory (torch may put its cache there)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("SB3")] == []
    trained, rand = out["trained"], out["random"]
    # same 40 evaluation episodes for both; the margin is several standard errors wide
    margin = 4 * math.hypot(trained["return_se"], rand["return_se"])
    assert trained["return"] > rand["return"] + max(margin, 100.0), (trained, rand)


@pytest.mark.sb3
def test_maskable_ppo_example_and_its_agent_in_the_cage2_loop(one_thread, tmp_path, monkeypatch):
    pytest.importorskip("sb3_contrib")
    ex = _load("sb3_ppo")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = tmp_path / "masked.zip"
    out = ex.main(["--total-timesteps", "4096", "--mask", "--memory", "--workflow", "reverse",
                   "--eval-episodes", "10", "--save", str(model)])
    assert out["trained"]["return"] > out["random"]["return"]
    monkeypatch.setenv(ex.MODEL_ENV, str(model))
    from wfrl.evaluation.cage2 import cage2_evaluate
    res = cage2_evaluate(agent=f"{EXAMPLES / 'sb3_ppo.py'}:agent", backend="sim", episodes=3,
                         workflow="reverse", n_workers=1)
    assert len(res["settings"]) == 9 and res["complete"]
    # the agent replays the model's own masked greedy choice on the same input
    agent = ex.agent()
    obs, _ = envs.make_memory(seed=1).reset()
    a = agent.get_action(obs[:52].astype(np.int64), 145)
    assert agent.settings["mask"] and agent._mem.allowed[0, a]


@pytest.mark.sb3
def test_sb3_example_with_the_belief_block(one_thread, tmp_path, monkeypatch):
    ex = _load("sb3_ppo")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = tmp_path / "belief.zip"
    out = ex.main(["--total-timesteps", "2048", "--belief", "8", "--eval-episodes", "4",
                   "--save", str(model)])
    assert out["model"].observation_space.shape == (52 + 42,)
    monkeypatch.setenv(ex.MODEL_ENV, str(model))
    with pytest.raises(ValueError, match="belief"):
        ex.agent()


@pytest.mark.sb3
def test_sb3_ppo_verbose_logs_to_stdout_only(tmp_path, monkeypatch, capsys, one_thread):
    ex = _load("sb3_ppo")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    ex.train(total_timesteps=64, n_envs=2, n_steps=32, verbose=1)
    assert "total_timesteps" in capsys.readouterr().out      # SB3's table, on stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("SB3")] == []


@pytest.mark.sb3
def test_sb3_adapter_contract():
    from stable_baselines3.common.vec_env import VecMonitor

    from wfrl.envs.sb3 import SB3VecEnv
    from wfrl.envs.workflow_env import VecWorkflowWrapper
    from wfrl.errors import UserError
    with pytest.raises(UserError, match="SAME_STEP"):
        SB3VecEnv(envs.make_vec(2))
    venv = VecMonitor(SB3VecEnv(VecWorkflowWrapper(
        envs.make_vec(3, seed=0, autoreset_mode="SameStep"), "balanced"),
        info_keys=("env_reward", "compliance")), info_keywords=("compliance",))
    venv.seed(5)
    obs = venv.reset()
    assert obs.shape == (3, 77)
    for _t in range(100):
        obs, rew, done, infos = venv.step(np.full(3, 15 + 7))  # Remove Op_Server0: a fix
        assert rew.dtype == np.float32 and done.dtype == np.bool_
    assert done.all() and not obs[:, :52].any()
    for i in infos:
        assert i["terminal_observation"].shape == (77,) and i["TimeLimit.truncated"]
        assert i["episode"]["l"] == 100 and 0.0 <= i["compliance"] <= 1.0
        assert set(i) >= {"env_reward", "compliance"}
    venv.close()


def test_cleanrl_envs_take_the_alignment_weight_on_every_id():
    ex = _load("cleanrl_ppo")
    for env_id in (envs.ENV_ID, envs.RECIPE_ID):
        args = ex.parse_args(["--env-id", env_id, "--workflow", "reverse",
                              "--alignment-lambda", "5", "--num-envs", "2"])
        venv, lams = ex.make_envs(args), []
        while venv is not None:
            lams += [venv.lam] if hasattr(venv, "lam") else []
            venv = getattr(venv, "env", None)
        assert lams == [5.0], (env_id, lams)


def test_cleanrl_style_ppo_runs(one_thread, tmp_path, monkeypatch):
    ex = _load("cleanrl_ppo")
    monkeypatch.chdir(tmp_path)
    out = ex.main(["--total-timesteps", "1600", "--num-envs", "8", "--num-steps", "100",
                   "--update-epochs", "2", "--quiet", "--save-model", "--eval-episodes", "5"])
    run = tmp_path / "runs" / out["run_name"]
    assert (run / "cleanrl_ppo.cleanrl_model").is_file()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(run))
    events.Reload()
    assert set(events.Tags()["scalars"]) >= {
        "charts/episodic_return", "charts/SPS", "charts/learning_rate", "losses/value_loss",
        "losses/policy_loss", "losses/entropy", "losses/approx_kl", "losses/clipfrac",
        "losses/explained_variance"}
    assert len(events.Scalars("charts/episodic_return")) == 16   # one per finished episode
    assert out["greedy"]["return"] < 0 and out["greedy"]["return_se"] >= 0   # the final evaluation
    assert len(out["history"]) == 2 and out["episodes"] == 16
    assert all(np.isfinite(r["mean_return"]) and r["mean_return"] < 0 for r in out["history"])
    out = ex.main(["--total-timesteps", "800", "--num-envs", "8", "--workflow", "critical_first",
                   "--quiet", "--env-id", "wfrl/CAGE2-v0", "--no-tensorboard",
                   "--eval-episodes", "0"])
    row = out["history"][-1]
    assert out["episodes"] == 8 and 0.0 <= row["mean_compliance"] <= 1.0
