/* Sanitizer driver for csrc/wfrl_head.h (built with -fsanitize=address,undefined by
 * tests/test_head.py). Every array is allocated to its exact size, so a read or write past a
 * minibatch is caught. Random minibatches of random sizes and widths (1 to 145 actions): logits
 * from small to extreme scales, random masks (at least one allowed action per row; sometimes none
 * masked), taken actions that are sometimes masked, ratios near and far from 1. Checked after
 * every call: a masked action's gradient is exactly 0; each row's gradient sums to 0 (the
 * softmax's gradient does); the statistics are finite and in range.
 * Usage: check_head CALLS [SEED]. Exit 0 and one summary line when all hold. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "wfrl_head.h"
#include "wfrl_rng.h"

static int fail(const char *what, long call, long row)
{
    fprintf(stderr, "invariant broken: %s (call %ld, row %ld)\n", what, call, row);
    return 1;
}

int main(int argc, char **argv)
{
    const long calls = argc > 1 ? atol(argv[1]) : 200;
    const uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    wfrl_rng rng;
    wfrl_rng_seed(&rng, seed);
    long rows_checked = 0;
    for (long c = 0; c < calls; ++c) {
        const int64_t n = 1 + (int64_t)(wfrl_rng_uniform(&rng) * 300);
        /* every width up to the full action space: the row buffers' unused lanes must add
         * nothing (half the calls at the full 145) */
        const int64_t A = wfrl_rng_uniform(&rng) < 0.5 ? WFRL_N_ACTIONS
                          : 1 + (int64_t)(wfrl_rng_uniform(&rng) * WFRL_N_ACTIONS);
        const float scale = (float)pow(10.0, -1.0 + 3.0 * wfrl_rng_uniform(&rng));  /* 0.1 .. 100 */
        const int all_allowed = wfrl_rng_uniform(&rng) < 0.2;
        float *logits = malloc((size_t)(n * A) * sizeof(float));
        float *grad = malloc((size_t)(n * A) * sizeof(float));
        uint8_t *allowed = malloc((size_t)(n * A));
        int64_t *actions = malloc((size_t)n * sizeof(int64_t));
        float *old_logp = malloc((size_t)n * sizeof(float));
        float *adv = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < A; ++j) {
                logits[i * A + j] = scale * (float)(2.0 * wfrl_rng_uniform(&rng) - 1.0);
                allowed[i * A + j] = all_allowed || wfrl_rng_uniform(&rng) < 0.5;
            }
            actions[i] = (int64_t)(wfrl_rng_uniform(&rng) * (double)A);
            if (wfrl_rng_uniform(&rng) < 0.95) allowed[i * A + actions[i]] = 1;
            allowed[i * A] = 1;                                  /* Sleep is never masked */
            old_logp[i] = (float)(-5.0 * wfrl_rng_uniform(&rng));
            adv[i] = (float)(4.0 * wfrl_rng_uniform(&rng) - 2.0);
        }
        double stats[5];
        wfrl_ppo_head(n, A, logits, allowed, actions, old_logp, adv, 0.2f, 0.01f, grad, stats);
        if (stats[4] != 0) return fail("a row was reported without an allowed action", c, -1);
        for (int i = 0; i < 4; ++i)
            if (!isfinite(stats[i])) return fail("a statistic is not finite", c, -1);
        if (stats[1] < -1e-3 || stats[1] > (double)n * log((double)A) + 1e-3)
            return fail("entropy sum outside [0, n log A]", c, -1);
        if (stats[2] < -1e-4 * (double)n) return fail("approximate KL sum below 0", c, -1);
        if (stats[3] < 0 || stats[3] > (double)n) return fail("clipped count outside [0, n]", c, -1);
        for (int64_t i = 0; i < n; ++i) {
            double sum = 0.0, mag = 0.0;
            for (int64_t j = 0; j < A; ++j) {
                const float g = grad[i * A + j];
                if (!isfinite(g)) return fail("a gradient is not finite", c, i);
                if (!allowed[i * A + j] && g != 0.0f && j != actions[i])
                    return fail("a masked action has a gradient", c, i);
                sum += g;
                mag += fabs(g);
            }
            /* float rounding of (z - lse) + H at logit scales of 100 reaches ~2e-5 of mag; a
             * missing term of the softmax gradient would be of the order of mag itself. Where
             * (z - lse) + H nearly cancels (a near-uniform row of a few actions, the surrogate
             * clipped) mag is tiny and the rounding of the entropy term, ent_w·ε·|z - lse|, sets
             * the floor instead; and where the taken action's probability is near 1 and its
             * ratio large, the rounding of p_a·g against g (|g| ≤ |A_i| e^-old_i / n) does */
            const double floor = 1e-5 * (0.01 / (double)n) * (2.0 * scale + 2.0 * log((double)A + 1.0))
                                 + 4e-7 * fabs(adv[i]) * exp(-old_logp[i]) / (double)n;
            if (fabs(sum) > 1e-4 * mag + floor + 1e-9)
                return fail("a row's gradient does not sum to 0", c, i);
            ++rows_checked;
        }
        free(logits); free(grad); free(allowed); free(actions); free(old_logp); free(adv);
    }
    printf("check_head: %ld calls, %ld rows: all invariants held\n", calls, rows_checked);
    return 0;
}
