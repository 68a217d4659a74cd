# The compiled CAGE2 simulator (csrc/wfrl_cage2.h): n envs stepped from Python, the red kinds its
# reset takes, and an env's raw state (its bytes, blue table, red's access and own RNG).

# The C side of the red table (wfrl.config.names: RED_SPECS, POOL_SPECS), for the test that holds
# them equal: the enums of csrc/wfrl_cage2.h and the pools' member codes.
C_RED_ENUM = {"RED_BLINE": RED_BLINE, "RED_MEANDER": RED_MEANDER, "RED_SLEEP": RED_SLEEP,
              "RED_MIXED": RED_MIXED, "RED_POOL_FAMILY": RED_POOL_FAMILY,
              "RED_POOL_TRAIN": RED_POOL_TRAIN, "RED_POOL_HELDOUT": RED_POOL_HELDOUT,
              "RV_NONE": RV_NONE, "RV_DELAYED": RV_DELAYED, "RV_BURSTY": RV_BURSTY,
              "RV_NOISY": RV_NOISY, "RV_SCOUTING": RV_SCOUTING, "RV_PERSISTENT": RV_PERSISTENT,
              "RV_ENTERPRISE": RV_ENTERPRISE, "WFRL_RED_VARIANT_SHIFT": WFRL_RED_VARIANT_SHIFT}
C_POOL_MEMBERS = {RED_POOL_FAMILY: tuple(cage2_pool_family[i] for i in range(9)),
                  RED_POOL_TRAIN: tuple(cage2_pool_train[i] for i in range(5)),
                  RED_POOL_HELDOUT: tuple(cage2_pool_heldout[i] for i in range(6))}


RED_N_ACTIONS = WFRL_RED_N_ACTIONS
RED_OBS_DIM = WFRL_RED_OBS_DIM
RED_EXTERNAL = WFRL_RED_EXTERNAL


def red_kind_code(red_agent, bint leaderboard=False):
    """The red kind the C reset takes: the red's or pool's code (wfrl.config.names.red_code), with
    WFRL_RED_LEADERBOARD set to play by the CybORG code the CAGE2 leaderboard was scored on
    (wfrl.envs.base.BACKENDS). ValueError for an unknown name."""
    from wfrl.config.names import red_code
    return red_code(red_agent) | (WFRL_RED_LEADERBOARD if leaderboard else 0)


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


cdef class Cage2Sim:
    """n independent compiled CAGE2 envs against one red agent.

    The env structs live in a numpy byte array owned by this object; the C code never allocates.
    An external red is given its actions (set_red_action), or a red network plays it
    (seed_red, act_red: a learned red, as the compiled rollout loop plays it).
    """
    cdef wfrl_cage2 *envs
    cdef readonly Py_ssize_t n
    cdef readonly int red_kind
    cdef object _storage
    cdef object _red_rngs, _red_scratch

    def __cinit__(self, Py_ssize_t n, str red_agent, bint leaderboard=False,
                  bint external=False):
        if n <= 0:
            raise ValueError("Cage2Sim needs at least one env")
        self.n = n
        # external: red is an agent (set_red_action, or scripted_red for red_agent's own decision)
        self.red_kind = red_kind_code(red_agent, leaderboard) | (WFRL_RED_EXTERNAL if external
                                                                 else 0)
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

    def reset(self, Py_ssize_t i, uint64_t seed, int kind=-1):
        """Start a new episode of env i from `seed` (kind >= 0: against that red kind code instead
        of the env's own, e.g. a population's member); returns (obs float32[52], red_access
        uint8[13])."""
        cdef wfrl_cage2 *e = self._env(i)
        wfrl_cage2_reset(e, seed, self.red_kind if kind < 0 else kind)
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
        ExploitRemoteService, 4 PrivilegeEscalate, 5 Impact (target a host); success 0/1: a
        scripted red's as its base agent last saw it, an external red's of that action)."""
        cdef wfrl_cage2 *e = self._env(i)
        ok = e.r_last_ok == 1 if e.red_external else e.prev_success == 1
        return int(e.last_red_type), int(e.last_red_target), int(ok)

    # -- red as an agent (external=True; csrc/wfrl_cage2.h WFRL_RED_EXTERNAL) ----------------
    cdef inline wfrl_cage2 *_external(self, Py_ssize_t i) except NULL:
        cdef wfrl_cage2 *e = self._env(i)
        if not e.red_external:
            raise ValueError("red is not external here: make the sim with external=True")
        return e

    def set_red_action(self, Py_ssize_t i, int action):
        """Red's action for env i's next step (0..RED_N_ACTIONS-1); returns whether red's mask
        allows it (one it does not is played as nothing, and fails)."""
        cdef wfrl_cage2 *e = self._external(i)
        if not wfrl_cage2_set_red_action(e, action):
            raise ValueError(f"red action {action} outside [0, {WFRL_RED_N_ACTIONS})")
        return bool(wfrl_cage2_red_allowed(e, action))

    def scripted_red(self, Py_ssize_t i):
        """Let env i's scripted red (the red agent it was made with) choose red's next action,
        as the built-in red would inside the step, and give it; returns its index."""
        return wfrl_cage2_scripted_red(self._external(i))

    def red_obs(self, Py_ssize_t i):
        """What red knows in env i now: float32[RED_OBS_DIM] (csrc/wfrl_cage2.h)."""
        out = np.empty(WFRL_RED_OBS_DIM, dtype=np.float32)
        cdef float[::1] ov = out
        wfrl_cage2_red_obs(self._env(i), &ov[0])
        return out

    def seed_red(self, Py_ssize_t i, uint64_t env_seed):
        """Seed env i's learned-red stream for the episode with this env seed (as the compiled
        rollout loop does: wfrl_red_seed)."""
        self._external(i)
        if self._red_rngs is None:
            self._red_rngs = np.zeros(self.n * sizeof(wfrl_rng) + 64, np.uint8)
            self._red_scratch = np.zeros(sizeof(wfrl_scratch) + 64, np.uint8)
        cdef wfrl_rng *rngs = <wfrl_rng *>_aligned(self._red_rngs)
        wfrl_rng_seed(&rngs[i], wfrl_red_seed(env_seed))

    def act_red(self, Py_ssize_t i, RedPolicy red):
        """Let the red network choose red's next action in env i (from its stream; seed_red
        first) and give it; returns the action."""
        cdef wfrl_cage2 *e = self._external(i)
        _need(self._red_rngs is not None, "act_red: seed_red first")
        cdef wfrl_rng *rngs = <wfrl_rng *>_aligned(self._red_rngs)
        cdef float logp
        return wfrl_red_play(&red.p, e, &rngs[i], <wfrl_scratch *>_aligned(self._red_scratch),
                             &logp, NULL)     # red's value is not needed here

    def act_red_all(self, RedPolicy red):
        """act_red in every env, in env order (one call for the batch; seed_red first): the
        actions, int32 [n]."""
        _need(self._red_rngs is not None, "act_red_all: seed_red first")
        out = np.empty(self.n, np.int32)
        cdef int32_t[::1] ov = out
        cdef wfrl_rng *rngs = <wfrl_rng *>_aligned(self._red_rngs)
        cdef wfrl_scratch *scratch = <wfrl_scratch *>_aligned(self._red_scratch)
        cdef float logp
        cdef Py_ssize_t i
        for i in range(self.n):
            ov[i] = wfrl_red_play(&red.p, self._external(i), &rngs[i], scratch, &logp, NULL)
        return out

    def red_mask(self, Py_ssize_t i):
        """The red actions allowed in env i now: bool[RED_N_ACTIONS]."""
        out = np.empty(WFRL_RED_N_ACTIONS, dtype=np.uint8)
        cdef uint8_t[::1] mv = out
        wfrl_cage2_red_mask(self._env(i), &mv[0])
        return out.view(bool)

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


def mixed_red_kind(uint64_t seed):
    """The red agent (0 B_line, 1 Meander) the mixed red plays in the episode with this env seed."""
    return wfrl_mixed_red_kind(seed)


CAGE2_STATE_BYTES = sizeof(wfrl_cage2)
CAGE2_STATE_RNG_OFFSET = offsetof_rng      # bytes before the env's RNG: its state without it


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
