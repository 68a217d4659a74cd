/* The true state as policy input: what the simulator knows and the defender cannot see, for the
 * full-information bound (docs/limit.md). Only red's access per host enters it: it is the one
 * part of the true state both backends expose alike (the compiled simulator through
 * wfrl_cage2_red_access, CybORG through its red sessions), and the rollout buffer already records
 * it at every step, so the learner rebuilds the block from the buffer exactly as the rollout
 * loop saw it.
 *
 * Block (WFRL_TRUTH_DIM floats), hosts in observation order: floats 3h, 3h + 1, 3h + 2 are the
 * one-hot of red's access level on host h (0 none, 1 user, 2 privileged) at the step the action
 * is chosen on — the same access the compliance rule reads. A level outside 0..2 gives three
 * zeros. The policy input with the block is obs ⊕ (memory block) ⊕ truth block ⊕ workflow
 * one-hot (wfrl/ppo/netspec.py).
 * Reference: wfrl/features.py (truth_features), held equal by tests/test_truth_input.py. */
#ifndef WFRL_TRUTH_H
#define WFRL_TRUTH_H

#include <stdint.h>
#include <string.h>

#include "wfrl_types.h"

#define WFRL_TRUTH_LEVELS 3
#define WFRL_TRUTH_DIM (WFRL_TRUTH_LEVELS * WFRL_N_HOSTS)

static inline void wfrl_truth_features(const uint8_t *red_access, float *out)
{
    memset(out, 0, WFRL_TRUTH_DIM * sizeof(float));
    for (int h = 0; h < WFRL_N_HOSTS; ++h)
        if (red_access[h] < WFRL_TRUTH_LEVELS) out[WFRL_TRUTH_LEVELS * h + red_access[h]] = 1.0f;
}

#endif
