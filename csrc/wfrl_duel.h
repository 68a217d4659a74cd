/* Red as a learner: episodes of the compiled CAGE2 whose red is external (WFRL_RED_EXTERNAL),
 * played by a red policy against a frozen blue policy, red's trajectory written into a buffer
 * row. No Python, no allocation.
 *
 * The red network has the blue network's layout (csrc/wfrl_mlp.h): its input is red's
 * observation (WFRL_RED_OBS_DIM floats, wfrl_cage2_red_obs) and its actions are red's
 * WFRL_RED_N_ACTIONS, the first of the 145-wide head; the rest are never played (the learner
 * masks them), so the learner, its compiled steps and the checkpoint format serve both sides.
 * Each step both sides choose from what they saw after the last one: blue with its compiled
 * actor (memory, mask, workflow, its own action stream), red with wfrl_red_act (csrc/
 * wfrl_rollout.h: red's mask, its stream seeded from the episode's env seed); then the env plays
 * blue's action and red's. Red's reward is the negative of blue's CAGE2 reward.
 * Reference: wfrl/training/attack.py (duel_episode_reference), held equal by
 * tests/test_attack.py. */
#ifndef WFRL_DUEL_H
#define WFRL_DUEL_H

#include <string.h>

#include "wfrl_rollout.h"

/* One episode of `horizon` steps in slot sl (csrc/wfrl_rollout.h: its env, blue's actor, red's
 * stream, what blue sees; red: this episode's red network); red's steps go into buffer row `row`
 * (buf may be NULL; its obs width must be WFRL_RED_OBS_DIM). red_kind: the scripted kind whose
 * code the env is reset with (any: an external red never runs it), the leaderboard bit included.
 * Returns blue's return in tenths. */
static inline int64_t wfrl_duel_episode(wfrl_slot *sl, int red_kind, uint64_t env_seed,
                                        uint64_t act_seed, const wfrl_policy *blue,
                                        const wfrl_red_policy *red, const wfrl_traj *buf,
                                        int64_t row, wfrl_scratch *s, int horizon)
{
    wfrl_slot_begin(sl, env_seed, act_seed, red_kind | WFRL_RED_EXTERNAL, row, buf);
    sl->red = red;
    int64_t ret10 = 0;
    float red_obs[WFRL_RED_OBS_DIM];
    uint8_t before[WFRL_N_HOSTS];
    for (int t = 0; t < horizon; ++t) {
        float logp, bonus, red_logp, red_value;
        const int b = wfrl_actor_act(&sl->actor, blue, s, sl->obs, sl->access, &logp, NULL,
                                     &bonus);               /* blue's value: not needed */
        const int r = wfrl_red_play(red, &sl->env, &sl->red_rng, s, &red_logp, &red_value);
        memcpy(red_obs, s->x, sizeof(red_obs));
        memcpy(before, sl->access, sizeof(before));
        const int r10 = wfrl_cage2_step(&sl->env, b, sl->obs, sl->access);
        ret10 += r10;
        if (buf && row >= 0)
            wfrl_traj_push(buf, row, red_obs, r, red_logp, red_value, -(float)r10 / 10.0f,
                           (uint8_t)(t + 1 == horizon), before, NULL);
    }
    return ret10;
}

#endif
