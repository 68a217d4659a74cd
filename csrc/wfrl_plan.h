/* Decision-time search over a particle belief: improve a learned greedy policy by rollouts in the
 * compiled simulator at every step. No Python, no allocation: the caller hands over one block of
 * memory sized by wfrl_plan_bytes and the planner lays out all its buffers in it once.
 *
 * Belief: the particle filter of csrc/wfrl_belief.h (wfrl_filter), its stream seeded from
 * (planner seed, episode key, 1), so the belief depends on the seed and the history alone, not on
 * the search budget.
 *
 * Search (wfrl_plan_decide), before each action: the policy's forward pass on the real history
 * gives masked logits; the K best allowed actions are the candidates, the first of them the
 * greedy action. Compliance veto: a candidate that is a fix (Remove/Restore) breaks the workflow
 * rule in a particle if red's access there makes it non-compliant (the rule of
 * csrc/wfrl_compliance.h); it breaks it in the belief when it does in more than half of the
 * particles. A candidate that breaks it where the greedy action does not is never evaluated nor
 * chosen. Then rounds: round r draws one particle and one rollout seed from the search stream and
 * plays every remaining candidate from that same particle with that same RNG (common random
 * numbers: the candidates are compared on paired rollouts): apply the candidate, then the rollout
 * policy greedy (memory carried along from a copy of the defender's) for depth − 1 more steps,
 * summing the env reward, plus the rollout policy's critic value of the last observation
 * (leaf_value, when the episode has not ended there). The rollout policy is the acting policy
 * unless wfrl_plan_set_rollout_policy gave another (one with the truth input reads the
 * particle's true red access). With `hold` set and a fix (Remove/Restore) as the greedy action,
 * the rollouts of the other candidates never take that fix: the search then weighs fixing now
 * against not fixing for the rollout's depth (without it, an alternative is followed by a policy
 * that mostly takes the same fix one step later). Rollouts stop at the episode's horizon. The time limit is checked
 * after each round: the rounds stop when one more, as long as the longest so far, would pass it
 * (a decision overruns only when a round takes longer than every one before it); only completed
 * rounds count. Decision: a candidate c replaces the greedy action only with at least 2 rounds
 * and a paired mean gain d̄ = mean_r(R_c,r − R_greedy,r) > 0 with d̄ > z · se(d̄); among those,
 * the largest d̄ (the lowest rank on a tie). Otherwise greedy.
 * Reference of the search's pieces: the forward pass and memory (wfrl_rollout.h, held to their
 * Python twins elsewhere); the selection rule is tested through its outcomes in tests/test_plan.py. */
#ifndef WFRL_PLAN_H
#define WFRL_PLAN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "wfrl_belief.h"
#include "wfrl_cage2.h"
#include "wfrl_compliance.h"
#include "wfrl_memory.h"
#include "wfrl_mlp.h"
#include "wfrl_rng.h"
#include "wfrl_rollout.h"
#include "wfrl_truth.h"

#define WFRL_PLAN_MAX_PARTICLES WFRL_FILTER_MAX_PARTICLES
#define WFRL_PLAN_MAX_CANDIDATES 16
#define WFRL_PLAN_MAX_ROLLOUTS 4096
#define WFRL_PLAN_MAX_DEPTH WFRL_EP_LEN

typedef struct {
    int32_t particles;     /* N */
    int32_t candidates;    /* K (1: the greedy action, no search) */
    int32_t rollouts;      /* R per candidate (rounds) */
    int32_t depth;         /* D >= 1: steps per rollout, the candidate included */
    double time_limit_ms;  /* per decision; 0: none */
    double z;              /* evidence for leaving the greedy action (d̄ > z · se) */
    int32_t leaf_value;    /* add the critic's value at the rollout's last observation */
    uint64_t seed;
} wfrl_plan_budget;

/* What one decision did. */
typedef struct {
    int32_t greedy, chosen;
    int32_t n_candidates;  /* candidates searched (after the veto) */
    int32_t vetoed;        /* candidates removed by the compliance veto */
    int32_t rounds;        /* completed rounds */
    int32_t timed_out;     /* the time limit stopped the rounds */
    double elapsed_ms;
    double gain;           /* paired mean gain of the chosen action over greedy (0 if greedy) */
} wfrl_plan_info;

typedef struct {
    wfrl_plan_budget b;
    wfrl_policy pol;          /* the caller's policy with greedy = 1 */
    wfrl_policy rpol;         /* the policy the rollouts continue with and whose critic scores
                                 their leaves: pol, or one set by wfrl_plan_set_rollout_policy
                                 (a policy with the truth input reads the particle's true state) */
    int32_t horizon;          /* blue steps of the episode */
    int32_t t;                /* steps observed */
    wfrl_filter flt;          /* the belief (its buffers inside the caller's block) */
    wfrl_rng search_rng;
    wfrl_memory mem;          /* the defender's memory (same for every particle) */
    double *ret;              /* [K * R] rollout returns, inside the caller's block */
    /* temporaries */
    wfrl_cage2 sim;
    wfrl_actor actor;
    wfrl_scratch scratch;
    int32_t cand[WFRL_PLAN_MAX_CANDIDATES];
    /* counters over the planner's life */
    int64_t n_decisions, n_switches, n_vetoes, n_timeouts;
    int32_t hold;             /* rollouts of an alternative never take the greedy fix */
} wfrl_planner;

/* 0 if the budget is valid, else a code (see wfrl_plan_budget_error). */
static inline int wfrl_plan_check(const wfrl_plan_budget *b)
{
    if (b->particles < 1 || b->particles > WFRL_PLAN_MAX_PARTICLES) return 1;
    if (b->candidates < 1 || b->candidates > WFRL_PLAN_MAX_CANDIDATES) return 2;
    if (b->rollouts < 0 || b->rollouts > WFRL_PLAN_MAX_ROLLOUTS) return 3;
    if (b->depth < 1 || b->depth > WFRL_PLAN_MAX_DEPTH) return 4;
    if (!(b->time_limit_ms >= 0.0) || b->time_limit_ms > 1e7) return 5;
    if (!(b->z >= 0.0) || b->z > 1e6) return 6;
    return 0;
}

/* Bytes of the block a planner with this budget needs (64-byte aligned start assumed). */
static inline size_t wfrl_plan_bytes(const wfrl_plan_budget *b)
{
    const size_t rounds = (size_t)(b->rollouts > 0 ? b->rollouts : 1);
    return wfrl_belief_align(sizeof(wfrl_planner)) + wfrl_filter_bytes(b->particles) +
           wfrl_belief_align((size_t)b->candidates * rounds * sizeof(double));
}

/* Lay the planner out in `block` (wfrl_plan_bytes long, 64-byte aligned); returns it. */
static inline wfrl_planner *wfrl_plan_init(void *block, const wfrl_plan_budget *b,
                                           const wfrl_policy *p)
{
    uint8_t *m = (uint8_t *)block;
    wfrl_planner *pl = (wfrl_planner *)m;
    memset(pl, 0, sizeof(*pl));
    m += wfrl_belief_align(sizeof(wfrl_planner));
    m = wfrl_filter_init(&pl->flt, m, b->particles, WFRL_PLAN_RED_BLINE, 0);
    pl->ret = (double *)m;
    pl->b = *b;
    pl->pol = *p;
    pl->pol.greedy = 1;
    pl->rpol = pl->pol;
    pl->horizon = WFRL_EP_LEN;
    return pl;
}

/* Continue the rollouts with policy p (greedy) instead of the acting policy, and score their
 * leaves with its critic. A policy with the truth input is fed each particle's true red access:
 * the rollouts then value a candidate as if the defender knew the state from the next step on
 * (QMDP-like, an optimistic continuation shared by every candidate). The acting policy still
 * proposes the candidates and is the fallback. */
static inline void wfrl_plan_set_rollout_policy(wfrl_planner *pl, const wfrl_policy *p)
{
    pl->rpol = *p;
    pl->rpol.greedy = 1;
}

/* Start an episode: every particle the reset state of an allowed red kind. red_set:
 * WFRL_PLAN_RED_* bits (at least one); key: the episode's key (any number; with the planner
 * seed it fixes both random streams). */
static inline void wfrl_plan_reset(wfrl_planner *pl, int red_set, int leaderboard, uint64_t key,
                                   int horizon)
{
    pl->flt.red_set = red_set;
    pl->flt.leaderboard = leaderboard != 0;
    pl->horizon = horizon;
    pl->t = 0;
    wfrl_filter_reset(&pl->flt, wfrl_stream_seed(pl->b.seed, key, 1));
    wfrl_rng_seed(&pl->search_rng, wfrl_stream_seed(pl->b.seed, key, 2));
    wfrl_memory_begin(&pl->mem);
}

/* The belief update after `action` was taken and `obs` observed (wfrl_filter_observe). Returns
 * the number of particles that matched obs exactly (0: the fallback rule was applied). */
static inline int wfrl_plan_observe(wfrl_planner *pl, int action, const float *obs)
{
    const int exact = wfrl_filter_observe(&pl->flt, action, obs);
    wfrl_memory_acted(&pl->mem, action);
    ++pl->t;
    return exact;
}

/* Equal in everything but the RNG (the state a filter can hope to hold). */
static inline int wfrl_plan_same_state(const wfrl_cage2 *a, const wfrl_cage2 *b)
{
    return memcmp(a, b, offsetof(wfrl_cage2, rng)) == 0;
}

/* How many particles hold `truth`'s state (RNG aside). */
static inline int wfrl_plan_count_state(const wfrl_planner *pl, const wfrl_cage2 *truth)
{
    int n = 0;
    for (int i = 0; i < pl->flt.n; ++i) n += wfrl_plan_same_state(&pl->flt.parts[i], truth);
    return n;
}

static inline double wfrl_plan_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The action `action` breaks the workflow rule given red's access (a fix that is not of the
 * highest-priority unit type red holds; the rule of wfrl_compliance_step). */
static inline int wfrl_plan_breaks(const wfrl_workflow *w, int action, const uint8_t *access)
{
    const int target = wfrl_fix_target(action);
    return target >= 0 && !wfrl_fix_compliant(w, target, access);
}

/* One rollout of `action` from particle `from` with RNG seed `seed`; returns its value. */
static inline double wfrl_plan_rollout(wfrl_planner *pl, const wfrl_cage2 *from, uint64_t seed,
                                       int action, int blocked)
{
    wfrl_cage2 *e = &pl->sim;
    wfrl_actor *a = &pl->actor;
    memcpy(e, from, sizeof(*e));
    wfrl_rng_seed(&e->rng, seed);
    a->mem = pl->mem;
    a->comp.fixes = a->comp.compliant = 0;
    wfrl_memory_acted(&a->mem, action);
    float obs[WFRL_OBS_DIM];
    uint8_t access[WFRL_N_HOSTS];
    int64_t r10 = wfrl_cage2_step(e, action, obs, access);
    for (int d = 1; d < pl->b.depth && e->t < pl->horizon; ++d) {
        float logp, bonus;
        const int act = wfrl_actor_act_except(a, &pl->rpol, &pl->scratch, obs, access, blocked,
                                              &logp, NULL, &bonus);
        r10 += wfrl_cage2_step(e, act, obs, access);
    }
    double ret = (double)r10 / 10.0;
    if (pl->b.leaf_value && e->t < pl->horizon) {
        float value;
        wfrl_memory_update(&a->mem, obs);
        wfrl_policy_forward(&pl->rpol, &a->mem, NULL, obs, access, &pl->scratch, &value);
        ret += value;
    }
    return ret;
}

/* Choose the action for obs (the observation after the last wfrl_plan_observe, or the reset
 * observation). access: red's access to feed a policy with the truth input (else unused; may be
 * NULL then). Returns the action; info (may be NULL) receives what the decision did. */
static inline int wfrl_plan_decide(wfrl_planner *pl, const float *obs, const uint8_t *access,
                                   wfrl_plan_info *info)
{
    const double t0 = wfrl_plan_now_ms();
    const int N = pl->b.particles, R = pl->b.rollouts;
    uint8_t zero_access[WFRL_N_HOSTS] = {0};
    wfrl_plan_info inf;
    memset(&inf, 0, sizeof(inf));
    float value;
    wfrl_memory_update(&pl->mem, obs);
    wfrl_policy_forward(&pl->pol, &pl->mem, NULL, obs, access ? access : zero_access, &pl->scratch,
                      &value);
    /* top-K allowed actions by logit (ties: lower index first, as the argmax; a masked action
     * only if nothing else is allowed) */
    const float *lg = pl->scratch.logits;
    int K = 0;
    for (int c = 0; c < pl->b.candidates; ++c) {
        int best = -1;
        for (int a = 0; a < WFRL_N_ACTIONS; ++a) {
            int taken = 0;
            for (int q = 0; q < K; ++q) taken |= pl->cand[q] == a;
            if (taken || (c > 0 && lg[a] <= WFRL_MASKED_LOGIT)) continue;
            if (best < 0 || lg[a] > lg[best]) best = a;
        }
        if (best < 0) break;
        pl->cand[K++] = best;
    }
    const int greedy = pl->cand[0];
    inf.greedy = inf.chosen = greedy;
    /* compliance veto against the particles' red access (majority) */
    if (K > 1) {
        int nbreak[WFRL_PLAN_MAX_CANDIDATES] = {0};
        int any_fix = 0;
        for (int c = 0; c < K; ++c) any_fix |= wfrl_fix_target(pl->cand[c]) >= 0;
        if (any_fix) {
            uint8_t ra[WFRL_N_HOSTS];
            for (int i = 0; i < N; ++i) {
                wfrl_cage2_red_access(&pl->flt.parts[i], ra);
                for (int c = 0; c < K; ++c) nbreak[c] += wfrl_plan_breaks(&pl->pol.wf, pl->cand[c], ra);
            }
        }
        const int greedy_breaks = 2 * nbreak[0] > N;
        int kept = 1;
        for (int c = 1; c < K; ++c) {
            if (!greedy_breaks && 2 * nbreak[c] > N) {
                ++inf.vetoed;
                continue;
            }
            pl->cand[kept++] = pl->cand[c];
        }
        K = kept;
    }
    inf.n_candidates = K;
    /* paired rollout rounds */
    const int blocked = pl->hold && wfrl_fix_target(greedy) >= 0 ? greedy : -1;
    int rounds = 0;
    if (K > 1) {
        double last = wfrl_plan_now_ms(), longest = 0.0;
        for (int r = 0; r < R; ++r) {
            const int j = (int)wfrl_rng_below(&pl->search_rng, (uint32_t)N);
            const uint64_t seed = wfrl_rng_next(&pl->search_rng);
            for (int c = 0; c < K; ++c)
                pl->ret[c * R + r] = wfrl_plan_rollout(pl, &pl->flt.parts[j], seed, pl->cand[c],
                                                       c > 0 ? blocked : -1);
            rounds = r + 1;
            if (pl->b.time_limit_ms > 0) {
                /* stop when another round as long as the longest so far would pass the limit */
                const double now = wfrl_plan_now_ms();
                longest = now - last > longest ? now - last : longest;
                last = now;
                if (rounds < R && now - t0 + longest >= pl->b.time_limit_ms) {
                    inf.timed_out = 1;
                    break;
                }
            }
        }
    }
    inf.rounds = rounds;
    if (rounds >= 2) {
        double best_gain = 0.0;
        for (int c = 1; c < K; ++c) {
            double sum = 0.0, sq = 0.0;
            for (int r = 0; r < rounds; ++r) {
                const double d = pl->ret[c * R + r] - pl->ret[r];
                sum += d;
                sq += d * d;
            }
            const double mean = sum / rounds;
            const double var = (sq - rounds * mean * mean) / (rounds - 1);
            const double se = sqrt(var > 0.0 ? var / rounds : 0.0);
            if (mean > 0.0 && mean > pl->b.z * se && mean > best_gain) {
                best_gain = mean;
                inf.chosen = pl->cand[c];
            }
        }
        inf.gain = best_gain;
    }
    ++pl->n_decisions;
    pl->n_switches += inf.chosen != greedy;
    pl->n_vetoes += inf.vetoed;
    pl->n_timeouts += inf.timed_out;
    inf.elapsed_ms = wfrl_plan_now_ms() - t0;
    if (info) *info = inf;
    return inf.chosen;
}

#endif
