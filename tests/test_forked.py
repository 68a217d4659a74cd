"""The forked runner the tests use for wfrl commands (tests/_forked.py) says what a fresh
interpreter says: the same exit code, stdout and stderr, and nothing of the test process (its exit
handlers) runs in the child."""
import atexit

import _forked


def test_a_forked_command_says_what_a_fresh_interpreter_says(tmp_path, monkeypatch):
    ran = tmp_path / "the test process's exit handler ran"

    def handler():
        ran.write_text("in the child")
    atexit.register(handler)
    try:
        for args in (["train", "--workflow", "no_such_order"],
                     ["eval", "--checkpoint", "pretrained:critical_first", "--episodes", 2,
                      "--json"]):
            monkeypatch.delenv(_forked.FRESH_ENV, raising=False)
            assert _forked.fork_allowed(None)
            forked = _forked.run(args, timeout=120)
            monkeypatch.setenv(_forked.FRESH_ENV, "1")
            assert not _forked.fork_allowed(None)
            fresh = _forked.run(args, timeout=120)
            assert forked.returncode == fresh.returncode, (forked.stderr, fresh.stderr)
            assert (forked.stdout, forked.stderr) == (fresh.stdout, fresh.stderr)
        assert forked.returncode == 0 and '"n": 2' in forked.stdout
    finally:
        atexit.unregister(handler)
    assert not ran.exists()


def test_what_a_fork_cannot_stand_for_gets_a_fresh_interpreter(monkeypatch):
    import os
    monkeypatch.delenv(_forked.FRESH_ENV, raising=False)
    assert _forked.fork_allowed(dict(os.environ))
    for key, value in (("PYTHONPATH", "/nowhere"), ("WFRL_COMPILED_STEP", "off"),
                       ("OMP_NUM_THREADS", "7")):
        assert not _forked.fork_allowed({**os.environ, key: value}), key


def test_a_forked_popen_is_the_commands_popen(monkeypatch):
    """_forked.popen: Popen's pipes and exit code for a command that runs to its end, and for
    one stopped by SIGTERM in a session of its own (its workers up), the same forked and fresh."""
    import os
    import signal
    import subprocess
    import time

    from _helpers import live_session_processes
    got = {}
    for fresh in ("0", "1"):
        monkeypatch.setenv(_forked.FRESH_ENV, fresh)
        proc = _forked.popen(["train", "--workflow", "no_such_order"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert isinstance(proc, _forked._ForkedPopen) == (fresh == "0")
        out, err = proc.communicate(timeout=120)
        proc = _forked.popen(["eval", "--cage2", "--backend", "sim", "--checkpoint",
                              "pretrained:critical_first", "--n-workers", "2", "--episodes",
                              "3000", "--json"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert os.getsid(proc.pid) == proc.pid
            deadline = time.monotonic() + 60
            while len(live_session_processes(proc.pid, wait=0)) < 3 and \
                    time.monotonic() < deadline:
                time.sleep(0.2)                  # the command and its two workers are up
            proc.send_signal(signal.SIGTERM)
            _, err_term = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert live_session_processes(proc.pid) == []
        got[fresh] = (out, err, err_term.strip().splitlines()[-1:], proc.returncode)
    assert got["0"] == got["1"] and got["0"][3] == 143, got
