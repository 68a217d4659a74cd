/* Sanitizer driver and plain twin for csrc/wfrl_update.h (built with -fsanitize=address,undefined
 * by tests/test_learner.py). Random networks and minibatches of random sizes — rows 1..300, hidden
 * width 1..70 (most not a multiple of 16: padded lanes), input width 1..40 with a random subset
 * of columns in use, 1..145 actions with a random subset in use, random masks — every array
 * allocated to its exact size (the scratch too), so a read or write past one is caught. Each
 * actor, critic and distillation step (wfrl_kl_step: random targets and row weights; before it,
 * the distribution wfrl_net_probs gives), under each register tiling the CPU can run
 * (wfrl_gemm_level), is held to the same computed here plainly in double precision: the loss,
 * the clipped gradient of every parameter (exactly 0 for the columns and actions not in use), the
 * parameters after Adam, the probabilities. Usage: check_update CALLS [SEED]. Exit 0 and one
 * summary line when all hold. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "wfrl_rng.h"
#include "wfrl_update.h"

static int fail(const char *what, long call, double got, double want)
{
    fprintf(stderr, "mismatch: %s (call %ld): %.9g vs %.9g\n", what, call, got, want);
    return 1;
}

static double uni(wfrl_rng *rng, double lo, double hi)
{
    return lo + (hi - lo) * wfrl_rng_uniform(rng);
}

/* A random increasing subset of 0..n-1 with at least one element; returns its size. */
static int64_t subset(wfrl_rng *rng, int64_t n, int64_t *out)
{
    int64_t m = 0;
    const double keep = uni(rng, 0.3, 1.0);
    for (int64_t i = 0; i < n; ++i)
        if (wfrl_rng_uniform(rng) < keep) out[m++] = i;
    if (m == 0) out[m++] = (int64_t)(wfrl_rng_uniform(rng) * (double)n);
    return m;
}

/* The network's layer sizes and its parameters (and the same in double for the twin). */
typedef struct {
    int64_t H, I, O, sizes[6];
    float *p[6], *g[6], *m[6], *v[6], step[6];
    double *rp[6], *rm[6], *rv[6];
} net_data;

static void net_init(net_data *d, wfrl_rng *rng, int64_t H, int64_t I, int64_t O)
{
    const int64_t sizes[6] = {H * I, H, H * H, H, O * H, O};
    d->H = H, d->I = I, d->O = O;
    for (int q = 0; q < 6; ++q) {
        d->sizes[q] = sizes[q];
        d->p[q] = malloc((size_t)sizes[q] * sizeof(float));
        d->g[q] = malloc((size_t)sizes[q] * sizeof(float));
        d->m[q] = malloc((size_t)sizes[q] * sizeof(float));
        d->v[q] = malloc((size_t)sizes[q] * sizeof(float));
        d->rp[q] = malloc((size_t)sizes[q] * sizeof(double));
        d->rm[q] = malloc((size_t)sizes[q] * sizeof(double));
        d->rv[q] = malloc((size_t)sizes[q] * sizeof(double));
        const int later = wfrl_rng_uniform(rng) < 0.5;    /* Adam state from earlier steps */
        d->step[q] = later ? 3.0f : 0.0f;
        for (int64_t i = 0; i < sizes[q]; ++i) {
            d->p[q][i] = (float)uni(rng, -0.5, 0.5);
            d->g[q][i] = (float)uni(rng, -9.0, 9.0);       /* overwritten by the step */
            d->m[q][i] = later ? (float)uni(rng, -1e-3, 1e-3) : 0.0f;
            d->v[q][i] = later ? (float)uni(rng, 0.0, 1e-5) : 0.0f;
            d->rp[q][i] = d->p[q][i], d->rm[q][i] = d->m[q][i], d->rv[q][i] = d->v[q][i];
        }
    }
}

static void net_free(net_data *d)
{
    for (int q = 0; q < 6; ++q) {
        free(d->p[q]), free(d->g[q]), free(d->m[q]), free(d->v[q]);
        free(d->rp[q]), free(d->rm[q]), free(d->rv[q]);
    }
}

static wfrl_net_t net_view(net_data *d)
{
    wfrl_net_t net;
    net.H = d->H, net.I = d->I, net.O = d->O;
    for (int q = 0; q < 6; ++q) {
        net.param[q] = d->p[q], net.grad[q] = d->g[q];
        net.exp_avg[q] = d->m[q], net.exp_avg_sq[q] = d->v[q], net.step[q] = &d->step[q];
    }
    net.lr = 2e-3f, net.beta1 = 0.9f, net.beta2 = 0.999f, net.eps = 1e-5f, net.max_norm = 0.5f;
    return net;
}

/* The forward pass of the used columns and outputs in double (the parameters before the step):
 * a1, a2 [k, H], out [k, no]. */
static void forward_twin(const net_data *d, int64_t k, const float *x, const int64_t *cols,
                         int64_t nc, const int64_t *acts, int64_t no, double *a1, double *a2,
                         double *out)
{
    const int64_t H = d->H, I = d->I;
    const double *W1 = d->rp[0], *b1 = d->rp[1], *W2 = d->rp[2];
    const double *b2 = d->rp[3], *W3 = d->rp[4], *b3 = d->rp[5];
    for (int64_t r = 0; r < k; ++r) {
        for (int64_t o = 0; o < H; ++o) {
            double s = b1[o];
            for (int64_t c = 0; c < nc; ++c) s += x[r * nc + c] * W1[o * I + cols[c]];
            a1[r * H + o] = tanh(s);
        }
        for (int64_t o = 0; o < H; ++o) {
            double s = b2[o];
            for (int64_t i = 0; i < H; ++i) s += a1[r * H + i] * W2[o * H + i];
            a2[r * H + o] = tanh(s);
        }
        for (int64_t j = 0; j < no; ++j) {
            const int64_t row = acts ? acts[j] : j;
            double s = b3[row];
            for (int64_t i = 0; i < H; ++i) s += a2[r * H + i] * W3[row * H + i];
            out[r * no + j] = s;
        }
    }
}

/* The twin: forward (forward_twin); dout given by `loss` (called with the outputs, writes
 * d loss / d out); backward; clip; Adam. Compared with the C step. */
typedef void (*loss_fn)(int64_t k, int64_t no, const double *out, double *dout, void *ctx);

static int twin_and_compare(net_data *d, int64_t k, const float *x,
                            const int64_t *cols, int64_t nc, const int64_t *acts, int64_t no,
                            loss_fn loss, void *ctx, long call)
{
    const int64_t H = d->H, I = d->I;
    double *a1 = calloc((size_t)(k * H), sizeof(double));
    double *a2 = calloc((size_t)(k * H), sizeof(double));
    double *d1 = calloc((size_t)(k * H), sizeof(double));
    double *d2 = calloc((size_t)(k * H), sizeof(double));
    double *out = calloc((size_t)(k * no), sizeof(double));
    double *dout = calloc((size_t)(k * no), sizeof(double));
    double *g[6];
    for (int q = 0; q < 6; ++q) g[q] = calloc((size_t)d->sizes[q], sizeof(double));
    const double *W2 = d->rp[2], *W3 = d->rp[4];
    forward_twin(d, k, x, cols, nc, acts, no, a1, a2, out);
    loss(k, no, out, dout, ctx);
    for (int64_t r = 0; r < k; ++r) {
        for (int64_t j = 0; j < no; ++j) {
            const int64_t row = acts ? acts[j] : j;
            const double dz = dout[r * no + j];
            g[5][row] += dz;
            for (int64_t i = 0; i < H; ++i) {
                g[4][row * H + i] += dz * a2[r * H + i];
                d2[r * H + i] += dz * W3[row * H + i];
            }
        }
        for (int64_t o = 0; o < H; ++o) {
            const double dd = d2[r * H + o] * (1.0 - a2[r * H + o] * a2[r * H + o]);
            g[3][o] += dd;
            for (int64_t i = 0; i < H; ++i) {
                g[2][o * H + i] += dd * a1[r * H + i];
                d1[r * H + i] += dd * W2[o * H + i];
            }
        }
        for (int64_t o = 0; o < H; ++o) {
            const double dd = d1[r * H + o] * (1.0 - a1[r * H + o] * a1[r * H + o]);
            g[1][o] += dd;
            for (int64_t c = 0; c < nc; ++c) g[0][o * I + cols[c]] += dd * x[r * nc + c];
        }
    }
    double sq = 0.0, gmax = 0.0;
    for (int q = 0; q < 6; ++q)
        for (int64_t i = 0; i < d->sizes[q]; ++i) sq += g[q][i] * g[q][i];
    const double scale = fmin(1.0, 0.5 / (sqrt(sq) + 1e-6));
    for (int q = 0; q < 6; ++q)
        for (int64_t i = 0; i < d->sizes[q]; ++i) gmax = fmax(gmax, fabs(g[q][i] * scale));
    int bad = 0;
    for (int q = 0; q < 6 && !bad; ++q) {
        const double t = (double)d->step[q];     /* the C step has already counted this one */
        const double bc1 = 1.0 - pow(0.9, t), bc2 = 1.0 - pow(0.999, t);
        for (int64_t i = 0; i < d->sizes[q] && !bad; ++i) {
            const double gi = g[q][i] * scale;
            if (gi == 0.0 && d->g[q][i] != 0.0f)
                bad = fail("a gradient that must be exactly 0", call, d->g[q][i], 0.0);
            else if (fabs(d->g[q][i] - gi) > 1e-3 * gmax + 1e-7)
                bad = fail("a clipped gradient", call, d->g[q][i], gi);
            const double m = 0.9 * d->rm[q][i] + 0.1 * gi;
            const double v = 0.999 * d->rv[q][i] + 0.001 * gi * gi;
            const double w = d->rp[q][i] - 2e-3 / bc1 * m / (sqrt(v) / sqrt(bc2) + 1e-5);
            if (!bad && fabs(d->p[q][i] - w) > 2e-6 + 1e-5 * fabs(w))
                bad = fail("a parameter after Adam", call, d->p[q][i], w);
        }
    }
    free(a1), free(a2), free(out), free(dout), free(d1), free(d2);
    for (int q = 0; q < 6; ++q) free(g[q]);
    return bad;
}

/* The policy head in double (the loss csrc/wfrl_head.h documents). */
typedef struct {
    const uint8_t *allowed;
    const int64_t *actions;
    const float *old_logp, *adv;
    double clip, ent_coef, pg, ent;
} head_ctx;

static void head_twin(int64_t k, int64_t no, const double *z, double *dz, void *vctx)
{
    head_ctx *h = vctx;
    h->pg = h->ent = 0.0;
    for (int64_t r = 0; r < k; ++r) {
        const double *zr = z + r * no;
        const uint8_t *al = h->allowed + r * no;
        double mx = -INFINITY, sum = 0.0, H = 0.0;
        for (int64_t j = 0; j < no; ++j) if (al[j]) mx = fmax(mx, zr[j]);
        for (int64_t j = 0; j < no; ++j) if (al[j]) sum += exp(zr[j] - mx);
        const double lse = mx + log(sum);
        for (int64_t j = 0; j < no; ++j)
            if (al[j]) H -= exp(zr[j] - lse) * (zr[j] - lse);
        const int64_t a = h->actions[r];
        const double ratio = exp(zr[a] - lse - h->old_logp[r]);
        const double A = h->adv[r];
        const double un = -A * ratio, cl = -A * fmin(fmax(ratio, 1 - h->clip), 1 + h->clip);
        h->pg += fmax(un, cl);
        h->ent += H;
        const double gi = un >= cl ? -A * ratio / (double)k : 0.0;
        for (int64_t j = 0; j < no; ++j) {
            if (!al[j]) { dz[r * no + j] = 0.0; continue; }
            const double p = exp(zr[j] - lse), lp = zr[j] - lse;
            dz[r * no + j] = gi * ((j == a) - p) + h->ent_coef / (double)k * p * (lp + H);
        }
    }
}

typedef struct {
    const float *ret;
    double value_coef, loss;
} value_ctx;

static void value_twin(int64_t k, int64_t no, const double *v, double *dv, void *vctx)
{
    value_ctx *c = vctx;
    (void)no;
    c->loss = 0.0;
    for (int64_t r = 0; r < k; ++r) {
        c->loss += 0.5 * (v[r] - c->ret[r]) * (v[r] - c->ret[r]) / (double)k;
        dv[r] = c->value_coef * (v[r] - c->ret[r]) / (double)k;
    }
}

/* The distillation loss in double (wfrl_kl_step's): coef · mean_r w_r · KL(target_r ‖ q_r). */
typedef struct {
    const uint8_t *allowed;
    const float *target, *w;
    double coef, total;
    double *kl;
} kl_ctx;

static void kl_twin(int64_t k, int64_t no, const double *z, double *dz, void *vctx)
{
    kl_ctx *c = vctx;
    c->total = 0.0;
    for (int64_t r = 0; r < k; ++r) {
        const double *zr = z + r * no;
        const uint8_t *al = c->allowed + r * no;
        const float *p = c->target + r * no;
        double mx = -INFINITY, sum = 0.0, mass = 0.0, kl = 0.0;
        for (int64_t j = 0; j < no; ++j) if (al[j]) mx = fmax(mx, zr[j]);
        for (int64_t j = 0; j < no; ++j) if (al[j]) sum += exp(zr[j] - mx), mass += p[j];
        const double lse = mx + log(sum);
        for (int64_t j = 0; j < no; ++j)
            if (al[j] && p[j] > 0.0f) kl += p[j] * (log(fmax(p[j], 1e-12)) - (zr[j] - lse));
        const double wr = c->w ? c->w[r] : 1.0;
        c->kl[r] = kl;
        c->total += wr * kl / (double)k;
        for (int64_t j = 0; j < no; ++j)
            dz[r * no + j] = al[j] ? c->coef * wr / (double)k * (exp(zr[j] - lse) * mass - p[j])
                                   : 0.0;
    }
}

int main(int argc, char **argv)
{
    const long calls = argc > 1 ? atol(argv[1]) : 60;
    const uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    wfrl_rng rng;
    wfrl_rng_seed(&rng, seed);
    int levels = 1;      /* tilings 0 and (with AVX-512) 2 */
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) levels = 2;
#endif
    long steps = 0;
    for (long c = 0; c < calls; ++c) {
        wfrl_gemm_level_override = 2 * (int)(c % levels);
        const int64_t k = 1 + (int64_t)(wfrl_rng_uniform(&rng) * 300);
        const int64_t H = 1 + (int64_t)(wfrl_rng_uniform(&rng) * 70);
        const int64_t I = 1 + (int64_t)(wfrl_rng_uniform(&rng) * 40);
        const int actor = c % 3 == 0, distil = c % 3 == 2;
        const int64_t O = actor || distil ? 1 + (int64_t)(wfrl_rng_uniform(&rng) * WFRL_N_ACTIONS)
                                          : 1;
        int64_t *cols = malloc((size_t)I * sizeof(int64_t));
        int64_t *acts = malloc((size_t)O * sizeof(int64_t));
        const int64_t nc = subset(&rng, I, cols);
        /* the distillation step: all outputs in half its calls, a subset in the others */
        const int64_t no = actor || (distil && c % 2) ? subset(&rng, O, acts) : distil ? O : 1;
        const int64_t *used = actor || (distil && c % 2) ? acts : NULL;
        float *x = malloc((size_t)(k * nc) * sizeof(float));
        for (int64_t i = 0; i < k * nc; ++i)   /* sparse 0/1 and real inputs */
            x[i] = wfrl_rng_uniform(&rng) < 0.5 ? 0.0f
                   : wfrl_rng_uniform(&rng) < 0.5 ? 1.0f : (float)uni(&rng, -2.0, 2.0);
        net_data d;
        net_init(&d, &rng, H, I, O);
        wfrl_net_t net = net_view(&d);
        const int64_t nscratch = wfrl_step_scratch_floats(k, nc, H, no);
        float *scratch = malloc((size_t)nscratch * sizeof(float));
        int bad;
        if (actor) {
            uint8_t *allowed = malloc((size_t)(k * no));
            int64_t *actions = malloc((size_t)k * sizeof(int64_t));
            float *old_logp = malloc((size_t)k * sizeof(float));
            float *adv = malloc((size_t)k * sizeof(float));
            for (int64_t r = 0; r < k; ++r) {
                for (int64_t j = 0; j < no; ++j) allowed[r * no + j] = wfrl_rng_uniform(&rng) < 0.6;
                actions[r] = (int64_t)(wfrl_rng_uniform(&rng) * (double)no);
                allowed[r * no + actions[r]] = 1;
                old_logp[r] = (float)uni(&rng, -5.0, 0.0);
                adv[r] = (float)uni(&rng, -2.0, 2.0);
            }
            double stats[6];
            wfrl_actor_step(&net, k, x, cols, nc, acts, no, allowed, actions, old_logp, adv,
                            0.2f, 0.01f, scratch, stats);
            head_ctx h = {allowed, actions, old_logp, adv, 0.2, 0.01, 0.0, 0.0};
            bad = twin_and_compare(&d, k, x, cols, nc, acts, no, head_twin, &h, c);
            if (!bad && fabs(stats[0] - h.pg) > 1e-4 * (1.0 + fabs(h.pg)))
                bad = fail("the surrogate sum", c, stats[0], h.pg);
            if (!bad && fabs(stats[1] - h.ent) > 1e-4 * (1.0 + fabs(h.ent)))
                bad = fail("the entropy sum", c, stats[1], h.ent);
            free(allowed), free(actions), free(old_logp), free(adv);
        } else if (distil) {
            /* every output in use; a random mask (each row allows one at least), a target over
             * the allowed actions with zeros and values below the log's 1e-12 floor, and row
             * weights in half the calls (NULL: all 1) */
            uint8_t *allowed = malloc((size_t)(k * no));
            float *target = malloc((size_t)(k * no) * sizeof(float));
            float *w = wfrl_rng_uniform(&rng) < 0.5 ? malloc((size_t)k * sizeof(float)) : NULL;
            float *kl = malloc((size_t)k * sizeof(float));
            double *kl_ref = malloc((size_t)k * sizeof(double));
            for (int64_t r = 0; r < k; ++r) {
                double mass = 0.0;
                for (int64_t j = 0; j < no; ++j) {
                    allowed[r * no + j] = wfrl_rng_uniform(&rng) < 0.6;
                    const double u = wfrl_rng_uniform(&rng);
                    target[r * no + j] = u < 0.3 ? 0.0f : u < 0.35 ? 1e-14f : (float)u;
                }
                allowed[r * no + (int64_t)(wfrl_rng_uniform(&rng) * (double)no)] = 1;
                for (int64_t j = 0; j < no; ++j)
                    if (!allowed[r * no + j]) target[r * no + j] = 0.0f;
                    else mass += target[r * no + j];
                for (int64_t j = 0; j < no && mass > 0.0; ++j)
                    target[r * no + j] = (float)(target[r * no + j] / mass);
                if (w) w[r] = (float)uni(&rng, 0.0, 1.0);
            }
            /* the distribution (wfrl_net_probs, nothing stepped), against the softmax of the
             * twin's forward over each row's allowed actions; then the step */
            float *probs = malloc((size_t)(k * no) * sizeof(float));
            double *a1 = malloc((size_t)(k * H) * sizeof(double));
            double *a2 = malloc((size_t)(k * H) * sizeof(double));
            double *z = malloc((size_t)(k * no) * sizeof(double));
            if (!used) {    /* (wfrl_net_probs: every output) */
                wfrl_net_probs(&net, k, x, cols, nc, allowed, scratch, probs);
                forward_twin(&d, k, x, cols, nc, NULL, no, a1, a2, z);
            }
            bad = 0;
            for (int64_t r = 0; r < k && !bad && !used; ++r) {
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < no; ++j) if (allowed[r * no + j]) mx = fmax(mx, z[r * no + j]);
                for (int64_t j = 0; j < no; ++j) if (allowed[r * no + j]) sum += exp(z[r * no + j] - mx);
                for (int64_t j = 0; j < no && !bad; ++j) {
                    const double want = allowed[r * no + j] ? exp(z[r * no + j] - mx) / sum : 0.0;
                    if (fabs(probs[r * no + j] - want) > 1e-5 * want + 1e-7)
                        bad = fail("a probability", c, probs[r * no + j], want);
                }
            }
            free(probs), free(a1), free(a2), free(z);
            double stats[3];
            wfrl_kl_step(&net, k, x, cols, nc, used, no, allowed, target, w, 0.7f, scratch, kl,
                         stats);
            kl_ctx t = {allowed, target, w, 0.7, 0.0, kl_ref};
            if (!bad)
                bad = twin_and_compare(&d, k, x, cols, nc, used, no, kl_twin, &t, c);
            if (!bad && stats[1] != 0.0)
                bad = fail("rows allowing nothing", c, stats[1], 0.0);
            if (!bad && fabs(stats[0] - t.total) > 1e-4 * (1.0 + fabs(t.total)))
                bad = fail("the weighted KL", c, stats[0], t.total);
            for (int64_t r = 0; r < k && !bad; ++r)
                if (fabs(kl[r] - kl_ref[r]) > 1e-4 * (1.0 + fabs(kl_ref[r])))
                    bad = fail("a row's KL", c, kl[r], kl_ref[r]);
            free(allowed), free(target), free(w), free(kl), free(kl_ref);
        } else {
            float *ret = malloc((size_t)k * sizeof(float));
            for (int64_t r = 0; r < k; ++r) ret[r] = (float)uni(&rng, -30.0, 5.0);
            double stats[2];
            wfrl_critic_step(&net, k, x, cols, nc, ret, 0.5f, scratch, stats);
            value_ctx v = {ret, 0.5, 0.0};
            bad = twin_and_compare(&d, k, x, cols, nc, NULL, 1, value_twin, &v, c);
            if (!bad && fabs(stats[0] - v.loss) > 1e-4 * (1.0 + fabs(v.loss)))
                bad = fail("the value loss", c, stats[0], v.loss);
            free(ret);
        }
        free(scratch), free(x), free(cols), free(acts);
        net_free(&d);
        if (bad) return 1;
        ++steps;
    }
    printf("all invariants held: %ld steps, %d register tilings\n", steps, levels);
    return 0;
}
