"""`python -m wfrl ARGS` for tests, in a fork of the test process instead of a new interpreter.

A new interpreter spends about 1.5 CPU-s importing torch (and CybORG, which imports it again
through Stable-Baselines3) before a test's command starts; most commands the tests run take less
than that. A fork of the test process has those modules already: the child sets up what a fresh
`python -m wfrl` would see (the environment and working directory asked for, stdin from
/dev/null, stdout and stderr on pipes read here, default signal handlers, no exit handler or
multiprocessing finaliser of the test process), runs wfrl's entry point (wfrl.__main__.run) and
leaves with its exit code, running its own exit handlers as an interpreter would. Output, exit
codes, files written and processes started are the command's own.

A fresh interpreter is used instead where a fork could not stand for one: an environment that
changes what an interpreter loads at start (PYTHONPATH, LD_PRELOAD, PYTHON* settings), Ray
connected in the test process, a WFRL_ setting of its own (some are read as wfrl's modules load), or WFRL_TEST_FRESH=1 (the whole suite the slow way, to compare).
Tests that signal or kill a command start it with subprocess.Popen as before.
"""
import atexit
import os
import signal
import subprocess
import sys
import threading
import time

FRESH_ENV = "WFRL_TEST_FRESH"
# variables an interpreter reads as it starts: a fork has already started
_AT_START = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONNOUSERSITE", "PYTHONSAFEPATH",
             "PYTHONHASHSEED", "PYTHONMALLOC", "PYTHONDEVMODE", "PYTHONWARNINGS",
             "PYTHONFAULTHANDLER", "LD_PRELOAD", "LD_LIBRARY_PATH", "OMP_NUM_THREADS",
             "MKL_NUM_THREADS")


def fork_allowed(env) -> bool:
    """Whether a fork can stand for a fresh interpreter under `env` (None: this process's)."""
    if os.environ.get(FRESH_ENV, "0") == "1":
        return False
    if env is not None:
        changed = {k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)}
        # wfrl reads some of its own settings as its modules load (WFRL_COMPILED_STEP)
        if changed & set(_AT_START) or any(k.startswith("WFRL_") for k in changed):
            return False
    ray = sys.modules.get("ray")
    return not (ray is not None and ray.is_initialized())


def _child(args, env, cwd, out_w, err_w, drop) -> None:
    code = 1
    try:
        for fd in drop:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.close(out_w)
        os.close(err_w)
        import faulthandler
        import io
        faulthandler.disable()              # the test process's, writing to its own stderr
        sys.stdin = open(0, closefd=False)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True,
                                      errors="backslashreplace")
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
        # nothing of the test process runs at this process's exit
        import multiprocessing.process as mp_process
        import multiprocessing.util as mp_util
        atexit._clear()
        mp_util._finalizer_registry.clear()
        mp_process._children.clear()
        mp_util._run_after_forkers()        # as multiprocessing's own fork start does (its
        #                                     resource sharer's listener is the parent's)
        atexit.register(mp_util._exit_function)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                    signal.SIGUSR2, signal.SIGALRM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)    # as Python sets it at start
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.alarm(0)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        import wfrl.__main__ as entry
        sys.argv = [entry.__file__, *args]
        try:
            entry.run()                      # leaves through entry._leave on CPython 3.11
            code = 0
        except SystemExit as exc:
            c = exc.code
            if c is None or isinstance(c, int):
                code = c or 0
            else:
                print(c, file=sys.stderr)
                code = 1
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        entry._leave(code)                   # threads joined, exit handlers run, os._exit
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def run(args, timeout=600, env=None, cwd=None):
    """subprocess.run([python, -m, wfrl, *args], capture_output=True, text=True, timeout=...,
    env=env, cwd=cwd), by a fork where fork_allowed(env)."""
    args = [str(a) for a in args]
    if not fork_allowed(env):
        return subprocess.run([sys.executable, "-m", "wfrl", *args], capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=cwd)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(args, env, cwd, out_w, err_w, (out_r, err_r))
    os.close(out_w)
    os.close(err_w)
    chunks = {out_r: [], err_r: []}

    def drain(fd):
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            chunks[fd].append(b)
        os.close(fd)

    readers = [threading.Thread(target=drain, args=(fd,), daemon=True) for fd in chunks]
    for t in readers:
        t.start()
    deadline = time.monotonic() + timeout
    status = None
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(["wfrl", *args], timeout)
        else:
            time.sleep(0.01)
    for t in readers:      # until every process that holds the pipes has closed them
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in readers):     # as subprocess.run: a process it started lingers
        raise subprocess.TimeoutExpired(["wfrl", *args], timeout)
    # text=True's decoding: the locale's encoding, universal newlines
    text = {fd: b"".join(c).decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")
            for fd, c in chunks.items()}
    return subprocess.CompletedProcess(["wfrl", *args], os.waitstatus_to_exitcode(status),
                                       text[out_r], text[err_r])
