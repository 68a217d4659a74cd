"""Test-suite wiring: one hook that skips, with the reason, tests whose heavy part is absent
(marker `cyborg`: the real CybORG; `ray`: Ray; `sb3`: Stable-Baselines3), and the session fixture of a venv with
wfrl installed from a freshly built wheel (tests/test_wheel.py, the Ray cluster test)."""
import dataclasses
import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# One math thread per process, here and in every process a test starts: the tests check behaviour,
# and on a 2-core machine torch's default of a thread per core, beside collector processes and
# subprocess runs, makes the suite several times slower without testing anything more.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


def _cyborg_available():
    from wfrl.envs.cyborg import available
    return available()


CYBORG = _cyborg_available()
RAY = importlib.util.find_spec("ray") is not None
SB3 = importlib.util.find_spec("stable_baselines3") is not None

_ABSENT = {
    "cyborg": (CYBORG, "CybORG is not installed (pip install 'wfrl[cyborg]' and gym-csle-cyborg "
                       "--no-deps; scripts/setup.sh does it)"),
    "ray": (RAY, "Ray is not installed (pip install 'wfrl[ray]'; scripts/setup.sh does it)"),
    "sb3": (SB3, "Stable-Baselines3 is not installed (pip install 'wfrl[sb3]'; the [cyborg] extra "
                 "brings it too)"),
}


def pytest_collection_modifyitems(config, items):
    for marker, (present, reason) in _ABSENT.items():
        if present:
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@dataclasses.dataclass
class WheelVenv:
    wheel: Path      # the built wheel
    root: Path       # the venv
    python: Path     # its interpreter


def run_ok(cmd, **kw):
    """Run a command; fail the test with its output unless it exits 0."""
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert res.returncode == 0, f"{cmd}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    return res


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory):
    """Build the wheel with `python -m build` (without an isolated build env: the build
    requirements are installed here) and install it, without dependencies, into a new venv whose
    only other entry is a path line to this environment's site-packages (no .pth file of it is
    executed there, so the editable checkout stays invisible)."""
    tmp = tmp_path_factory.mktemp("wheel")
    run_ok([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"),
          str(ROOT)])
    wheels = list((tmp / "dist").glob("wfrl-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp / "venv"
    run_ok([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    site = run_ok([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                ).stdout.strip()
    (Path(site) / "wfrl_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run_ok([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
          str(wheels[0])])
    return WheelVenv(wheel=wheels[0], root=venv, python=py)
