"""wfrl.collect.output: what worker processes print reaches the user, prefixed with the worker, or
a file, and never blocks the worker, however slowly (or not at all) the user's stderr is read."""
import multiprocessing as mp
import os
import time

from wfrl.collect.output import OutputDrain, redirect


def _talker(end, n, size):
    redirect(end)
    for i in range(n):
        print(f"line {i} " + "z" * size)
    os.write(2, b"straight to fd 2\n")
    os.write(1, b"no newline at the end")


def _run_workers(drain, n=200, size=100, workers=2, timeout=30):
    ctx = mp.get_context("spawn")
    procs = []
    for k in range(workers):
        end = drain.child_end(f"w{k}")
        p = ctx.Process(target=_talker, args=(end, n, size))
        p.start()
        end.close()
        procs.append(p)
    t0 = time.monotonic()
    for p in procs:
        p.join(timeout)
    took = time.monotonic() - t0
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return took


def test_lines_reach_stderr_prefixed_and_whole(tmp_path):
    path = tmp_path / "err.txt"
    with open(path, "w") as stream:
        drain = OutputDrain(stream=stream)
        _run_workers(drain)
        drain.close()
    lines = path.read_text().splitlines()
    for k in range(2):
        mine = [line for line in lines if line.startswith(f"[w{k}] ")]
        assert [m.split()[2] for m in mine[:200]] == [str(i) for i in range(200)]
        assert f"[w{k}] straight to fd 2" in mine and f"[w{k}] no newline at the end" in mine
        assert len(mine) == 202
    assert "not shown" not in path.read_text()


def test_a_file_keeps_every_line_unprefixed(tmp_path):
    out = tmp_path / "agent_output.txt"
    drain = OutputDrain(to=out)
    _run_workers(drain, workers=1)
    drain.close()
    lines = out.read_text().splitlines()
    assert lines[0].startswith("line 0 ") and len(lines) == 202 and "[w0]" not in out.read_text()


def test_an_unread_stderr_never_blocks_the_workers(tmp_path):
    """stderr a pipe nobody reads: 2 MB printed (32 pipe buffers' worth) all the same, at the
    rate of an unblocked worker; what cannot wait is dropped and counted once it is read."""
    r, w = os.pipe()
    stream = os.fdopen(w, "w")
    drain = OutputDrain(stream=stream, limit=64 << 10)
    took = _run_workers(drain, n=2000, size=1000)
    assert took < 20                  # a blocked worker would never have finished
    got = bytearray()
    import threading
    reader = threading.Thread(target=lambda: [got.extend(b) for b in iter(
        lambda: os.read(r, 1 << 16), b"")])
    reader.start()                    # read at last: what waited is written, then the count
    drain.close()
    stream.close()
    reader.join(10)
    os.close(r)
    text = got.decode()
    assert "] line 0 " in text and "lines of worker output were not shown" in text
    dropped = int(text.split("wfrl: ")[-1].split()[0])
    shown = text.count("[w0] ") + text.count("[w1] ")
    assert dropped > 0 and shown + dropped == 2 * 2002
