/* Trajectory buffer over caller-owned [rows, T] arrays.
 *
 * Ownership: Python (wfrl/collect/buffer.py, later the shared-memory owner) allocates every array;
 * this struct only borrows pointers and never allocates. A row is filled front to back by exactly
 * one writer (one env); lengths[row] is the number of valid steps in it.
 * Reference: wfrl/collect/buffer.py (ReferenceTrajectoryBuffer), held equal by tests/test_buffer.py. */
#ifndef WFRL_BUFFER_H
#define WFRL_BUFFER_H

#include <stdint.h>
#include <string.h>

typedef struct {
    int64_t n_rows, T, obs_dim, n_hosts;
    float *obs;           /* [n_rows, T, obs_dim] */
    int32_t *actions;     /* [n_rows, T] */
    float *logprobs;      /* [n_rows, T] */
    float *values;        /* [n_rows, T] */
    float *rewards;       /* [n_rows, T] training reward (env reward + alignment) */
    uint8_t *dones;       /* [n_rows, T] */
    uint8_t *red_access;  /* [n_rows, T, n_hosts] red access before the step (0 none, 1 user, 2 priv) */
    float *belief;        /* [n_rows, T, belief_dim] the belief block the action was chosen on, or
                             NULL (a buffer for policies without the belief input) */
    int64_t belief_dim;
    int32_t *lengths;     /* [n_rows] */
} wfrl_traj;

/* Append one step to `row` (belief: the step's belief block, written where the buffer has the
 * field and belief is not NULL). Returns the step index written, or -1 if the row is full. */
static inline int64_t wfrl_traj_push(const wfrl_traj *b, int64_t row, const float *obs,
                                     int32_t action, float logprob, float value, float reward,
                                     uint8_t done, const uint8_t *red_access, const float *belief)
{
    const int64_t t = b->lengths[row];
    if (t >= b->T) return -1;
    const int64_t i = row * b->T + t;
    memcpy(b->obs + i * b->obs_dim, obs, (size_t)b->obs_dim * sizeof(float));
    memcpy(b->red_access + i * b->n_hosts, red_access, (size_t)b->n_hosts);
    if (b->belief && belief)
        memcpy(b->belief + i * b->belief_dim, belief, (size_t)b->belief_dim * sizeof(float));
    b->actions[i] = action;
    b->logprobs[i] = logprob;
    b->values[i] = value;
    b->rewards[i] = reward;
    b->dones[i] = done;
    b->lengths[row] = (int32_t)(t + 1);
    return t;
}

static inline void wfrl_traj_clear(const wfrl_traj *b)
{
    memset(b->lengths, 0, (size_t)b->n_rows * sizeof(int32_t));
}

static inline int64_t wfrl_traj_count(const wfrl_traj *b)
{
    int64_t n = 0;
    for (int64_t r = 0; r < b->n_rows; ++r) n += b->lengths[r];
    return n;
}

/* Gather the valid steps of every row, row-major, into flat arrays of wfrl_traj_count() entries.
 * adv/ret are [n_rows, T] arrays laid out like the buffer (from wfrl_gae). */
static inline int64_t wfrl_traj_flatten(const wfrl_traj *b, const float *adv, const float *ret,
                                        float *obs_out, int32_t *act_out, float *logp_out,
                                        float *val_out, float *adv_out, float *ret_out,
                                        int32_t *row_out)
{
    int64_t k = 0;
    for (int64_t r = 0; r < b->n_rows; ++r) {
        const int64_t len = b->lengths[r];
        const int64_t base = r * b->T;
        if (len == 0) continue;
        memcpy(obs_out + k * b->obs_dim, b->obs + base * b->obs_dim,
               (size_t)(len * b->obs_dim) * sizeof(float));
        memcpy(act_out + k, b->actions + base, (size_t)len * sizeof(int32_t));
        memcpy(logp_out + k, b->logprobs + base, (size_t)len * sizeof(float));
        memcpy(val_out + k, b->values + base, (size_t)len * sizeof(float));
        memcpy(adv_out + k, adv + base, (size_t)len * sizeof(float));
        memcpy(ret_out + k, ret + base, (size_t)len * sizeof(float));
        for (int64_t t = 0; t < len; ++t) row_out[k + t] = (int32_t)r;
        k += len;
    }
    return k;
}

#endif
