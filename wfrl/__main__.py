"""`python -m wfrl` and the `wfrl` script (run): the command line (wfrl.cli) in the environment
set below, and a quick exit after it.

A command that returns has closed, flushed and fsynced everything it wrote and its collectors
have stopped their workers. What Python does at exit is then done here in its order — stop and
join the threads that are not daemons (thread pools told to stop first), run every exit handler
(the multiprocessing and Ray handlers, shared memory released, any registered elsewhere) — and
the process leaves with the command's exit code, skipping only the last part: tearing down every
module torch, scikit-learn and matplotlib loaded, 1.0 s of every run on the 2-core machine,
which changes nothing on disk. SIGTERM's SystemExit(143) leaves the same way; a command that
raises anything else exits the ordinary way."""
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


SPIN_COUNT = "10000"


def quiet_openmp(environ) -> None:
    """GOMP_SPINCOUNT=10000 for this process and its workers, unless the user set it or an
    OMP_WAIT_POLICY. How long an idle OpenMP thread spins before it sleeps: 300,000 turns of
    `pause` by default. It matters where torch's OpenMP pool has more than one thread (the
    user's OMP_NUM_THREADS, --learner-threads N): with two in a default run, the pool worked only
    for the orthogonal initialisation of each visit's new learner (MKL's QR), and then its idle
    thread spun for 3.2 of the first 50 s (0.2 s with this setting), CPU taken from the
    collectors and the learner. 10,000 turns (well under a millisecond) still hand back-to-back
    operations of a multi-threaded learner (--learner-threads N) or of `wfrl bench train`'s
    comparison paths over without a sleep: their rates are unchanged (docs/learner.md), where
    OMP_WAIT_POLICY=PASSIVE (no spin at all) slowed them. It changes when an idle thread
    sleeps, never what a computation gives (the same training log). Must run before torch is
    imported: OpenMP reads it once, when it loads."""
    if "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ:
        return
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT


def one_thread_by_default(environ) -> None:
    """OMP_NUM_THREADS=1 for this process and its workers unless the user set it. A run's
    results depend on the thread count of every pool that sums for it (torch's and OpenBLAS's,
    sized from the cores when unset). The learner sets its own count around each update, but
    other work runs on those pools as they are: each new learner's orthogonal initialisation,
    work on other threads (the collect-ahead thread builds the next update's batch), the
    feasibility model's linear algebra. Left to the machine, the same seed and settings give
    other numbers on a machine with another core count (docs/learner.md, "Threads").
    One thread is what the default run uses anyway: the learner sets its own count for each
    update (--learner-threads), and the collectors' workers play one episode at a time. Must
    run before numpy and torch are imported: both read it once, when they load."""
    environ.setdefault("OMP_NUM_THREADS", "1")


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
    if hasattr(atexit, "_run_exitfuncs") and hasattr(threading, "_shutdown"):
        _leave(code if isinstance(code, int) else (0 if code is None else 1))
    sys.exit(code)


# Guarded: spawned collector workers re-import the main module under another name.
if __name__ == "__main__":
    run()
