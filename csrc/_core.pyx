# Bindings of the compiled core. Each entry point checks dtype, contiguity and shape once, then runs
# the C routine without the GIL. The C side never allocates: every array belongs to the caller.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

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
        float *belief
        int64_t belief_dim
        int32_t *lengths
    int64_t wfrl_traj_push(const wfrl_traj *b, int64_t row, const float *obs, int32_t action,
                           float logprob, float value, float reward, uint8_t done,
                           const uint8_t *red_access, const float *belief)
    void wfrl_traj_clear(const wfrl_traj *b)
    int64_t wfrl_traj_count(const wfrl_traj *b)
    int64_t wfrl_traj_flatten(const wfrl_traj *b, const float *adv, const float *ret,
                              float *obs_out, int32_t *act_out, float *logp_out, float *val_out,
                              float *adv_out, float *ret_out, int32_t *row_out)

cdef extern from "wfrl_seqlock.h" nogil:
    void wfrl_weights_publish(int64_t *seq, float *dst, const float *src, int64_t n,
                              int64_t version)
    int64_t wfrl_weights_read(const int64_t *seq, const float *src, float *out, int64_t n)

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
    An optional "belief" array [rows, T, BELIEF_DIM] records the belief block of every step.

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
        cdef float[:, :, ::1] belief
        self.b.belief = NULL
        self.b.belief_dim = 0
        if arrays.get("belief") is not None:
            belief = arrays["belief"]
            _need(belief.shape[0] == n and belief.shape[1] == T
                  and belief.shape[2] == WFRL_BELIEF_DIM,
                  f"TrajectoryBuffer: belief must have shape ({n}, {T}, {WFRL_BELIEF_DIM})")
            self.b.belief = &belief[0, 0, 0]
            self.b.belief_dim = WFRL_BELIEF_DIM

    @property
    def n_rows(self):
        return self.b.n_rows

    @property
    def T(self):
        return self.b.T

    def push(self, Py_ssize_t row, const float[::1] obs, int action, float logprob, float value,
             float reward, bint done, const uint8_t[::1] red_access, const float[::1] belief=None):
        """Append one step to `row` (belief: its belief block, recorded where the buffer has the
        field); returns its step index. Raises if the row is full."""
        if row < 0 or row >= self.b.n_rows:
            raise IndexError(f"row {row} outside [0, {self.b.n_rows})")
        if obs.shape[0] != self.b.obs_dim or red_access.shape[0] != self.b.n_hosts:
            raise ValueError("push: obs or red_access has the wrong length")
        if belief is not None and belief.shape[0] != WFRL_BELIEF_DIM:
            raise ValueError(f"push: belief must have {WFRL_BELIEF_DIM} entries")
        cdef const float *bp = NULL if belief is None else &belief[0]
        cdef int64_t t = wfrl_traj_push(&self.b, row, &obs[0], action, logprob, value, reward,
                                        done, &red_access[0], bp)
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


# ------------------------------------------------------------------------------------------
# Compiled CAGE2 (csrc/wfrl_cage2.h)

cdef extern from "wfrl_rng.h" nogil:
    ctypedef struct wfrl_rng:
        uint64_t s[4]
    void wfrl_rng_seed(wfrl_rng *r, uint64_t seed)

cdef extern from "wfrl_cage2.h" nogil:
    ctypedef struct wfrl_cage2:
        int32_t t
        wfrl_rng rng
        uint8_t comp[13]
        uint8_t ot_running
        uint8_t decoys[13]
        uint8_t n_vsftpd[13]
        uint8_t prev_success
        uint8_t last_red_type
        signed char last_red_target
        uint8_t red_kind
    int WFRL_RED_LEADERBOARD
    void wfrl_cage2_reset(wfrl_cage2 *e, uint64_t seed, int red_kind)
    int wfrl_cage2_step(wfrl_cage2 *e, int action, float *obs, uint8_t *red_access)
    void wfrl_cage2_obs(const wfrl_cage2 *e, float *obs)
    void wfrl_cage2_red_access(const wfrl_cage2 *e, uint8_t *red_access)
    void wfrl_cage2_step_batch(wfrl_cage2 *envs, int64_t n, const int32_t *actions, float *obs,
                               float *reward, uint8_t *done, uint8_t *red_access)
    int64_t wfrl_cage2_random_rollout(wfrl_cage2 *e, int64_t n_steps, uint64_t seed)

import numpy as np

RED_KINDS = {"B_lineAgent": 0, "RedMeanderAgent": 1, "SleepAgent": 2, "mixed": 3}


def red_kind_code(str red_agent, bint leaderboard=False):
    """The red kind the C reset takes: the agent's RED_* code, with WFRL_RED_LEADERBOARD set to
    play by the CybORG code the CAGE2 leaderboard was scored on (wfrl.envs.base.BACKENDS)."""
    if red_agent not in RED_KINDS:
        raise ValueError(f"unknown red agent {red_agent!r}")
    return RED_KINDS[red_agent] | (WFRL_RED_LEADERBOARD if leaderboard else 0)


cdef class Cage2Sim:
    """n independent compiled CAGE2 envs against one red agent.

    The env structs live in a numpy byte array owned by this object; the C code never allocates.
    """
    cdef wfrl_cage2 *envs
    cdef readonly Py_ssize_t n
    cdef readonly int red_kind
    cdef object _storage

    def __cinit__(self, Py_ssize_t n, str red_agent, bint leaderboard=False):
        if n <= 0:
            raise ValueError("Cage2Sim needs at least one env")
        self.n = n
        self.red_kind = red_kind_code(red_agent, leaderboard)
        self._storage = np.zeros(n * sizeof(wfrl_cage2) + 64, dtype=np.uint8)
        cdef uint8_t[::1] raw = self._storage
        cdef size_t addr = <size_t>&raw[0]
        self.envs = <wfrl_cage2 *>((addr + 63) & ~(<size_t>63))
        for i in range(n):
            wfrl_cage2_reset(&self.envs[i], i, self.red_kind)

    cdef inline wfrl_cage2 *_env(self, Py_ssize_t i) except NULL:
        if i < 0 or i >= self.n:
            raise IndexError(f"env {i} outside [0, {self.n})")
        return &self.envs[i]

    def reset(self, Py_ssize_t i, uint64_t seed):
        """Start a new episode of env i from `seed`; returns (obs float32[52], red_access uint8[13])."""
        cdef wfrl_cage2 *e = self._env(i)
        wfrl_cage2_reset(e, seed, self.red_kind)
        obs = np.zeros(WFRL_OBS_DIM, dtype=np.float32)
        ra = np.empty(WFRL_N_HOSTS, dtype=np.uint8)
        cdef uint8_t[::1] rav = ra
        wfrl_cage2_red_access(e, &rav[0])
        return obs, ra

    def step(self, Py_ssize_t i, int action):
        """One blue step of env i → (obs float32[52], reward float, red_access uint8[13])."""
        cdef wfrl_cage2 *e = self._env(i)
        if action < 0 or action >= WFRL_N_ACTIONS:
            raise ValueError(f"action {action} outside [0, {WFRL_N_ACTIONS})")
        obs = np.empty(WFRL_OBS_DIM, dtype=np.float32)
        ra = np.empty(WFRL_N_HOSTS, dtype=np.uint8)
        cdef float[::1] ov = obs
        cdef uint8_t[::1] rav = ra
        cdef int r10 = wfrl_cage2_step(e, action, &ov[0], &rav[0])
        return obs, r10 / 10.0, ra

    def reset_batch(self, const uint64_t[::1] seeds, float[:, ::1] obs, uint8_t[:, ::1] red_access):
        """Reset every env i with seeds[i]; writes the first obs and red_access of each."""
        _need(seeds.shape[0] == self.n and obs.shape[0] == self.n and obs.shape[1] == WFRL_OBS_DIM
              and red_access.shape[0] == self.n and red_access.shape[1] == WFRL_N_HOSTS,
              "reset_batch: arrays must have n rows (obs [n, 52], red_access [n, 13])")
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                wfrl_cage2_reset(&self.envs[i], seeds[i], self.red_kind)
                wfrl_cage2_obs(&self.envs[i], &obs[i, 0])
                wfrl_cage2_red_access(&self.envs[i], &red_access[i, 0])

    def step_batch(self, const int32_t[::1] actions, float[:, ::1] obs, float[::1] reward,
                   uint8_t[::1] done, uint8_t[:, ::1] red_access):
        """Step all n envs at once without the GIL (no auto-reset: reset done envs yourself)."""
        _need(actions.shape[0] == self.n and obs.shape[0] == self.n
              and obs.shape[1] == WFRL_OBS_DIM and reward.shape[0] == self.n
              and done.shape[0] == self.n and red_access.shape[0] == self.n
              and red_access.shape[1] == WFRL_N_HOSTS,
              "step_batch: arrays must have n rows (obs [n, 52], red_access [n, 13])")
        cdef Py_ssize_t i
        for i in range(self.n):
            if actions[i] < 0 or actions[i] >= WFRL_N_ACTIONS:
                raise ValueError(f"actions[{i}]={actions[i]} outside [0, {WFRL_N_ACTIONS})")
        with nogil:
            wfrl_cage2_step_batch(self.envs, self.n, &actions[0], &obs[0, 0], &reward[0], &done[0],
                                  &red_access[0, 0])

    def random_rollout(self, Py_ssize_t i, int64_t n_steps, uint64_t seed):
        """Step env i n_steps times with uniform random actions in C (new episode every 100 steps);
        returns the summed reward. For measuring the simulator's own per-step cost."""
        cdef wfrl_cage2 *e = self._env(i)
        cdef int64_t total
        with nogil:
            total = wfrl_cage2_random_rollout(e, n_steps, seed)
        return total / 10.0

    def last_red_action(self, Py_ssize_t i):
        """Red's action in env i's last step: (kind 0 sleep, 1 DiscoverRemoteSystems (target a
        subnet: 0 user, 1 enterprise, 2 operational), 2 DiscoverNetworkServices, 3
        ExploitRemoteService, 4 PrivilegeEscalate, 5 Impact (target a host); success 0/1)."""
        cdef wfrl_cage2 *e = self._env(i)
        return int(e.last_red_type), int(e.last_red_target), int(e.prev_success == 1)

    def decoys(self, Py_ssize_t i):
        """Decoys in place on env i's hosts: uint8[13], bit k = kind k of wfrl.features
        .DECOY_KINDS."""
        cdef wfrl_cage2 *e = self._env(i)
        out = np.empty(WFRL_N_HOSTS, dtype=np.uint8)
        for h in range(WFRL_N_HOSTS):
            out[h] = (e.decoys[h] & 0x7F) | (0x80 if e.n_vsftpd[h] else 0)
        return out

    def steps_taken(self, Py_ssize_t i):
        return self._env(i).t

    def ot_running(self, Py_ssize_t i):
        return bool(self._env(i).ot_running)


# ------------------------------------------------------------------------------------------
# Policy forward pass, compliance and the rollout loop (csrc/wfrl_mlp.h, wfrl_compliance.h,
# wfrl_rollout.h)

cdef extern from "wfrl_memory.h" nogil:
    int WFRL_MEM_DIM
    ctypedef struct wfrl_memory:
        int16_t t
    void wfrl_memory_begin(wfrl_memory *m)
    void wfrl_memory_update(wfrl_memory *m, const float *obs)
    void wfrl_memory_features(const wfrl_memory *m, float *out)
    void wfrl_memory_mask(const wfrl_memory *m, uint8_t *allowed)
    void wfrl_memory_acted(wfrl_memory *m, int action)

cdef extern from "wfrl_truth.h" nogil:
    int WFRL_TRUTH_DIM
    void wfrl_truth_features(const uint8_t *red_access, float *out)

cdef extern from "wfrl_cage2.h" nogil:
    int wfrl_mixed_red_kind(uint64_t seed)

cdef extern from "wfrl_belief.h" nogil:
    int WFRL_BELIEF_DIM
    int WFRL_FILTER_MAX_PARTICLES
    ctypedef struct wfrl_filter:
        int32_t n, red_set, leaderboard, last_survivors
        wfrl_cage2 *parts
        int64_t n_observed, n_fallbacks
    size_t wfrl_filter_bytes(int n)
    uint8_t *wfrl_filter_init(wfrl_filter *f, void *block, int n, int red_set, int leaderboard)
    size_t wfrl_belief_align(size_t n)
    void wfrl_belief_features(const wfrl_cage2 *parts, int n, float *out)

BELIEF_DIM = WFRL_BELIEF_DIM
FILTER_MAX_PARTICLES = WFRL_FILTER_MAX_PARTICLES

cdef extern from "wfrl_rollout.h" nogil:
    int WFRL_IN_DIM
    int WFRL_MAX_IN_DIM
    int WFRL_MAX_HIDDEN
    ctypedef struct wfrl_workflow:
        uint8_t rank[5]
        uint8_t count_foothold
        float lam
    ctypedef struct wfrl_compliance:
        int32_t fixes
        int32_t compliant
    ctypedef struct wfrl_policy:
        const float *weights
        int hidden
        int in_dim
        int memory
        int truth
        int belief
        int belief_reds
        int mask
        int greedy
        const float *cond
        wfrl_workflow wf
    ctypedef struct wfrl_episode_stats:
        float env_return
        float alignment
        float compliance
        int32_t fixes
        int32_t compliant
    ctypedef struct wfrl_actor:
        wfrl_compliance comp
        wfrl_memory mem
        wfrl_filter *filter
        float belief[1]   # [WFRL_BELIEF_DIM]: the block of the last action choice
    ctypedef struct wfrl_scratch:
        float x[1]        # [WFRL_MAX_IN_DIM]: the input of the last action choice
    ctypedef struct wfrl_slot:
        wfrl_cage2 env
        wfrl_actor actor
    int64_t wfrl_mlp_n_params(int64_t H, int64_t I)
    void wfrl_mlp_pack(const float *flat, int H, int I, float *packed)
    void wfrl_mlp_forward(const float *packed, int H, int I, const float *x, float *logits,
                          float *value, float *scratch)
    double wfrl_compliance_rate(const wfrl_compliance *c)
    float wfrl_compliance_finish(const wfrl_compliance *c, const wfrl_workflow *w)
    void wfrl_actor_begin(wfrl_actor *a, uint64_t act_seed)
    int wfrl_actor_act(wfrl_actor *a, const wfrl_policy *p, wfrl_scratch *s, const float *obs,
                       const uint8_t *red_access, float *logp, float *value, float *bonus)
    void wfrl_slot_begin(wfrl_slot *sl, uint64_t env_seed, uint64_t act_seed, int red_kind,
                         int64_t row, const wfrl_traj *buf)
    void wfrl_slots_step(wfrl_slot *slots, int64_t n, const wfrl_policy *p, const wfrl_traj *buf,
                         wfrl_scratch *s)
    void wfrl_slot_stats(const wfrl_slot *sl, wfrl_episode_stats *st)
    void wfrl_rollout_sim_episode(wfrl_slot *sl, int red_kind, uint64_t env_seed,
                                  uint64_t act_seed, const wfrl_policy *p, const wfrl_traj *buf,
                                  int64_t row, wfrl_scratch *s, wfrl_episode_stats *st,
                                  int horizon)

IN_DIM = WFRL_IN_DIM
MEM_DIM = WFRL_MEM_DIM
TRUTH_DIM = WFRL_TRUTH_DIM
MAX_IN_DIM = WFRL_MAX_IN_DIM


def in_dim(bint memory, bint truth=False, bint belief=False):
    """Width of the policy input: obs ⊕ (memory block) ⊕ (truth block) ⊕ (belief block) ⊕
    workflow one-hot."""
    return (WFRL_IN_DIM + (WFRL_MEM_DIM if memory else 0) + (WFRL_TRUTH_DIM if truth else 0)
            + (WFRL_BELIEF_DIM if belief else 0))



def truth_rows(const uint8_t[:, :, ::1] red_access, const int32_t[::1] lengths):
    """The compiled truth block (csrc/wfrl_truth.h, the rollout loop's own code) of recorded
    episodes, flattened the way the learner's batch is: row 0's steps 0..lengths[0]-1, then row
    1's, … red_access [R, T, 13] is red's access at each step (the buffer's red_access).
    Returns float32 [N, TRUTH_DIM], N = sum(lengths). Plain-Python twin:
    wfrl.features.truth_features (indexed by the valid steps)."""
    cdef Py_ssize_t R = red_access.shape[0], T = red_access.shape[1], r, t, k = 0, N = 0
    _need(red_access.shape[2] == WFRL_N_HOSTS and lengths.shape[0] >= R,
          "truth_rows: red_access must be [R, T, 13] and lengths [R]")
    for r in range(R):
        _need(0 <= lengths[r] <= T, f"truth_rows: length {lengths[r]} of row {r} not in 0..{T}")
        N += lengths[r]
    feats = np.zeros((N, WFRL_TRUTH_DIM), np.float32)
    if N == 0:
        return feats
    cdef float[:, ::1] fv = feats
    with nogil:
        for r in range(R):
            for t in range(lengths[r]):
                wfrl_truth_features(&red_access[r, t, 0], &fv[k, 0])
                k += 1
    return feats


def _valid_in_dims():
    return sorted({in_dim(m, t) for m in (False, True) for t in (False, True)})


def mixed_red_kind(uint64_t seed):
    """The red agent (0 B_line, 1 Meander) the mixed red plays in the episode with this env seed."""
    return wfrl_mixed_red_kind(seed)


def memory_trace(const float[:, ::1] obs, const int32_t[::1] actions):
    """Run the compiled memory over one recorded episode: the observation each action was chosen
    on (obs [T, 52]) and the actions (T). Returns (features float32 [T, MEM_DIM], allowed uint8
    [T, 145]) as the rollout loop saw them at each step."""
    cdef Py_ssize_t T = obs.shape[0], t
    _need(obs.shape[1] == WFRL_OBS_DIM and actions.shape[0] == T,
          "memory_trace: obs must be [T, 52] and actions [T]")
    feats = np.zeros((T, WFRL_MEM_DIM), np.float32)
    allowed = np.zeros((T, WFRL_N_ACTIONS), np.uint8)
    cdef float[:, ::1] fv = feats
    cdef uint8_t[:, ::1] av = allowed
    cdef wfrl_memory m
    wfrl_memory_begin(&m)
    for t in range(T):
        _need(0 <= actions[t] < WFRL_N_ACTIONS, f"memory_trace: action {actions[t]} out of range")
        wfrl_memory_update(&m, &obs[t, 0])
        wfrl_memory_features(&m, &fv[t, 0])
        wfrl_memory_mask(&m, &av[t, 0])
        wfrl_memory_acted(&m, actions[t])
    return feats, allowed


def memory_rows(const float[:, :, ::1] obs, const int32_t[:, ::1] actions,
                const int32_t[::1] lengths, bint memory=True, bint mask=True):
    """The compiled memory over recorded episodes (rows of a trajectory buffer), flattened the
    way the learner's batch is: row 0's steps 0..lengths[0]-1, then row 1's, … obs [R, T, 52] is
    the observation each action was chosen on, actions [R, T] the actions. Returns (features
    float32 [N, MEM_DIM] or None, allowed uint8 [N, 145] or None), N = sum(lengths). Plain-Python
    twin: wfrl.features.memory_and_masks (indexed by the valid steps)."""
    cdef Py_ssize_t R = obs.shape[0], T = obs.shape[1], r, t, k = 0, N = 0
    _need(obs.shape[2] == WFRL_OBS_DIM and actions.shape[0] == R and actions.shape[1] == T
          and lengths.shape[0] >= R, "memory_rows: obs must be [R, T, 52], actions [R, T], "
          "lengths [R]")
    for r in range(R):
        _need(0 <= lengths[r] <= T, f"memory_rows: length {lengths[r]} of row {r} not in 0..{T}")
        N += lengths[r]
        for t in range(lengths[r]):
            _need(0 <= actions[r, t] < WFRL_N_ACTIONS,
                  f"memory_rows: action {actions[r, t]} out of range")
    feats = np.zeros((N if memory else 0, WFRL_MEM_DIM), np.float32)
    allowed = np.zeros((N if mask else 0, WFRL_N_ACTIONS), np.uint8)
    cdef float[:, ::1] fv = feats
    cdef uint8_t[:, ::1] av = allowed
    cdef wfrl_memory m
    with nogil:
        for r in range(R):
            wfrl_memory_begin(&m)
            for t in range(lengths[r]):
                wfrl_memory_update(&m, &obs[r, t, 0])
                if memory:
                    wfrl_memory_features(&m, &fv[k, 0])
                if mask:
                    wfrl_memory_mask(&m, &av[k, 0])
                wfrl_memory_acted(&m, actions[r, t])
                k += 1
    return (feats if memory else None), (allowed if mask else None)


cdef class MemoryBatch:
    """The compiled memory (csrc/wfrl_memory.h) of n episodes in progress, stepped together: the
    memory and action-mask wrappers (wfrl.envs.memory_env) hold one. Per step: acted(actions)
    with the actions just taken, then update(obs), which writes each episode's memory block into
    `features` [n, MEM_DIM] and its allowed actions into `allowed` [n, 145] (1 = allowed), the
    input and mask the rollout loop builds at that step. Reference: wfrl.features.MemoryTracker."""
    cdef wfrl_memory *m
    cdef object _storage
    cdef readonly Py_ssize_t n
    cdef readonly object features, allowed

    def __cinit__(self, Py_ssize_t n):
        _need(n > 0, "MemoryBatch needs at least one episode")
        self.n = n
        self._storage = np.zeros(n * sizeof(wfrl_memory) + 64, np.uint8)
        self.m = <wfrl_memory *>_aligned(self._storage)
        self.features = np.zeros((n, WFRL_MEM_DIM), np.float32)
        self.allowed = np.ones((n, WFRL_N_ACTIONS), np.uint8)
        cdef Py_ssize_t i
        for i in range(n):
            wfrl_memory_begin(&self.m[i])

    cdef object _mask(self, mask, what):
        """mask (bool [n]; None: every episode) as a uint8 array, which the caller holds while
        it reads it."""
        if mask is None:
            return np.ones(self.n, np.uint8)
        m = np.ascontiguousarray(mask, dtype=np.bool_).view(np.uint8)
        _need(m.ndim == 1 and m.shape[0] == self.n,
              f"MemoryBatch.{what}: mask must have {self.n} entries")
        return m

    def begin(self, mask=None):
        """Start new episodes: every one, or those where mask (bool [n])."""
        cdef const uint8_t[::1] mk = self._mask(mask, "begin")
        cdef Py_ssize_t i
        for i in range(self.n):
            if mk[i]:
                wfrl_memory_begin(&self.m[i])

    def acted(self, const int32_t[::1] actions):
        """Record the action each episode just took (a negative one: none, e.g. an autoreset
        step whose action the env ignored)."""
        _need(actions.shape[0] == self.n, f"MemoryBatch.acted: actions must have shape ({self.n},)")
        cdef Py_ssize_t i
        for i in range(self.n):
            _need(actions[i] < WFRL_N_ACTIONS, f"MemoryBatch.acted: action {actions[i]} out of range")
        with nogil:
            for i in range(self.n):
                if actions[i] >= 0:
                    wfrl_memory_acted(&self.m[i], actions[i])

    def update(self, const float[:, ::1] obs, mask=None):
        """Account for each episode's new observation (obs [n, >= 52]: the first 52 floats are
        CAGE2's) and write its memory block and mask into `features` / `allowed`; with mask (bool
        [n]) only those episodes move."""
        _need(obs.shape[0] == self.n and obs.shape[1] >= WFRL_OBS_DIM,
              f"MemoryBatch.update: obs must be [{self.n}, >= {WFRL_OBS_DIM}]")
        cdef const uint8_t[::1] mk = self._mask(mask, "update")
        cdef float[:, ::1] fv = self.features
        cdef uint8_t[:, ::1] av = self.allowed
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                if mk[i]:
                    wfrl_memory_update(&self.m[i], &obs[i, 0])
                    wfrl_memory_features(&self.m[i], &fv[i, 0])
                    wfrl_memory_mask(&self.m[i], &av[i, 0])

    def peek(self, Py_ssize_t i, const float[::1] obs):
        """Episode i's memory block and mask had it seen obs now, without keeping it (the last
        observation of an episode that autoreset ended): (float32 [MEM_DIM], uint8 [145])."""
        _need(0 <= i < self.n and obs.shape[0] >= WFRL_OBS_DIM, "MemoryBatch.peek: bad index/obs")
        cdef wfrl_memory c = self.m[i]
        f = np.empty(WFRL_MEM_DIM, np.float32)
        a = np.empty(WFRL_N_ACTIONS, np.uint8)
        cdef float[::1] fv = f
        cdef uint8_t[::1] av = a
        wfrl_memory_update(&c, &obs[0])
        wfrl_memory_features(&c, &fv[0])
        wfrl_memory_mask(&c, &av[0])
        return f, a


cdef extern from "wfrl_fastmath.h" nogil:
    float wfrl_exp_nonpos(float x)
    float wfrl_tanh(float x)


def fastmath(const float[::1] x, str fn):
    """The branch-free exp (fn="exp", for x <= 0) or tanh (fn="tanh") of csrc/wfrl_fastmath.h on
    every element of x: a new float32 array. Plain twins: numpy's exp and tanh
    (tests/test_fastmath.py bounds the difference)."""
    _need(fn in ("exp", "tanh"), "fastmath: fn must be 'exp' or 'tanh'")
    out = np.empty(x.shape[0], np.float32)
    cdef float[::1] ov = out
    cdef Py_ssize_t i
    cdef bint tanh = fn == "tanh"
    with nogil:
        for i in range(x.shape[0]):
            ov[i] = wfrl_tanh(x[i]) if tanh else wfrl_exp_nonpos(x[i])
    return out


cdef extern from "wfrl_head.h" nogil:
    void wfrl_ppo_head(int64_t n, int64_t A, const float *logits, const uint8_t *allowed,
                       const int64_t *actions, const float *old_logp, const float *adv,
                       float clip, float ent_coef, float *grad, double *stats)


def ppo_head(const float[:, ::1] logits, const uint8_t[:, ::1] allowed not None,
             const int64_t[::1] actions, const float[::1] old_logp, const float[::1] adv,
             float clip, float ent_coef, float[:, ::1] grad):
    """The PPO policy head of one minibatch in one pass (C): writes d loss / d logits into grad
    [n, A] and returns the sums over rows of (clipped surrogate, entropy, approx. KL, clipped
    ratios); loss = mean surrogate - ent_coef * mean entropy. allowed [n, A]: 1 where the action
    is allowed, 0 where it is masked. Plain twin: wfrl.ppo.head.head_loss_reference (torch autograd); see
    csrc/wfrl_head.h."""
    cdef Py_ssize_t n = logits.shape[0], A = logits.shape[1], i
    _need(A > 0 and n > 0, "ppo_head: logits must be a non-empty [n, A] array")
    _need(A <= WFRL_N_ACTIONS, f"ppo_head: at most {WFRL_N_ACTIONS} actions per row, not {A}")
    _need(grad.shape[0] == n and grad.shape[1] == A, f"ppo_head: grad must have shape ({n}, {A})")
    _need(actions.shape[0] == n and old_logp.shape[0] == n and adv.shape[0] == n,
          f"ppo_head: actions, old_logp and adv must have {n} entries")
    _need(allowed.shape[0] == n and allowed.shape[1] == A,
          f"ppo_head: allowed must have shape ({n}, {A})")
    cdef bint in_range = True
    with nogil:
        for i in range(n):
            if actions[i] < 0 or actions[i] >= A:
                in_range = False
    _need(in_range, f"ppo_head: an action lies outside 0..{A - 1}")
    cdef const char *zb = <const char *>&logits[0, 0]
    cdef const char *gb = <const char *>&grad[0, 0]
    cdef Py_ssize_t nbytes = n * A * sizeof(float)
    _need(gb + nbytes <= zb or zb + nbytes <= gb, "ppo_head: grad must not overlap logits")
    cdef double stats[5]
    with nogil:
        wfrl_ppo_head(n, A, &logits[0, 0], &allowed[0, 0], &actions[0], &old_logp[0], &adv[0], clip,
                      ent_coef, &grad[0, 0], stats)
    _need(stats[4] == 0, f"ppo_head: {int(stats[4])} row(s) allow no action")
    return stats[0], stats[1], stats[2], stats[3]


cdef extern from "wfrl_update.h" nogil:
    ctypedef struct wfrl_net_t:
        int64_t H, I, O
        float *param[6]
        float *grad[6]
        float *exp_avg[6]
        float *exp_avg_sq[6]
        float *step[6]
        float lr, beta1, beta2, eps, max_norm
    int64_t wfrl_step_scratch_floats(int64_t k, int64_t nc, int64_t H, int64_t no)
    int wfrl_gemm_level()
    void wfrl_actor_step(const wfrl_net_t *net, int64_t k, const float *x, const int64_t *cols,
                         int64_t nc, const int64_t *acts, int64_t no, const uint8_t *allowed,
                         const int64_t *actions, const float *old_logp, const float *adv,
                         float clip, float ent_coef, float *scratch, double *stats)
    void wfrl_critic_step(const wfrl_net_t *net, int64_t k, const float *x, const int64_t *cols,
                          int64_t nc, const float *ret, float value_coef, float *scratch,
                          double *stats)
    int64_t wfrl_actor_logp(const wfrl_net_t *net, int64_t k, const float *x,
                            const int64_t *cols, int64_t nc, const int64_t *acts, int64_t no,
                            const uint8_t *allowed, const int64_t *actions,
                            const float *behaviour_logp, float max_weight, float *scratch,
                            float *logp, float *weight)


def compiled_step_fast():
    """Whether the compiled minibatch step runs its fast tiling on this CPU (AVX-512); elsewhere
    it is correct but slower than torch's steps, which the learner then keeps."""
    return wfrl_gemm_level() == 2


cdef float *_f32_ptr(object arr, tuple shape, str what) except NULL:
    """The data of a writeable float32 C-contiguous numpy array of this shape."""
    _need(isinstance(arr, np.ndarray) and arr.dtype == np.float32 and arr.flags.c_contiguous
          and arr.flags.writeable and arr.shape == shape,
          f"NetStep: {what} must be a writeable C-contiguous float32 array of shape {shape}")
    cdef float[::1] flat = arr.reshape(-1)
    return &flat[0]


cdef const int64_t *_indices(const int64_t[::1] idx):
    """The data of an index array, or NULL for None (every index)."""
    return NULL if idx is None or idx.shape[0] == 0 else &idx[0]


cdef _increasing(const int64_t[::1] idx, int64_t limit, str what):
    """Refuse index arrays that are not strictly increasing within 0..limit-1."""
    cdef int64_t j
    for j in range(idx.shape[0]):
        _need(0 <= idx[j] < limit and (j == 0 or idx[j] > idx[j - 1]),
              f"NetStep: {what} indices must increase within 0..{limit - 1}")


cdef class NetStep:
    """One network of the learner (the actor or the critic: two tanh layers and a linear output)
    for the compiled minibatch step (csrc/wfrl_update.h): its six parameters W1 [H, I], b1 [H],
    W2 [H, H], b2 [H], W3 [O, H], b3 [O], their gradients, Adam's two moments and step counters
    (0-d), as numpy arrays sharing the memory of the learner's tensors (kept referenced here),
    and Adam's betas and eps and the gradient-norm clip. A step overwrites the gradients, steps
    the parameters and moments in place and adds 1 to each step counter. Plain twin: the
    learner's torch path (PPOLearner(compiled=False)), held equal by tests/test_learner.py."""
    cdef wfrl_net_t net
    cdef object keep
    cdef object scratch

    def __init__(self, params, grads, exp_avg, exp_avg_sq, steps, float beta1, float beta2,
                 float eps, float max_norm):
        groups = (params, grads, exp_avg, exp_avg_sq, steps)
        _need(all(len(g) == 6 for g in groups), "NetStep: six arrays per group")
        W1, W3 = params[0], params[4]
        _need(getattr(W1, "ndim", 0) == 2 and getattr(W3, "ndim", 0) == 2,
              "NetStep: the first and last weights must be matrices")
        cdef int64_t H = W1.shape[0], I = W1.shape[1], O = W3.shape[0]
        _need(H > 0 and I > 0 and O > 0, "NetStep: empty layers")
        shapes = ((H, I), (H,), (H, H), (H,), (O, H), (O,))
        cdef int p
        for p in range(6):
            self.net.param[p] = _f32_ptr(params[p], shapes[p], "a parameter")
            self.net.grad[p] = _f32_ptr(grads[p], shapes[p], "a gradient")
            self.net.exp_avg[p] = _f32_ptr(exp_avg[p], shapes[p], "a first moment")
            self.net.exp_avg_sq[p] = _f32_ptr(exp_avg_sq[p], shapes[p], "a second moment")
            self.net.step[p] = _f32_ptr(steps[p], (), "a step counter")
        bufs = [a for g in groups for a in g]
        spans = sorted((a.__array_interface__["data"][0], a.nbytes) for a in bufs)
        _need(all(spans[p][0] + spans[p][1] <= spans[p + 1][0] for p in range(len(spans) - 1)),
              "NetStep: arrays must not share memory")
        self.net.H, self.net.I, self.net.O = H, I, O
        self.net.beta1, self.net.beta2, self.net.eps, self.net.max_norm = beta1, beta2, eps, max_norm
        self.keep = bufs
        self.scratch = np.zeros(0, np.float32)

    cdef float *_scratch(self, int64_t k, int64_t nc, int64_t no):
        cdef int64_t need = wfrl_step_scratch_floats(k, nc, self.net.H, no)
        if self.scratch.shape[0] < need:
            self.scratch = np.zeros(need, np.float32)
        cdef float[::1] view = self.scratch
        return &view[0]

    cdef int64_t _columns(self, const float[:, ::1] x, const int64_t[::1] cols) except -1:
        cdef int64_t nc = x.shape[1]
        _need(x.shape[0] > 0, "NetStep: an empty minibatch")
        if cols is None:
            _need(nc == self.net.I, f"NetStep: x must have {self.net.I} columns")
        else:
            _need(cols.shape[0] == nc, "NetStep: one column index per column of x")
            _increasing(cols, self.net.I, "column")
        return nc

    cdef int64_t _outputs(self, const int64_t[::1] acts) except -1:
        cdef int64_t no
        if acts is None:
            no = self.net.O
        else:
            no = acts.shape[0]
            _increasing(acts, self.net.O, "action")
        _need(no > 0 and no <= WFRL_N_ACTIONS, f"NetStep: 1..{WFRL_N_ACTIONS} actions in use")
        return no

    cdef _check_rows(self, int64_t k, int64_t no, const uint8_t[:, ::1] allowed,
                     const int64_t[::1] actions, rows):
        _need(allowed.shape[0] == k and allowed.shape[1] == no,
              f"NetStep: allowed must have shape ({k}, {no})")
        _need(actions.shape[0] == k and all(len(r) == k for r in rows),
              f"NetStep: actions, log-probabilities and advantages must have {k} entries")
        cdef bint in_range = True
        cdef int64_t i
        with nogil:
            for i in range(k):
                if actions[i] < 0 or actions[i] >= no:
                    in_range = False
        _need(in_range, f"NetStep: an action lies outside 0..{no - 1}")

    def actor_step(self, const float[:, ::1] x not None, const int64_t[::1] cols,
                   const int64_t[::1] acts, const uint8_t[:, ::1] allowed not None,
                   const int64_t[::1] actions not None, const float[::1] old_logp not None,
                   const float[::1] adv not None, float clip, float ent_coef, float lr):
        """One step of the actor on k rows: x [k, nc] the input columns cols (None: all), acts
        the actions in use (None: all O), allowed [k, no] (1 allowed, 0 masked), actions [k] as
        indices into acts, behaviour log-probabilities and normalised advantages [k]. Returns
        the minibatch means (clipped surrogate, entropy, approximate KL, clipped share) and the
        gradient norm before the clip."""
        cdef int64_t k = x.shape[0], nc = self._columns(x, cols), no = self._outputs(acts)
        self._check_rows(k, no, allowed, actions, (old_logp, adv))
        cdef float *scratch = self._scratch(k, nc, no)
        cdef double stats[6]
        cdef const int64_t *cp = _indices(cols)
        cdef const int64_t *ap = _indices(acts)
        self.net.lr = lr
        with nogil:
            wfrl_actor_step(&self.net, k, &x[0, 0], cp, nc, ap, no, &allowed[0, 0], &actions[0],
                            &old_logp[0], &adv[0], clip, ent_coef, scratch, stats)
        _need(stats[4] == 0, f"NetStep: {int(stats[4])} row(s) allow no action")
        return stats[0] / k, stats[1] / k, stats[2] / k, stats[3] / k, stats[5]

    def actor_logp(self, const float[:, ::1] x not None, const int64_t[::1] cols,
                   const int64_t[::1] acts, const uint8_t[:, ::1] allowed not None,
                   const int64_t[::1] actions not None,
                   const float[::1] behaviour_logp not None, float max_weight):
        """The actor's log-probability of each row's action (arguments as actor_step) and the
        weight min(exp(log p - behaviour_logp), max_weight): two float32 arrays [k]. A masked
        action gets -inf and weight 0. Nothing is stepped."""
        cdef int64_t k = x.shape[0], nc = self._columns(x, cols), no = self._outputs(acts)
        self._check_rows(k, no, allowed, actions, (behaviour_logp,))
        cdef float *scratch = self._scratch(k, nc, no)
        logp, weight = np.empty(k, np.float32), np.empty(k, np.float32)
        cdef float[::1] lv = logp, wv = weight
        cdef const int64_t *cp = _indices(cols)
        cdef const int64_t *ap = _indices(acts)
        cdef int64_t empty
        with nogil:
            empty = wfrl_actor_logp(&self.net, k, &x[0, 0], cp, nc, ap, no, &allowed[0, 0],
                                    &actions[0], &behaviour_logp[0], max_weight, scratch,
                                    &lv[0], &wv[0])
        _need(empty == 0, f"NetStep: {empty} row(s) allow no action")
        return logp, weight

    def critic_step(self, const float[:, ::1] x not None, const int64_t[::1] cols,
                    const float[::1] ret not None, float value_coef, float lr):
        """One step of the critic (one output) on k rows toward the returns ret [k]: returns the
        value loss 0.5·mean((v - ret)²) (the gradient is of value_coef times it) and the
        gradient norm before the clip."""
        cdef int64_t k = x.shape[0], nc = self._columns(x, cols)
        _need(self.net.O == 1, "NetStep: the critic has one output")
        _need(ret.shape[0] == k, f"NetStep: ret must have {k} entries")
        cdef float *scratch = self._scratch(k, nc, 1)
        cdef double stats[2]
        cdef const int64_t *cp = _indices(cols)
        self.net.lr = lr
        with nogil:
            wfrl_critic_step(&self.net, k, &x[0, 0], cp, nc,
                             &ret[0], value_coef, scratch, stats)
        return stats[0], stats[1]


cdef void *_aligned(object storage):
    """Pointer to a 64-byte aligned address inside a numpy uint8 array (with 64 spare bytes)."""
    cdef uint8_t[::1] raw = storage
    cdef size_t addr = <size_t>&raw[0]
    return <void *>((addr + 63) & ~(<size_t>63))


def mlp_n_params(int hidden, int in_dim=WFRL_IN_DIM):
    return wfrl_mlp_n_params(hidden, in_dim)


def mlp_forward(const float[::1] weights, int hidden, const float[:, ::1] x):
    """Actor-critic forward in C for a batch x [n, in_dim] → (logits [n, 145], values [n])."""
    _need(0 < hidden <= WFRL_MAX_HIDDEN, f"hidden must lie in [1, {WFRL_MAX_HIDDEN}]")
    cdef int I = x.shape[1]
    _need(I in _valid_in_dims(),
          f"x must have one of {', '.join(map(str, _valid_in_dims()))} columns")
    _need(weights.shape[0] == wfrl_mlp_n_params(hidden, I),
          f"weights must have {wfrl_mlp_n_params(hidden, I)} floats for hidden={hidden}")
    cdef Py_ssize_t n = x.shape[0], i
    packed = np.empty(weights.shape[0], np.float32)
    cdef float[::1] pv = packed
    wfrl_mlp_pack(&weights[0], hidden, I, &pv[0])
    logits = np.empty((n, WFRL_N_ACTIONS), np.float32)
    values = np.empty(n, np.float32)
    scratch = np.empty(2 * hidden, np.float32)
    cdef float[:, ::1] lv = logits
    cdef float[::1] vv = values, sv = scratch
    with nogil:
        for i in range(n):
            wfrl_mlp_forward(&pv[0], hidden, I, &x[i, 0], &lv[i, 0], &vv[i], &sv[0])
    return logits, values


cdef class Policy:
    """A policy as the rollout loop sees it: the actor-critic weights (packed once here from the
    flat array; call refresh() after new weights were written into that array), the workflow
    conditioning and compliance settings, greedy or sampling.

    weights: float32[n_params(hidden, in_dim)]; cond: float32[25]; rank: the priority position of
    each unit type (Workflow.rank); lam: alignment λ; memory: the input carries the memory block;
    mask: actions that cannot do anything are never chosen (csrc/wfrl_memory.h); truth: the input
    carries red's true access per host (csrc/wfrl_truth.h); belief: N > 0 particles of the belief
    block in the input (csrc/wfrl_belief.h), drawn from the red kinds of belief_reds
    (PLAN_RED_* bits)."""
    cdef wfrl_policy p
    cdef readonly object weights, cond
    cdef object _packed

    def __cinit__(self, weights, int hidden, cond, rank, float lam, bint count_foothold=False,
                  bint greedy=False, bint memory=False, bint mask=False, bint truth=False,
                  int belief=0, int belief_reds=7):
        cdef const float[::1] wv = weights
        cdef const float[::1] cv = cond
        cdef int I = in_dim(memory, truth, belief > 0)
        _need(0 < hidden <= WFRL_MAX_HIDDEN, f"hidden must lie in [1, {WFRL_MAX_HIDDEN}]")
        _need(0 <= belief <= WFRL_FILTER_MAX_PARTICLES,
              f"belief particles must lie in 0..{WFRL_FILTER_MAX_PARTICLES}")
        _need(0 < belief_reds < 8, "belief_reds: a non-empty combination of PLAN_RED_* bits")
        _need(wv.shape[0] == wfrl_mlp_n_params(hidden, I),
              f"weights must have {wfrl_mlp_n_params(hidden, I)} floats for hidden={hidden}"
              f"{' with memory' if memory else ''}{' with truth' if truth else ''}"
              f"{' with belief' if belief else ''}")
        _need(cv.shape[0] == WFRL_COND_DIM, f"cond must have {WFRL_COND_DIM} floats")
        _need(sorted(rank) == list(range(5)), "rank must be a permutation of 0..4")
        self.weights = weights
        self.cond = cond
        self._packed = np.empty(wv.shape[0], np.float32)
        cdef float[::1] pv = self._packed
        self.p.weights = &pv[0]
        self.p.hidden = hidden
        self.p.in_dim = I
        self.p.memory = memory
        self.p.truth = truth
        self.p.belief = belief
        self.p.belief_reds = belief_reds
        self.p.mask = mask
        self.p.greedy = greedy
        self.p.cond = &cv[0]
        for k in range(5):
            self.p.wf.rank[k] = rank[k]
        self.p.wf.count_foothold = count_foothold
        self.p.wf.lam = lam
        self.refresh()

    def refresh(self):
        """Re-pack the weights from the flat array (after a new version was published into it)."""
        cdef const float[::1] wv = self.weights
        cdef float[::1] pv = self._packed
        wfrl_mlp_pack(&wv[0], self.p.hidden, self.p.in_dim, &pv[0])

    @property
    def hidden(self):
        return self.p.hidden

    @property
    def memory(self):
        return bool(self.p.memory)

    @property
    def mask(self):
        return bool(self.p.mask)

    @property
    def truth(self):
        return bool(self.p.truth)

    @property
    def belief(self):
        """Particles of the belief block in the input (0: none)."""
        return self.p.belief

    @property
    def belief_reds(self):
        return self.p.belief_reds

    @property
    def in_dim(self):
        return self.p.in_dim


cdef class FilterBlock:
    """n particle filters (csrc/wfrl_belief.h) of `particles` particles each, drawn from the red
    kinds of red_set and playing by the leaderboard's code if asked: the structs and all their
    buffers in one array allocated here, once."""
    cdef readonly int n, particles, red_set
    cdef readonly bint leaderboard
    cdef size_t stride
    cdef uint8_t *base
    cdef object _storage

    def __cinit__(self, Py_ssize_t n, int particles, int red_set, bint leaderboard=False):
        _need(n > 0, "FilterBlock needs at least one filter")
        _need(1 <= particles <= WFRL_FILTER_MAX_PARTICLES,
              f"belief particles must lie in 1..{WFRL_FILTER_MAX_PARTICLES}")
        _need(0 < red_set < 8, "red_set: a non-empty combination of PLAN_RED_* bits")
        self.n, self.particles, self.red_set, self.leaderboard = n, particles, red_set, leaderboard
        cdef size_t head = wfrl_belief_align(sizeof(wfrl_filter))
        self.stride = head + wfrl_filter_bytes(particles)
        self._storage = np.zeros(n * self.stride + 64, np.uint8)
        self.base = <uint8_t *>_aligned(self._storage)
        cdef wfrl_filter *f
        for i in range(n):
            f = self.at(i)
            wfrl_filter_init(f, <uint8_t *>f + head, particles, red_set, leaderboard)

    cdef wfrl_filter *at(self, Py_ssize_t i):
        return <wfrl_filter *>(self.base + i * self.stride)

    def fits(self, Policy policy):
        return policy.p.belief == self.particles and policy.p.belief_reds == self.red_set


cdef class Actor:
    """Per-step policy for envs stepped from Python (CybORG): forward, sampling and compliance in
    C, one call per step. Call begin(act_seed) at the start of every episode. With a belief
    policy the actor owns its particle filter, whose particles play by the leaderboard's CybORG
    code when `leaderboard` is set (the code of the env the actor plays)."""
    cdef wfrl_actor a
    cdef wfrl_scratch *s
    cdef readonly Policy policy
    cdef readonly FilterBlock filters
    cdef object _storage

    def __cinit__(self, Policy policy, bint leaderboard=False):
        self.policy = policy
        self._storage = np.zeros(sizeof(wfrl_scratch) + 64, np.uint8)
        self.s = <wfrl_scratch *>_aligned(self._storage)
        self.a.filter = NULL
        if policy.p.belief:
            self.filters = FilterBlock(1, policy.p.belief, policy.p.belief_reds, leaderboard)
            self.a.filter = self.filters.at(0)
        self.begin(0)

    def belief(self):
        """A copy of the belief block the last act() chose on (float32 [BELIEF_DIM]; a policy
        with the belief input only)."""
        _need(self.policy.p.belief > 0, "belief: the policy has no belief input")
        out = np.empty(WFRL_BELIEF_DIM, np.float32)
        cdef float[::1] ov = out
        memcpy(&ov[0], &self.a.belief[0], WFRL_BELIEF_DIM * sizeof(float))
        return out

    def begin(self, uint64_t act_seed):
        wfrl_actor_begin(&self.a, act_seed)

    def act(self, const float[::1] obs, const uint8_t[::1] red_access):
        """→ (action, logprob, value, alignment bonus) for obs[52] and red's access when acting."""
        _need(obs.shape[0] == WFRL_OBS_DIM and red_access.shape[0] == WFRL_N_HOSTS,
              "act: obs must have 52 and red_access 13 entries")
        cdef float logp, value, bonus
        cdef int action = wfrl_actor_act(&self.a, &self.policy.p, self.s, &obs[0], &red_access[0],
                                         &logp, &value, &bonus)
        return action, logp, value, bonus

    def last_input(self):
        """A copy of the policy input (float32 [in_dim]) the last act() chose on."""
        out = np.empty(self.policy.p.in_dim, np.float32)
        cdef float[::1] ov = out
        cdef const float *x = &self.s.x[0]
        cdef Py_ssize_t i
        for i in range(ov.shape[0]):
            ov[i] = x[i]
        return out

    def finish(self):
        """End-of-episode alignment term (−0.2·λ if the episode had no fix)."""
        return wfrl_compliance_finish(&self.a.comp, &self.policy.p.wf)

    @property
    def fixes(self):
        return self.a.comp.fixes

    @property
    def compliant(self):
        return self.a.comp.compliant

    @property
    def compliance(self):
        return wfrl_compliance_rate(&self.a.comp)


cdef class SimSlots:
    """n compiled CAGE2 episodes-in-progress (env + action RNG + compliance + current obs), for
    the compiled rollout loop. Storage is a numpy byte array owned here."""
    cdef wfrl_slot *slots
    cdef wfrl_scratch *s
    cdef readonly Py_ssize_t n
    cdef readonly int red_kind
    cdef readonly FilterBlock filters
    cdef object _storage, _scratch

    def __cinit__(self, Py_ssize_t n, str red_agent, bint leaderboard=False):
        _need(n > 0, "SimSlots needs at least one slot")
        self.n = n
        self.red_kind = red_kind_code(red_agent, leaderboard)
        self._storage = np.zeros(n * sizeof(wfrl_slot) + 64, np.uint8)
        self.slots = <wfrl_slot *>_aligned(self._storage)
        self._scratch = np.zeros(sizeof(wfrl_scratch) + 64, np.uint8)
        self.s = <wfrl_scratch *>_aligned(self._scratch)
        for i in range(n):
            self.slots[i].env.t = WFRL_EP_LEN  # idle until begin()
            self.slots[i].actor.filter = NULL

    cdef int _fit(self, Policy policy) except -1:
        """Give every slot a particle filter of the belief policy's size (allocated once, when
        the first such policy comes, or again if another size comes between episodes)."""
        if not policy.p.belief or (self.filters is not None and self.filters.fits(policy)):
            return 0
        for i in range(self.n):
            _need(self.slots[i].env.t >= WFRL_EP_LEN or self.slots[i].actor.mem.t == 0,
                  "a belief policy of another size cannot take over an episode in progress")
        self.filters = FilterBlock(self.n, policy.p.belief, policy.p.belief_reds,
                                   (self.red_kind & WFRL_RED_LEADERBOARD) != 0)
        for i in range(self.n):
            self.slots[i].actor.filter = self.filters.at(i)
        return 0

    cdef const wfrl_traj *_buf(self, TrajectoryBuffer buffer, Policy policy) except? NULL:
        if buffer is None:
            return NULL
        _need(buffer.b.T >= WFRL_EP_LEN and buffer.b.obs_dim == WFRL_OBS_DIM
              and buffer.b.n_hosts == WFRL_N_HOSTS, "buffer rows must hold a 100-step episode")
        _need(policy is None or not policy.p.belief or buffer.b.belief != NULL,
              "a belief policy needs a buffer with the belief field")
        return &buffer.b

    def run_episodes(self, Py_ssize_t slot, Policy policy, const uint64_t[::1] env_seeds,
                     const uint64_t[::1] act_seeds, const int64_t[::1] rows,
                     TrajectoryBuffer buffer, dict stats, int horizon=WFRL_EP_LEN):
        """Play len(env_seeds) complete episodes of `horizon` steps one after another on `slot`,
        episode k into buffer row rows[k] (buffer may be None; a row < 0 is not written). stats:
        float32 arrays env_return, alignment, compliance and int32 arrays fixes, compliant (one
        entry each)."""
        cdef Py_ssize_t k, n = env_seeds.shape[0]
        _need(1 <= horizon <= WFRL_EP_LEN, f"horizon must lie in [1, {WFRL_EP_LEN}]")
        _need(0 <= slot < self.n, f"slot {slot} outside [0, {self.n})")
        _need(act_seeds.shape[0] == n and rows.shape[0] == n, "seeds/rows lengths differ")
        cdef const wfrl_traj *b = self._buf(buffer, policy)
        self._fit(policy)
        if b != NULL:
            for k in range(n):
                _need(rows[k] < b.n_rows, f"row {rows[k]} outside the buffer")
        cdef float[::1] ret = stats["env_return"], ali = stats["alignment"], comp = stats["compliance"]
        cdef int32_t[::1] fixes = stats["fixes"], compliant = stats["compliant"]
        _need(min(ret.shape[0], ali.shape[0], comp.shape[0], fixes.shape[0], compliant.shape[0]) >= n,
              "stats arrays too short")
        cdef wfrl_episode_stats st
        cdef wfrl_slot *sl = &self.slots[slot]
        with nogil:
            for k in range(n):
                wfrl_rollout_sim_episode(sl, self.red_kind, env_seeds[k], act_seeds[k], &policy.p,
                                         b, rows[k], self.s, &st, horizon)
                ret[k] = st.env_return
                ali[k] = st.alignment
                comp[k] = st.compliance
                fixes[k] = st.fixes
                compliant[k] = st.compliant

    def begin(self, const uint64_t[::1] env_seeds, const uint64_t[::1] act_seeds,
              const int64_t[::1] rows, TrajectoryBuffer buffer):
        """Start an episode in every slot i (seeds[i], buffer row rows[i]; a row < 0 leaves the
        slot idle)."""
        _need(env_seeds.shape[0] == self.n and act_seeds.shape[0] == self.n
              and rows.shape[0] == self.n, "begin: one seed pair and row per slot")
        cdef const wfrl_traj *b = self._buf(buffer, None)
        for i in range(self.n):
            _need(b == NULL or rows[i] < b.n_rows, f"row {rows[i]} outside the buffer")
            wfrl_slot_begin(&self.slots[i], env_seeds[i], act_seeds[i], self.red_kind, rows[i], b)
            if rows[i] < 0:
                self.slots[i].env.t = WFRL_EP_LEN  # no episode for this slot: stays idle

    def step(self, Policy policy, TrajectoryBuffer buffer):
        """Advance every slot by one step (lock-step; finished slots stay put)."""
        cdef const wfrl_traj *b = self._buf(buffer, policy)
        self._fit(policy)
        with nogil:
            wfrl_slots_step(self.slots, self.n, &policy.p, b, self.s)

    def stats(self, dict out):
        """Write each slot's episode statistics into out (arrays as for run_episodes)."""
        cdef float[::1] ret = out["env_return"], ali = out["alignment"], comp = out["compliance"]
        cdef int32_t[::1] fixes = out["fixes"], compliant = out["compliant"]
        cdef wfrl_episode_stats st
        for i in range(self.n):
            wfrl_slot_stats(&self.slots[i], &st)
            ret[i] = st.env_return
            ali[i] = st.alignment
            comp[i] = st.compliance
            fixes[i] = st.fixes
            compliant[i] = st.compliant


def weights_publish(int64_t[::1] seq, float[::1] dst, const float[::1] src, int64_t version):
    """Publish src into the shared weights dst under the sequence lock seq (int64[2])."""
    _need(seq.shape[0] == 2, "seq must have 2 entries")
    _need(dst.shape[0] == src.shape[0], "dst and src differ in length")
    with nogil:
        wfrl_weights_publish(&seq[0], &dst[0], &src[0], dst.shape[0], version)


def weights_read(const int64_t[::1] seq, const float[::1] src, float[::1] out):
    """Copy a consistent version of the shared weights src into out; returns its version."""
    cdef int64_t version
    _need(seq.shape[0] == 2, "seq must have 2 entries")
    _need(out.shape[0] == src.shape[0], "src and out differ in length")
    with nogil:
        version = wfrl_weights_read(&seq[0], &src[0], &out[0], src.shape[0])
    return version


# ------------------------------------------------------------------------------------------
# gymnasium views of the simulator: the single env's step (wfrl.envs.Cage2Env), the vector env
# (wfrl.envs.vector) and the workflow wrapper's alignment reward (csrc/wfrl_vec.h)

cdef extern from "wfrl_types.h":
    int WFRL_N_UNIT_TYPES

cdef extern from "wfrl_vec.h" nogil:
    int WFRL_AUTORESET_NEXT_STEP
    int WFRL_AUTORESET_SAME_STEP
    int WFRL_AUTORESET_DISABLED
    uint64_t wfrl_next_episode_seed(uint64_t s)
    ctypedef struct wfrl_vec:
        wfrl_cage2 *envs
        int64_t n
        int mode
        int32_t horizon
        const uint8_t *red_kind
        uint64_t *seed
        uint8_t *pending
        float *obs
        double *reward
        uint8_t *terminated
        uint8_t *truncated
        uint8_t *red_access
        float *final_obs
        uint8_t *final_red_access
    void wfrl_vec_reset(const wfrl_vec *v, const uint8_t *mask)
    int64_t wfrl_vec_check(const wfrl_vec *v, const int32_t *actions)
    int64_t wfrl_vec_step(const wfrl_vec *v, const int32_t *actions)
    void wfrl_vec_playing(const wfrl_vec *v, uint8_t *out)
    void wfrl_compliance_step_batch(int64_t n, const int32_t *actions, const uint8_t *red_access,
                                    const uint8_t *rank, const uint8_t *count_foothold,
                                    const float *lam, const uint8_t *done, int32_t *fixes,
                                    int32_t *compliant, float *bonus)

from operator import index as _operator_index

AUTORESET_NEXT_STEP = WFRL_AUTORESET_NEXT_STEP
AUTORESET_SAME_STEP = WFRL_AUTORESET_SAME_STEP
AUTORESET_DISABLED = WFRL_AUTORESET_DISABLED


def next_episode_seed(uint64_t seed):
    """The seed of the episode that follows the one seeded with `seed` (C twin of
    wfrl.envs.sim.next_episode_seed)."""
    return wfrl_next_episode_seed(seed)


def _action_index(action):
    """A Discrete action as a Python int: ints, numpy integers and 0-d integer arrays."""
    try:
        return _operator_index(action)
    except TypeError:
        raise ValueError(f"an action is one integer in [0, {WFRL_N_ACTIONS}), got {action!r}") \
            from None


cdef class Cage2Gym:
    """gymnasium's reset/step tuples for env 0 of a Cage2Sim (wfrl.envs.Cage2Env on the
    simulator), truncated after `horizon` blue steps (1..100). An episode's observations and
    red-access rows are views of two blocks allocated once at reset, so a step allocates no array
    of its own and no returned array is reused."""
    cdef readonly Cage2Sim sim
    cdef readonly int horizon
    cdef wfrl_cage2 *e
    cdef float[:, ::1] _obs
    cdef uint8_t[:, ::1] _ra
    cdef list _obs_rows, _ra_rows
    cdef bint _started

    def __cinit__(self, Cage2Sim sim, int horizon=WFRL_EP_LEN):
        _need(1 <= horizon <= WFRL_EP_LEN, f"horizon must lie in [1, {WFRL_EP_LEN}]")
        self.sim = sim
        self.horizon = horizon
        self.e = &sim.envs[0]
        self._started = False

    def reset(self, uint64_t seed):
        """Start an episode from `seed` → (obs float32[52], {"red_access": uint8[13]})."""
        wfrl_cage2_reset(self.e, seed, self.sim.red_kind)
        obs = np.empty((WFRL_EP_LEN + 1, WFRL_OBS_DIM), np.float32)
        ra = np.empty((WFRL_EP_LEN + 1, WFRL_N_HOSTS), np.uint8)
        self._obs = obs
        self._ra = ra
        wfrl_cage2_obs(self.e, &self._obs[0, 0])
        wfrl_cage2_red_access(self.e, &self._ra[0, 0])
        self._obs_rows = list(obs)
        self._ra_rows = list(ra)
        self._started = True
        return self._obs_rows[0], {"red_access": self._ra_rows[0]}

    def step(self, action):
        """One blue step → (obs, reward, terminated=False, truncated, {"red_access": ...})."""
        cdef int t = self.e.t
        if not self._started:
            raise RuntimeError("step() before reset(); call reset() first")
        if t >= self.horizon:
            raise RuntimeError("step() after the episode was truncated; call reset()")
        if type(action) is not int:
            action = _action_index(action)
        cdef long a = action
        if a < 0 or a >= WFRL_N_ACTIONS:
            raise ValueError(f"action {a} outside [0, {WFRL_N_ACTIONS})")
        cdef int r10 = wfrl_cage2_step(self.e, <int>a, &self._obs[t + 1, 0], &self._ra[t + 1, 0])
        return (self._obs_rows[t + 1], r10 / 10.0, False, t + 1 >= self.horizon,
                {"red_access": self._ra_rows[t + 1]})


cdef class Cage2Vec:
    """n compiled CAGE2 envs stepped together with gymnasium's autoreset (wfrl.envs.vector drives
    it). Each env has its own red agent and chain of episode seeds. The output arrays are
    allocated once here and rewritten by every reset/step: obs float32 [n, 52], reward float64
    [n], terminated/truncated bool [n], red_access uint8 [n, 13] and, for SAME_STEP, final_obs /
    final_red_access of the episodes that ended in the last step."""
    cdef wfrl_vec v
    cdef readonly Py_ssize_t n
    cdef readonly int mode, horizon
    cdef readonly object obs, reward, terminated, truncated, red_access, final_obs, \
        final_red_access, seeds, red_kinds
    cdef object _storage, _pending, _term_u8, _trunc_u8

    def __cinit__(self, const uint8_t[::1] red_kinds, int mode, const uint64_t[::1] seeds,
                  int horizon=WFRL_EP_LEN):
        cdef Py_ssize_t n = red_kinds.shape[0], i
        _need(n > 0, "Cage2Vec needs at least one env")
        _need(1 <= horizon <= WFRL_EP_LEN, f"horizon must lie in [1, {WFRL_EP_LEN}]")
        _need(seeds.shape[0] == n, "Cage2Vec: one seed per env")
        _need(mode in (WFRL_AUTORESET_NEXT_STEP, WFRL_AUTORESET_SAME_STEP, WFRL_AUTORESET_DISABLED),
              f"unknown autoreset mode {mode}")
        for i in range(n):
            _need((red_kinds[i] & ~WFRL_RED_LEADERBOARD) <= 3,
                  f"red kind {red_kinds[i]} of env {i} outside [0, 3] (+ WFRL_RED_LEADERBOARD)")
        self.n = n
        self.mode = mode
        self._storage = np.zeros(n * sizeof(wfrl_cage2) + 64, np.uint8)
        self.red_kinds = np.array(red_kinds, np.uint8)
        self.seeds = np.array(seeds, np.uint64)
        self._pending = np.zeros(n, np.uint8)
        self.obs = np.zeros((n, WFRL_OBS_DIM), np.float32)
        self.reward = np.zeros(n, np.float64)
        self.terminated = np.zeros(n, np.bool_)
        self.truncated = np.zeros(n, np.bool_)
        self._term_u8 = self.terminated.view(np.uint8)
        self._trunc_u8 = self.truncated.view(np.uint8)
        self.red_access = np.zeros((n, WFRL_N_HOSTS), np.uint8)
        self.final_obs = np.zeros((n, WFRL_OBS_DIM), np.float32)
        self.final_red_access = np.zeros((n, WFRL_N_HOSTS), np.uint8)
        cdef uint8_t[::1] rk = self.red_kinds, pend = self._pending, term = self._term_u8, \
            trunc = self._trunc_u8
        cdef uint64_t[::1] sd = self.seeds
        cdef float[:, ::1] ob = self.obs, fob = self.final_obs
        cdef double[::1] rew = self.reward
        cdef uint8_t[:, ::1] ra = self.red_access, fra = self.final_red_access
        self.v.envs = <wfrl_cage2 *>_aligned(self._storage)
        self.v.n = n
        self.v.mode = mode
        self.v.horizon = horizon
        self.horizon = horizon
        self.v.red_kind = &rk[0]
        self.v.seed = &sd[0]
        self.v.pending = &pend[0]
        self.v.obs = &ob[0, 0]
        self.v.reward = &rew[0]
        self.v.terminated = &term[0]
        self.v.truncated = &trunc[0]
        self.v.red_access = &ra[0, 0]
        self.v.final_obs = &fob[0, 0]
        self.v.final_red_access = &fra[0, 0]
        for i in range(n):
            self.v.envs[i].t = WFRL_EP_LEN  # no episode until reset()

    def bind(self, obs, reward, terminated, truncated, red_access):
        """Make the given arrays (same shapes and dtypes as the attributes of the same names) the
        ones the next reset/step write into, e.g. fresh arrays per step: the results are then
        written once, straight into arrays the caller can keep."""
        cdef float[:, ::1] ob = obs
        cdef double[::1] rew = reward
        cdef uint8_t[::1] term = terminated.view(np.uint8), trunc = truncated.view(np.uint8)
        cdef uint8_t[:, ::1] ra = red_access
        _need(ob.shape[0] == self.n and ob.shape[1] == WFRL_OBS_DIM and rew.shape[0] == self.n
              and term.shape[0] == self.n and trunc.shape[0] == self.n
              and ra.shape[0] == self.n and ra.shape[1] == WFRL_N_HOSTS,
              f"bind: arrays for {self.n} envs (obs [n, 52], red_access [n, 13], the rest [n])")
        _need(terminated.dtype == np.bool_ and truncated.dtype == np.bool_,
              "bind: terminated and truncated must be bool arrays")
        self.obs, self.reward, self.terminated, self.truncated, self.red_access = \
            obs, reward, terminated, truncated, red_access
        self.v.obs = &ob[0, 0]
        self.v.reward = &rew[0]
        self.v.terminated = &term[0]
        self.v.truncated = &trunc[0]
        self.v.red_access = &ra[0, 0]

    def reset(self, mask=None):
        """Start the next episode of every env (or of the envs where mask, bool/uint8 [n], is
        set) from its seed (`seeds`, which the caller may overwrite first)."""
        cdef const uint8_t[::1] m
        if mask is None:
            with nogil:
                wfrl_vec_reset(&self.v, NULL)
            return
        m = np.ascontiguousarray(mask, dtype=np.bool_).view(np.uint8)
        _need(m.shape[0] == self.n, f"reset mask must have {self.n} entries")
        with nogil:
            wfrl_vec_reset(&self.v, &m[0])

    def step(self, const int32_t[::1] actions):
        """Step every env with actions[i]; returns how many episodes ended in this step."""
        _need(actions.shape[0] == self.n, f"actions must have shape ({self.n},)")
        cdef int64_t bad, ended
        with nogil:
            bad = wfrl_vec_check(&self.v, &actions[0])
            if bad < 0:
                ended = wfrl_vec_step(&self.v, &actions[0])
        if bad >= self.n:
            raise RuntimeError(f"env {bad - self.n}'s episode is over and autoreset is disabled: "
                               "reset it first (reset(options={'reset_mask': ...}))")
        if bad >= 0:
            raise ValueError(f"actions[{bad}]={actions[bad]} outside [0, {WFRL_N_ACTIONS})")
        return ended

    def playing(self, uint8_t[::1] out):
        """Write into out [n] the red agent each env's current episode is played against (0
        B_line, 1 Meander, 2 Sleep: the mixed red resolved)."""
        _need(out.shape[0] == self.n, f"out must have {self.n} entries")
        wfrl_vec_playing(&self.v, &out[0])


def compliance_step_batch(const int32_t[::1] actions, const uint8_t[:, ::1] red_access,
                          const uint8_t[:, ::1] rank, const uint8_t[::1] count_foothold,
                          const float[::1] lam, const uint8_t[::1] done, int32_t[::1] fixes,
                          int32_t[::1] compliant, float[::1] bonus):
    """Alignment reward of one step of n envs into bonus [n], updating the episodes' compliance
    counts fixes/compliant [n] in place: the rollout loop's compiled compliance step per env, with
    env i's workflow rank[i] (Workflow.rank), count_foothold[i], lam[i]; red_access [n, 13] as
    when the action was chosen; done[i] adds the end-of-episode term. An action outside the fix
    actions (e.g. -1) changes nothing. Reference: wfrl.workflow.ComplianceTracker."""
    cdef Py_ssize_t n = actions.shape[0], i, k
    cdef unsigned seen
    _need(red_access.shape[0] == n and red_access.shape[1] == WFRL_N_HOSTS,
          f"red_access must have shape ({n}, {WFRL_N_HOSTS})")
    _need(rank.shape[0] == n and rank.shape[1] == WFRL_N_UNIT_TYPES,
          f"rank must have shape ({n}, {WFRL_N_UNIT_TYPES})")
    for name, arr in (("count_foothold", count_foothold), ("lam", lam), ("done", done),
                      ("fixes", fixes), ("compliant", compliant), ("bonus", bonus)):
        _need(arr.shape[0] == n, f"{name} must have {n} entries")
    for i in range(n):
        seen = 0
        for k in range(WFRL_N_UNIT_TYPES):
            if rank[i, k] < WFRL_N_UNIT_TYPES:
                seen |= 1u << rank[i, k]
        if seen != (1u << WFRL_N_UNIT_TYPES) - 1:
            raise ValueError(f"rank[{i}] must be a permutation of 0..4")
    if n == 0:
        return
    with nogil:
        wfrl_compliance_step_batch(n, &actions[0], &red_access[0, 0], &rank[0, 0],
                                   &count_foothold[0], &lam[0], &done[0], &fixes[0],
                                   &compliant[0], &bonus[0])


# ------------------------------------------------------------------------------------------
# Decision-time search over a particle belief (csrc/wfrl_plan.h)

cdef extern from "wfrl_plan.h" nogil:
    int WFRL_PLAN_MAX_PARTICLES
    int WFRL_PLAN_MAX_CANDIDATES
    int WFRL_PLAN_MAX_ROLLOUTS
    int WFRL_PLAN_MAX_DEPTH
    int WFRL_PLAN_RED_BLINE
    int WFRL_PLAN_RED_MEANDER
    int WFRL_PLAN_RED_SLEEP
    ctypedef struct wfrl_plan_budget:
        int32_t particles, candidates, rollouts, depth
        double time_limit_ms, z
        int32_t leaf_value
        uint64_t seed
    ctypedef struct wfrl_plan_info:
        int32_t greedy, chosen, n_candidates, vetoed, rounds, timed_out
        double elapsed_ms, gain
    ctypedef struct wfrl_planner:
        wfrl_filter flt
        int32_t cand[16]
        double *ret
        wfrl_memory mem
        int32_t hold
        int32_t t, horizon
        int64_t n_decisions, n_switches, n_vetoes, n_timeouts
    int wfrl_plan_check(const wfrl_plan_budget *b)
    size_t wfrl_plan_bytes(const wfrl_plan_budget *b)
    wfrl_planner *wfrl_plan_init(void *block, const wfrl_plan_budget *b, const wfrl_policy *p)
    void wfrl_plan_reset(wfrl_planner *pl, int red_set, int leaderboard, uint64_t key,
                         int horizon)
    int wfrl_plan_observe(wfrl_planner *pl, int action, const float *obs)
    int wfrl_plan_decide(wfrl_planner *pl, const float *obs, const uint8_t *access,
                         wfrl_plan_info *info)
    int wfrl_plan_count_state(const wfrl_planner *pl, const wfrl_cage2 *truth)
    void wfrl_plan_set_rollout_policy(wfrl_planner *pl, const wfrl_policy *p)
    size_t offsetof_rng "offsetof(wfrl_cage2, rng)"

PLAN_RED_BLINE = WFRL_PLAN_RED_BLINE
PLAN_RED_MEANDER = WFRL_PLAN_RED_MEANDER
PLAN_RED_SLEEP = WFRL_PLAN_RED_SLEEP
PLAN_LIMITS = {"particles": WFRL_PLAN_MAX_PARTICLES, "candidates": WFRL_PLAN_MAX_CANDIDATES,
               "rollouts": WFRL_PLAN_MAX_ROLLOUTS, "depth": WFRL_PLAN_MAX_DEPTH}
CAGE2_STATE_BYTES = sizeof(wfrl_cage2)
CAGE2_STATE_RNG_OFFSET = offsetof_rng      # bytes before the env's RNG: its state without it
_PLAN_BUDGET_ERRORS = {
    1: f"particles must lie in 1..{WFRL_PLAN_MAX_PARTICLES}",
    2: f"candidates must lie in 1..{WFRL_PLAN_MAX_CANDIDATES}",
    3: f"rollouts must lie in 0..{WFRL_PLAN_MAX_ROLLOUTS}",
    4: f"depth must lie in 1..{WFRL_PLAN_MAX_DEPTH}",
    5: "time_limit_ms must lie in [0, 1e7] (0: no limit)",
    6: "z must be a non-negative number"}


def cage2_state(Cage2Sim sim, Py_ssize_t i):
    """The raw state of env i of sim (bytes, CAGE2_STATE_BYTES long; its RNG is the tail from
    CAGE2_STATE_RNG_OFFSET on)."""
    cdef wfrl_cage2 *e = sim._env(i)
    return (<char *>e)[:sizeof(wfrl_cage2)]


def set_cage2_state(Cage2Sim sim, Py_ssize_t i, bytes state):
    """Overwrite env i of sim with a raw state from cage2_state."""
    cdef wfrl_cage2 *e = sim._env(i)
    _need(len(state) == sizeof(wfrl_cage2), f"a state has {sizeof(wfrl_cage2)} bytes")
    memcpy(e, <const char *>state, sizeof(wfrl_cage2))


def set_cage2_comp(Cage2Sim sim, Py_ssize_t i, const uint8_t[::1] comp):
    """Overwrite env i's blue table (0 no, 1 unknown, 2 user, 3 privileged per host)."""
    cdef wfrl_cage2 *e = sim._env(i)
    _need(comp.shape[0] == WFRL_N_HOSTS, "comp must have 13 entries")
    cdef Py_ssize_t h
    for h in range(WFRL_N_HOSTS):
        _need(comp[h] <= 3, "comp entries lie in 0..3")
        e.comp[h] = comp[h]


def seed_cage2_rng(Cage2Sim sim, Py_ssize_t i, uint64_t seed):
    """Reseed env i's own RNG (wfrl_rng_seed), leaving the rest of its state as it is."""
    cdef wfrl_cage2 *e = sim._env(i)
    wfrl_rng_seed(&e.rng, seed)


def cage2_red_access(Cage2Sim sim, Py_ssize_t i):
    """Red's access per host in env i of sim now: uint8[13] (0 none, 1 user, 2 privileged)."""
    out = np.empty(WFRL_N_HOSTS, np.uint8)
    cdef uint8_t[::1] ov = out
    wfrl_cage2_red_access(sim._env(i), &ov[0])
    return out


def cage2_red_kind(Cage2Sim sim, Py_ssize_t i):
    """The red agent env i of sim plays (0 B_line, 1 Meander, 2 Sleep)."""
    return sim._env(i).red_kind



cdef class Planner:
    """The compiled planner (csrc/wfrl_plan.h) for one policy: a particle belief over the
    simulator's state and paired-rollout search over the policy's top candidates. All its memory
    is one block allocated here, once."""
    cdef wfrl_planner *pl
    cdef readonly Policy policy
    cdef readonly Policy rollout_policy
    cdef readonly int particles, candidates, rollouts, depth
    cdef readonly double time_limit_ms, z
    cdef readonly uint64_t seed
    cdef readonly bint leaf_value
    cdef object _storage

    def __cinit__(self, Policy policy, int particles, int candidates, int rollouts, int depth,
                  double time_limit_ms, uint64_t seed, bint leaf_value=True, double z=1.0):
        cdef wfrl_plan_budget b
        b.particles, b.candidates, b.rollouts, b.depth = particles, candidates, rollouts, depth
        b.time_limit_ms, b.z, b.leaf_value, b.seed = time_limit_ms, z, leaf_value, seed
        cdef int code = wfrl_plan_check(&b)
        if code:
            raise ValueError(_PLAN_BUDGET_ERRORS[code])
        _need(not policy.p.belief, "the decision-time search takes no policy with the belief "
              "input (its rollouts carry no belief)")
        self.policy = policy
        self.particles, self.candidates, self.rollouts, self.depth = \
            particles, candidates, rollouts, depth
        self.time_limit_ms, self.z, self.seed, self.leaf_value = time_limit_ms, z, seed, leaf_value
        self._storage = np.zeros(wfrl_plan_bytes(&b) + 64, np.uint8)
        self.pl = wfrl_plan_init(_aligned(self._storage), &b, &policy.p)
        wfrl_plan_reset(self.pl, WFRL_PLAN_RED_BLINE, 0, 0, WFRL_EP_LEN)

    def reset(self, int red_set, bint leaderboard=False, uint64_t key=0, int horizon=WFRL_EP_LEN):
        """Start an episode: particles drawn from the red kinds in red_set (PLAN_RED_* bits),
        playing by the leaderboard's code if asked; key with the seed fixes the random streams."""
        _need(0 < red_set < 8, "red_set: a non-empty combination of PLAN_RED_* bits")
        _need(1 <= horizon <= WFRL_EP_LEN, f"horizon must lie in [1, {WFRL_EP_LEN}]")
        wfrl_plan_reset(self.pl, red_set, leaderboard, key, horizon)

    def observe(self, int action, const float[::1] obs):
        """The belief update after `action` led to `obs`; returns the exact survivors (0: the
        fallback rule kept the nearest particles)."""
        _need(0 <= action < WFRL_N_ACTIONS, f"action {action} outside [0, {WFRL_N_ACTIONS})")
        _need(obs.shape[0] == WFRL_OBS_DIM, "observe: obs must have 52 entries")
        cdef int n
        with nogil:
            n = wfrl_plan_observe(self.pl, action, &obs[0])
        return n

    def decide(self, const float[::1] obs, const uint8_t[::1] red_access=None):
        """The action for obs → (action, greedy action, candidates searched, vetoed, rounds,
        timed out, elapsed ms, gain). red_access: only read by a policy with the truth input."""
        _need(obs.shape[0] == WFRL_OBS_DIM, "decide: obs must have 52 entries")
        _need(red_access is None or red_access.shape[0] == WFRL_N_HOSTS,
              "decide: red_access must have 13 entries")
        _need(red_access is not None or not self.policy.p.truth,
              "decide: a policy with the truth input needs red_access")
        cdef const uint8_t *ra = NULL if red_access is None else &red_access[0]
        cdef wfrl_plan_info info
        cdef int a
        with nogil:
            a = wfrl_plan_decide(self.pl, &obs[0], ra, &info)
        return (a, info.greedy, info.n_candidates, info.vetoed, info.rounds, bool(info.timed_out),
                info.elapsed_ms, info.gain)

    def belief_features(self):
        """The belief block of the particles now (csrc/wfrl_belief.h): float32 [BELIEF_DIM]."""
        out = np.empty(WFRL_BELIEF_DIM, np.float32)
        cdef float[::1] ov = out
        wfrl_belief_features(self.pl.flt.parts, self.particles, &ov[0])
        return out

    def particle_states(self):
        """Copies of the particles' raw states: uint8 [N, CAGE2_STATE_BYTES]."""
        out = np.empty((self.particles, sizeof(wfrl_cage2)), np.uint8)
        cdef uint8_t[:, ::1] ov = out
        memcpy(&ov[0, 0], self.pl.flt.parts, self.particles * sizeof(wfrl_cage2))
        return out

    def set_rollout_policy(self, Policy policy):
        """Continue the rollouts with `policy` (greedy; its critic scores the leaves) instead of
        the acting policy; with the truth input it reads each particle's true state."""
        _need(not policy.p.belief, "the search's rollouts take no policy with the belief input")
        self.rollout_policy = policy
        wfrl_plan_set_rollout_policy(self.pl, &policy.p)

    def last_estimates(self, int n_candidates, int rounds):
        """After decide: the searched candidates and their rollout values [K, rounds]."""
        _need(0 <= n_candidates <= self.candidates and 0 <= rounds <= self.rollouts,
              "last_estimates: counts outside the budget")
        cand = np.array([self.pl.cand[c] for c in range(n_candidates)], np.int64)
        vals = np.empty((n_candidates, rounds), np.float64)
        for c in range(n_candidates):
            for r in range(rounds):
                vals[c, r] = self.pl.ret[c * self.rollouts + r]
        return cand, vals

    def set_hold(self, bint hold):
        """When the greedy action is a fix, the rollouts of the other candidates never take it
        (see wfrl_plan.h)."""
        self.pl.hold = hold

    def copy_memory_from(self, Planner other):
        """Take over the defender's memory of another planner that saw the same episode (so a
        planner consulted only on some steps decides with the history of all of them)."""
        self.pl.mem = other.pl.mem

    def set_particles_to(self, Cage2Sim sim, Py_ssize_t i=0):
        """Every particle becomes env i of sim (its RNG kept per particle): a belief that
        knows the true state, for measuring the search without the belief's error."""
        cdef const wfrl_cage2 *src = sim._env(i)
        cdef wfrl_rng keep
        for k in range(self.particles):
            keep = self.pl.flt.parts[k].rng
            memcpy(&self.pl.flt.parts[k], src, sizeof(wfrl_cage2))
            self.pl.flt.parts[k].rng = keep

    def count_state(self, Cage2Sim sim, Py_ssize_t i=0):
        """How many particles hold env i of sim's state (its RNG aside)."""
        return wfrl_plan_count_state(self.pl, sim._env(i))

    @property
    def t(self):
        return self.pl.t

    @property
    def last_survivors(self):
        return self.pl.flt.last_survivors

    def counters(self):
        """Totals over the planner's life: observed steps, fallbacks, decisions, decisions that
        left the greedy action, vetoed candidates, decisions stopped by the time limit."""
        return {"observed": self.pl.flt.n_observed, "fallbacks": self.pl.flt.n_fallbacks,
                "decisions": self.pl.n_decisions, "switches": self.pl.n_switches,
                "vetoes": self.pl.n_vetoes, "timeouts": self.pl.n_timeouts}
