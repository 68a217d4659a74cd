# wfrl._core, the compiled core's one extension module: the Cython bindings of the plain C headers
# in csrc/ (no Python.h). Each entry point checks dtype, contiguity and shape once, then runs the C
# routine without the GIL. The C side never allocates: every array belongs to the caller.
#
# The C declarations are in wfrl_c.pxd, each header's once. The bindings are one include file per
# subject, below, after the helpers they share: the simulator (core_sim.pxi), its gymnasium views
# (core_vector.pxi), the memory, truth and belief blocks (core_features.pxi), the rollout loop
# (core_rollout.pxi), the learner's steps (core_learner.pxi), the planner (core_plan.pxi) and
# red as a learner (core_duel.pxi).
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy
from wfrl_c cimport *

import numpy as np

OBS_DIM = WFRL_OBS_DIM
N_ACTIONS = WFRL_N_ACTIONS
N_HOSTS = WFRL_N_HOSTS
EP_LEN = WFRL_EP_LEN
COND_DIM = WFRL_COND_DIM


def _need(bint ok, str what):
    if not ok:
        raise ValueError(what)


cdef void *_aligned(object storage):
    """Pointer to a 64-byte aligned address inside a numpy uint8 array (with 64 spare bytes)."""
    cdef uint8_t[::1] raw = storage
    cdef size_t addr = <size_t>&raw[0]
    return <void *>((addr + 63) & ~(<size_t>63))


include "core_sim.pxi"
include "core_vector.pxi"
include "core_features.pxi"
include "core_rollout.pxi"
include "core_learner.pxi"
include "core_plan.pxi"
include "core_duel.pxi"
