"""The C core under AddressSanitizer and UndefinedBehaviorSanitizer, driven by a small C program
over many random episodes of every red agent."""
import shutil

import pytest


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_cage2_core_is_clean_under_asan_and_ubsan(tmp_path):
    from conftest import run_sanitized
    run_sanitized("check_cage2", tmp_path, [3000, 11], timeout=600,
                  env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
                       "UBSAN_OPTIONS": "print_stacktrace=1"})
