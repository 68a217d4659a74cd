/* The particle filter over the simulator's state, and the belief block it gives the policy.
 *
 * Filter (wfrl_filter). N particles, each a whole wfrl_cage2 (true state, red's knowledge and
 * memory, the blue table, its RNG), all consistent with what the defender has seen. At reset
 * every particle is the reset state of one of the allowed red kinds (particle i: the (i mod k)-th
 * allowed kind), its RNG seeded from the filter stream. After the action a and the observation o
 * that followed it (wfrl_filter_observe):
 *   1. every particle steps once with a (its own RNG: red's random choices diverge);
 *   2. the survivors are the particles whose simulated observation equals o exactly (52 floats);
 *      if none survives (a state the filter lost, or a backend the simulator does not reproduce
 *      exactly), the survivors are the particles with the fewest mismatching floats, and every
 *      survivor's blue table (comp, which the observation's last two bits of a host encode one to
 *      one) is overwritten from o, so the filter never dies; such steps are counted (fallbacks);
 *   3. systematic resampling back to N: survivors carry equal weight, so with one uniform u from
 *      the filter stream particle k becomes survivor floor((u + k) · S / N);
 *   4. every particle's RNG is reseeded from the filter stream (copies of one survivor must not
 *      replay the same red choices).
 * The filter stream is seeded by its owner and used by nothing else: the decision-time planner
 * (csrc/wfrl_plan.h) seeds it from (planner seed, episode key), the rollout loop
 * (csrc/wfrl_rollout.h) from the episode's action seed (wfrl_belief_seed), so the belief depends
 * on the seed and the history alone. All memory is the caller's (wfrl_filter_bytes, laid out once
 * by wfrl_filter_init); nothing is allocated per step.
 * Reference: wfrl/features.py (ParticleFilterReference), held equal by tests/test_plan.py and
 * tests/test_belief.py.
 *
 * Belief block (WFRL_BELIEF_DIM floats): what the filter believes about red, in the layout of the
 * truth block (csrc/wfrl_truth.h) averaged over the particles, so a policy that reads it reads what
 * a full-information policy reads, as a probability instead of a certainty. Hosts in observation
 * order: floats 3h, 3h + 1, 3h + 2 are the share of particles in which red has no, user or
 * privileged access on host h (each host's three sum to 1); then the share of particles of each
 * red kind (B_line, Meander, Sleep). Why this layout: red's access per host is what decides a
 * fix's use and its compliance (the same access the compliance rule and the truth block read),
 * and the kind shares say which attacker's path the particles follow, which the access alone
 * does not (Meander wanders, B_line heads for Op_Server0). Shares, not counts: the block does not
 * depend on the number of particles.
 * Reference: wfrl/features.py (belief_features), held equal by tests/test_belief.py. */
#ifndef WFRL_BELIEF_H
#define WFRL_BELIEF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wfrl_cage2.h"
#include "wfrl_rng.h"
#include "wfrl_truth.h"

#define WFRL_BELIEF_KINDS 3
#define WFRL_BELIEF_DIM (WFRL_TRUTH_DIM + WFRL_BELIEF_KINDS)
#define WFRL_FILTER_MAX_PARTICLES 100000
/* Bits of the red-kind set the particles are drawn from. */
#define WFRL_PLAN_RED_BLINE 1
#define WFRL_PLAN_RED_MEANDER 2
#define WFRL_PLAN_RED_SLEEP 4

typedef struct {
    int32_t n;                /* particles */
    int32_t red_set;          /* WFRL_PLAN_RED_* bits */
    int32_t leaderboard;      /* the particles play by the leaderboard's CybORG code */
    int32_t last_survivors;   /* exact survivors of the last observe (0: a fallback) */
    wfrl_rng rng;             /* the filter stream */
    wfrl_cage2 *parts, *spare; /* [n] each, inside the caller's block */
    int32_t *surv;            /* [n] */
    int32_t *mism;            /* [n] mismatching floats per particle */
    float obs_tmp[WFRL_OBS_DIM];
    int64_t n_observed, n_fallbacks;
} wfrl_filter;

static inline size_t wfrl_belief_align(size_t n) { return (n + 63) & ~(size_t)63; }

/* Bytes of the buffers of an n-particle filter (64-byte aligned start assumed). */
static inline size_t wfrl_filter_bytes(int n)
{
    return 2 * wfrl_belief_align((size_t)n * sizeof(wfrl_cage2)) +
           2 * wfrl_belief_align((size_t)n * sizeof(int32_t));
}

/* Lay an n-particle filter's buffers out in `block` (wfrl_filter_bytes(n) long, 64-byte
 * aligned); returns the byte after them. The filter draws from red_set (at least one bit). */
static inline uint8_t *wfrl_filter_init(wfrl_filter *f, void *block, int n, int red_set,
                                        int leaderboard)
{
    uint8_t *m = (uint8_t *)block;
    memset(f, 0, sizeof(*f));
    f->n = n;
    f->red_set = red_set;
    f->leaderboard = leaderboard != 0;
    f->parts = (wfrl_cage2 *)m;
    m += wfrl_belief_align((size_t)n * sizeof(wfrl_cage2));
    f->spare = (wfrl_cage2 *)m;
    m += wfrl_belief_align((size_t)n * sizeof(wfrl_cage2));
    f->surv = (int32_t *)m;
    m += wfrl_belief_align((size_t)n * sizeof(int32_t));
    f->mism = (int32_t *)m;
    m += wfrl_belief_align((size_t)n * sizeof(int32_t));
    return m;
}

/* A stream seed from (seed, key, stream): the planner's streams and the rollout loop's filter. */
static inline uint64_t wfrl_stream_seed(uint64_t seed, uint64_t key, uint64_t stream)
{
    uint64_t x = seed ^ (key * 0x9E3779B97F4A7C15ULL) ^ (stream * 0xD1B54A32D192ED03ULL);
    return wfrl_splitmix64(&x);
}

/* The filter seed of an episode of the rollout loop: stream 3 of (its action seed, key 0) (the
 * planner's own streams are 1 and 2). Twin: wfrl.features.stream_seed with
 * ROLLOUT_BELIEF_STREAM. */
static inline uint64_t wfrl_belief_seed(uint64_t act_seed)
{
    return wfrl_stream_seed(act_seed, 0, 3);
}

/* Start an episode: every particle the reset state of an allowed red kind, the filter stream
 * seeded with `seed`. */
static inline void wfrl_filter_reset(wfrl_filter *f, uint64_t seed)
{
    int kinds[3], nk = 0;
    if (f->red_set & WFRL_PLAN_RED_BLINE) kinds[nk++] = RED_BLINE;
    if (f->red_set & WFRL_PLAN_RED_MEANDER) kinds[nk++] = RED_MEANDER;
    if (f->red_set & WFRL_PLAN_RED_SLEEP) kinds[nk++] = RED_SLEEP;
    if (nk == 0) kinds[nk++] = RED_BLINE;
    wfrl_rng_seed(&f->rng, seed);
    const int lb = f->leaderboard ? WFRL_RED_LEADERBOARD : 0;
    for (int i = 0; i < f->n; ++i) {
        wfrl_cage2_reset(&f->parts[i], 0, kinds[i % nk] | lb);
        wfrl_rng_seed(&f->parts[i].rng, wfrl_rng_next(&f->rng));
    }
    f->last_survivors = f->n;
}

/* Number of floats where two observations differ. */
static inline int wfrl_obs_mismatch(const float *a, const float *b)
{
    int n = 0;
    for (int k = 0; k < WFRL_OBS_DIM; ++k) n += a[k] != b[k];
    return n;
}

/* Blue's table entry of host h from its observation bits (the inverse of wfrl_cage2_obs). */
static inline uint8_t wfrl_comp_of_obs(const float *obs, int h)
{
    const int c2 = obs[4 * h + 2] != 0.0f, c3 = obs[4 * h + 3] != 0.0f;
    return (uint8_t)(c2 ? (c3 ? COMP_PRIV : COMP_UNKNOWN) : (c3 ? COMP_USER : COMP_NO));
}

/* The belief update after `action` was taken and `obs` observed. Returns the number of particles
 * that matched obs exactly (0: the fallback rule was applied). */
static inline int wfrl_filter_observe(wfrl_filter *f, int action, const float *obs)
{
    const int N = f->n;
    int S = 0, best = WFRL_OBS_DIM + 1;
    for (int i = 0; i < N; ++i) {
        wfrl_cage2_step(&f->parts[i], action, f->obs_tmp, NULL);
        const int m = wfrl_obs_mismatch(f->obs_tmp, obs);
        f->mism[i] = m;
        if (m == 0) f->surv[S++] = i;
        if (m < best) best = m;
    }
    const int exact = S;
    if (S == 0) {
        for (int i = 0; i < N; ++i)
            if (f->mism[i] == best) f->surv[S++] = i;
        ++f->n_fallbacks;
    }
    const double u = wfrl_rng_uniform(&f->rng);
    for (int k = 0; k < N; ++k) {
        int j = (int)(((double)k + u) * (double)S / (double)N);
        if (j >= S) j = S - 1;
        memcpy(&f->spare[k], &f->parts[f->surv[j]], sizeof(wfrl_cage2));
    }
    wfrl_cage2 *tmp = f->parts;
    f->parts = f->spare;
    f->spare = tmp;
    for (int k = 0; k < N; ++k) {
        if (!exact)
            for (int h = 0; h < NH; ++h) f->parts[k].comp[h] = wfrl_comp_of_obs(obs, h);
        wfrl_rng_seed(&f->parts[k].rng, wfrl_rng_next(&f->rng));
    }
    ++f->n_observed;
    f->last_survivors = exact;
    return exact;
}

/* The belief block of n particles into out[WFRL_BELIEF_DIM]. */
static inline void wfrl_belief_features(const wfrl_cage2 *parts, int n, float *out)
{
    double acc[WFRL_BELIEF_DIM];
    memset(acc, 0, sizeof(acc));
    uint8_t ra[WFRL_N_HOSTS];
    for (int i = 0; i < n; ++i) {
        wfrl_cage2_red_access(&parts[i], ra);
        for (int h = 0; h < WFRL_N_HOSTS; ++h)
            if (ra[h] < WFRL_TRUTH_LEVELS) acc[WFRL_TRUTH_LEVELS * h + ra[h]] += 1.0;
        const int kind = parts[i].red_kind;
        if (kind < WFRL_BELIEF_KINDS) acc[WFRL_TRUTH_DIM + kind] += 1.0;
    }
    const double scale = n > 0 ? 1.0 / (double)n : 0.0;
    for (int k = 0; k < WFRL_BELIEF_DIM; ++k) out[k] = (float)(acc[k] * scale);
}

#endif
