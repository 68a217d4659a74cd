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
