/* Sanitizer driver for csrc/wfrl_vec.h (built with -fsanitize=address,undefined by
 * tests/test_vec_env.py). Every output array is allocated to its exact size, so any write past a
 * row is caught. Steps vector envs of mixed red agents in each autoreset mode with random actions
 * (the checked invalid ones included), masked resets, and the batch compliance step beside them,
 * and checks the invariants of the vector contract after every step.
 * Usage: check_vec N_ENVS STEPS [SEED]. Exit 0 and one summary line when all hold. */
#include <stdio.h>
#include <stdlib.h>

#include "wfrl_vec.h"

static int fail(const char *what, int mode, long t, long i)
{
    fprintf(stderr, "invariant broken: %s (mode %d, step %ld, env %ld)\n", what, mode, t, i);
    return 1;
}

int main(int argc, char **argv)
{
    const long n = argc > 1 ? atol(argv[1]) : 64;
    const long steps = argc > 2 ? atol(argv[2]) : 1000;
    const uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    wfrl_rng rng;
    wfrl_rng_seed(&rng, seed);
    long checked = 0;
    for (int mode = WFRL_AUTORESET_NEXT_STEP; mode <= WFRL_AUTORESET_DISABLED; ++mode) {
        wfrl_vec v;
        v.n = n;
        v.mode = mode;
        v.horizon = mode == WFRL_AUTORESET_NEXT_STEP ? 30 : mode == WFRL_AUTORESET_SAME_STEP ? 50
                                                                                   : WFRL_EP_LEN;
        v.envs = malloc(n * sizeof(wfrl_cage2));
        uint8_t *kinds = malloc(n), *mask = malloc(n), *done = malloc(n), *foothold = malloc(n);
        uint8_t *rank = malloc(n * WFRL_N_UNIT_TYPES), *before = malloc(n * WFRL_N_HOSTS);
        uint64_t *seeds = malloc(n * sizeof(uint64_t));
        int32_t *actions = malloc(n * sizeof(int32_t)), *fixes = calloc(n, sizeof(int32_t));
        int32_t *compliant = calloc(n, sizeof(int32_t));
        float *lam = malloc(n * sizeof(float)), *bonus = malloc(n * sizeof(float));
        v.red_kind = kinds;
        v.seed = seeds;
        v.pending = calloc(n, 1);
        v.obs = malloc(n * WFRL_OBS_DIM * sizeof(float));
        v.reward = malloc(n * sizeof(double));
        v.terminated = malloc(n);
        v.truncated = malloc(n);
        v.red_access = malloc(n * WFRL_N_HOSTS);
        v.final_obs = malloc(n * WFRL_OBS_DIM * sizeof(float));
        v.final_red_access = malloc(n * WFRL_N_HOSTS);
        for (long i = 0; i < n; ++i) {
            kinds[i] = (uint8_t)(i % 4);
            seeds[i] = seed + (uint64_t)i;
            foothold[i] = (uint8_t)(i % 2);
            lam[i] = 30.0f;
            for (int k = 0; k < WFRL_N_UNIT_TYPES; ++k)
                rank[i * WFRL_N_UNIT_TYPES + k] = (uint8_t)((k + i) % WFRL_N_UNIT_TYPES);
        }
        wfrl_vec_reset(&v, NULL);
        for (long t = 0; t < steps; ++t) {
            for (long i = 0; i < n; ++i) actions[i] = (int32_t)wfrl_rng_below(&rng, WFRL_N_ACTIONS);
            if (wfrl_rng_below(&rng, 50) == 0) {  /* an invalid action is refused, nothing moves */
                const long bad = (long)wfrl_rng_below(&rng, (uint64_t)n);
                actions[bad] = wfrl_rng_below(&rng, 2) ? -1 : WFRL_N_ACTIONS;
                if (wfrl_vec_check(&v, actions) != bad) return fail("invalid action", mode, t, bad);
                actions[bad] = 0;
            }
            const int64_t why = wfrl_vec_check(&v, actions);
            if (mode == WFRL_AUTORESET_DISABLED && why >= n) {
                for (long i = 0; i < n; ++i)
                    mask[i] = (uint8_t)(v.envs[i].t >= v.horizon || wfrl_rng_below(&rng, 7) == 0);
                wfrl_vec_reset(&v, mask);
                for (long i = 0; i < n; ++i)
                    if (mask[i]) fixes[i] = compliant[i] = 0;
                if (wfrl_vec_check(&v, actions) != -1) return fail("reset did not free", mode, t, 0);
            } else if (why != -1) {
                return fail("check refused a valid step", mode, t, why);
            }
            memcpy(before, v.red_access, (size_t)(n * WFRL_N_HOSTS));
            const uint8_t *was_pending = v.pending;
            for (long i = 0; i < n; ++i) mask[i] = was_pending[i];
            const int64_t ended = wfrl_vec_step(&v, actions);
            long count = 0;
            for (long i = 0; i < n; ++i) {
                if (v.terminated[i]) return fail("terminated", mode, t, i);
                count += v.truncated[i];
                if (mask[i] && (v.reward[i] != 0.0 || v.truncated[i]))
                    return fail("reset step scored", mode, t, i);
                if (v.reward[i] > 0.0 || v.reward[i] < -25.0) return fail("reward range", mode, t, i);
                for (int k = 0; k < WFRL_OBS_DIM; ++k) {
                    const float o = v.obs[i * WFRL_OBS_DIM + k];
                    if (o != 0.0f && o != 1.0f) return fail("obs not 0/1", mode, t, i);
                }
                for (int h = 0; h < WFRL_N_HOSTS; ++h)
                    if (v.red_access[i * WFRL_N_HOSTS + h] > 2) return fail("red access", mode, t, i);
                if (mode == WFRL_AUTORESET_SAME_STEP && v.envs[i].t >= v.horizon)
                    return fail("same-step env left finished", mode, t, i);
                done[i] = v.truncated[i];
                if (mask[i]) {  /* NEXT_STEP reset step: no action was played */
                    actions[i] = -1;
                    fixes[i] = compliant[i] = 0;
                }
            }
            if (count != ended) return fail("ended count", mode, t, 0);
            wfrl_compliance_step_batch(n, actions, before, rank, foothold, lam, done, fixes,
                                       compliant, bonus);
            for (long i = 0; i < n; ++i) {
                if (compliant[i] > fixes[i] || bonus[i] > 30.0f || bonus[i] < -36.0f)
                    return fail("compliance", mode, t, i);
                if (done[i] && mode == WFRL_AUTORESET_SAME_STEP) fixes[i] = compliant[i] = 0;
            }
            checked += n;
        }
        free(v.envs); free(kinds); free(mask); free(done); free(foothold); free(rank);
        free(before); free(seeds); free(actions); free(fixes); free(compliant); free(lam);
        free(bonus); free(v.pending); free(v.obs); free(v.reward); free(v.terminated);
        free(v.truncated); free(v.red_access); free(v.final_obs); free(v.final_red_access);
    }
    printf("all invariants held over %ld env-steps\n", checked);
    return 0;
}
