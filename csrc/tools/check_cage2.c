/* Sanitizer driver for the compiled CAGE2 and the defender's memory (built with
 * -fsanitize=address,undefined by tests/test_sanitizers.py). Plays many episodes against every red
 * agent (and the mixed red) with several blue behaviours, runs the memory block and action mask
 * beside them, and checks the invariants of the env contract after every step.
 * Usage: check_cage2 EPISODES_PER_RED [SEED]. Exit 0 and one summary line when all hold. */
#include <stdio.h>
#include <stdlib.h>

#include "wfrl_cage2.h"
#include "wfrl_memory.h"

static int fail(const char *what, int red, long ep, int t)
{
    fprintf(stderr, "invariant broken: %s (red %d, episode %ld, step %d)\n", what, red, ep, t);
    return 1;
}

static int blue_action(wfrl_rng *rng, int style, int t, const float *obs)
{
    switch (style) {
    case 0: return (int)wfrl_rng_below(rng, WFRL_N_ACTIONS);            /* uniform */
    case 1: return 28 + (int)wfrl_rng_below(rng, 104);                  /* decoys only */
    case 2:                                                            /* react-restore */
        for (int h = 0; h < WFRL_N_HOSTS; ++h)
            if (obs[4 * h + 3] != 0.0f) return 132 + h;
        return 0;
    case 3: return (t % 2) ? 15 + (int)wfrl_rng_below(rng, 13) : 132 + (int)wfrl_rng_below(rng, 13);
    default: return 0;                                                 /* sleep */
    }
}

int main(int argc, char **argv)
{
    const long episodes = argc > 1 ? atol(argv[1]) : 1000;
    const uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    wfrl_rng rng;
    wfrl_rng_seed(&rng, seed);
    long steps = 0;
    for (int red = 0; red <= RED_MIXED; ++red) {
        for (long ep = 0; ep < episodes; ++ep) {
            wfrl_cage2 env;
            wfrl_memory mem;
            float obs[WFRL_OBS_DIM] = {0}, feats[WFRL_MEM_DIM];
            uint8_t access[WFRL_N_HOSTS], allowed[WFRL_N_ACTIONS];
            wfrl_cage2_reset(&env, seed * 1000003u + (uint64_t)ep, red);
            wfrl_memory_begin(&mem);
            if (red == RED_MIXED && env.red_kind != RED_BLINE && env.red_kind != RED_MEANDER)
                return fail("mixed red resolved to neither B_line nor Meander", red, ep, 0);
            const int style = (int)(ep % 5);
            for (int t = 0; t < WFRL_EP_LEN; ++t) {
                wfrl_memory_update(&mem, obs);
                wfrl_memory_features(&mem, feats);
                wfrl_memory_mask(&mem, allowed);
                for (int i = 0; i < WFRL_MEM_DIM; ++i)
                    if (!(feats[i] >= 0.0f && feats[i] <= 1.0f)) return fail("memory range", red, ep, t);
                if (!allowed[0] || allowed[WFRL_MONITOR]) return fail("mask of Sleep/Monitor", red, ep, t);
                const int a = blue_action(&rng, style, t, obs);
                wfrl_memory_acted(&mem, a);
                const int r10 = wfrl_cage2_step(&env, a, obs, access);
                ++steps;
                if (r10 > 0 || r10 < -(100 + 58 + 10)) return fail("reward range", red, ep, t);
                for (int i = 0; i < WFRL_OBS_DIM; ++i)
                    if (obs[i] != 0.0f && obs[i] != 1.0f) return fail("obs not 0/1", red, ep, t);
                for (int h = 0; h < WFRL_N_HOSTS; ++h)
                    if (access[h] > 2) return fail("red_access > 2", red, ep, t);
                if (access[H_U0] != 2) return fail("User0 foothold lost", red, ep, t);
                const int restore = a >= 132;
                if (red == RED_SLEEP && (r10 != (restore ? -10 : 0) || access[H_ENT0] != 0))
                    return fail("sleeping red did something", red, ep, t);
                if (env.t != t + 1) return fail("step counter", red, ep, t);
            }
        }
    }
    /* The batched entry point over a block of envs, including the done flags. */
    enum { NB = 64 };
    static wfrl_cage2 envs[NB];
    static float bobs[NB * WFRL_OBS_DIM], brew[NB];
    static uint8_t bdone[NB], bacc[NB * WFRL_N_HOSTS];
    static int32_t bact[NB];
    for (int i = 0; i < NB; ++i) wfrl_cage2_reset(&envs[i], seed + (uint64_t)i, i % 3);
    for (int t = 0; t < WFRL_EP_LEN; ++t) {
        for (int i = 0; i < NB; ++i) bact[i] = (int32_t)wfrl_rng_below(&rng, WFRL_N_ACTIONS);
        wfrl_cage2_step_batch(envs, NB, bact, bobs, brew, bdone, bacc);
        for (int i = 0; i < NB; ++i)
            if (bdone[i] != (t == WFRL_EP_LEN - 1)) return fail("batch done flag", i % 3, i, t);
    }
    printf("check_cage2: %ld episodes, %ld steps, all invariants held\n", 3 * episodes, steps);
    return 0;
}
