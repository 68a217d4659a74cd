# The compiled rollout loop (csrc/wfrl_rollout.h, wfrl_mlp.h, wfrl_compliance.h): the trajectory
# buffer it writes (wfrl_buffer.h), the policy and its forward pass, per-step actors, episode slots
# on the simulator, and the sequence lock on the shared weights (wfrl_seqlock.h).

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


IN_DIM = WFRL_IN_DIM
MAX_IN_DIM = WFRL_MAX_IN_DIM


def in_dim(bint memory, bint truth=False, bint belief=False):
    """Width of the policy input: obs ⊕ (memory block) ⊕ (truth block) ⊕ (belief block) ⊕
    workflow one-hot."""
    return (WFRL_IN_DIM + (WFRL_MEM_DIM if memory else 0) + (WFRL_TRUTH_DIM if truth else 0)
            + (WFRL_BELIEF_DIM if belief else 0))


def _valid_in_dims():
    return sorted({in_dim(m, t) for m in (False, True) for t in (False, True)})


def mlp_n_params(int hidden, int in_dim=WFRL_IN_DIM):
    return wfrl_mlp_n_params(hidden, in_dim)


def mlp_forward(const float[::1] weights, int hidden, const float[:, ::1] x, bint value=True):
    """Actor-critic forward in C for a batch x [n, in_dim] → (logits [n, 145], values [n]);
    value=False: the actor alone, as greedy acting runs it (values None)."""
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
            wfrl_mlp_forward(&pv[0], hidden, I, &x[i, 0], &lv[i, 0], &vv[i] if value else NULL,
                             &sv[0])
    return logits, (values if value else None)


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


def actors_act(list actors, const float[:, ::1] obs, const uint8_t[::1] red_access,
                int32_t[::1] out):
    """Actor i acts on obs[i] (as actors[i].act(obs[i], red_access), the action only), for every
    i, in one call: out[i] its action."""
    cdef Py_ssize_t i, n = len(actors)
    _need(obs.shape[0] == n and out.shape[0] == n and obs.shape[1] == WFRL_OBS_DIM and
          red_access.shape[0] == WFRL_N_HOSTS,
          "actors_act: obs must be [len(actors), 52], out [len(actors)], red_access [13]")
    cdef Actor a
    cdef float logp, bonus
    for i in range(n):
        a = <Actor?>actors[i]
        out[i] = wfrl_actor_act(&a.a, &a.policy.p, a.s, &obs[i, 0], &red_access[0],
                                &logp, NULL, &bonus)     # the value is not needed here


def learned_red_policy(str red_agent, leaderboard=None):
    """The RedPolicy of a learned red (learned:PATH; wfrl.envs.duel.red_weights: one line for a
    red trained on the other CybORG code than `leaderboard` says), else None."""
    from wfrl.config.names import LEARNED_PREFIX, is_learned
    if not is_learned(red_agent):
        return None
    from wfrl.envs.duel import red_weights
    weights, hidden = red_weights(red_agent[len(LEARNED_PREFIX):], leaderboard)
    return RedPolicy(weights, hidden)


cdef class RedPopulation:
    """A population of reds (wfrl.envs.reds.Population) in the compiled loop's form
    (csrc/wfrl_rollout.h wfrl_population): each member's red kind code and, for a learned red,
    its network, loaded once here; the episode's env seed draws the member."""
    cdef wfrl_population p
    cdef readonly object spec
    cdef readonly tuple reds      # a member's RedPolicy, or None for a scripted red

    def __cinit__(self, spec, bint leaderboard=False):
        members = tuple(spec.members)
        _need(1 <= len(members) <= WFRL_POP_MAX,
              f"a population holds 1 to {WFRL_POP_MAX} reds")
        self.spec = spec
        self.reds = tuple(learned_red_policy(name, leaderboard) for name in members)
        self.p.n = len(members)
        cdef RedPolicy red
        for k, name in enumerate(members):
            self.p.kinds[k] = red_kind_code(name, leaderboard)
            red = self.reds[k]
            self.p.reds[k] = NULL if red is None else &red.p
            self.p.upto[k] = spec.upto[k]

    @property
    def kinds(self):
        """Each member's red kind code (the leaderboard bit included)."""
        return tuple(self.p.kinds[k] for k in range(self.p.n))

    def draw(self, uint64_t env_seed):
        """The member the episode with this env seed plays (compiled; twin:
        Population.member)."""
        return wfrl_population_draw(&self.p, env_seed)


def red_population(str red_agent, leaderboard=False):
    """The RedPopulation of population:PATH (wfrl.envs.reds.load_population: one line for a
    missing or damaged file or member), else None."""
    from wfrl.config.names import is_population
    if not is_population(red_agent):
        return None
    from wfrl.envs.reds import load_population
    return RedPopulation(load_population(red_agent), bool(leaderboard))


cdef class SimSlots:
    """n compiled CAGE2 episodes-in-progress (env + action RNG + compliance + current obs), for
    the compiled rollout loop. Storage is a numpy byte array owned here. A learned red
    (learned:PATH) is loaded once here and plays in every slot; a population
    (population:PATH) once here, each episode playing the member its seed draws."""
    cdef wfrl_slot *slots
    cdef wfrl_scratch *s
    cdef readonly Py_ssize_t n
    cdef readonly int red_kind
    cdef readonly FilterBlock filters
    cdef readonly RedPolicy red
    cdef readonly RedPopulation population
    cdef object _storage, _scratch

    def __cinit__(self, Py_ssize_t n, str red_agent, bint leaderboard=False):
        _need(n > 0, "SimSlots needs at least one slot")
        self.n = n
        self.red_kind = red_kind_code(red_agent, leaderboard)
        self.red = learned_red_policy(red_agent, leaderboard)
        self.population = red_population(red_agent, leaderboard)
        self._storage = np.zeros(n * sizeof(wfrl_slot) + 64, np.uint8)
        self.slots = <wfrl_slot *>_aligned(self._storage)
        self._scratch = np.zeros(sizeof(wfrl_scratch) + 64, np.uint8)
        self.s = <wfrl_scratch *>_aligned(self._scratch)
        for i in range(n):
            self.slots[i].env.t = WFRL_EP_LEN  # idle until begin()
            self.slots[i].actor.filter = NULL
            self.slots[i].red = NULL if self.red is None else &self.red.p
            self.slots[i].pop = NULL if self.population is None else &self.population.p

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
