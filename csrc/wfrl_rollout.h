/* The worker-side rollout loop: env step ↔ policy forward ↔ action sampling ↔ compliance, writing
 * each step into a trajectory-buffer row. No Python, no allocation.
 *
 * An episode in progress lives in a slot (env, its action RNG, its compliance count, the current
 * observation). Stepping slots one step at a time (wfrl_slots_step, the synchronous collector) and
 * running one slot to the end (wfrl_rollout_sim_episode, the other collectors) execute the same
 * code, so every collector produces the same episode for the same seeds.
 * With the policy's `memory` flag the network input is obs ⊕ memory block ⊕ workflow one-hot
 * (csrc/wfrl_memory.h), with its `mask` flag actions that cannot do anything are never sampled;
 * with its `truth` flag the one-hot of red's true access per host (csrc/wfrl_truth.h) follows
 * the memory block: obs ⊕ (memory) ⊕ truth ⊕ workflow one-hot; with its `belief` flag (N > 0
 * particles) the actor's particle filter (csrc/wfrl_belief.h) follows the episode and its belief
 * block comes next: obs ⊕ (memory) ⊕ (truth) ⊕ (belief) ⊕ workflow one-hot. The filter is reset
 * at the episode's first action (stream seeded from the action seed, wfrl_belief_seed) and
 * updated with the previous action and the observation it led to before every later one, so the
 * block the action is chosen on is the one the trajectory buffer records with it.
 * Reference: wfrl/collect/rollout.py (run_episode_reference), held equal by
 * tests/test_rollout.py, tests/test_features.py and tests/test_truth_input.py. */
#ifndef WFRL_ROLLOUT_H
#define WFRL_ROLLOUT_H

#include <string.h>

#include "wfrl_belief.h"
#include "wfrl_buffer.h"
#include "wfrl_cage2.h"
#include "wfrl_compliance.h"
#include "wfrl_memory.h"
#include "wfrl_mlp.h"
#include "wfrl_truth.h"

typedef struct {
    const float *weights; /* packed actor-critic weights (wfrl_mlp_pack) */
    int hidden;
    int in_dim;           /* 77, + WFRL_MEM_DIM with memory, + WFRL_TRUTH_DIM with truth,
                             + WFRL_BELIEF_DIM with the belief */
    int memory;           /* the memory block is part of the input */
    int truth;            /* red's true access per host is part of the input */
    int belief;           /* particles of the belief block in the input (0: no belief) */
    int belief_reds;      /* WFRL_PLAN_RED_* bits: the red kinds the particles may be */
    int mask;             /* actions that cannot do anything are masked */
    int greedy;
    const float *cond;    /* workflow one-hot [25] */
    wfrl_workflow wf;
} wfrl_policy;

typedef struct {
    float env_return;
    float alignment;
    float compliance;
    int32_t fixes, compliant;
} wfrl_episode_stats;

/* What an action choice persists across the steps of an episode. With a belief policy, `filter`
 * is the actor's particle filter (its owner's memory, n == the policy's belief) and `belief` the
 * block of the last action choice. */
typedef struct {
    wfrl_rng rng;
    wfrl_compliance comp;
    wfrl_memory mem;
    wfrl_filter *filter;
    uint64_t filter_seed;
    float belief[WFRL_BELIEF_DIM];
} wfrl_actor;

/* Temporaries of one action choice (not kept between steps). */
typedef struct {
    float x[WFRL_MAX_IN_DIM];
    float logits[WFRL_N_ACTIONS];
    double exps[WFRL_N_ACTIONS];
    uint8_t allowed[WFRL_N_ACTIONS];
    float hidden[2 * WFRL_MAX_HIDDEN];
} wfrl_scratch;

/* ---- a learned red (an external red played by a red network) ------------------------------
 * Its network has the blue network's layout (csrc/wfrl_mlp.h) with red's observation as input
 * (WFRL_RED_OBS_DIM floats) and red's WFRL_RED_N_ACTIONS actions first in the head. Its draws
 * come from stream WFRL_RED_STREAM of the episode's env seed (wfrl_red_seed): a red that is part
 * of the environment plays the same episode whoever collects it. */
#define WFRL_RED_STREAM 4

static inline uint64_t wfrl_red_seed(uint64_t env_seed)
{
    return wfrl_stream_seed(env_seed, 0, WFRL_RED_STREAM);
}

typedef struct {
    const float *weights; /* packed actor-critic weights (wfrl_mlp_pack, I = WFRL_RED_OBS_DIM) */
    int hidden;
    int greedy;
} wfrl_red_policy;

/* Red's action in env e now: its observation into s->x, the forward pass, red's mask over the
 * first WFRL_RED_N_ACTIONS logits, one draw from rng (none when greedy). Returns the action and
 * writes its log-probability and the value (value NULL: the critic is not run). */
static inline int wfrl_red_act(const wfrl_red_policy *p, const wfrl_cage2 *e, wfrl_rng *rng,
                               wfrl_scratch *s, float *logp, float *value)
{
    uint8_t mask[WFRL_RED_N_ACTIONS];
    wfrl_cage2_red_obs(e, s->x);
    wfrl_mlp_forward(p->weights, p->hidden, WFRL_RED_OBS_DIM, s->x, s->logits, value, s->hidden);
    wfrl_cage2_red_mask(e, mask);
    for (int a = 0; a < WFRL_RED_N_ACTIONS; ++a)
        if (!mask[a]) s->logits[a] = WFRL_MASKED_LOGIT;
    return wfrl_sample_first(s->logits, WFRL_RED_N_ACTIONS, p->greedy, rng, logp, s->exps);
}

/* wfrl_red_act, and the action given to the env for its next step. */
static inline int wfrl_red_play(const wfrl_red_policy *p, wfrl_cage2 *e, wfrl_rng *rng,
                                wfrl_scratch *s, float *logp, float *value)
{
    const int a = wfrl_red_act(p, e, rng, s, logp, value);
    wfrl_cage2_set_red_action(e, a);
    return a;
}

/* ---- a population of reds: each episode plays the member its env seed draws ----------------
 * A member is a red kind code (a scripted red, or an external red with its network in `reds`);
 * member k is drawn with probability (upto[k] - upto[k-1]) / 2^53 from 53 bits of splitmix64 of
 * the seed, so a population plays the same episode whoever collects it. Twin:
 * wfrl.envs.reds.Population.member. */
#define WFRL_POP_MAX 64
#define WFRL_POP_SALT 0x706F70756C617465ULL   /* "populate" */

typedef struct {
    int n;
    int kinds[WFRL_POP_MAX];
    const wfrl_red_policy *reds[WFRL_POP_MAX];   /* NULL: the scripted red of kinds[k] */
    uint64_t upto[WFRL_POP_MAX];                 /* cumulative, in 2^-53; upto[n-1] = 2^53 */
} wfrl_population;

static inline int wfrl_population_draw(const wfrl_population *pop, uint64_t env_seed)
{
    uint64_t x = env_seed ^ WFRL_POP_SALT;
    const uint64_t u = wfrl_splitmix64(&x) >> 11;
    for (int k = 0; k < pop->n - 1; ++k)
        if (u < pop->upto[k]) return k;
    return pop->n - 1;
}

static inline void wfrl_actor_begin(wfrl_actor *a, uint64_t act_seed)
{
    wfrl_rng_seed(&a->rng, act_seed);
    a->comp.fixes = a->comp.compliant = 0;
    wfrl_memory_begin(&a->mem);
    a->filter_seed = wfrl_belief_seed(act_seed);
}

/* The belief for obs (memory already updated with it): the filter reset before the first action
 * of an episode, else updated with the previous action and obs; its block into a->belief. */
static inline void wfrl_actor_believe(wfrl_actor *a, const float *obs)
{
    if (a->mem.prev_action < 0) wfrl_filter_reset(a->filter, a->filter_seed);
    else wfrl_filter_observe(a->filter, a->mem.prev_action, obs);
    wfrl_belief_features(a->filter->parts, a->filter->n, a->belief);
}

/* The policy's input for obs (memory m already updated with obs; belief: the belief block, read
 * only by a belief policy) into s->x, then its logits (masked with the policy's mask flag) into
 * s->logits and its value (value NULL: not computed). */
static inline void wfrl_policy_forward(const wfrl_policy *p, const wfrl_memory *m,
                                       const float *belief, const float *obs,
                                       const uint8_t *red_access, wfrl_scratch *s, float *value)
{
    memcpy(s->x, obs, WFRL_OBS_DIM * sizeof(float));
    int k = WFRL_OBS_DIM;
    if (p->memory) {
        wfrl_memory_features(m, s->x + k);
        k += WFRL_MEM_DIM;
    }
    if (p->truth) {
        wfrl_truth_features(red_access, s->x + k);
        k += WFRL_TRUTH_DIM;
    }
    if (p->belief) {
        memcpy(s->x + k, belief, WFRL_BELIEF_DIM * sizeof(float));
        k += WFRL_BELIEF_DIM;
    }
    memcpy(s->x + k, p->cond, WFRL_COND_DIM * sizeof(float));
    wfrl_mlp_forward(p->weights, p->hidden, p->in_dim, s->x, s->logits, value, s->hidden);
    if (p->mask) {
        wfrl_memory_mask(m, s->allowed);
        for (int i = 0; i < WFRL_N_ACTIONS; ++i)
            if (!s->allowed[i]) s->logits[i] = WFRL_MASKED_LOGIT;
    }
}

/* Choose the action for obs with red's current access, never `blocked` (-1: no action blocked;
 * the decision-time search's hold); returns it and its logp/value/bonus (value NULL: the critic
 * is not run; the action, logp and bonus are the same). */
static inline int wfrl_actor_act_except(wfrl_actor *a, const wfrl_policy *p, wfrl_scratch *s,
                                        const float *obs, const uint8_t *red_access, int blocked,
                                        float *logp, float *value, float *bonus)
{
    wfrl_memory_update(&a->mem, obs);
    if (p->belief) wfrl_actor_believe(a, obs);
    wfrl_policy_forward(p, &a->mem, a->belief, obs, red_access, s, value);
    if (blocked >= 0) s->logits[blocked] = WFRL_MASKED_LOGIT;
    const int action = wfrl_sample_action(s->logits, p->greedy, &a->rng, logp, s->exps);
    wfrl_memory_acted(&a->mem, action);
    *bonus = wfrl_compliance_step(&a->comp, &p->wf, action, red_access);
    return action;
}

/* Choose the action for obs with red's current access; returns it and its logp/value/bonus. */
static inline int wfrl_actor_act(wfrl_actor *a, const wfrl_policy *p, wfrl_scratch *s,
                                 const float *obs, const uint8_t *red_access, float *logp,
                                 float *value, float *bonus)
{
    return wfrl_actor_act_except(a, p, s, obs, red_access, -1, logp, value, bonus);
}

/* An episode of a compiled CAGE2 env in progress (red: a learned red's network, or NULL: the env's
 * own red; pop: a population whose member each episode draws, which sets both at its start). */
typedef struct {
    wfrl_cage2 env;
    wfrl_actor actor;
    const wfrl_red_policy *red;
    const wfrl_population *pop;
    wfrl_rng red_rng;
    float obs[WFRL_OBS_DIM];
    uint8_t access[WFRL_N_HOSTS];
    int64_t row;          /* buffer row it writes, or -1 */
    int32_t horizon;      /* blue steps of this episode (WFRL_EP_LEN; shorter in evaluations) */
    int64_t return10;     /* env return so far, in tenths */
    double alignment;
} wfrl_slot;

static inline void wfrl_slot_begin(wfrl_slot *sl, uint64_t env_seed, uint64_t act_seed,
                                   int red_kind, int64_t row, const wfrl_traj *buf)
{
    if (sl->pop) {
        const int k = wfrl_population_draw(sl->pop, env_seed);
        red_kind = sl->pop->kinds[k];
        sl->red = sl->pop->reds[k];
    }
    wfrl_cage2_reset(&sl->env, env_seed, red_kind);
    wfrl_cage2_obs(&sl->env, sl->obs);
    wfrl_cage2_red_access(&sl->env, sl->access);
    wfrl_actor_begin(&sl->actor, act_seed);
    wfrl_rng_seed(&sl->red_rng, wfrl_red_seed(env_seed));
    sl->row = row;
    sl->horizon = WFRL_EP_LEN;
    sl->return10 = 0;
    sl->alignment = 0.0;
    if (buf && row >= 0) buf->lengths[row] = 0;
}

/* Advance every slot by one blue step (slots whose episode is over are left alone). */
static inline void wfrl_slots_step(wfrl_slot *slots, int64_t n, const wfrl_policy *p,
                                   const wfrl_traj *buf, wfrl_scratch *s)
{
    for (int64_t i = 0; i < n; ++i) {
        wfrl_slot *sl = &slots[i];
        if (sl->env.t >= sl->horizon) continue;
        float logp, value = 0.0f, bonus;
        float next_obs[WFRL_OBS_DIM];
        uint8_t next_access[WFRL_N_HOSTS];
        const int record = buf && sl->row >= 0;   /* else the value goes nowhere: not computed */
        const int action = wfrl_actor_act(&sl->actor, p, s, sl->obs, sl->access, &logp,
                                          record ? &value : NULL, &bonus);
        if (sl->red) {   /* a learned red chooses from what it saw, as blue did */
            float red_logp;
            wfrl_red_play(sl->red, &sl->env, &sl->red_rng, s, &red_logp, NULL);
        }
        const int r10 = wfrl_cage2_step(&sl->env, action, next_obs, next_access);
        const int done = sl->env.t >= sl->horizon;
        if (done) bonus += wfrl_compliance_finish(&sl->actor.comp, &p->wf);
        if (record)
            wfrl_traj_push(buf, sl->row, sl->obs, action, logp, value,
                           (float)r10 / 10.0f + bonus, (uint8_t)done, sl->access,
                           p->belief ? sl->actor.belief : NULL);
        sl->return10 += r10;
        sl->alignment += bonus;
        memcpy(sl->obs, next_obs, sizeof(next_obs));
        memcpy(sl->access, next_access, sizeof(next_access));
    }
}

static inline void wfrl_slot_stats(const wfrl_slot *sl, wfrl_episode_stats *st)
{
    st->env_return = (float)((double)sl->return10 / 10.0);
    st->alignment = (float)sl->alignment;
    st->compliance = (float)wfrl_compliance_rate(&sl->actor.comp);
    st->fixes = sl->actor.comp.fixes;
    st->compliant = sl->actor.comp.compliant;
}

/* One complete episode of `horizon` blue steps (1..WFRL_EP_LEN; training always plays
 * WFRL_EP_LEN), written into buffer row `row` (buf may be NULL). */
static inline void wfrl_rollout_sim_episode(wfrl_slot *sl, int red_kind, uint64_t env_seed,
                                            uint64_t act_seed, const wfrl_policy *p,
                                            const wfrl_traj *buf, int64_t row, wfrl_scratch *s,
                                            wfrl_episode_stats *st, int horizon)
{
    wfrl_slot_begin(sl, env_seed, act_seed, red_kind, row, buf);
    sl->horizon = horizon;
    for (int t = 0; t < horizon; ++t) wfrl_slots_step(sl, 1, p, buf, s);
    wfrl_slot_stats(sl, st);
}

#endif
