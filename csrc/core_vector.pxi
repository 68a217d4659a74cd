# gymnasium views of the simulator: the single env's step (wfrl.envs.Cage2Env), the vector env
# (wfrl.envs.vector) and the workflow wrapper's alignment reward (csrc/wfrl_vec.h)

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
        from wfrl.envs.reds import red_codes
        known = {code | lb for code in red_codes().values() for lb in (0, WFRL_RED_LEADERBOARD)}
        for i in range(n):
            _need(red_kinds[i] in known,
                  f"red kind {red_kinds[i]} of env {i} is not a red's or pool's code "
                  "(wfrl.envs.reds.red_codes; + WFRL_RED_LEADERBOARD)")
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
