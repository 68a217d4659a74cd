/* One PPO minibatch step of one network — the actor or the critic — in C: the forward pass, the
 * loss and its gradient with respect to the network's output, the backward pass, the clip of the
 * network's gradient norm and Adam, with no Python or torch operation in between.
 *
 * The network is the learner's (wfrl/ppo/policy.py): two tanh layers of H units and a linear
 * output, each layer's weight row-major [out, in] as torch keeps it. Only the input columns
 * `cols` and (actor) the outputs `acts` a minibatch uses take part in the products (the others
 * contribute exact zeros and get a gradient of exactly 0: the learner's _Compact plan); the
 * gradient is written back at full size into the parameters' .grad arrays (0 elsewhere), then
 * clipped as a whole (max_norm over this network alone: clip_per_net) and every parameter takes
 * one step of Adam (torch's fused Adam: eps added after the bias-corrected square root; a
 * parameter without gradient this step still moves by its first moment, as in torch).
 *
 * The loss of the output: the actor's is the policy head (csrc/wfrl_head.h: clipped surrogate
 * minus the entropy bonus, with its gradient in the same pass); the critic's is
 * value_coef · 0.5 · mean((v - R)²).
 *
 * The products are one register-blocked kernel (wfrl_gemm): with AVX-512, blocks of 6 rows × 64
 * columns held in 24 vector registers for the whole sum, every operand streamed once per block
 * (elsewhere a narrow tiling, correct but slow: see wfrl_gemm_level). This code is compiled with
 * multiply-add contraction on (the pragma below), unlike the rest of the extension: the
 * products' rounding is not held to torch's anyway (MKL's blocking sums in another order), and a
 * fused multiply-add doubles what each cycle does here.
 *
 * Reference: the learner's torch path (wfrl/ppo/learner.py, PPOLearner(compiled=False): the same
 * step through torch's matrix products and fused Adam), held equal up to float rounding by
 * tests/test_learner.py. */
#ifndef WFRL_UPDATE_H
#define WFRL_UPDATE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "wfrl_fastmath.h"
#include "wfrl_head.h"
#include "wfrl_mlp.h"

#define WFRL_PAD16(n) (((n) + 15) / 16 * 16)

/* One network's parameters and optimiser state as the learner keeps them (torch tensors'
 * memory): for layer l = 0, 1, 2 the weight [out_l, in_l] (index 2l) and the bias [out_l]
 * (index 2l + 1); their gradients; Adam's two moments; Adam's step counters (one per parameter,
 * as torch keeps them). */
typedef struct {
    int64_t H, I, O;   /* hidden width, full input width, full output width */
    float *param[6];
    float *grad[6];
    float *exp_avg[6];
    float *exp_avg_sq[6];
    float *step[6];
    float lr, beta1, beta2, eps, max_norm;
} wfrl_net_t;

/* Floats of scratch a step of k rows needs, for nc input columns and no outputs in use (the
 * layout of wfrl_step_prepare, each part 64-byte aligned, plus 16 floats to align the start). */
static inline int64_t wfrl_step_scratch_floats(int64_t k, int64_t nc, int64_t H, int64_t no)
{
    const int64_t lh = WFRL_PAD16(H), lo = WFRL_PAD16(no), ln = WFRL_PAD16(nc);
    return 16 + lh * (2 * ln + 3 * H + 2 * no + 4 + 4 * k) + lo * (H + 2) + 2 * WFRL_PAD16(k * no);
}

#if defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif

/* The register tiling of the products, by what the CPU has (wfrl_gemm_level): with AVX-512 (32
 * registers of 16 floats; level 2) blocks of 6 rows × 64 columns, 24 accumulators; otherwise
 * 2 rows × 16 columns, correct everywhere but slow (the 16-float vector type is not native
 * there): the learner steps in C only where the level is 2 and keeps torch's steps elsewhere
 * (wfrl/ppo/learner.py, _compiled_ok). Every clone compiles both tilings and runs the one for
 * the CPU it was chosen for; wfrl_gemm_level_override (tests) forces one. */
static int wfrl_gemm_level_override = -1;

static inline int wfrl_gemm_level(void)
{
    if (wfrl_gemm_level_override >= 0)
        return wfrl_gemm_level_override;
#if defined(__GNUC__) && defined(__x86_64__)
    static int level = -1;
    if (level < 0)
        level = __builtin_cpu_supports("avx512f") ? 2 : 0;
    return level;
#else
    return 0;
#endif
}

#if defined(__GNUC__)
/* The kernel for one block of MR rows and NV vectors of 16 columns, columns c0.. of C, over the
 * terms k0..k1: C[m, c] = (k0 == 0 ? bias[c] : C[m, c]) + Σ_k A(m, k)·B[k, c], A(m, k) =
 * A[m·sam + k·sak]. B and bias are read for all 16·NV lanes (padded); `ncols` of them are read
 * from and stored to C (the rest of the last vector is dropped). Each output is its own sum over
 * k in order. */
#define WFRL_GEMM_BLOCK(MR, NV)                                                                    \
    do {                                                                                           \
        wfrl_f16 acc[MR][NV];                                                                      \
        float tmp_[16] __attribute__((aligned(64)));                                               \
        for (int i_ = 0; i_ < (MR); ++i_)                                                          \
            for (int j_ = 0; j_ < (NV); ++j_) {                                                    \
                const int64_t left_ = ncols - 16 * j_;                                             \
                const float *row_ = C + (m0 + i_) * ldc + c0 + 16 * j_;                            \
                if (k0 == 0) {                                                                     \
                    acc[i_][j_] = bias ? (wfrl_f16) * (const wfrl_f16u *)(bias + c0 + 16 * j_)    \
                                       : (wfrl_f16){0};                                            \
                } else if (left_ >= 16) {                                                          \
                    acc[i_][j_] = *(const wfrl_f16u *)row_;                                        \
                } else {                                                                           \
                    memcpy(tmp_, row_, (size_t)left_ * sizeof(float));                             \
                    acc[i_][j_] = *(const wfrl_f16 *)tmp_;                                         \
                }                                                                                  \
            }                                                                                      \
        const float *a_ = A + m0 * sam;                                                            \
        for (int64_t k_ = k0; k_ < k1; ++k_) {                                                     \
            wfrl_f16 b_[NV];                                                                       \
            for (int j_ = 0; j_ < (NV); ++j_)                                                      \
                b_[j_] = *(const wfrl_f16u *)(B + k_ * ldb + c0 + 16 * j_);                        \
            for (int i_ = 0; i_ < (MR); ++i_) {                                                    \
                const float s_ = a_[i_ * sam + k_ * sak];                                          \
                for (int j_ = 0; j_ < (NV); ++j_)                                                  \
                    acc[i_][j_] += s_ * b_[j_];                                                    \
            }                                                                                      \
        }                                                                                          \
        for (int i_ = 0; i_ < (MR); ++i_) {                                                        \
            float *row_ = C + (m0 + i_) * ldc + c0;                                                \
            for (int j_ = 0; j_ < (NV); ++j_) {                                                    \
                const int64_t left_ = ncols - 16 * j_;                                             \
                if (left_ >= 16) {                                                                 \
                    *(wfrl_f16u *)(row_ + 16 * j_) = acc[i_][j_];                                  \
                } else if (left_ > 0) {                                                            \
                    *(wfrl_f16 *)tmp_ = acc[i_][j_];                                               \
                    memcpy(row_ + 16 * j_, tmp_, (size_t)left_ * sizeof(float));                   \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* The rows of one panel (NV vectors): blocks of MR rows, then single rows. */
#define WFRL_GEMM_PANEL(MR, NV)                                                                    \
    do {                                                                                           \
        int64_t m0 = 0;                                                                            \
        for (; m0 + (MR) <= M; m0 += (MR))                                                         \
            WFRL_GEMM_BLOCK(MR, NV);                                                               \
        for (; m0 < M; ++m0)                                                                       \
            WFRL_GEMM_BLOCK(1, NV);                                                                \
    } while (0)

/* The same with blocks of 6 rows and the last 1-5 rows as one block (not row by row: a weight
 * gradient has 64 or 87 rows, and a single-row block goes over the whole sum for one row's
 * accumulators). */
#define WFRL_GEMM_PANEL6(NV)                                                                       \
    do {                                                                                           \
        int64_t m0 = 0;                                                                            \
        for (; m0 + 6 <= M; m0 += 6)                                                               \
            WFRL_GEMM_BLOCK(6, NV);                                                                \
        switch (M - m0) {                                                                          \
        case 5: WFRL_GEMM_BLOCK(5, NV); break;                                                     \
        case 4: WFRL_GEMM_BLOCK(4, NV); break;                                                     \
        case 3: WFRL_GEMM_BLOCK(3, NV); break;                                                     \
        case 2: WFRL_GEMM_BLOCK(2, NV); break;                                                     \
        case 1: WFRL_GEMM_BLOCK(1, NV); break;                                                     \
        default: break;                                                                            \
        }                                                                                          \
    } while (0)
#endif

/* Terms per pass of a long sum (the weight gradients' sums over a minibatch's rows): the rows of
 * A and B one pass reads stay in the core's cache while every block of C goes over them. */
#define WFRL_GEMM_KC 256

/* C[M, N] (row stride ldc) = bias + A·B for A(m, k) = A[m·sam + k·sak] (any strides: a matrix or
 * its transpose) and B [K, N] with row stride ldb. B's rows and bias (NULL: 0) must be readable
 * up to N rounded up to 16 (the learner pads them with zeros); only N columns of C are written.
 * Sums longer than WFRL_GEMM_KC terms are taken in passes of that many (the same order). */
WFRL_SIMD_CLONES
static void wfrl_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t sam, int64_t sak,
                      const float *B, int64_t ldb, const float *bias, float *C, int64_t ldc)
{
#if defined(__GNUC__)
    const int level = wfrl_gemm_level();
    const int64_t width = level == 2 ? 64 : 16;
    int64_t k0 = 0;
    do {
        const int64_t k1 = K - k0 > WFRL_GEMM_KC ? k0 + WFRL_GEMM_KC : K;
        for (int64_t c0 = 0; c0 < N; c0 += width) {
            const int64_t ncols = N - c0 < width ? N - c0 : width;
            if (level == 2) {
                switch ((ncols + 15) / 16) {
                case 4: WFRL_GEMM_PANEL6(4); break;
                case 3: WFRL_GEMM_PANEL6(3); break;
                case 2: WFRL_GEMM_PANEL6(2); break;
                default: WFRL_GEMM_PANEL6(1); break;
                }
            } else {
                WFRL_GEMM_PANEL(2, 1);
            }
        }
        k0 = k1;
    } while (k0 < K);
#else
    for (int64_t m = 0; m < M; ++m)
        for (int64_t c = 0; c < N; ++c) {
            float acc = bias ? bias[c] : 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += A[m * sam + k * sak] * B[k * ldb + c];
            C[m * ldc + c] = acc;
        }
#endif
}

/* g[c] = Σ_r D[r·ld + c] for c < N (a bias's gradient). */
static inline WFRL_ALWAYS_INLINE void wfrl_colsum(int64_t rows, int64_t N, const float *D,
                                                  int64_t ld, float *g)
{
    for (int64_t c = 0; c < N; ++c)
        g[c] = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < N; ++c)
            g[c] += D[r * ld + c];
}

/* Y = tanh(Y) over rows × N (row stride ld), or D *= 1 - Y² (tanh's derivative). */
static inline WFRL_ALWAYS_INLINE void wfrl_tanh_rows(int64_t rows, int64_t N, float *Y, int64_t ld)
{
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < N; ++c)
            Y[r * ld + c] = wfrl_tanh(Y[r * ld + c]);
}

static inline WFRL_ALWAYS_INLINE void wfrl_tanh_grad_rows(int64_t rows, int64_t N, float *D,
                                                          const float *Y, int64_t ld)
{
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < N; ++c) {
            const float y = Y[r * ld + c];
            D[r * ld + c] *= 1.0f - y * y;
        }
}

/* What a step keeps between its forward and backward passes (pointers into one scratch area). */
typedef struct {
    int64_t k, nc, no, lh, lo;
    float *w1t, *w2t, *w3t, *w2p, *w3p, *b1p, *b2p, *b3p;   /* packed, zero-padded weights */
    float *a1, *a2, *d1, *d2;                               /* [k, lh] */
    float *g1t, *g2, *g3, *gb1, *gb2, *gb3;                 /* gradients of the used part */
    float *out, *dout;                                      /* [k, no] contiguous */
} wfrl_step_mem;

static inline float *wfrl_take(float **cursor, int64_t n)
{
    float *p = *cursor;
    *cursor += WFRL_PAD16(n);
    return p;
}

/* Lays the scratch out and packs the used part of the weights: W1[:, cols]ᵀ, W2ᵀ, W3[acts]ᵀ
 * (for the forward pass), W2 and W3[acts] (for the backward). The packs are zeroed first, so
 * their padding lanes are 0; the other parts' padding lanes (only where H is not a multiple of
 * 16) are never written and never reach a stored result. */
static inline WFRL_ALWAYS_INLINE void wfrl_step_prepare(const wfrl_net_t *net, int64_t k,
                                                        const int64_t *cols, int64_t nc,
                                                        const int64_t *acts, int64_t no,
                                                        float *scratch, wfrl_step_mem *s)
{
    const int64_t H = net->H, I = net->I, lh = WFRL_PAD16(H), lo = WFRL_PAD16(no);
    float *cur = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    s->k = k, s->nc = nc, s->no = no, s->lh = lh, s->lo = lo;
    s->w1t = wfrl_take(&cur, WFRL_PAD16(nc) * lh);
    s->w2t = wfrl_take(&cur, H * lh);
    s->w3t = wfrl_take(&cur, H * lo);
    s->w2p = wfrl_take(&cur, H * lh);
    s->w3p = wfrl_take(&cur, no * lh);
    s->b1p = wfrl_take(&cur, lh);
    s->b2p = wfrl_take(&cur, lh);
    s->b3p = wfrl_take(&cur, lo);
    memset(s->w1t, 0, (size_t)(cur - s->w1t) * sizeof(float));
    s->a1 = wfrl_take(&cur, k * lh);
    s->a2 = wfrl_take(&cur, k * lh);
    s->d1 = wfrl_take(&cur, k * lh);
    s->d2 = wfrl_take(&cur, k * lh);
    s->g1t = wfrl_take(&cur, WFRL_PAD16(nc) * lh);
    s->g2 = wfrl_take(&cur, H * lh);
    s->g3 = wfrl_take(&cur, no * lh);
    s->gb1 = wfrl_take(&cur, lh);
    s->gb2 = wfrl_take(&cur, lh);
    s->gb3 = wfrl_take(&cur, lo);
    s->out = wfrl_take(&cur, k * no);
    s->dout = wfrl_take(&cur, k * no);
    const float *W1 = net->param[0], *W2 = net->param[2], *W3 = net->param[4];
    for (int64_t o = 0; o < H; ++o) {
        for (int64_t c = 0; c < nc; ++c)
            s->w1t[c * lh + o] = W1[o * I + (cols ? cols[c] : c)];
        for (int64_t i = 0; i < H; ++i) {
            s->w2t[i * lh + o] = W2[o * H + i];
            s->w2p[o * lh + i] = W2[o * H + i];
        }
        s->b1p[o] = net->param[1][o];
        s->b2p[o] = net->param[3][o];
    }
    for (int64_t j = 0; j < no; ++j) {
        const int64_t row = acts ? acts[j] : j;
        for (int64_t h = 0; h < H; ++h) {
            s->w3t[h * lo + j] = W3[row * H + h];
            s->w3p[j * lh + h] = W3[row * H + h];
        }
        s->b3p[j] = net->param[5][row];
    }
}

/* The forward pass of x [k, nc] (the used columns, contiguous): s->a1, s->a2, s->out. */
static inline WFRL_ALWAYS_INLINE void wfrl_step_forward(const wfrl_net_t *net, const float *x,
                                                        wfrl_step_mem *s)
{
    const int64_t k = s->k, H = net->H, lh = s->lh;
    wfrl_gemm(k, H, s->nc, x, s->nc, 1, s->w1t, lh, s->b1p, s->a1, lh);
    wfrl_tanh_rows(k, H, s->a1, lh);
    wfrl_gemm(k, H, H, s->a1, lh, 1, s->w2t, lh, s->b2p, s->a2, lh);
    wfrl_tanh_rows(k, H, s->a2, lh);
    wfrl_gemm(k, s->no, H, s->a2, lh, 1, s->w3t, s->lo, s->b3p, s->out, s->no);
}

/* The backward pass from s->dout = d loss / d out [k, no]: the gradients of the used part. */
static inline WFRL_ALWAYS_INLINE void wfrl_step_backward(const wfrl_net_t *net, const float *x,
                                                         wfrl_step_mem *s)
{
    const int64_t k = s->k, H = net->H, lh = s->lh, no = s->no, nc = s->nc;
    /* layer 3: G3 [no, H] = doutᵀ a2, gb3 = Σ dout, d2 = dout W3 */
    wfrl_gemm(no, H, k, s->dout, 1, no, s->a2, lh, NULL, s->g3, lh);
    wfrl_colsum(k, no, s->dout, no, s->gb3);
    wfrl_gemm(k, H, no, s->dout, no, 1, s->w3p, lh, NULL, s->d2, lh);
    wfrl_tanh_grad_rows(k, H, s->d2, s->a2, lh);
    /* layer 2: G2 [H, H] = d2ᵀ a1, d1 = d2 W2 */
    wfrl_gemm(H, H, k, s->d2, 1, lh, s->a1, lh, NULL, s->g2, lh);
    wfrl_colsum(k, H, s->d2, lh, s->gb2);
    wfrl_gemm(k, H, H, s->d2, lh, 1, s->w2p, lh, NULL, s->d1, lh);
    wfrl_tanh_grad_rows(k, H, s->d1, s->a1, lh);
    /* layer 1: G1ᵀ [nc, H] = xᵀ d1 */
    wfrl_gemm(nc, H, k, x, 1, nc, s->d1, lh, NULL, s->g1t, lh);
    wfrl_colsum(k, H, s->d1, lh, s->gb1);
}

/* The full-size gradients into net->grad (0 where a column or output is not in use), clipped
 * to net->max_norm over the whole network, then one Adam step of every parameter. Returns the
 * norm before the clip. */
static inline WFRL_ALWAYS_INLINE double wfrl_step_apply(const wfrl_net_t *net,
                                                       const int64_t *cols, const int64_t *acts,
                                                       const wfrl_step_mem *s)
{
    const int64_t H = net->H, I = net->I, O = net->O, lh = s->lh, nc = s->nc, no = s->no;
    float **g = (float **)net->grad;
    const int64_t sizes[6] = {H * I, H, H * H, H, O * H, O};
    for (int p = 0; p < 6; ++p)
        memset(g[p], 0, (size_t)sizes[p] * sizeof(float));
    for (int64_t c = 0; c < nc; ++c) {
        const int64_t col = cols ? cols[c] : c;
        for (int64_t o = 0; o < H; ++o)
            g[0][o * I + col] = s->g1t[c * lh + o];
    }
    for (int64_t o = 0; o < H; ++o) {
        g[1][o] = s->gb1[o];
        g[3][o] = s->gb2[o];
        memcpy(g[2] + o * H, s->g2 + o * lh, (size_t)H * sizeof(float));
    }
    for (int64_t j = 0; j < no; ++j) {
        const int64_t row = acts ? acts[j] : j;
        memcpy(g[4] + row * H, s->g3 + j * lh, (size_t)H * sizeof(float));
        g[5][row] = s->gb3[j];
    }
    double sq = 0.0;
    for (int p = 0; p < 6; ++p) {
        float part = 0.0f;   /* each parameter's sum of squares in float, as torch's norms */
        for (int64_t i = 0; i < sizes[p]; ++i)
            part += g[p][i] * g[p][i];
        sq += (double)part;
    }
    const double norm = sqrt(sq);
    double coef = (double)net->max_norm / (norm + 1e-6);
    const float scale = coef < 1.0 ? (float)coef : 1.0f;
    const float b1 = net->beta1, b2 = net->beta2, eps = net->eps;
    for (int p = 0; p < 6; ++p) {
        const double t = (double)(*net->step[p] += 1.0f);
        const double bc1 = 1.0 - pow((double)b1, t), bc2 = 1.0 - pow((double)b2, t);
        const float step_size = (float)((double)net->lr / bc1);
        const float bc2_sqrt = (float)sqrt(bc2);
        float *w = net->param[p], *m = net->exp_avg[p], *v = net->exp_avg_sq[p], *gp = g[p];
        for (int64_t i = 0; i < sizes[p]; ++i) {
            const float gi = gp[i] * scale;
            gp[i] = gi;
            m[i] = m[i] * b1 + gi * (1.0f - b1);
            v[i] = v[i] * b2 + gi * gi * (1.0f - b2);
            w[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
        }
    }
    return norm;
}

/* The actor's step on k rows: x [k, nc] (the used input columns), allowed [k, no] (1 allowed,
 * 0 masked; the used actions acts[0..no), NULL: all O), actions [k] as indices into acts,
 * old_logp, adv [k] (adv normalised, times any proximal weight), the head's clip and entropy
 * weight. stats: the head's sums (surrogate, entropy, approximate KL, clipped ratios, rows
 * allowing nothing — a nonzero count means nothing was applied), then the gradient norm. */
WFRL_SIMD_CLONES
static void wfrl_actor_step(const wfrl_net_t *net, int64_t k, const float *x, const int64_t *cols,
                            int64_t nc, const int64_t *acts, int64_t no, const uint8_t *allowed,
                            const int64_t *actions, const float *old_logp, const float *adv,
                            float clip, float ent_coef, float *scratch, double *stats)
{
    wfrl_step_mem s;
    wfrl_step_prepare(net, k, cols, nc, acts, no, scratch, &s);
    wfrl_step_forward(net, x, &s);
    wfrl_ppo_head(k, no, s.out, allowed, actions, old_logp, adv, clip, ent_coef, s.dout, stats);
    if (stats[4] != 0) {
        stats[5] = 0.0;
        return;
    }
    wfrl_step_backward(net, x, &s);
    stats[5] = wfrl_step_apply(net, cols, acts, &s);
}

/* The critic's step on k rows: value loss 0.5·mean((v - ret)²) into stats[0] (the gradient is
 * that times value_coef), the gradient norm into stats[1]. */
WFRL_SIMD_CLONES
static void wfrl_critic_step(const wfrl_net_t *net, int64_t k, const float *x, const int64_t *cols,
                             int64_t nc, const float *ret, float value_coef, float *scratch,
                             double *stats)
{
    wfrl_step_mem s;
    wfrl_step_prepare(net, k, cols, nc, NULL, 1, scratch, &s);
    wfrl_step_forward(net, x, &s);
    float sq = 0.0f;
    const float w = value_coef / (float)k;
    for (int64_t r = 0; r < k; ++r) {
        const float d = s.out[r] - ret[r];
        sq += d * d;
        s.dout[r] = d * w;
    }
    stats[0] = 0.5 * (double)sq / (double)k;
    wfrl_step_backward(net, x, &s);
    stats[1] = wfrl_step_apply(net, cols, NULL, &s);
}

/* The actor's log-probability of each row's taken action and its proximal weight, for the
 * decoupled objective on a stale batch (wfrl/ppo/learner.py, proximal_weights): the forward pass
 * of the used columns and actions, log p_a = z_a - logsumexp over the allowed actions (-inf and
 * weight 0 for a masked taken action), weight = min(exp(log p_a - behaviour_logp), max_weight).
 * Returns the number of rows that allow no action (their results are NaN). */
WFRL_SIMD_CLONES
static int64_t wfrl_actor_logp(const wfrl_net_t *net, int64_t k, const float *x,
                               const int64_t *cols, int64_t nc, const int64_t *acts, int64_t no,
                               const uint8_t *allowed, const int64_t *actions,
                               const float *behaviour_logp, float max_weight, float *scratch,
                               float *logp, float *weight)
{
    wfrl_step_mem s;
    wfrl_step_prepare(net, k, cols, nc, acts, no, scratch, &s);
    wfrl_step_forward(net, x, &s);
    int64_t empty = 0;
    for (int64_t r = 0; r < k; ++r) {
        const float *z = s.out + r * no;
        const uint8_t *ok = allowed + r * no;
        float mx = -INFINITY;
        for (int64_t j = 0; j < no; ++j)
            mx = ok[j] && z[j] > mx ? z[j] : mx;
        if (mx == -INFINITY) {
            ++empty;
            logp[r] = weight[r] = NAN;
            continue;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < no; ++j)
            sum += ok[j] ? wfrl_exp_nonpos(z[j] - mx) : 0.0f;
        const int64_t a = actions[r];
        if (!ok[a]) {
            logp[r] = -INFINITY;
            weight[r] = 0.0f;
            continue;
        }
        logp[r] = (z[a] - mx) - logf(sum);
        const float w = expf(logp[r] - behaviour_logp[r]);
        weight[r] = w < max_weight ? w : max_weight;
    }
    return empty;
}

/* The network's action distribution on k rows, nothing stepped (the frozen teacher's labels,
 * wfrl/ppo/privileged.py Teacher): probs [k, O] the softmax of the output over each row's allowed
 * actions (allowed [k, O], NULL: all), 0 on the others; a row allowing nothing gets the uniform
 * distribution over all O (as the masked logits, all equal, give it). */
WFRL_SIMD_CLONES
static void wfrl_net_probs(const wfrl_net_t *net, int64_t k, const float *x, const int64_t *cols,
                           int64_t nc, const uint8_t *allowed, float *scratch, float *probs)
{
    wfrl_step_mem s;
    const int64_t no = net->O;
    wfrl_step_prepare(net, k, cols, nc, NULL, no, scratch, &s);
    wfrl_step_forward(net, x, &s);
    for (int64_t r = 0; r < k; ++r) {
        const float *z = s.out + r * no;
        const uint8_t *ok = allowed ? allowed + r * no : NULL;
        float *p = probs + r * no;
        float mx = -INFINITY;
        for (int64_t j = 0; j < no; ++j)
            mx = (!ok || ok[j]) && z[j] > mx ? z[j] : mx;
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < no; ++j)
                p[j] = 1.0f / (float)no;
            continue;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < no; ++j) {
            p[j] = (!ok || ok[j]) ? wfrl_exp_nonpos(z[j] - mx) : 0.0f;
            sum += p[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < no; ++j)
            p[j] *= inv;
    }
}

/* The distillation step on k rows (wfrl/ppo/privileged.py, Distiller): the loss
 * coef · mean_r w_r · KL(target_r ‖ q_r), q_r the softmax of the network's output over the row's
 * allowed actions, w NULL for every row 1. The outputs in use are acts[0..no) (NULL: all O; an
 * action no row allows may be left out: it adds nothing to the loss and gets no gradient);
 * allowed and target are [k, no] over those, target 0 on masked actions; its entries below
 * 1e-12 count as 1e-12 inside the log (as the torch twin clamps them). The gradient of a row's output is coef · w_r / k · (q · Σ target_r − target_r) on the
 * allowed actions and 0 elsewhere. kl [k]: each row's KL before the step. stats: the mean of
 * w_r · KL_r, the number of rows that allow no action (nothing is applied when it is not 0),
 * then the gradient norm before the clip (a max_norm of infinity clips nothing). */
WFRL_SIMD_CLONES
static void wfrl_kl_step(const wfrl_net_t *net, int64_t k, const float *x, const int64_t *cols,
                         int64_t nc, const int64_t *acts, int64_t no, const uint8_t *allowed,
                         const float *target, const float *w, float coef, float *scratch,
                         float *kl, double *stats)
{
    wfrl_step_mem s;
    wfrl_step_prepare(net, k, cols, nc, acts, no, scratch, &s);
    wfrl_step_forward(net, x, &s);
    double total = 0.0;
    int64_t empty = 0;
    for (int64_t r = 0; r < k; ++r) {
        const float *z = s.out + r * no, *p = target + r * no;
        const uint8_t *ok = allowed + r * no;
        float *d = s.dout + r * no;
        float mx = -INFINITY;
        for (int64_t j = 0; j < no; ++j)
            mx = ok[j] && z[j] > mx ? z[j] : mx;
        if (mx == -INFINITY) {
            ++empty;
            kl[r] = NAN;
            continue;
        }
        float sum = 0.0f, mass = 0.0f;
        for (int64_t j = 0; j < no; ++j) {
            sum += ok[j] ? wfrl_exp_nonpos(z[j] - mx) : 0.0f;
            mass += ok[j] ? p[j] : 0.0f;
        }
        const float lse = mx + logf(sum);
        float klr = 0.0f;
        for (int64_t j = 0; j < no; ++j)
            if (ok[j] && p[j] > 0.0f)
                klr += p[j] * (logf(p[j] > 1e-12f ? p[j] : 1e-12f) - (z[j] - lse));
        kl[r] = klr;
        const float wr = w ? w[r] : 1.0f, g = coef * wr / (float)k;
        total += (double)(wr * klr);
        for (int64_t j = 0; j < no; ++j)
            d[j] = ok[j] ? g * (wfrl_exp_nonpos(z[j] - lse) * mass - p[j]) : 0.0f;
    }
    stats[0] = total / (double)k;
    stats[1] = (double)empty;
    if (empty) {
        stats[2] = 0.0;
        return;
    }
    wfrl_step_backward(net, x, &s);
    stats[2] = wfrl_step_apply(net, cols, acts, &s);
}

#if defined(__GNUC__)
#pragma GCC pop_options
#endif

#endif
