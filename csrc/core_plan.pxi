# Decision-time search over a particle belief (csrc/wfrl_plan.h)

PLAN_RED_BLINE = WFRL_PLAN_RED_BLINE
PLAN_RED_MEANDER = WFRL_PLAN_RED_MEANDER
PLAN_RED_SLEEP = WFRL_PLAN_RED_SLEEP
PLAN_LIMITS = {"particles": WFRL_PLAN_MAX_PARTICLES, "candidates": WFRL_PLAN_MAX_CANDIDATES,
               "rollouts": WFRL_PLAN_MAX_ROLLOUTS, "depth": WFRL_PLAN_MAX_DEPTH}
_PLAN_BUDGET_ERRORS = {
    1: f"particles must lie in 1..{WFRL_PLAN_MAX_PARTICLES}",
    2: f"candidates must lie in 1..{WFRL_PLAN_MAX_CANDIDATES}",
    3: f"rollouts must lie in 0..{WFRL_PLAN_MAX_ROLLOUTS}",
    4: f"depth must lie in 1..{WFRL_PLAN_MAX_DEPTH}",
    5: "time_limit_ms must lie in [0, 1e7] (0: no limit)",
    6: "z must be a non-negative number"}


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
