/* The PPO update's policy head for one minibatch, forward and backward in one pass over the logits.
 *
 * For row i with logits z (A of them), the allowed set S (allowed[i, j] = 1; 0 or 1 only), the
 * taken action a, the behaviour log-probability old_i and the (already normalised) advantage A_i:
 *
 *   log p_j = z_j - logsumexp_{k in S} z_k   for j in S; p_j = 0 outside S
 *   H_i     = -sum_j p_j log p_j
 *   r_i     = exp(log p_a - old_i)
 *   pg_i    = max(-A_i r_i, -A_i clamp(r_i, 1 - clip, 1 + clip))
 *
 * and the minibatch loss L = mean_i pg_i - ent_coef * mean_i H_i. Written to grad: dL/dz, that is
 *
 *   dL/dz_j = g_i (1[j = a] - p_j) + (ent_coef / n) p_j (log p_j + H_i)
 *
 * with g_i = -A_i r_i / n when the unclipped term is the larger one (or the two are equal) and 0
 * otherwise (the clamp passes no gradient where it clips), and 0 for every action outside S. A
 * taken action outside S gets the log-probability of a logit moved by WFRL_MASKED_LOGIT, as the
 * additive mask bias gives it (its ratio is then 0). stats receives the sums over rows of pg_i,
 * H_i, (r_i - 1) - log r_i and 1[|r_i - 1| > clip], and in stats[4] the number of rows that allow no
 * action at all (their gradient is set to 0; the binding refuses such a minibatch). A is at most
 * WFRL_N_ACTIONS (a wider call is refused whole: stats[4] = n).
 *
 * Reference: wfrl/ppo/head.py (head_loss_reference), the same loss through torch autograd, held
 * equal by tests/test_head.py, which also runs csrc/tools/check_head.c under ASan and UBSan. */
#ifndef WFRL_HEAD_H
#define WFRL_HEAD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "wfrl_fastmath.h"
#include "wfrl_mlp.h"

/* Each row is worked on in row-local buffers: 64-byte aligned and WFRL_HEAD_LANES wide (A
 * rounded up to a multiple of 16, the extra lanes disallowed, so they add exactly 0 to every sum
 * and max), so every loop below runs whole vectors from an aligned start — no scalar peel or
 * remainder iterations, which for the exp loop cost as much as the vectorised part. The loops'
 * float selects vectorise because the extension is built with -fno-trapping-math (setup.py; see
 * csrc/wfrl_fastmath.h). */
#define WFRL_HEAD_LANES (((WFRL_N_ACTIONS) + 15) / 16 * 16)

WFRL_UNUSED WFRL_SIMD_CLONES
static void wfrl_ppo_head(int64_t n, int64_t A, const float *logits, const uint8_t *allowed,
                                 const int64_t *actions, const float *old_logp, const float *adv,
                                 float clip, float ent_coef, float *grad, double *stats)
{
    double pg_sum = 0.0, ent_sum = 0.0, kl_sum = 0.0, clipped = 0.0, empty = 0.0;
    const float inv_n = 1.0f / (float)n;
    const float ent_w = ent_coef * inv_n;
    float zb[WFRL_HEAD_LANES] __attribute__((aligned(64)));   /* logits, masked ones moved */
    float keep[WFRL_HEAD_LANES] __attribute__((aligned(64))); /* 1 allowed, 0 not */
    float pb[WFRL_HEAD_LANES] __attribute__((aligned(64)));   /* exp, then p */
    const int64_t W = (A + 15) / 16 * 16;
    if (A > WFRL_HEAD_LANES) {   /* wider than the buffers: refused (the binding checks first) */
        stats[0] = stats[1] = stats[2] = stats[3] = 0.0;
        stats[4] = (double)n;
        return;
    }
    for (int64_t j = A; j < W; ++j) {
        zb[j] = WFRL_MASKED_LOGIT;
        keep[j] = 0.0f;
    }
    for (int64_t i = 0; i < n; ++i) {
        const float *z = logits + i * A;
        const uint8_t *ok = allowed + i * A;
        float *gz = grad + i * A;
        for (int64_t j = 0; j < A; ++j) {
            keep[j] = ok[j] ? 1.0f : 0.0f;
            zb[j] = z[j] + (ok[j] ? 0.0f : WFRL_MASKED_LOGIT);
        }
        /* the largest allowed logit (a masked one counts as -1e9 here, which never wins unless
         * everything is masked) */
        float m = -INFINITY;
#pragma omp simd reduction(max:m) aligned(zb:64)
        for (int64_t j = 0; j < W; ++j)
            m = zb[j] > m ? zb[j] : m;
        /* pb holds exp(z - m), exactly 0 outside S, for now */
        float s = 0.0f;
#pragma omp simd reduction(+:s) aligned(zb, keep, pb:64)
        for (int64_t j = 0; j < W; ++j) {
            const float e = keep[j] * wfrl_exp_nonpos(zb[j] - m);
            pb[j] = e;
            s += e;
        }
        if (!(s > 0.0f)) {          /* no allowed action: the row is refused (stats[4]) */
            for (int64_t j = 0; j < A; ++j) gz[j] = 0.0f;
            empty += 1.0;
            continue;
        }
        const float lse = m + logf(s);
        const float inv_s = 1.0f / s;
        float h = 0.0f;
#pragma omp simd reduction(+:h) aligned(zb, pb:64)
        for (int64_t j = 0; j < W; ++j) {
            const float p = pb[j] * inv_s;
            pb[j] = p;
            /* a disallowed lane has p = 0 exactly; its (z - lse) is finite (about -1e9) */
            h -= p * (zb[j] - lse);
        }
        const int64_t a = actions[i];
        const float za = ok[a] ? z[a] : z[a] + WFRL_MASKED_LOGIT;
        const float log_ratio = (za - lse) - old_logp[i];
        const float r = expf(log_ratio);
        const float lo = 1.0f - clip, hi = 1.0f + clip;
        const float rc = r < lo ? lo : (r > hi ? hi : r);
        const float adv_i = adv[i];
        const float unclipped = -adv_i * r, clipped_term = -adv_i * rc;
        const float g = unclipped >= clipped_term ? unclipped * inv_n : 0.0f;
#pragma omp simd aligned(zb, pb:64)
        for (int64_t j = 0; j < W; ++j)
            pb[j] = pb[j] * (ent_w * ((zb[j] - lse) + h) - g);
        memcpy(gz, pb, (size_t)A * sizeof(float));
        gz[a] += g;
        pg_sum += unclipped >= clipped_term ? unclipped : clipped_term;
        ent_sum += h;
        kl_sum += (double)(r - 1.0f) - (double)log_ratio;
        clipped += fabsf(r - 1.0f) > clip ? 1.0 : 0.0;
    }
    stats[0] = pg_sum;
    stats[1] = ent_sum;
    stats[2] = kl_sum;
    stats[3] = clipped;
    stats[4] = empty;
}

#endif
