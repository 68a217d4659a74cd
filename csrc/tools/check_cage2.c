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

/* The simulator's bit helpers against their plain definitions, over every input they take. */
static int check_bit_helpers(void)
{
    for (uint32_t x = 0; x < (1u << 16); ++x) {
        int n = 0;
        for (uint32_t y = x; y; y >>= 1) n += (int)(y & 1u);
        if (cage2_popcount16((uint16_t)x) != n) return fail("popcount16", -1, (long)x, 0);
        uint32_t rest = x;   /* the k-th set bit: drop the lowest k, take the lowest */
        for (int k = 0; k < n; ++k, rest &= rest - 1)
            if (cage2_select_bit(x, (uint32_t)k) != cage2_lowest_bit(rest))
                return fail("select_bit", -1, (long)x, k);
    }
    /* the decoy that answers each exploit, by decoy kind */
    static const int answers[N_DECOYS] = {X_HTTP, X_FTP, X_HARAKA, X_EB, X_SSH, X_BK, X_HTTPS, X_HTTP};
    for (int x = 0; x < N_EXPLOITS; ++x)
        for (int k = 0; k < N_DECOYS; ++k)
            if (((cage2_exploit_decoys[x] >> k) & 1) != (answers[k] == x))
                return fail("exploit_decoys", -1, x, k);
    for (uint32_t mem = 0; mem < (1u << N_PORTBITS); ++mem) {
        const uint8_t off = cage2_offered((uint16_t)mem);
        for (int x = 0; x < N_EXPLOITS; ++x) {
            const int want = x == X_SQLI ? (mem >> P3390 & 1) && (mem >> P80 & 1 || mem >> P443 & 1)
                                         : (int)(mem >> cage2_exploit_port[x] & 1);
            if (((off >> x) & 1) != want) return fail("offered", -1, (long)mem, x);
        }
    }
    for (int a = ACT_NONE; a <= ACT_EXPLOIT; ++a)
        for (int c = COMP_NO; c <= COMP_PRIV; ++c) {
            const float *b = cage2_obs_bits[a][c];
            if (b[0] != (a != ACT_NONE) || b[1] != (a == ACT_EXPLOIT) ||
                b[2] != (c == COMP_UNKNOWN || c == COMP_PRIV) || b[3] != (c == COMP_USER || c == COMP_PRIV))
                return fail("obs_bits", -1, a, c);
        }
    return 0;
}

int main(int argc, char **argv)
{
    if (check_bit_helpers()) return 1;
    const long episodes = argc > 1 ? atol(argv[1]) : 1000;
    const uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    wfrl_rng rng;
    wfrl_rng_seed(&rng, seed);
    long steps = 0;
    /* the CAGE2 reds, the family's nine variants (drawn per episode by the pool), both codes */
    static const int reds[] = {RED_BLINE, RED_MEANDER, RED_SLEEP, RED_MIXED, RED_POOL_FAMILY,
                               RED_POOL_FAMILY | WFRL_RED_LEADERBOARD,
                               RED_MIXED | WFRL_RED_LEADERBOARD};
    const int n_reds = (int)(sizeof(reds) / sizeof(reds[0]));
    for (int ri = 0; ri < n_reds; ++ri) {
        const int red = reds[ri];
        for (long ep = 0; ep < episodes; ++ep) {
            wfrl_cage2 env;
            wfrl_memory mem;
            float obs[WFRL_OBS_DIM] = {0}, feats[WFRL_MEM_DIM];
            uint8_t access[WFRL_N_HOSTS], allowed[WFRL_N_ACTIONS];
            wfrl_cage2_reset(&env, seed * 1000003u + (uint64_t)ep, red);
            wfrl_memory_begin(&mem);
            if ((red & 0x0F) == RED_MIXED && env.red_kind != RED_BLINE && env.red_kind != RED_MEANDER)
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
    printf("check_cage2: %ld episodes, %ld steps, all invariants held\n", n_reds * episodes, steps);
    return 0;
}
