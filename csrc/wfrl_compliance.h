/* Compliance and alignment reward, per episode (rules: wfrl/workflow.py).
 * Reference: wfrl/workflow.py (ComplianceTracker), held equal by tests/test_rollout.py. */
#ifndef WFRL_COMPLIANCE_H
#define WFRL_COMPLIANCE_H

#include <stdint.h>

#include "wfrl_types.h"

/* Unit type of each host: defender 0, enterprise 1, op_server 2, op_host 3, user 4. */
static const uint8_t wfrl_host_type[WFRL_N_HOSTS] = {0, 1, 1, 1, 3, 3, 3, 2, 4, 4, 4, 4, 4};
#define WFRL_USER0 8

typedef struct {
    uint8_t rank[WFRL_N_UNIT_TYPES]; /* priority position of each unit type (0 = first) */
    uint8_t count_foothold;          /* count red's User0 foothold as compromised */
    float lam;                       /* alignment weight λ */
} wfrl_workflow;

typedef struct {
    int32_t fixes, compliant;
} wfrl_compliance;

static inline int wfrl_fix_target(int action)
{
    if (action >= WFRL_ACT_REMOVE && action < WFRL_ACT_REMOVE + WFRL_N_HOSTS) return action - WFRL_ACT_REMOVE;
    if (action >= WFRL_ACT_RESTORE && action < WFRL_ACT_RESTORE + WFRL_N_HOSTS) return action - WFRL_ACT_RESTORE;
    return -1;
}

static inline double wfrl_compliance_rate(const wfrl_compliance *c)
{
    return c->fixes ? (double)c->compliant / c->fixes : 0.5;
}

/* A fix of host `target` is compliant given red's access: it fixes the highest-priority unit type
 * red holds (or red holds nothing that counts). */
static inline int wfrl_fix_compliant(const wfrl_workflow *w, int target, const uint8_t *red_access)
{
    int top = WFRL_N_UNIT_TYPES;
    for (int h = 0; h < WFRL_N_HOSTS; ++h) {
        if (red_access[h] == 0 || (h == WFRL_USER0 && !w->count_foothold)) continue;
        const int r = w->rank[wfrl_host_type[h]];
        if (r < top) top = r;
    }
    return top == WFRL_N_UNIT_TYPES || w->rank[wfrl_host_type[target]] == top;
}

/* Alignment reward of `action`, judged against red's access when it was chosen. */
static inline float wfrl_compliance_step(wfrl_compliance *c, const wfrl_workflow *w, int action,
                                         const uint8_t *red_access)
{
    const int target = wfrl_fix_target(action);
    if (target < 0) return 0.0f;
    /* Before the first fix the rate is 0.5, so a compliant first fix earns λ/2 (the first-fix
     * bonus, wfrl/workflow.py); without it (--no-first-fix-bonus) the learner takes λ/2 off at
     * each episode's first fix. */
    const double before = wfrl_compliance_rate(c);
    c->fixes += 1;
    c->compliant += wfrl_fix_compliant(w, target, red_access);
    return (float)(w->lam * (wfrl_compliance_rate(c) - before));
}

/* End-of-episode term: −0.2·λ for an episode without a fix. */
static inline float wfrl_compliance_finish(const wfrl_compliance *c, const wfrl_workflow *w)
{
    return c->fixes == 0 ? (float)(-0.2 * w->lam) : 0.0f;
}

#endif
