/* The particle belief as policy input: what the particle filter (csrc/wfrl_plan.h) believes about
 * red, in the layout of the truth block (csrc/wfrl_truth.h) averaged over the particles, so a
 * policy that reads the belief block reads what a full-information policy reads, as a
 * probability instead of a certainty.
 *
 * Block (WFRL_BELIEF_DIM floats), hosts in observation order: floats 3h, 3h + 1, 3h + 2 are the
 * share of particles in which red has no, user or privileged access on host h (each host's three
 * sum to 1); then the share of particles of each red kind (B_line, Meander, Sleep). Why this
 * layout: red's access per host is what decides a fix's use and its compliance (the same access
 * the compliance rule and the truth block read), and the kind shares say which attacker's
 * path the particles follow, which the access alone does not (Meander wanders, B_line heads
 * for Op_Server0). Shares, not counts: the block does not depend on the number of particles.
 * Reference: wfrl/features.py (belief_features), held equal by tests/test_belief.py. */
#ifndef WFRL_BELIEF_H
#define WFRL_BELIEF_H

#include <stdint.h>
#include <string.h>

#include "wfrl_cage2.h"
#include "wfrl_truth.h"

#define WFRL_BELIEF_KINDS 3
#define WFRL_BELIEF_DIM (WFRL_TRUTH_DIM + WFRL_BELIEF_KINDS)

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
