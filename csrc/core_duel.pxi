# Red as a learner (csrc/wfrl_duel.h): a red policy's episodes against a frozen blue policy on
# the compiled simulator with an external red, red's steps written into a trajectory buffer.

RED_STREAM = WFRL_RED_STREAM


cdef class RedPolicy:
    """A red policy as the duel loop sees it: actor-critic weights of input RED_OBS_DIM (packed
    once here from the flat array; refresh() after new weights were written into it), greedy or
    sampling."""
    cdef wfrl_red_policy p
    cdef readonly object weights
    cdef object _packed

    def __cinit__(self, weights, int hidden, bint greedy=False):
        cdef const float[::1] wv = weights
        _need(0 < hidden <= WFRL_MAX_HIDDEN, f"hidden must lie in [1, {WFRL_MAX_HIDDEN}]")
        _need(wv.shape[0] == wfrl_mlp_n_params(hidden, WFRL_RED_OBS_DIM),
              f"red weights must have {wfrl_mlp_n_params(hidden, WFRL_RED_OBS_DIM)} floats for "
              f"hidden={hidden}")
        self.weights = weights
        self._packed = np.empty(wv.shape[0], np.float32)
        cdef float[::1] pv = self._packed
        self.p.weights = &pv[0]
        self.p.hidden = hidden
        self.p.greedy = greedy
        self.refresh()

    def refresh(self):
        cdef const float[::1] wv = self.weights
        cdef float[::1] pv = self._packed
        wfrl_mlp_pack(&wv[0], self.p.hidden, WFRL_RED_OBS_DIM, &pv[0])

    def logits(self, const float[::1] x):
        """Red's logits over its RED_N_ACTIONS actions for one observation x [RED_OBS_DIM]
        (the forward pass in C; the rest of the head is not red's)."""
        _need(x.shape[0] == WFRL_RED_OBS_DIM, f"x must have {WFRL_RED_OBS_DIM} floats")
        logits = np.empty(WFRL_N_ACTIONS, np.float32)
        scratch = np.empty(2 * self.p.hidden, np.float32)
        cdef float[::1] lv = logits, sv = scratch
        cdef float value
        wfrl_mlp_forward(self.p.weights, self.p.hidden, WFRL_RED_OBS_DIM, &x[0], &lv[0], &value,
                         &sv[0])
        return logits[:WFRL_RED_N_ACTIONS]

    @property
    def hidden(self):
        return self.p.hidden

    @property
    def greedy(self):
        return bool(self.p.greedy)


cdef class DuelSlots:
    """n duels in progress (env, blue's actor, red's stream) for the compiled duel loop; each
    plays whole episodes without the GIL. Storage is a numpy byte array owned here."""
    cdef wfrl_duel *duels
    cdef wfrl_scratch *s
    cdef readonly Py_ssize_t n
    cdef readonly int red_kind
    cdef object _storage, _scratch

    def __cinit__(self, Py_ssize_t n, bint leaderboard=False):
        _need(n > 0, "DuelSlots needs at least one slot")
        self.n = n
        # the scripted kind the env is reset with: never run (red is external)
        self.red_kind = red_kind_code("SleepAgent", leaderboard)
        self._storage = np.zeros(n * sizeof(wfrl_duel) + 64, np.uint8)
        self.duels = <wfrl_duel *>_aligned(self._storage)
        self._scratch = np.zeros(sizeof(wfrl_scratch) + 64, np.uint8)
        self.s = <wfrl_scratch *>_aligned(self._scratch)
        for i in range(n):
            self.duels[i].blue.filter = NULL

    def run_episodes(self, Py_ssize_t slot, Policy blue, RedPolicy red,
                     const uint64_t[::1] env_seeds, const uint64_t[::1] act_seeds,
                     const int64_t[::1] rows, TrajectoryBuffer buffer, double[::1] blue_returns,
                     int horizon=WFRL_EP_LEN):
        """Play len(env_seeds) episodes of `horizon` steps on `slot`, red's steps of episode k
        into buffer row rows[k] (buffer may be None; a row < 0 is not written); blue's return of
        each into blue_returns[k]."""
        cdef Py_ssize_t k, n = env_seeds.shape[0]
        _need(1 <= horizon <= WFRL_EP_LEN, f"horizon must lie in [1, {WFRL_EP_LEN}]")
        _need(0 <= slot < self.n, f"slot {slot} outside [0, {self.n})")
        _need(act_seeds.shape[0] == n and rows.shape[0] == n and blue_returns.shape[0] >= n,
              "seeds, rows and blue_returns lengths differ")
        _need(not blue.p.belief, "a blue policy with the belief input cannot be attacked here "
              "(its particles model CAGE2's scripted reds)")
        cdef const wfrl_traj *b = NULL
        if buffer is not None:
            _need(buffer.b.T >= horizon and buffer.b.obs_dim == WFRL_RED_OBS_DIM
                  and buffer.b.n_hosts == WFRL_N_HOSTS,
                  f"the buffer's rows must hold {horizon} steps of {WFRL_RED_OBS_DIM} floats")
            b = &buffer.b
            for k in range(n):
                _need(rows[k] < b.n_rows, f"row {rows[k]} outside the buffer")
        cdef wfrl_duel *d = &self.duels[slot]
        cdef int64_t r10
        with nogil:
            for k in range(n):
                r10 = wfrl_duel_episode(d, self.red_kind, env_seeds[k], act_seeds[k], &blue.p,
                                        &red.p, b, rows[k], self.s, horizon)
                blue_returns[k] = r10 / 10.0
