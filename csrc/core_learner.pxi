# The learner's compiled pieces: GAE (csrc/wfrl_gae.h), the branch-free exp and tanh
# (csrc/wfrl_fastmath.h), the PPO head (csrc/wfrl_head.h) and the minibatch step
# (csrc/wfrl_update.h).

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


def compiled_step_fast():
    """Whether the compiled minibatch step runs its fast tiling on this CPU (AVX-512); elsewhere
    it is correct but slower than torch's steps, which the learner then keeps
    (wfrl.ppo.learner.COMPILED_FAST, which WFRL_COMPILED_STEP may override)."""
    return wfrl_gemm_level() == 2


def cpu_tiling():
    """The tiling this CPU runs when nothing forces one (set_gemm_level): 2 with AVX-512, else
    0."""
    global wfrl_gemm_level_override
    saved = wfrl_gemm_level_override
    wfrl_gemm_level_override = -1
    level = wfrl_gemm_level()
    wfrl_gemm_level_override = saved
    return level


def gemm_level():
    """The tiling the compiled step's products run: 2 (AVX-512, 6 rows × 64 columns) or 0 (the
    portable one, 2 rows × 16 columns)."""
    return wfrl_gemm_level()


def set_gemm_level(int level):
    """Force the tiling (0 or 2; 2 only where the CPU has AVX-512), or -1: by the CPU again."""
    global wfrl_gemm_level_override
    _need(level in (-1, 0, 2), f"set_gemm_level: level must be -1, 0 or 2, got {level}")
    if level == 2:
        wfrl_gemm_level_override = -1
        _need(wfrl_gemm_level() == 2, "set_gemm_level: this CPU has no AVX-512")
    wfrl_gemm_level_override = level


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

    def probs(self, const float[:, ::1] x not None, const int64_t[::1] cols,
              const uint8_t[:, ::1] allowed):
        """The network's action distribution on k rows, nothing stepped (csrc/wfrl_update.h,
        wfrl_net_probs): x [k, nc] the input columns cols (None: all), allowed [k, O] (None: every
        action). Returns float32 [k, O], 0 on masked actions. Plain twin: Teacher.probs with
        numpy (tests/test_privileged.py)."""
        cdef int64_t k = x.shape[0], nc = self._columns(x, cols), O = self.net.O
        _need(allowed is None or (allowed.shape[0] == k and allowed.shape[1] == O),
              f"NetStep: allowed must have shape ({k}, {O})")
        cdef float *scratch = self._scratch(k, nc, O)
        cdef const int64_t *cp = _indices(cols)
        cdef const uint8_t *ap = NULL if allowed is None else &allowed[0, 0]
        out = np.empty((k, O), np.float32)
        cdef float[:, ::1] ov = out
        with nogil:
            wfrl_net_probs(&self.net, k, &x[0, 0], cp, nc, ap, scratch, &ov[0, 0])
        return out

    def kl_step(self, const float[:, ::1] x not None, const int64_t[::1] cols,
                const int64_t[::1] acts, const uint8_t[:, ::1] allowed not None,
                const float[:, ::1] target not None, const float[::1] weight, float coef,
                float lr):
        """One distillation step on k rows (csrc/wfrl_update.h, wfrl_kl_step): the loss
        coef · mean(weight · KL(target ‖ the output's softmax over the allowed actions)), x [k, nc]
        the input columns cols (None: all), acts the actions in use (None: all O; leave out only
        actions no row allows), allowed and target [k, no] over them, weight [k] (None: all 1).
        Returns each row's KL before the step (float32 [k]), the mean weighted KL and the
        gradient norm before the clip. Plain twin: Distiller's torch step
        (tests/test_privileged.py)."""
        cdef int64_t k = x.shape[0], nc = self._columns(x, cols), no = self._outputs(acts)
        _need(allowed.shape[0] == k and allowed.shape[1] == no
              and target.shape[0] == k and target.shape[1] == no,
              f"NetStep: allowed and target must have shape ({k}, {no})")
        _need(weight is None or weight.shape[0] == k, f"NetStep: weight must have {k} entries")
        cdef float *scratch = self._scratch(k, nc, no)
        cdef double stats[3]
        cdef const int64_t *cp = _indices(cols)
        cdef const int64_t *ap = _indices(acts)
        cdef const float *wp = NULL if weight is None else &weight[0]
        kl = np.empty(k, np.float32)
        cdef float[::1] kv = kl
        self.net.lr = lr
        with nogil:
            wfrl_kl_step(&self.net, k, &x[0, 0], cp, nc, ap, no, &allowed[0, 0], &target[0, 0],
                         wp, coef, scratch, &kv[0], stats)
        _need(stats[1] == 0, f"NetStep: {int(stats[1])} row(s) allow no action")
        return kl, stats[0], stats[2]

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
