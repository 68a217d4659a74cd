"""The one owner of a run's shared memory.

SharedArrays creates a single POSIX shared-memory segment holding named numpy arrays (the
trajectory arrays, the per-episode statistics, the weights board), hands workers a small picklable
handle to attach to, and unlinks the segment on every exit path it can see: close() / the context
manager, interpreter exit (atexit), SIGTERM and SIGINT (re-raised as the usual exceptions after the
unlink). Workers never own the segment: a worker that dies leaves nothing behind, and the owner
dying by SIGKILL is the only case left to the operating system (the segment's name starts with
`wfrl-` and the owner's pid, see SEGMENT_PREFIX).

WeightsBoard is the weights block inside it: the learner publishes a new flat weight vector with a
version number under a sequence lock; workers copy a consistent version between episodes.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import threading
import weakref
from multiprocessing import resource_tracker, shared_memory

import numpy as np

SEGMENT_PREFIX = "wfrl-"
_ALIGN = 64
_live: weakref.WeakSet[SharedArrays] = weakref.WeakSet()
_handlers_installed = False


def _layout(spec: dict) -> tuple[dict, int]:
    offsets, off = {}, 0
    for name, (shape, dtype) in spec.items():
        off = (off + _ALIGN - 1) // _ALIGN * _ALIGN
        offsets[name] = off
        off += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return offsets, max(off, 1)


def _views(buf, spec: dict, offsets: dict) -> dict:
    return {name: np.ndarray(shape, dtype=dtype, buffer=buf, offset=offsets[name])
            for name, (shape, dtype) in spec.items()}


def _unlink_all(*_):
    """Remove every owned segment's name (nothing is left in /dev/shm), keeping the mappings:
    on a signal or at exit another thread may still be inside compiled code that reads or
    writes a segment (the batch collected ahead), and unmapping it there was a segfault
    (exit -11 on SIGTERM, the workers left orphaned; tests/test_stress.py). The mappings go
    with the process."""
    for owner in list(_live):
        owner.unlink()


def _install_handlers():
    """Unlink on SIGTERM/SIGINT too, then behave as Python would have."""
    global _handlers_installed
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    _handlers_installed = True
    atexit.register(_unlink_all)
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)

        def handler(signum, frame, previous=previous):
            _unlink_all()
            if callable(previous):
                return previous(signum, frame)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)

        signal.signal(sig, handler)


@contextlib.contextmanager
def worker_signals_deferred():
    """Hold SIGINT and SIGTERM back while worker processes are being started or stopped, then
    deliver the first one held (its handler runs as the block ends). Without it, a second Ctrl-C
    (or a SIGTERM) landing inside a collector's shutdown left workers that were never terminated
    or joined, and one landing while a worker was being spawned cut its start-up data short (the
    worker printed a traceback). Only the main thread handles signals: elsewhere this does
    nothing. The block must be bounded: the collectors' joins time out and then kill."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            signal.raise_signal(held[0])


class SharedArrays:
    """Named numpy arrays in one shared-memory segment owned by this process.

    spec: {name: (shape, dtype)}. Arrays are zero-initialised.
    """

    def __init__(self, spec: dict):
        self.spec = {k: (tuple(int(d) for d in shape), np.dtype(dt).str) for k, (shape, dt) in spec.items()}
        self.offsets, size = _layout(self.spec)
        self.name = f"{SEGMENT_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self._shm: shared_memory.SharedMemory | None = shared_memory.SharedMemory(
            name=self.name, create=True, size=size)
        self._owner_pid = os.getpid()
        self.arrays = _views(self._shm.buf, self.spec, self.offsets)
        for a in self.arrays.values():
            a[...] = 0
        _live.add(self)
        _install_handlers()

    @property
    def handle(self) -> tuple:
        """What a worker needs to attach: (segment name, spec, offsets)."""
        return (self.name, self.spec, self.offsets)

    def unlink(self) -> None:
        """Remove the segment's name, keep the mapping (idempotent; owner only)."""
        shm = getattr(self, "_shm", None)
        if shm is None or os.getpid() != self._owner_pid or getattr(self, "_unlinked", False):
            return
        self._unlinked = True
        try:
            shm.unlink()
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Unmap and unlink the segment (idempotent; only the owning process unlinks)."""
        self.unlink()
        shm, self._shm = getattr(self, "_shm", None), None
        if shm is None or os.getpid() != self._owner_pid:
            return
        self.arrays = {}
        try:
            shm.close()
        except BufferError:
            pass  # views still exported somewhere; the unlink above is what frees the name
        _live.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Attached:
    """A worker's view of an owner's segment. Never unlinks it."""

    def __init__(self, handle: tuple):
        name, spec, offsets = handle
        # Attaching would register the name with the resource tracker (shared with the owner),
        # which then unlinks or double-counts the owner's segment; the owner alone decides when
        # it goes, so the attach is not registered at all.
        register = resource_tracker.register
        resource_tracker.register = lambda *a, **k: None
        try:
            self._shm = shared_memory.SharedMemory(name=name, create=False)
        finally:
            resource_tracker.register = register
        self.arrays = _views(self._shm.buf, spec, offsets)

    def close(self):
        self.arrays = {}
        try:
            self._shm.close()
        except BufferError:
            pass


def weights_spec(n: int) -> dict:
    # seq: [sequence counter (odd while writing), published version]
    return {"weights": ((n,), np.float32), "weights_seq": ((2,), np.int64)}


class WeightsBoard:
    """Sequence-locked weights inside a SharedArrays/Attached mapping. Publish and read run in C
    (csrc/wfrl_seqlock.h) with release/acquire fences, so the lock also holds on CPUs that reorder
    memory accesses (aarch64), not only on x86."""

    def __init__(self, arrays: dict):
        self.w = arrays["weights"]
        self.seq = arrays["weights_seq"]

    def publish(self, flat: np.ndarray, version: int) -> None:
        from wfrl._core import weights_publish
        weights_publish(self.seq, self.w, np.ascontiguousarray(flat, np.float32), int(version))

    def read_into(self, out: np.ndarray) -> int:
        """Copy a consistent version into `out`; returns its version number."""
        from wfrl._core import weights_read
        return int(weights_read(self.seq, self.w, out))

    @property
    def version(self) -> int:
        return int(self.seq[1])


class ReferenceWeightsBoard(WeightsBoard):
    """The plain-Python twin of the compiled sequence lock (same counter protocol, no fences):
    the reference tests/test_shm_seqlock.py holds the compiled one equal to."""

    def publish(self, flat: np.ndarray, version: int) -> None:
        self.seq[0] += 1          # odd: a write is in progress
        self.w[:] = flat
        self.seq[1] = version
        self.seq[0] += 1          # even: consistent

    def read_into(self, out: np.ndarray) -> int:
        while True:
            s0 = int(self.seq[0])
            if s0 % 2:
                continue
            out[:] = self.w
            version = int(self.seq[1])
            if int(self.seq[0]) == s0:
                return version


def leaked_segments(pid: int | None = None) -> list[str]:
    """wfrl segments in /dev/shm (of one owner pid, or of any)."""
    prefix = SEGMENT_PREFIX + (f"{pid}-" if pid is not None else "")
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix))
    except FileNotFoundError:
        return []
