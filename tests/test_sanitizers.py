"""The C core under AddressSanitizer and UndefinedBehaviorSanitizer, driven by a small C program
over many random episodes of every red agent."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_cage2_core_is_clean_under_asan_and_ubsan(tmp_path):
    exe = tmp_path / "check_cage2"
    cmd = ["gcc", "-std=c11", "-O1", "-g", "-fno-omit-frame-pointer",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-Wall", "-Wextra",
           "-Werror", "-I", str(ROOT / "csrc"), str(ROOT / "csrc/tools/check_cage2.c"), "-o",
           str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    res = subprocess.run([str(exe), "3000", "11"], capture_output=True, text=True, timeout=600,
                         env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all invariants held" in res.stdout and "runtime error" not in res.stderr
