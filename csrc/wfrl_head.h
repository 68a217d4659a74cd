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
 * action at all (their gradient is set to 0; the binding refuses such a minibatch).
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

/* The loops' float selects vectorise because the extension is built with -fno-trapping-math
 * (setup.py; see csrc/wfrl_fastmath.h). */
WFRL_UNUSED
static void wfrl_ppo_head(int64_t n, int64_t A, const float *logits, const uint8_t *allowed,
                                 const int64_t *actions, const float *old_logp, const float *adv,
                                 float clip, float ent_coef, float *grad, double *stats)
{
    double pg_sum = 0.0, ent_sum = 0.0, kl_sum = 0.0, clipped = 0.0, empty = 0.0;
    const float inv_n = 1.0f / (float)n;
    const float ent_w = ent_coef * inv_n;
    for (int64_t i = 0; i < n; ++i) {
        const float *z = logits + i * A;
        const uint8_t *ok = allowed + i * A;
        float *gz = grad + i * A;
        /* the largest allowed logit (a masked one counts as -1e9 here, which never wins unless
         * everything is masked) */
        float m = -INFINITY;
#pragma omp simd reduction(max:m)
        for (int64_t j = 0; j < A; ++j) {
            const float zj = z[j] + (ok[j] ? 0.0f : WFRL_MASKED_LOGIT);
            m = zj > m ? zj : m;
        }
        /* gz holds exp(z - m), exactly 0 outside S, for now */
        float s = 0.0f;
#pragma omp simd reduction(+:s)
        for (int64_t j = 0; j < A; ++j) {
            const float e = (ok[j] ? 1.0f : 0.0f) * wfrl_exp_nonpos(z[j] - m);
            gz[j] = e;
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
#pragma omp simd reduction(+:h)
        for (int64_t j = 0; j < A; ++j) {
            const float p = gz[j] * inv_s;
            gz[j] = p;
            h -= p * (z[j] - lse);
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
        for (int64_t j = 0; j < A; ++j) {
            const float p = gz[j];
            gz[j] = p * (ent_w * ((z[j] - lse) + h) - g);
        }
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
