"""The wheel a cluster node installs: built with `python -m build`, it carries the compiled core,
and installed alone in a fresh venv `python -m wfrl train --help` works."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(cmd, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert res.returncode == 0, f"{cmd}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    return res


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)])
    wheels = list(dist.glob("wfrl-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_wheel_is_a_platform_wheel_with_the_compiled_core(wheel):
    assert not wheel.name.endswith("-none-any.whl"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("wfrl/_core.") and n.endswith(".so") for n in names), names
    assert "wfrl/cli.py" in names and not any(n.endswith(".pyx") for n in names)
    assert "wfrl/pretrained/critical_first.pt" in names


def test_wheel_installs_and_runs_in_a_fresh_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c",
         str(ROOT / "constraints.txt"), str(wheel)])
    res = run([py, "-m", "wfrl", "train", "--help"], cwd=tmp_path)
    assert "--workflow" in res.stdout
    res = run([py, "-c", "import wfrl._core as c, wfrl; print(c.__file__)"], cwd=tmp_path)
    assert str(venv) in res.stdout
    # the shipped policy is usable right after install
    res = run([py, "-m", "wfrl", "eval", "--cage2", "--checkpoint", "pretrained:critical_first",
               "--episodes", "3", "--json"], cwd=tmp_path)
    assert '"settings"' in res.stdout
