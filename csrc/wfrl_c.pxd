# What wfrl._core takes from the C headers of csrc/: one extern block per header, each declared
# here only, in the order the generated module includes them. _core.pyx cimports it whole.

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint64_t

cdef extern from "wfrl_types.h":
    int WFRL_OBS_DIM
    int WFRL_N_ACTIONS
    int WFRL_N_HOSTS
    int WFRL_EP_LEN
    int WFRL_COND_DIM
    int WFRL_N_UNIT_TYPES

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
        uint8_t red_external
        uint8_t r_last_ok
    int WFRL_RED_LEADERBOARD
    int WFRL_RED_VARIANT_SHIFT
    int WFRL_RED_EXTERNAL
    int WFRL_RED_N_ACTIONS
    int WFRL_RED_OBS_DIM
    enum:
        RED_BLINE
        RED_MEANDER
        RED_SLEEP
        RED_MIXED
        RED_POOL_FAMILY
        RED_POOL_TRAIN
        RED_POOL_HELDOUT
        RV_NONE
        RV_DELAYED
        RV_BURSTY
        RV_NOISY
        RV_SCOUTING
        RV_PERSISTENT
        RV_ENTERPRISE
    const uint8_t cage2_pool_family[9]
    const uint8_t cage2_pool_train[5]
    const uint8_t cage2_pool_heldout[6]
    void wfrl_cage2_reset(wfrl_cage2 *e, uint64_t seed, int red_kind)
    int wfrl_cage2_step(wfrl_cage2 *e, int action, float *obs, uint8_t *red_access)
    void wfrl_cage2_obs(const wfrl_cage2 *e, float *obs)
    void wfrl_cage2_red_access(const wfrl_cage2 *e, uint8_t *red_access)
    void wfrl_cage2_step_batch(wfrl_cage2 *envs, int64_t n, const int32_t *actions, float *obs,
                               float *reward, uint8_t *done, uint8_t *red_access)
    int64_t wfrl_cage2_random_rollout(wfrl_cage2 *e, int64_t n_steps, uint64_t seed)
    void wfrl_cage2_red_mask(const wfrl_cage2 *e, uint8_t *mask)
    void wfrl_cage2_red_obs(const wfrl_cage2 *e, float *obs)
    int wfrl_cage2_set_red_action(wfrl_cage2 *e, int a)
    int wfrl_cage2_red_allowed(const wfrl_cage2 *e, int a)
    int wfrl_cage2_scripted_red(wfrl_cage2 *e)
    int wfrl_mixed_red_kind(uint64_t seed)
    size_t offsetof_rng "offsetof(wfrl_cage2, rng)"   # a C expression: where the RNG starts

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

cdef extern from "wfrl_belief.h" nogil:
    int WFRL_BELIEF_DIM
    int WFRL_FILTER_MAX_PARTICLES
    ctypedef struct wfrl_filter:
        int32_t n, red_set, leaderboard, last_survivors
        wfrl_cage2 *parts
        int64_t n_observed, n_fallbacks
    size_t wfrl_filter_bytes(int n)
    uint8_t *wfrl_filter_init(wfrl_filter *f, void *block, int n, int red_set, int leaderboard)
    uint64_t wfrl_stream_seed(uint64_t seed, uint64_t key, uint64_t stream)
    void wfrl_filter_reset(wfrl_filter *f, uint64_t seed)
    int wfrl_filter_observe(wfrl_filter *f, int action, const float *obs)
    size_t wfrl_belief_align(size_t n)
    void wfrl_belief_features(const wfrl_cage2 *parts, int n, float *out)

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
    int WFRL_RED_STREAM
    ctypedef struct wfrl_red_policy:
        const float *weights
        int hidden
        int greedy
    uint64_t wfrl_red_seed(uint64_t env_seed)
    int wfrl_red_play(const wfrl_red_policy *p, wfrl_cage2 *e, wfrl_rng *rng,
                      wfrl_scratch *s, float *logp, float *value)
    int WFRL_POP_MAX
    ctypedef struct wfrl_population:
        int n
        int kinds[64]                        # [WFRL_POP_MAX]
        const wfrl_red_policy *reds[64]
        uint64_t upto[64]
    int wfrl_population_draw(const wfrl_population *pop, uint64_t env_seed)
    ctypedef struct wfrl_slot:
        wfrl_cage2 env
        wfrl_actor actor
        const wfrl_red_policy *red
        const wfrl_population *pop
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

cdef extern from "wfrl_fastmath.h" nogil:
    float wfrl_exp_nonpos(float x)
    float wfrl_tanh(float x)

cdef extern from "wfrl_head.h" nogil:
    void wfrl_ppo_head(int64_t n, int64_t A, const float *logits, const uint8_t *allowed,
                       const int64_t *actions, const float *old_logp, const float *adv,
                       float clip, float ent_coef, float *grad, double *stats)

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
    int wfrl_gemm_level_override
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
    void wfrl_net_probs(const wfrl_net_t *net, int64_t k, const float *x, const int64_t *cols,
                        int64_t nc, const uint8_t *allowed, float *scratch, float *probs)
    void wfrl_kl_step(const wfrl_net_t *net, int64_t k, const float *x, const int64_t *cols,
                      int64_t nc, const int64_t *acts, int64_t no, const uint8_t *allowed,
                      const float *target, const float *w, float coef, float *scratch,
                      float *kl, double *stats)

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

cdef extern from "wfrl_duel.h" nogil:
    int64_t wfrl_duel_episode(wfrl_slot *sl, int red_kind, uint64_t env_seed, uint64_t act_seed,
                              const wfrl_policy *blue, const wfrl_red_policy *red,
                              const wfrl_traj *buf, int64_t row, wfrl_scratch *s, int horizon)
