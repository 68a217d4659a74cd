"""The wheel a cluster node installs: built with `python -m build` and made a manylinux wheel by
`auditwheel repair` (tests/conftest.py), it carries the compiled core
and the shipped policy, and a venv holding wfrl only from that wheel runs `wfrl train --help` and
`wfrl eval --cage2 --checkpoint pretrained:critical_first`.

The venv (the session fixture `wheel_venv` in conftest.py) takes wfrl from the wheel and nothing
from this checkout; its third-party dependencies come from the test environment through a path
entry instead of a second multi-gigabyte download, and a check confirms that the wheel's
declared requirements are met by them (checked per requirement: the environment as a whole
holds gym-csle-cyborg, installed without its dependencies on purpose)."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import run_ok as run

# Every unconditional Requires-Dist of the installed wfrl is present in a version it allows.
REQUIREMENTS_MET = """
from importlib.metadata import requires, version, PackageNotFoundError
from packaging.requirements import Requirement
bad = []
for text in requires("wfrl"):
    r = Requirement(text)
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue
    try:
        v = version(r.name)
    except PackageNotFoundError:
        bad.append(f"{r}: not installed"); continue
    if not r.specifier.contains(v, prereleases=True):
        bad.append(f"{r}: {v}")
assert not bad, bad
"""


@pytest.mark.slow
def test_wheel_is_a_platform_wheel_with_the_compiled_core(wheel_venv):
    wheel = wheel_venv.wheel
    assert not wheel.name.endswith("-none-any.whl"), wheel.name
    assert "-manylinux_2_" in wheel.name or ".manylinux_2_" in wheel.name, wheel.name   # repaired
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("wfrl/_core.") and n.endswith(".so") for n in names), names
    assert "wfrl/cli/commands.py" in names and not any(n.endswith(".pyx") for n in names)
    assert {"wfrl/pretrained/critical_first.pt",
            "wfrl/pretrained/critical_first_leaderboard.pt"} <= set(names)
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [line for line in zipfile.ZipFile(wheel).read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]
    assert any("torch" in r for r in requires) and any("numpy" in r for r in requires)


@pytest.mark.slow
def test_wheel_installs_and_runs_in_a_fresh_venv(wheel_venv, tmp_path):
    py = str(wheel_venv.python)
    res = run([py, "-c", "import wfrl, wfrl._core as c; print(wfrl.__file__); print(c.__file__)"],
              cwd=tmp_path)
    assert all(line.startswith(str(wheel_venv.root)) for line in res.stdout.split()), res.stdout
    run([py, "-c", REQUIREMENTS_MET], cwd=tmp_path)
    res = run([py, "-m", "wfrl", "train", "--help"], cwd=tmp_path)
    assert "--workflow" in res.stdout
    # the shipped policy is usable right after install
    res = run([py, "-m", "wfrl", "eval", "--cage2", "--checkpoint", "pretrained:critical_first",
               "--episodes", "3", "--json"], cwd=tmp_path)
    assert '"settings"' in res.stdout
    # the `wfrl` script runs what `python -m wfrl` runs, one OpenMP thread unless the user chose
    # (libgomp prints its settings when it starts with OMP_DISPLAY_ENV=VERBOSE)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    res = run([str(Path(py).parent / "wfrl"), "eval", "--cage2", "--checkpoint",
               "pretrained:critical_first", "--episodes", "1", "--json"], cwd=tmp_path, env=env)
    assert '"settings"' in res.stdout
    assert "OMP_NUM_THREADS = '1'" in res.stderr and "GOMP_SPINCOUNT = '10000'" in res.stderr


@pytest.mark.slow
def test_manylinux_wheel_searches_and_says_which_update_it_runs(wheel_venv, tmp_path):
    """A short workflow search from the manylinux wheel; its compiled update is on exactly where
    the CPU has AVX-512 (docs/agents.md)."""
    import json
    py = str(wheel_venv.python)
    out = tmp_path / "run"
    run([py, "-m", "wfrl", "train", "--total-episodes", "60", "--pretrain-episodes", "20",
         "--episodes-per-update", "20", "--hidden", "16", "--out", str(out)], cwd=tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes_used"] == 60 and summary["visits"] == 1
    res = run([py, "-c", "from wfrl.ppo.learner import COMPILED_FAST; print(COMPILED_FAST)"],
              cwd=tmp_path)
    flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    from wfrl.config.run import compiled_step_setting
    mode = compiled_step_setting()      # WFRL_COMPILED_STEP, which the wheel's run inherits
    assert res.stdout.strip() == str(mode == "on" or (mode == "auto" and "avx512f" in flags))


def _core_site(dest: Path) -> Path:
    """A directory holding (symlinked from this environment) exactly wfrl's core dependencies
    and theirs: the distributions the wheel's unconditional requirements name, recursively."""
    from importlib.metadata import distribution

    from packaging.requirements import Requirement
    dest.mkdir()
    todo, seen = ["numpy", "gymnasium"], set()
    while todo:
        name = todo.pop()
        dist = distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        base = Path(dist.locate_file(""))
        for top in {Path(f).parts[0] for f in dist.files or []}:
            if top != ".." and not top.endswith(".pth") and not (dest / top).exists():
                (dest / top).symlink_to(base / top)
        for text in dist.requires or []:
            r = Requirement(text)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    return dest


@pytest.mark.slow
def test_the_core_wheel_alone_runs_the_env_its_wrappers_and_agent_scoring(wheel_venv, tmp_path):
    # a venv with the wheel and its core dependencies only (numpy, gymnasium and theirs): no
    # torch, scikit-learn, scipy or matplotlib
    root = tmp_path / "core"
    run([sys.executable, "-m", "venv", "--without-pip", str(root)])
    py = str(root / "bin" / "python")
    site = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    Path(site.strip(), "core_deps.pth").write_text(str(_core_site(tmp_path / "deps")) + "\n")
    run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", "-q",
         str(wheel_venv.wheel)])
    # the check of the declared requirements needs `packaging`, which is not wfrl's: given to
    # that one command only
    import packaging
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "packaging").symlink_to(Path(packaging.__file__).parent)
    run([py, "-c", REQUIREMENTS_MET], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tools)})
    res = subprocess.run([py, "-c", "import torch"], capture_output=True, text=True)
    assert res.returncode != 0 and "No module named 'torch'" in res.stderr
    code = """
import gymnasium as gym, numpy as np
from gymnasium.utils.env_checker import check_env
import wfrl.envs as envs
check_env(gym.make(envs.MEMORY_ID).unwrapped)
check_env(envs.make_memory(seed=1), skip_render_check=True)
v = envs.make_vec_memory(4, "mixed", seed=2, autoreset_mode="SameStep", max_steps=30)
obs, info = v.reset()
for t in range(70):
    m = v.action_masks()
    acts = np.array([np.flatnonzero(m[i])[t % m[i].sum()] for i in range(4)], np.int32)
    obs, r, term, trunc, info = v.step(acts)
assert obs.shape == (4, 118) and info["action_mask"].shape == (4, 145)
print("ok")
"""
    assert run([py, "-W", "ignore", "-c", code], cwd=tmp_path).stdout.strip() == "ok"
    agents = Path(__file__).parent / "agents" / "cage2_agents.py"
    res = run([py, "-m", "wfrl", "eval", "--cage2", "--agent", f"{agents}:restorer",
               "--backend", "sim", "--episodes", "2", "--json"], cwd=tmp_path)
    assert '"settings"' in res.stdout
    res = subprocess.run([py, "-m", "wfrl", "train"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "pip install 'wfrl[train]'" in res.stderr and not (tmp_path / "runs").exists()
