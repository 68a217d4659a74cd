# Bindings of the compiled core. Each entry point checks dtype, contiguity and shape once, then runs
# the C routine without the GIL. The C side never allocates: every array belongs to the caller.
from libc.stdint cimport int32_t, int64_t, uint8_t

cdef extern from "wfrl_types.h":
    int WFRL_OBS_DIM
    int WFRL_N_ACTIONS
    int WFRL_N_HOSTS
    int WFRL_EP_LEN
    int WFRL_COND_DIM

cdef extern from "wfrl_gae.h" nogil:
    void wfrl_gae(int64_t n_rows, int64_t T, const float *rewards, const float *values,
                  const uint8_t *dones, const int32_t *lengths, const float *last_values,
                  float gamma, float lam, float *adv, float *ret)

cdef extern from "wfrl_buffer.h" nogil:
    ctypedef struct wfrl_traj:
        int64_t n_rows, T, obs_dim, n_hosts
        float *obs
        int32_t *actions
        float *logprobs
        float *values
        float *rewards
        uint8_t *dones
        uint8_t *red_access
        int32_t *lengths
    int64_t wfrl_traj_push(const wfrl_traj *b, int64_t row, const float *obs, int32_t action,
                           float logprob, float value, float reward, uint8_t done,
                           const uint8_t *red_access)
    void wfrl_traj_clear(const wfrl_traj *b)
    int64_t wfrl_traj_count(const wfrl_traj *b)
    int64_t wfrl_traj_flatten(const wfrl_traj *b, const float *adv, const float *ret,
                              float *obs_out, int32_t *act_out, float *logp_out, float *val_out,
                              float *adv_out, float *ret_out, int32_t *row_out)

OBS_DIM = WFRL_OBS_DIM
N_ACTIONS = WFRL_N_ACTIONS
N_HOSTS = WFRL_N_HOSTS
EP_LEN = WFRL_EP_LEN
COND_DIM = WFRL_COND_DIM


def _need(bint ok, str what):
    if not ok:
        raise ValueError(what)


def gae(const float[:, ::1] rewards, const float[:, ::1] values, const uint8_t[:, ::1] dones,
        const int32_t[::1] lengths, const float[::1] last_values, float gamma, float lam,
        float[:, ::1] adv, float[:, ::1] ret):
    """GAE over [rows, T] arrays in place into adv/ret (C). See csrc/wfrl_gae.h for the layout."""
    cdef Py_ssize_t n = rewards.shape[0], T = rewards.shape[1], r
    for name, arr in (("values", values), ("dones", dones), ("adv", adv), ("ret", ret)):
        _need(arr.shape[0] == n and arr.shape[1] == T, f"gae: {name} must have shape ({n}, {T})")
    _need(lengths.shape[0] == n and last_values.shape[0] == n,
          f"gae: lengths and last_values must have {n} entries")
    for r in range(n):
        _need(0 <= lengths[r] <= T, f"gae: lengths[{r}]={lengths[r]} outside [0, {T}]")
    if n == 0 or T == 0:
        return
    with nogil:
        wfrl_gae(n, T, &rewards[0, 0], &values[0, 0], &dones[0, 0], &lengths[0],
                 &last_values[0], gamma, lam, &adv[0, 0], &ret[0, 0])


cdef class TrajectoryBuffer:
    """C view over caller-owned trajectory arrays (see wfrl.collect.buffer.allocate_trajectory).

    Keeps references to the arrays so they outlive the pointers held in the C struct.
    """
    cdef wfrl_traj b
    cdef readonly object arrays

    def __cinit__(self, dict arrays):
        cdef float[:, :, ::1] obs = arrays["obs"]
        cdef int32_t[:, ::1] actions = arrays["actions"]
        cdef float[:, ::1] logprobs = arrays["logprobs"]
        cdef float[:, ::1] values = arrays["values"]
        cdef float[:, ::1] rewards = arrays["rewards"]
        cdef uint8_t[:, ::1] dones = arrays["dones"]
        cdef uint8_t[:, :, ::1] red_access = arrays["red_access"]
        cdef int32_t[::1] lengths = arrays["lengths"]
        cdef Py_ssize_t n = obs.shape[0], T = obs.shape[1]
        _need(n > 0 and T > 0 and obs.shape[2] > 0 and red_access.shape[2] > 0,
              "TrajectoryBuffer: every dimension must be positive")
        for name, arr in (("actions", actions), ("logprobs", logprobs), ("values", values),
                          ("rewards", rewards), ("dones", dones), ("red_access", red_access)):
            _need(arr.shape[0] == n and arr.shape[1] == T,
                  f"TrajectoryBuffer: {name} must start with shape ({n}, {T})")
        _need(lengths.shape[0] == n, f"TrajectoryBuffer: lengths must have {n} entries")
        self.arrays = arrays
        self.b.n_rows = n
        self.b.T = T
        self.b.obs_dim = obs.shape[2]
        self.b.n_hosts = red_access.shape[2]
        self.b.obs = &obs[0, 0, 0]
        self.b.actions = &actions[0, 0]
        self.b.logprobs = &logprobs[0, 0]
        self.b.values = &values[0, 0]
        self.b.rewards = &rewards[0, 0]
        self.b.dones = &dones[0, 0]
        self.b.red_access = &red_access[0, 0, 0]
        self.b.lengths = &lengths[0]

    @property
    def n_rows(self):
        return self.b.n_rows

    @property
    def T(self):
        return self.b.T

    def push(self, Py_ssize_t row, const float[::1] obs, int action, float logprob, float value,
             float reward, bint done, const uint8_t[::1] red_access):
        """Append one step to `row`; returns its step index. Raises if the row is full."""
        if row < 0 or row >= self.b.n_rows:
            raise IndexError(f"row {row} outside [0, {self.b.n_rows})")
        if obs.shape[0] != self.b.obs_dim or red_access.shape[0] != self.b.n_hosts:
            raise ValueError("push: obs or red_access has the wrong length")
        cdef int64_t t = wfrl_traj_push(&self.b, row, &obs[0], action, logprob, value, reward,
                                        done, &red_access[0])
        if t < 0:
            raise IndexError(f"row {row} is full ({self.b.T} steps)")
        return t

    def clear(self):
        wfrl_traj_clear(&self.b)

    def count(self):
        return wfrl_traj_count(&self.b)

    def flatten(self, const float[:, ::1] adv, const float[:, ::1] ret, dict out):
        """Gather the valid steps into the flat arrays of `out` (obs, actions, logprobs, values,
        advantages, returns, rows), each with at least count() entries; returns that count."""
        _need(adv.shape[0] == self.b.n_rows and adv.shape[1] == self.b.T
              and ret.shape[0] == self.b.n_rows and ret.shape[1] == self.b.T,
              "flatten: adv/ret must have the buffer's [rows, T] shape")
        cdef float[:, ::1] obs_out = out["obs"]
        cdef int32_t[::1] act_out = out["actions"]
        cdef float[::1] logp_out = out["logprobs"]
        cdef float[::1] val_out = out["values"]
        cdef float[::1] adv_out = out["advantages"]
        cdef float[::1] ret_out = out["returns"]
        cdef int32_t[::1] row_out = out["rows"]
        cdef int64_t n = wfrl_traj_count(&self.b), k
        _need(obs_out.shape[1] == self.b.obs_dim, "flatten: out['obs'] has the wrong width")
        for name, arr in (("obs", obs_out), ("actions", act_out), ("logprobs", logp_out),
                          ("values", val_out), ("advantages", adv_out), ("returns", ret_out),
                          ("rows", row_out)):
            _need(arr.shape[0] >= n, f"flatten: out['{name}'] holds fewer than {n} entries")
        if n == 0:
            return 0
        with nogil:
            k = wfrl_traj_flatten(&self.b, &adv[0, 0], &ret[0, 0], &obs_out[0, 0], &act_out[0],
                                  &logp_out[0], &val_out[0], &adv_out[0], &ret_out[0], &row_out[0])
        return k
