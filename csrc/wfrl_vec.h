/* n compiled CAGE2 envs behind gymnasium's vector API, and the alignment reward of a batch of
 * steps for the workflow wrapper.
 *
 * wfrl_vec_step steps every env once (an episode is truncated after `horizon` steps: CAGE2 scores
 * 30-, 50- and 100-step episodes, each the start of the same episode), resets the envs whose episode ended as the autoreset mode
 * says, and writes everything into the caller's arrays: one call per vector step, no Python per
 * env, no allocation. Each env keeps the seed of its next episode; a finished episode's successor
 * takes the seed wfrl_next_episode_seed derives from it, so env i of a vector env follows the same
 * episode sequence as a single env seeded like it.
 *
 * Twins: wfrl/envs/sim.py (next_episode_seed) for the seed chain; the autoreset bookkeeping is held
 * equal to gymnasium's SyncVectorEnv over single envs by tests/test_vec_env.py, and
 * wfrl_compliance_step_batch to wfrl/workflow.py (ComplianceTracker) by
 * tests/test_workflow_wrapper.py; csrc/tools/check_vec.c drives all of it under ASan/UBSan. */
#ifndef WFRL_VEC_H
#define WFRL_VEC_H

#include <stdint.h>
#include <string.h>

#include "wfrl_cage2.h"
#include "wfrl_compliance.h"
#include "wfrl_types.h"

/* gymnasium's AutoresetMode, in the order wfrl/envs/vector.py names them */
enum { WFRL_AUTORESET_NEXT_STEP = 0, WFRL_AUTORESET_SAME_STEP = 1, WFRL_AUTORESET_DISABLED = 2 };

/* Seed of the episode after the one seeded with s (a 64-bit LCG step). */
static inline uint64_t wfrl_next_episode_seed(uint64_t s)
{
    return s * 6364136223846793005ULL + 1442695040888963407ULL;
}

typedef struct {
    wfrl_cage2 *envs;          /* [n] */
    int64_t n;
    int mode;                  /* WFRL_AUTORESET_* */
    int32_t horizon;           /* blue steps per episode, 1..WFRL_EP_LEN (CAGE2's 30, 50, 100) */
    const uint8_t *red_kind;   /* [n] RED_* of each env (RED_MIXED: drawn per episode by seed) */
    uint64_t *seed;            /* [n] seed of each env's next episode */
    uint8_t *pending;          /* [n] NEXT_STEP: the env resets at its next step */
    /* outputs */
    float *obs;                /* [n, 52] */
    double *reward;            /* [n] */
    uint8_t *terminated;       /* [n] always 0: CAGE2 episodes are only ever truncated */
    uint8_t *truncated;        /* [n] */
    uint8_t *red_access;       /* [n, 13] */
    float *final_obs;          /* [n, 52] SAME_STEP: last obs of the episode that ended */
    uint8_t *final_red_access; /* [n, 13] SAME_STEP: red's access at that episode's end */
} wfrl_vec;

/* Start env i's next episode and write its first obs and red access. */
static inline void wfrl_vec_reset_env(const wfrl_vec *v, int64_t i)
{
    wfrl_cage2 *e = &v->envs[i];
    wfrl_cage2_reset(e, v->seed[i], v->red_kind[i]);
    v->seed[i] = wfrl_next_episode_seed(v->seed[i]);
    v->pending[i] = 0;
    wfrl_cage2_obs(e, v->obs + i * WFRL_OBS_DIM);
    wfrl_cage2_red_access(e, v->red_access + i * WFRL_N_HOSTS);
}

/* Reset the envs with mask[i] != 0 (every env if mask is NULL). */
static inline void wfrl_vec_reset(const wfrl_vec *v, const uint8_t *mask)
{
    for (int64_t i = 0; i < v->n; ++i) {
        if (mask && !mask[i]) continue;
        wfrl_vec_reset_env(v, i);
        v->terminated[i] = v->truncated[i] = 0;
    }
}

/* Checks before anything moves. Returns -1 if the step may go ahead; else i (action i outside
 * [0, 145)) or n + i (DISABLED: env i's episode is over and it was not reset). */
static inline int64_t wfrl_vec_check(const wfrl_vec *v, const int32_t *actions)
{
    for (int64_t i = 0; i < v->n; ++i)
        if (actions[i] < 0 || actions[i] >= WFRL_N_ACTIONS) return i;
    if (v->mode == WFRL_AUTORESET_DISABLED)
        for (int64_t i = 0; i < v->n; ++i)
            if (v->envs[i].t >= v->horizon) return v->n + i;
    return -1;
}

/* One vector step (after wfrl_vec_check passed). Returns how many episodes ended in this step.
 *   NEXT_STEP  an env whose episode ended in the previous step resets instead of stepping: its
 *              action is ignored, reward 0, not truncated, obs/red access of the new episode;
 *   SAME_STEP  an env whose episode ends now is reset at once: obs/red access are the new
 *              episode's, final_obs/final_red_access the ended one's, truncated is 1;
 *   DISABLED   envs are never reset here. */
static inline int64_t wfrl_vec_step(const wfrl_vec *v, const int32_t *actions)
{
    int64_t ended = 0;
    for (int64_t i = 0; i < v->n; ++i) {
        float *obs = v->obs + i * WFRL_OBS_DIM;
        uint8_t *access = v->red_access + i * WFRL_N_HOSTS;
        wfrl_cage2 *e = &v->envs[i];
        v->terminated[i] = 0;
        if (v->pending[i]) {
            wfrl_vec_reset_env(v, i);
            v->reward[i] = 0.0;
            v->truncated[i] = 0;
            continue;
        }
        const int r10 = wfrl_cage2_step(e, actions[i], obs, access);
        v->reward[i] = r10 / 10.0;
        const int end = e->t >= v->horizon;
        v->truncated[i] = (uint8_t)end;
        if (!end) continue;
        ++ended;
        if (v->mode == WFRL_AUTORESET_NEXT_STEP) {
            v->pending[i] = 1;
        } else if (v->mode == WFRL_AUTORESET_SAME_STEP) {
            memcpy(v->final_obs + i * WFRL_OBS_DIM, obs, WFRL_OBS_DIM * sizeof(float));
            memcpy(v->final_red_access + i * WFRL_N_HOSTS, access, WFRL_N_HOSTS);
            wfrl_vec_reset_env(v, i);
        }
    }
    return ended;
}

/* The red agent each env's current episode is played against (RED_MIXED resolved). */
static inline void wfrl_vec_playing(const wfrl_vec *v, uint8_t *out)
{
    for (int64_t i = 0; i < v->n; ++i)   /* base | variant << WFRL_RED_VARIANT_SHIFT */
        out[i] = (uint8_t)(v->envs[i].red_kind | (v->envs[i].red_variant << WFRL_RED_VARIANT_SHIFT));
}

/* The workflow wrapper's alignment reward for one step of n envs, each with its own workflow:
 * rank [n, 5], count_foothold [n], lam [n]; red_access [n, 13] as it was when action[i] was
 * chosen; done[i] adds the end-of-episode term. Compliance counts fixes/compliant [n] carry the
 * episode so far (zero them at an episode's start). The same wfrl_compliance_step and
 * wfrl_compliance_finish as the rollout loop (csrc/wfrl_rollout.h). */
static inline void wfrl_compliance_step_batch(int64_t n, const int32_t *actions,
                                              const uint8_t *red_access, const uint8_t *rank,
                                              const uint8_t *count_foothold, const float *lam,
                                              const uint8_t *done, int32_t *fixes,
                                              int32_t *compliant, float *bonus)
{
    for (int64_t i = 0; i < n; ++i) {
        wfrl_workflow w;
        memcpy(w.rank, rank + i * WFRL_N_UNIT_TYPES, WFRL_N_UNIT_TYPES);
        w.count_foothold = count_foothold[i];
        w.lam = lam[i];
        wfrl_compliance c;
        c.fixes = fixes[i];
        c.compliant = compliant[i];
        float b = wfrl_compliance_step(&c, &w, actions[i], red_access + i * WFRL_N_HOSTS);
        if (done[i]) b += wfrl_compliance_finish(&c, &w);
        fixes[i] = c.fixes;
        compliant[i] = c.compliant;
        bonus[i] = b;
    }
}

#endif
