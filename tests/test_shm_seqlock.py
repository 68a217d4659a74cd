"""The compiled sequence lock on the shared weights (csrc/wfrl_seqlock.h) against its plain-Python
twin, and readers in other processes never seeing a torn copy while a writer publishes."""
from multiprocessing import get_context

import numpy as np
import pytest

from wfrl.collect.shm import Attached, ReferenceWeightsBoard, SharedArrays, WeightsBoard, weights_spec


def _boards(n):
    a, b = SharedArrays(weights_spec(n)), SharedArrays(weights_spec(n))
    return (a, WeightsBoard(a.arrays)), (b, ReferenceWeightsBoard(b.arrays))


def test_compiled_and_reference_boards_agree_step_by_step():
    rng = np.random.default_rng(0)
    (sa, compiled), (sb, ref) = _boards(37)
    try:
        for version in [1, 2, 5, 5, 1 << 40, 3]:
            w = rng.standard_normal(37).astype(np.float32)
            compiled.publish(w, version)
            ref.publish(w, version)
            assert compiled.seq.tolist() == ref.seq.tolist()
            assert compiled.seq[0] % 2 == 0
            assert np.array_equal(compiled.w, ref.w) and np.array_equal(compiled.w, w)
            out_c, out_r = np.zeros(37, np.float32), np.zeros(37, np.float32)
            assert compiled.read_into(out_c) == ref.read_into(out_r) == version
            assert np.array_equal(out_c, out_r) and np.array_equal(out_c, w)
            assert compiled.version == ref.version == version
        # A reference-written board reads the same through the compiled reader and vice versa.
        out = np.zeros(37, np.float32)
        assert WeightsBoard(sb.arrays).read_into(out) == 3 and np.array_equal(out, ref.w)
        assert ReferenceWeightsBoard(sa.arrays).read_into(out) == 3
    finally:
        sa.close()
        sb.close()


def test_compiled_board_rejects_mismatched_shapes():
    with SharedArrays(weights_spec(4)) as s:
        board = WeightsBoard(s.arrays)
        with pytest.raises(ValueError, match="dst and src differ in length"):
            board.publish(np.zeros(5, np.float32), 1)
        with pytest.raises(ValueError, match="src and out differ in length"):
            board.read_into(np.zeros(3, np.float32))


def _reader(handle, reads, q, locked=True):
    """`reads` copies of the shared weights: through the sequence lock (read_into), or, locked=False,
    a plain copy of the same shared array (what a reader without the lock would get). Unlocked,
    it stops at its first torn copy."""
    att = Attached(handle)
    board = WeightsBoard(att.arrays)
    out = np.zeros(len(board.w), np.float32)
    torn, versions = 0, []
    for _ in range(reads):
        if locked:
            v = board.read_into(out)
        else:
            np.copyto(out, board.w)
            v = int(out[0])
        # every weight of version v equals v: a mixed copy shows two values
        torn += int(not (out == out[0]).all() or out[0] != v)
        versions.append(v)
        if torn and not locked:
            break
    att.close()
    q.put((locked, torn, versions == sorted(versions), len(set(versions))))


def test_readers_in_other_processes_never_see_a_torn_version():
    """Two readers through the lock and one without it, in other processes, against one writer
    publishing as fast as it can: the unlocked reader sees a torn copy (so the race is real in
    this very run) and the locked ones never do."""
    n = 1 << 16  # a copy long enough for a publish to overlap it often
    ctx = get_context("spawn")
    with SharedArrays(weights_spec(n)) as s:
        board = WeightsBoard(s.arrays)
        board.publish(np.zeros(n, np.float32), 0)
        q = ctx.Queue()
        readers = [ctx.Process(target=_reader, args=(s.handle, 3000, q)) for _ in range(2)]
        readers.append(ctx.Process(target=_reader, args=(s.handle, 200_000, q, False)))
        for p in readers:
            p.start()
        version = 0
        while any(p.is_alive() for p in readers) and q.qsize() < len(readers):
            version += 1
            board.publish(np.full(n, version, np.float32), version)
        results = [q.get(timeout=60) for _ in readers]
        for p in readers:
            p.join(10)
    locked = [r[1:] for r in results if r[0]]
    unlocked = [r[1:] for r in results if not r[0]]
    assert len(locked) == 2 and len(unlocked) == 1
    for torn, monotone, distinct in locked:
        assert torn == 0 and monotone
        assert distinct > 1  # the readers really raced a writer
    assert unlocked[0][0] == 1, "the unlocked reader never saw a torn copy: no race to show"
