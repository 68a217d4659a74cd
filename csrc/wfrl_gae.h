/* Generalised advantage estimation over [rows, T] trajectories.
 *
 * Layout: row r holds lengths[r] valid steps at [r*T, r*T + lengths[r]). dones[t] = 1 means the
 * transition at t ended an episode, so nothing flows back across it. A row that ends without a done
 * bootstraps from last_values[r] (the value of the state after its last step). Steps past lengths[r]
 * are left untouched in adv/ret.
 * Reference: wfrl/ppo/gae.py (gae_reference), held equal by tests/test_gae.py. */
#ifndef WFRL_GAE_H
#define WFRL_GAE_H

#include <stdint.h>

static inline void wfrl_gae(int64_t n_rows, int64_t T,
                            const float *rewards, const float *values, const uint8_t *dones,
                            const int32_t *lengths, const float *last_values,
                            float gamma, float lam, float *adv, float *ret)
{
    for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t len = lengths[r];
        const int64_t base = r * T;
        float next_value = last_values[r];
        float gae = 0.0f;
        for (int64_t t = len - 1; t >= 0; --t) {
            const int64_t i = base + t;
            const float nonterminal = dones[i] ? 0.0f : 1.0f;
            const float delta = rewards[i] + gamma * next_value * nonterminal - values[i];
            gae = delta + gamma * lam * nonterminal * gae;
            adv[i] = gae;
            ret[i] = gae + values[i];
            next_value = values[i];
        }
    }
}

#endif
