/* The order-conditioned actor-critic evaluated in C.
 *
 * Flat weights (what the learner publishes; the same as wfrl/ppo/policy.py, i.e. torch's
 * parameters() order): for the actor then the critic, three Linear layers, each weight row-major
 * [out, in] followed by its bias [out]:
 *   actor:  [H, I] [H]  [H, H] [H]  [145, H] [145]
 *   critic: [H, I] [H]  [H, H] [H]  [1, H]   [1]
 * I = 52 observation + (optionally) the memory block, the truth block and the belief block + 25
 * workflow one-hot. Hidden activations
 * are tanh (wfrl_tanh of csrc/wfrl_fastmath.h: within 2e-7 of libm's, and vectorisable).
 *
 * For speed the forward pass reads a *packed* copy (wfrl_mlp_pack): the same numbers with every
 * weight transposed to [in, out], so each input adds a contiguous column (vectorisable without
 * reordering a sum) and the zero inputs of the sparse 0/1 observation are skipped.
 * Reference: wfrl/ppo/policy.py (ActorCritic, in torch) and wfrl/ppo/netspec.py (NumpyPolicy),
 * held equal to 1e-5 by tests/test_rollout.py. */
#ifndef WFRL_MLP_H
#define WFRL_MLP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "wfrl_belief.h"
#include "wfrl_fastmath.h"
#include "wfrl_memory.h"
#include "wfrl_rng.h"
#include "wfrl_truth.h"
#include "wfrl_types.h"

#define WFRL_IN_DIM (WFRL_OBS_DIM + WFRL_COND_DIM) /* without the memory and truth blocks */
#define WFRL_MAX_IN_DIM \
    (WFRL_OBS_DIM + WFRL_MEM_DIM + WFRL_TRUTH_DIM + WFRL_BELIEF_DIM + WFRL_COND_DIM)
#define WFRL_MAX_HIDDEN 1024

static inline int64_t wfrl_mlp_n_params(int64_t H, int64_t I)
{
    const int64_t A = WFRL_N_ACTIONS;
    return 2 * (H * I + H + H * H + H) + A * H + A + H + 1;
}

/* Layer k of the six (actor 0-2, critic 3-5): its (out, in), for input width I. */
static inline void wfrl_mlp_layer_shape(int k, int H, int I, int *out, int *in)
{
    static const int outs[6] = {-1, -1, WFRL_N_ACTIONS, -1, -1, 1};
    *out = outs[k] < 0 ? H : outs[k];
    *in = (k == 0 || k == 3) ? I : H;
}

/* packed = flat with every weight matrix transposed to [in, out]; biases unchanged. */
static inline void wfrl_mlp_pack(const float *flat, int H, int I, float *packed)
{
    int64_t off = 0;
    for (int k = 0; k < 6; ++k) {
        int out, in;
        wfrl_mlp_layer_shape(k, H, I, &out, &in);
        for (int o = 0; o < out; ++o)
            for (int i = 0; i < in; ++i)
                packed[off + (int64_t)i * out + o] = flat[off + (int64_t)o * in + i];
        off += (int64_t)out * in;
        memcpy(packed + off, flat + off, (size_t)out * sizeof(float));
        off += out;
    }
}

#if defined(__GNUC__)
/* 16 floats as one vector value (GCC/Clang vector extension; each clone lowers it to the widest
 * registers it has). The "u" type may sit at any float-aligned address. */
typedef float wfrl_f16 __attribute__((vector_size(64)));
typedef float wfrl_f16u __attribute__((vector_size(64), aligned(4), may_alias));
#endif

/* The positions of x[0..n)'s nonzero entries, in order, into idx (branch-free: the sparse 0/1
 * observation's zeros fall in no predictable pattern); returns how many. */
static inline WFRL_ALWAYS_INLINE int wfrl_nonzero(const float *x, int n, int *restrict idx)
{
    int k = 0;
    for (int i = 0; i < n; ++i) {
        idx[k] = i;
        k += x[i] != 0.0f;
    }
    return k;
}

/* y = b + Σ_i x[i]·Wt[i, :] over the nonzero inputs nz[0..nnz) (wfrl_nonzero), optionally tanh.
 * Each output is its own sum, taken over the inputs in order (a multiply, then an add: the
 * build does not contract them), so vectorising over outputs changes no bit. Blocks of 64
 * outputs (then of 16) keep their sums in vector registers for the whole pass over the inputs,
 * instead of loading and storing y once per input — a store-to-load chain per input that made
 * this loop most of a rollout step; the last outputs (the 145th logit, the value) are scalar
 * sums. Same operations in the same order in every path, so the same bits. */
static inline WFRL_ALWAYS_INLINE void wfrl_dense_t(const float *Wt, const float *b,
                                                   const float *x, const int *nz, int nnz,
                                                   int out, int apply_tanh, float *restrict y)
{
    int o0 = 0;
#if defined(__GNUC__)
    for (; o0 + 64 <= out; o0 += 64) {
        wfrl_f16 s0 = *(const wfrl_f16u *)(b + o0), s1 = *(const wfrl_f16u *)(b + o0 + 16);
        wfrl_f16 s2 = *(const wfrl_f16u *)(b + o0 + 32), s3 = *(const wfrl_f16u *)(b + o0 + 48);
        for (int k = 0; k < nnz; ++k) {
            const int i = nz[k];
            const float xi = x[i];
            const float *col = Wt + (int64_t)i * out + o0;
            s0 = s0 + xi * *(const wfrl_f16u *)col;
            s1 = s1 + xi * *(const wfrl_f16u *)(col + 16);
            s2 = s2 + xi * *(const wfrl_f16u *)(col + 32);
            s3 = s3 + xi * *(const wfrl_f16u *)(col + 48);
        }
        *(wfrl_f16u *)(y + o0) = s0;
        *(wfrl_f16u *)(y + o0 + 16) = s1;
        *(wfrl_f16u *)(y + o0 + 32) = s2;
        *(wfrl_f16u *)(y + o0 + 48) = s3;
    }
    for (; o0 + 16 <= out; o0 += 16) {
        wfrl_f16 s0 = *(const wfrl_f16u *)(b + o0);
        for (int k = 0; k < nnz; ++k) {
            const int i = nz[k];
            s0 = s0 + x[i] * *(const wfrl_f16u *)(Wt + (int64_t)i * out + o0);
        }
        *(wfrl_f16u *)(y + o0) = s0;
    }
#endif
    for (; o0 < out; ++o0) {
        float s0 = b[o0];
        for (int k = 0; k < nnz; ++k) {
            const int i = nz[k];
            s0 = s0 + x[i] * Wt[(int64_t)i * out + o0];
        }
        y[o0] = s0;
    }
    if (apply_tanh)
        for (int o = 0; o < out; ++o) y[o] = wfrl_tanh(y[o]);
}

/* Forward pass of one input x[I] with packed weights: logits[145] and the value (value NULL:
 * the critic is not run — a greedy or recorded-nowhere action needs the logits alone).
 * scratch holds 2 * H floats. */
WFRL_SIMD_CLONES
static void wfrl_mlp_forward(const float *packed, int H, int I, const float *x,
                                    float *logits, float *value, float *scratch)
{
    const int A = WFRL_N_ACTIONS;
    float *h1 = scratch, *h2 = scratch + H;
    const float *p = packed;
    const float *aw1 = p; p += (int64_t)H * I;
    const float *ab1 = p; p += H;
    const float *aw2 = p; p += (int64_t)H * H;
    const float *ab2 = p; p += H;
    const float *aw3 = p; p += (int64_t)A * H;
    const float *ab3 = p; p += A;
    const float *cw1 = p; p += (int64_t)H * I;
    const float *cb1 = p; p += H;
    const float *cw2 = p; p += (int64_t)H * H;
    const float *cb2 = p; p += H;
    const float *cw3 = p; p += H;
    const float *cb3 = p;
    int nz_x[WFRL_MAX_IN_DIM], nz[WFRL_MAX_HIDDEN];
    const int nnz_x = wfrl_nonzero(x, I, nz_x);   /* both first layers read x */
    int nnz;
    wfrl_dense_t(aw1, ab1, x, nz_x, nnz_x, H, 1, h1);
    nnz = wfrl_nonzero(h1, H, nz);
    wfrl_dense_t(aw2, ab2, h1, nz, nnz, H, 1, h2);
    nnz = wfrl_nonzero(h2, H, nz);
    wfrl_dense_t(aw3, ab3, h2, nz, nnz, A, 0, logits);
    if (!value)
        return;
    wfrl_dense_t(cw1, cb1, x, nz_x, nnz_x, H, 1, h1);
    nnz = wfrl_nonzero(h1, H, nz);
    wfrl_dense_t(cw2, cb2, h1, nz, nnz, H, 1, h2);
    nnz = wfrl_nonzero(h2, H, nz);
    wfrl_dense_t(cw3, cb3, h2, nz, nnz, 1, 0, value);
}

/* Logit given to a masked action: exp() of it underflows to exactly 0 in float and double, and
 * 0 · it stays finite, so masked actions drop out of softmax, sampling and entropy alike. */
#define WFRL_MASKED_LOGIT (-1.0e9f)

/* Sample an action from softmax(logits[0..A)) (or take the argmax); returns it and writes its
 * log-probability. One uniform draw from rng when sampling. exps: scratch of A doubles.
 * Masked actions carry WFRL_MASKED_LOGIT and are never chosen (action 0, Sleep, never is). */
static inline int wfrl_sample_first(const float *logits, int A, int greedy, wfrl_rng *rng,
                                    float *logp, double *exps)
{
    int best = 0;
    for (int a = 1; a < A; ++a)
        if (logits[a] > logits[best]) best = a;
    const double mx = logits[best];
    double total = 0.0;
    for (int a = 0; a < A; ++a) {
        /* a masked logit's exp underflows to exactly 0: skip the call (libm's underflow path
         * is slow) */
        const int masked = logits[a] <= WFRL_MASKED_LOGIT && mx > WFRL_MASKED_LOGIT;
        exps[a] = masked ? 0.0 : exp((double)logits[a] - mx);
        total += exps[a];
    }
    int chosen = best;
    if (!greedy) {
        const double u = wfrl_rng_uniform(rng) * total;
        double acc = 0.0;
        chosen = A - 1;
        for (int a = 0; a < A; ++a) {
            acc += exps[a];
            if (u < acc) {
                chosen = a;
                break;
            }
        }
    }
    *logp = (float)(((double)logits[chosen] - mx) - log(total));
    return chosen;
}

/* The same over all WFRL_N_ACTIONS (a blue policy's). */
static inline int wfrl_sample_action(const float *logits, int greedy, wfrl_rng *rng, float *logp,
                                     double *exps)
{
    return wfrl_sample_first(logits, WFRL_N_ACTIONS, greedy, rng, logp, exps);
}

#endif
