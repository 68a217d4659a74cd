# Red as a learner (csrc/wfrl_duel.h): a red policy's episodes against a frozen blue policy on
# the compiled simulator with an external red, red's steps written into a trajectory buffer (the
# red policy, RedPolicy, is in core_sim.pxi: a learned red plays in blue's loop too).

cdef class DuelSlots:
    """n duels in progress (the rollout loop's slots: env, blue's actor, red's stream; and a
    scratch each) for the compiled duel loop; each plays whole episodes without the GIL, so n
    threads may play one slot each at once. Storage is numpy byte arrays owned here."""
    cdef wfrl_slot *duels
    cdef wfrl_scratch *s
    cdef readonly Py_ssize_t n
    cdef readonly int red_kind
    cdef object _storage, _scratch

    def __cinit__(self, Py_ssize_t n, bint leaderboard=False):
        _need(n > 0, "DuelSlots needs at least one slot")
        self.n = n
        # the scripted kind the env is reset with: never run (red is external)
        self.red_kind = red_kind_code("SleepAgent", leaderboard)
        self._storage = np.zeros(n * sizeof(wfrl_slot) + 64, np.uint8)
        self.duels = <wfrl_slot *>_aligned(self._storage)
        self._scratch = np.zeros(n * sizeof(wfrl_scratch) + 64, np.uint8)
        self.s = <wfrl_scratch *>_aligned(self._scratch)
        for i in range(n):
            self.duels[i].actor.filter = NULL

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
        cdef wfrl_slot *d = &self.duels[slot]
        cdef int64_t r10
        with nogil:
            for k in range(n):
                r10 = wfrl_duel_episode(d, self.red_kind, env_seeds[k], act_seeds[k], &blue.p,
                                        &red.p, b, rows[k], &self.s[slot], horizon)
                blue_returns[k] = r10 / 10.0
