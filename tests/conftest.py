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
    if any("wheel_venv" in getattr(item, "fixturenames", ()) for item in items):
        _WheelBuild.start()


def pytest_sessionfinish(session, exitstatus):
    _WheelBuild.stop()


# Building the wheel compiles the extension from scratch (~40 s of one core). It starts in the
# background, at a lower priority, as soon as the selected tests are known to need it, and runs
# beside the tests before them (which leave a core idle most of the time); the fixture waits.
_BUILD_SCRIPT = r"""
import subprocess, sys, sysconfig
from pathlib import Path
root, tmp, deps = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if res.returncode:
        sys.exit(f"{cmd}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return res.stdout
run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"), str(root)])
wheels = list((tmp / "dist").glob("wfrl-*.whl"))
if len(wheels) != 1:
    sys.exit(f"expected one wheel, found {wheels}")
venv = tmp / "venv"
run([sys.executable, "-m", "venv", str(venv)])
py = venv / "bin" / "python"
site = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
(Path(site) / "wfrl_test_deps.pth").write_text(deps + "\n")
run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", str(wheels[0])])
print(wheels[0])
"""


class _WheelBuild:
    proc = None
    tmp = None

    @classmethod
    def start(cls):
        if cls.proc is not None:
            return
        import tempfile
        cls.tmp = Path(tempfile.mkdtemp(prefix="wfrl-wheel-"))
        cls.proc = subprocess.Popen(
            [sys.executable, "-c", _BUILD_SCRIPT, str(ROOT), str(cls.tmp),
             sysconfig.get_paths()["purelib"]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: os.nice(10), start_new_session=True)

    @classmethod
    def result(cls):
        """Wait for the build; fail the test with its output unless it succeeded."""
        out, err = cls.proc.communicate(timeout=1200)
        assert cls.proc.returncode == 0, f"building and installing the wheel failed:\n{out}\n{err}"
        venv = cls.tmp / "venv"
        return WheelVenv(wheel=Path(out.strip().splitlines()[-1]), root=venv,
                         python=venv / "bin" / "python")

    @classmethod
    def stop(cls):
        proc, cls.proc = cls.proc, None
        if proc is not None and proc.poll() is None:
            import signal
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if cls.tmp is not None:
            import shutil
            shutil.rmtree(cls.tmp, ignore_errors=True)
            cls.tmp = None


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
def wheel_venv():
    """A venv with wfrl installed from a wheel freshly built by `python -m build` (without an
    isolated build env: the build requirements are installed here), without dependencies; its
    only other entry is a path line to this environment's site-packages (no .pth file of it is
    executed there, so the editable checkout stays invisible). Built in the background from the
    start of the session (_WheelBuild)."""
    _WheelBuild.start()
    return _WheelBuild.result()
