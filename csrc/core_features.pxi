# The defender's memory block and action mask (csrc/wfrl_memory.h), the truth block of red's access
# (csrc/wfrl_truth.h) and the particle filters behind the belief block (csrc/wfrl_belief.h).

MEM_DIM = WFRL_MEM_DIM
TRUTH_DIM = WFRL_TRUTH_DIM
BELIEF_DIM = WFRL_BELIEF_DIM
FILTER_MAX_PARTICLES = WFRL_FILTER_MAX_PARTICLES


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


cdef class ParticleFilter:
    """One particle filter (csrc/wfrl_belief.h) on its own, for a belief block outside the rollout
    loop and the planner (wfrl.envs.memory_env.VecBeliefWrapper): reset(red_set, leaderboard,
    key), then observe(action, obs) after each step; belief_features() reads the block. Its random
    streams are the planner's: Planner(..., seed).reset(red_set, leaderboard, key) holds the same
    particles. Its plain twin is wfrl.features.ParticleFilterReference."""
    cdef wfrl_filter flt
    cdef readonly int particles
    cdef readonly uint64_t seed
    cdef object _storage

    def __cinit__(self, int particles, uint64_t seed=0):
        _need(1 <= particles <= WFRL_FILTER_MAX_PARTICLES,
              f"belief particles must lie in 1..{WFRL_FILTER_MAX_PARTICLES}")
        self.particles, self.seed = particles, seed
        self._storage = np.zeros(wfrl_filter_bytes(particles) + 64, np.uint8)
        wfrl_filter_init(&self.flt, _aligned(self._storage), particles, 7, False)

    def reset(self, int red_set, bint leaderboard=False, uint64_t key=0):
        """Start an episode: particles drawn from the red kinds in red_set (PLAN_RED_* bits),
        playing by the leaderboard's code if asked; key with the seed fixes the random stream."""
        _need(0 < red_set < 8, "red_set: a non-empty combination of PLAN_RED_* bits")
        self.flt.red_set = red_set
        self.flt.leaderboard = leaderboard
        wfrl_filter_reset(&self.flt, wfrl_stream_seed(self.seed, key, 1))

    def observe(self, int action, const float[::1] obs):
        """The update after `action` led to `obs`; returns the exact survivors (0: the fallback
        rule kept the nearest particles)."""
        _need(0 <= action < WFRL_N_ACTIONS, f"action {action} outside [0, {WFRL_N_ACTIONS})")
        _need(obs.shape[0] == WFRL_OBS_DIM, "observe: obs must have 52 entries")
        cdef int n
        with nogil:
            n = wfrl_filter_observe(&self.flt, action, &obs[0])
        return n

    def belief_features(self):
        """The belief block of the particles now: float32 [BELIEF_DIM]."""
        out = np.empty(WFRL_BELIEF_DIM, np.float32)
        cdef float[::1] ov = out
        wfrl_belief_features(self.flt.parts, self.particles, &ov[0])
        return out
