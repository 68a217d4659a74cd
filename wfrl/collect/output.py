"""What worker processes print, carried to the user without ever blocking the worker.

A worker that writes to a stream it inherited blocks once that stream is a full pipe nobody
reads (`| less`, a slow `tee`, a notebook's or CI's log collector): an agent stalls in `print`
and its evaluation's watchdog blames the agent. Here each worker's stdout and stderr (file
descriptors 1 and 2) are one pipe of its own whose read end stays in the parent, where one
thread reads every worker's pipe as soon as it has data and hands whole lines on:

- to a file (`to=PATH`): written at once, every line kept;
- to the parent's stderr (the default), prefixed with the worker's name, through a second thread,
  so a stderr that is read slowly holds up only that thread: the reader keeps draining the
  workers into memory, up to `limit` bytes waiting; beyond it lines are dropped and counted, and
  `close()` says how many.

The worker's side is `redirect(end)`, called first thing in the worker process; the parent's
`OutputDrain.child_end(name)` gives that end (a multiprocessing Connection, which a spawned
process receives as an argument). A planted test hook, `WFRL_TEST_OUTPUT_NO_DRAIN=1`, leaves the
workers on the inherited streams, as they were before this module (tests/test_stress.py)."""
from __future__ import annotations

import collections
import multiprocessing as mp
import os
import selectors
import sys
import threading
from typing import Any, cast

LIMIT = 4 << 20      # bytes of lines waiting for a slow stderr before lines are dropped


def _planted_no_drain() -> bool:
    return os.environ.get("WFRL_TEST_OUTPUT_NO_DRAIN") == "1"


def redirect(end) -> None:
    """In the worker: send file descriptors 1 and 2 (and so print, warnings, C code's output)
    to the parent's drain. `end` None: leave them as inherited."""
    if end is None:
        return
    fd = end.fileno()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # noqa: BLE001 - a closed inherited stream: nothing to keep
            pass
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    end.close()
    for stream in (sys.stdout, sys.stderr):
        try:
            cast(Any, stream).reconfigure(line_buffering=True)   # lines reach the user as they are printed
        except Exception:   # noqa: BLE001 - a replaced stream without reconfigure
            pass


class _StderrSink:
    """Lines for the parent's stderr, written by a thread of their own."""

    def __init__(self, stream, limit: int):
        self.stream, self.limit = stream, limit
        self.lines: collections.deque[bytes] = collections.deque()
        self.waiting = 0          # bytes in self.lines
        self.dropped = 0          # lines dropped because `limit` bytes were waiting
        self.cond = threading.Condition()
        self.closing = False
        self.thread = threading.Thread(target=self._run, name="wfrl-output-writer", daemon=True)
        self.thread.start()

    def put(self, line: bytes) -> None:
        with self.cond:
            if self.waiting + len(line) > self.limit:
                self.dropped += 1
                return
            self.lines.append(line)
            self.waiting += len(line)
            self.cond.notify()

    def _run(self) -> None:
        # A raw duplicate of the stream's descriptor: a write blocked on a full pipe then holds
        # no lock of Python's stream (the interpreter's exit would wait on it, or abort).
        try:
            self.stream.flush()
            fd = os.dup(self.stream.fileno())
        except (AttributeError, OSError, ValueError):   # a stream without a descriptor
            fd = None
        try:
            self._write_all(fd)
        finally:
            if fd is not None:
                os.close(fd)

    def _write_all(self, fd) -> None:
        while True:
            with self.cond:
                while not self.lines and not self.closing:
                    self.cond.wait()
                if not self.lines:
                    return
                batch = list(self.lines)
                self.lines.clear()
                self.waiting = 0
            data = memoryview(b"".join(batch))
            try:
                if fd is None:
                    self.stream.write(bytes(data).decode("utf-8", "replace"))
                    self.stream.flush()
                while fd is not None and data:
                    data = data[os.write(fd, data):]
            except (OSError, ValueError):   # stderr closed or gone: nothing more can be shown
                with self.cond:
                    self.dropped += len(batch)

    def close(self) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify()
        self.thread.join()


class _FileSink:
    def __init__(self, path):
        self.file = open(path, "ab")   # noqa: SIM115 - closed in close()
        self.dropped = 0

    def put(self, line: bytes) -> None:
        self.file.write(line)
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class OutputDrain:
    """The parent's side: one pipe per worker, drained by one thread (see the module's text).

    drain = OutputDrain(to=None)       # or to="agent_output.txt"
    end = drain.child_end("worker 1")  # pass to the worker, which calls redirect(end)
    ...                                # start the worker; the parent's copy of `end` is closed
    drain.close()                      # after the workers have exited: the rest, then a summary
    """

    def __init__(self, to=None, stream=None, limit: int = LIMIT, what: str = "worker output"):
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.sink = _FileSink(to) if to else _StderrSink(self.stream, limit)
        self.sel = selectors.DefaultSelector()
        self.partial: dict[int, bytes] = {}
        self.names: dict[int, bytes] = {}
        self.prefixed = not to
        self.lock = threading.Lock()
        self.wake_r, self.wake_w = os.pipe()
        self.sel.register(self.wake_r, selectors.EVENT_READ, None)
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="wfrl-output-reader", daemon=True)
        self.thread.start()

    def child_end(self, name: str):
        """A new pipe for one worker: returns the end the worker writes to (None under the
        planted no-drain hook). Close the parent's copy (`end.close()`) once the worker started."""
        if _planted_no_drain():
            return None
        read, write = mp.Pipe(duplex=False)
        fd = read.fileno()
        os.set_blocking(fd, False)
        with self.lock:
            self.names[fd] = f"[{name}] ".encode()
            self.partial[fd] = b""
            self.sel.register(fd, selectors.EVENT_READ, read)   # (keeps the Connection alive)
        os.write(self.wake_w, b"x")
        return write

    def _emit(self, fd: int, data: bytes, final: bool) -> None:
        buf = self.partial[fd] + data
        *lines, rest = buf.split(b"\n")
        if final and rest:
            lines.append(rest)
            rest = b""
        self.partial[fd] = rest
        prefix = self.names[fd] if self.prefixed else b""
        for line in lines:
            self.sink.put(prefix + line + b"\n")

    def _run(self) -> None:
        while True:
            for key, _ in self.sel.select():
                fd = key.fd
                if fd == self.wake_r:
                    os.read(fd, 4096)
                    if self.closed and len(self.sel.get_map()) == 1:
                        return
                    continue
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                with self.lock:
                    self._emit(fd, data, final=not data)
                    if not data:    # every writer closed: the worker exited
                        self.sel.unregister(fd)
                        key.data.close()
                        del self.partial[fd], self.names[fd]
            if self.closed and len(self.sel.get_map()) == 1:
                return

    def close(self, timeout: float = 5.0) -> None:
        """Read what the exited workers left (at most `timeout` seconds for pipes still open:
        a worker's own child may hold one), then stop; says on stderr how many lines were
        dropped, if any. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        os.write(self.wake_w, b"x")
        self.thread.join(timeout)
        if self.thread.is_alive():   # a pipe still open somewhere: stop reading it
            with self.lock:
                for key in list(self.sel.get_map().values()):
                    if key.fd != self.wake_r:
                        self.sel.unregister(key.fd)
                        key.data.close()
            os.write(self.wake_w, b"x")
            self.thread.join()
        self.sel.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        self.sink.close()
        if self.sink.dropped:
            print(f"wfrl: {self.sink.dropped} lines of {self.what} were not shown: stderr was "
                  f"not read fast enough (--agent-output FILE keeps them all)",
                  file=self.stream, flush=True)
