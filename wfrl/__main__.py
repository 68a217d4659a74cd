"""`python -m wfrl` and the `wfrl` script (run): the command line (wfrl.cli) in the environment
set below, and a quick exit after it.

A command that returns has closed, flushed and fsynced everything it wrote and its collectors
have stopped their workers. What Python does at exit is then done here in its order — stop and
join the threads that are not daemons (thread pools told to stop first), run every exit handler
(the multiprocessing and Ray handlers, shared memory released, any registered elsewhere) — and
the process leaves with the command's exit code, skipping only the last part: tearing down every
module torch, scikit-learn and matplotlib loaded (its cost: docs/learner.md), which changes
nothing on disk. SIGTERM's SystemExit(143) leaves the same way; a command that
raises anything else exits the ordinary way. The quick exit calls CPython's private
threading._shutdown and atexit._run_exitfuncs, so it is taken only on the Python versions it was
measured on (MEASURED_PYTHON; bench/test_bench_train.py times both exits side by side and fails
if the quick one stops being faster) and not with WFRL_ORDINARY_EXIT=1; elsewhere the ordinary
interpreter exit."""
import atexit
import os
import sys
import threading

from wfrl.api import one_thread_by_default, quiet_openmp

MEASURED_PYTHON = ((3, 11),)


def quick_exit() -> bool:
    """Whether the command leaves through _leave (see the module docstring)."""
    return (sys.version_info[:2] in MEASURED_PYTHON and hasattr(atexit, "_run_exitfuncs")
            and hasattr(threading, "_shutdown")
            and os.environ.get("WFRL_ORDINARY_EXIT", "0") != "1")


def _leave(code: int) -> None:
    threading._shutdown()  # type: ignore[attr-defined]  # what Python's exit does first: thread pools told to stop, joined
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe: nothing more can be said on it
            pass
    os._exit(code)


def stop_on_sigterm() -> None:
    """SIGTERM raises SystemExit(143) in the main thread, so every command unwinds (its workers
    ended, its records closed) instead of dying where it stands: `wfrl eval --cage2` on 2 workers
    left both orphaned. wfrl.collect.shm chains its own handler (unlink first) to this one."""
    import signal

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, handler)


def run() -> None:
    """`python -m wfrl` and the `wfrl` script: the command line with the environment above."""
    quiet_openmp(os.environ)
    one_thread_by_default(os.environ)
    stop_on_sigterm()
    from wfrl.cli import main
    try:
        code = main()
    except SystemExit as exc:
        # SIGTERM (wfrl.collect.shm raised SystemExit(128 + 15) after unlinking the shared
        # memory; wfrl.cli said so): leave as a return does. The ordinary exit tore down torch's
        # thread pools while a daemon thread could still be in one, and died in C++'s
        # std::terminate (exit -6 instead of 143; tests/test_stress.py found it).
        if not (isinstance(exc.code, int) and exc.code >= 128):
            raise
        code = exc.code
    if quick_exit():
        _leave(code if isinstance(code, int) else (0 if code is None else 1))
    sys.exit(code)


# Guarded: spawned collector workers re-import the main module under another name.
if __name__ == "__main__":
    run()
