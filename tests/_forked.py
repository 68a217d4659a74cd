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
`popen(args, ...)` is subprocess.Popen for such a command (pipes, signals, wait and communicate
as Popen's), its child a fork in the same way: for the tests that signal or kill a command
mid-run. Commands that stand for a user's own process (tests/test_stress.py) still start a
fresh interpreter.
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


def _child(args, env, cwd, out_w, err_w, drop, in_r=-1) -> None:
    """In the forked child: stdin from in_r (/dev/null if −1), stdout and stderr to out_w and
    err_w (−1: the test process's, as a subprocess inherits them), `drop` closed."""
    code = 1
    try:
        for fd in drop:
            os.close(fd)
        if in_r == -1:
            in_r = os.open(os.devnull, os.O_RDONLY)
        for fd, std in ((in_r, 0), (out_w, 1), (err_w, 2)):
            if fd != -1 and fd != std:
                os.dup2(fd, std)
        for fd in {in_r, out_w, err_w} - {-1, 0, 1, 2}:
            os.close(fd)
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


class _ForkedPopen(subprocess.Popen):
    """subprocess.Popen whose child is a fork of this process running `wfrl ARGS` (_child)
    instead of a new program: Popen's own pipes, wait, poll, signals and communicate."""

    def __init__(self, args, **kw):
        self._wfrl_args = [str(a) for a in args]
        super().__init__(["wfrl", *self._wfrl_args], **kw)

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                       startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                       errread, errwrite, restore_signals, gid, gids, uid, umask,
                       start_new_session, process_group):
        sys.stdout.flush()
        sys.stderr.flush()
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            if start_new_session:
                os.setsid()
            os.close(ready_r)
            os.close(ready_w)     # as Popen returns once its child has exec'd: set up by now
            _child(self._wfrl_args, env, cwd, c2pwrite, errwrite,
                   [fd for fd in (p2cwrite, c2pread, errread) if fd != -1], in_r=p2cread)
        self.pid = pid
        self._child_created = True
        os.close(ready_w)
        try:
            os.read(ready_r, 1)   # EOF once the child has its session
        finally:
            os.close(ready_r)
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)


def popen(args, env=None, cwd=None, **kw):
    """subprocess.Popen([python, -m, wfrl, *args], env=env, cwd=cwd, **kw), by a fork where
    fork_allowed(env)."""
    if not fork_allowed(env):
        return subprocess.Popen([sys.executable, "-m", "wfrl", *map(str, args)], env=env,
                                cwd=cwd, **kw)
    return _ForkedPopen(args, env=env, cwd=cwd, **kw)
