/* The worker-side rollout loop: env step ↔ policy forward ↔ action sampling ↔ compliance, writing
 * each step into a trajectory-buffer row. No Python, no allocation.
 * Reference: wfrl/collect/sequential.py (run_episode_reference), held equal by
 * tests/test_rollout.py. */
#ifndef WFRL_ROLLOUT_H
#define WFRL_ROLLOUT_H

#include <string.h>

#include "wfrl_buffer.h"
#include "wfrl_cage2.h"
#include "wfrl_compliance.h"
#include "wfrl_mlp.h"

typedef struct {
    const float *weights; /* packed actor-critic weights (wfrl_mlp_pack) */
    int hidden;
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

/* Per-step policy state, shared by the compiled sim loop and the Python-driven CybORG loop.
 * The scratch it points into (owned by the caller): WFRL_ACTOR_SCRATCH(H) floats. */
#define WFRL_ACTOR_SCRATCH(H) (WFRL_IN_DIM + WFRL_N_ACTIONS + 2 * (H) + 2 * WFRL_N_ACTIONS)

typedef struct {
    wfrl_rng rng;
    wfrl_compliance comp;
    float *x, *logits, *hidden;
    double *exps;
} wfrl_actor;

static inline void wfrl_actor_begin(wfrl_actor *a, const wfrl_policy *p, uint64_t act_seed,
                                    float *scratch)
{
    wfrl_rng_seed(&a->rng, act_seed);
    a->comp.fixes = a->comp.compliant = 0;
    a->x = scratch;
    a->logits = scratch + WFRL_IN_DIM;
    a->hidden = a->logits + WFRL_N_ACTIONS;
    a->exps = (double *)(void *)(a->hidden + 2 * p->hidden); /* caller aligns scratch to 8 bytes */
    memcpy(a->x + WFRL_OBS_DIM, p->cond, WFRL_COND_DIM * sizeof(float));
}

/* Choose the action for obs with red's current access; returns it and its logp/value/bonus. */
static inline int wfrl_actor_act(wfrl_actor *a, const wfrl_policy *p, const float *obs,
                                 const uint8_t *red_access, float *logp, float *value, float *bonus)
{
    memcpy(a->x, obs, WFRL_OBS_DIM * sizeof(float));
    wfrl_mlp_forward(p->weights, p->hidden, a->x, a->logits, value, a->hidden);
    const int action = wfrl_sample_action(a->logits, p->greedy, &a->rng, logp, a->exps);
    *bonus = wfrl_compliance_step(&a->comp, &p->wf, action, red_access);
    return action;
}

/* One complete episode of a compiled CAGE2 env, written into buffer row `row` (buf may be NULL). */
static inline void wfrl_rollout_sim_episode(wfrl_cage2 *e, uint64_t env_seed, uint64_t act_seed,
                                            const wfrl_policy *p, const wfrl_traj *buf,
                                            int64_t row, float *scratch, wfrl_episode_stats *st)
{
    wfrl_actor a;
    float obs[WFRL_OBS_DIM], next_obs[WFRL_OBS_DIM];
    uint8_t access[WFRL_N_HOSTS], next_access[WFRL_N_HOSTS];
    wfrl_cage2_reset(e, env_seed, e->red_kind);
    wfrl_cage2_obs(e, obs);
    wfrl_cage2_red_access(e, access);
    wfrl_actor_begin(&a, p, act_seed, scratch);
    if (buf) buf->lengths[row] = 0;
    int64_t ret10 = 0;
    double alignment = 0.0;
    for (int t = 0; t < WFRL_EP_LEN; ++t) {
        float logp, value, bonus;
        const int action = wfrl_actor_act(&a, p, obs, access, &logp, &value, &bonus);
        const int r10 = wfrl_cage2_step(e, action, next_obs, next_access);
        const int done = t == WFRL_EP_LEN - 1;
        if (done) bonus += wfrl_compliance_finish(&a.comp, &p->wf);
        if (buf)
            wfrl_traj_push(buf, row, obs, action, logp, value, (float)r10 / 10.0f + bonus,
                           (uint8_t)done, access);
        ret10 += r10;
        alignment += bonus;
        memcpy(obs, next_obs, sizeof(obs));
        memcpy(access, next_access, sizeof(access));
    }
    st->env_return = (float)((double)ret10 / 10.0);
    st->alignment = (float)alignment;
    st->compliance = (float)wfrl_compliance_rate(&a.comp);
    st->fixes = a.comp.fixes;
    st->compliant = a.comp.compliant;
}

#endif
