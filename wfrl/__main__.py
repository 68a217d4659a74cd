"""`python -m wfrl`: the command line (wfrl.cli), and a quick exit after it.

A command that returns has closed, flushed and fsynced everything it wrote and its collectors
have stopped their workers. What Python does at exit is then done here in its order — stop and
join the threads that are not daemons (thread pools told to stop first), run every exit handler
(the multiprocessing and Ray handlers, shared memory released, any registered elsewhere) — and
the process leaves with the command's exit code, skipping only the last part: tearing down every
module torch, scikit-learn and matplotlib loaded, 1.0 s of every run on the 2-core machine,
which changes nothing on disk. A command that raises (SystemExit included) exits the ordinary way."""
import atexit
import os
import sys
import threading


def _leave(code: int) -> None:
    threading._shutdown()     # what Python's exit does first: thread pools told to stop, joined
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe: nothing more can be said on it
            pass
    os._exit(code)


def quiet_openmp(argv, environ) -> None:
    """OMP_WAIT_POLICY=PASSIVE for this process and its workers, unless the user set a policy or
    asked for a learner on more than one thread (--learner-threads N > 1). With one learner
    thread (the default) nothing runs torch's OpenMP pool but the occasional operation outside
    an update — the orthogonal initialisation of each visit's new learner — after which
    OpenMP's default policy keeps its idle thread spinning: 6 of a default run's ~170 CPU
    seconds on the 2-core machine, taken from the collectors and the learner. The policy
    changes when an idle thread sleeps, never what a computation gives (tested: the same
    training log). Must run before torch is imported: OpenMP reads it once, when it loads."""
    if "OMP_WAIT_POLICY" in environ:
        return
    for i, arg in enumerate(argv):
        value = (argv[i + 1] if arg == "--learner-threads" and i + 1 < len(argv) else
                 arg.partition("=")[2] if arg.startswith("--learner-threads=") else None)
        if value is not None and value.strip() != "1":
            return
    environ["OMP_WAIT_POLICY"] = "PASSIVE"


# Guarded: spawned collector workers re-import the main module under another name.
if __name__ == "__main__":
    quiet_openmp(sys.argv[1:], os.environ)
    from wfrl.cli import main
    code = main()
    if hasattr(atexit, "_run_exitfuncs") and hasattr(threading, "_shutdown"):
        _leave(code if isinstance(code, int) else (0 if code is None else 1))
    sys.exit(code)
