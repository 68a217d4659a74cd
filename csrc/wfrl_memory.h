/* What the defender remembers: a feature block computed only from the history of its own
 * observations and actions (never from the true state), and the mask of actions that cannot do
 * anything given that history.
 *
 * Memory, updated once per step before the policy acts (first from the previous own action, then
 * from the observation just received):
 *   scanned[h]     a Scan was seen on h this episode (activity bits 1,0)
 *   last_scan      the host of the most recent Scan (lowest index when several in one step), or -1
 *   comp_seen[h]   an Exploit (activity 1,1) or a User/Privileged flag (comp bit 1 set) was seen
 *                  on h since my last Restore of h
 *   restored[h]    I restored h this episode (a Restore of Op_Server0 also disarms Impact)
 *   decoys[h]      bit per decoy kind I placed on h since my last Restore of h (placeable ones)
 *   t              steps already taken
 * Feature block (WFRL_MEM_DIM floats): scanned[13], one-hot(last_scan)[13], comp_seen[13],
 * restored[13], placed-decoy fraction[13] (placed kinds / useful kinds of the host), t / 100.
 *
 * Mask (1 = allowed): Monitor (identical to Sleep in CAGE2) and every decoy that cannot be placed
 * or cannot catch an exploit on that host are masked: kinds whose port is taken by a real service
 * or that need the other OS, Vsftpd on User3/User4 (their real web server answers first), a kind
 * already placed since the host's last Restore, and the second of Apache/Vsftpd (both occupy
 * port 80).
 * Reference: wfrl/features.py (MemoryTracker, memory_and_masks), held equal by
 * tests/test_features.py. */
#ifndef WFRL_MEMORY_H
#define WFRL_MEMORY_H

#include <stdint.h>
#include <string.h>

#include "wfrl_types.h"

#define WFRL_MEM_DIM (5 * WFRL_N_HOSTS + 1)
#define WFRL_N_DECOYS 8
#define WFRL_DECOY_FIRST WFRL_ACT_DECOY /* DecoyApache(0); kind k on host h: 28 + 13k + h */
#define WFRL_MONITOR 1
#define WFRL_DECOY_APACHE 0
#define WFRL_DECOY_VSFTPD 7

/* Bit k set: decoy kind k (Apache, Femitter, HarakaSMPT, Smss, SSHD, Svchost, Tomcat, Vsftpd) can
 * be placed on the host and can catch an exploit there. Hosts in observation order. */
static const uint8_t wfrl_decoy_useful[WFRL_N_HOSTS] = {
    0xC5, /* Defender:    Apache Haraka Tomcat Vsftpd */
    0xC5, /* Enterprise0: Apache Haraka Tomcat Vsftpd */
    0x02, /* Enterprise1: Femitter */
    0x02, /* Enterprise2: Femitter */
    0xC5, /* Op_Host0 */
    0xC5, /* Op_Host1 */
    0xC5, /* Op_Host2 */
    0xC5, /* Op_Server0 */
    0x69, /* User0: Apache Smss Svchost Tomcat */
    0x69, /* User1: Apache Smss Svchost Tomcat */
    0x53, /* User2: Apache Femitter SSHD Tomcat */
    0x10, /* User3: SSHD */
    0x00, /* User4: none */
};

typedef struct {
    uint8_t scanned[WFRL_N_HOSTS];
    uint8_t comp_seen[WFRL_N_HOSTS];
    uint8_t restored[WFRL_N_HOSTS];
    uint8_t decoys[WFRL_N_HOSTS];
    int8_t last_scan;
    int16_t t;
    int16_t prev_action; /* -1 before the first action */
} wfrl_memory;

static inline void wfrl_memory_begin(wfrl_memory *m)
{
    memset(m, 0, sizeof(*m));
    m->last_scan = -1;
    m->prev_action = -1;
}

static inline int wfrl_popcount8(uint8_t x)
{
    int n = 0;
    for (; x; x &= (uint8_t)(x - 1)) ++n;
    return n;
}

/* Decoy kinds still worth placing on host h given what I placed there. */
static inline uint8_t wfrl_decoys_open(const wfrl_memory *m, int h)
{
    uint8_t open = (uint8_t)(wfrl_decoy_useful[h] & ~m->decoys[h]);
    const uint8_t port80 = (1u << WFRL_DECOY_APACHE) | (1u << WFRL_DECOY_VSFTPD);
    if (m->decoys[h] & port80) open &= (uint8_t)~port80;
    return open;
}

/* Account for my previous action, then for the observation it led to. */
static inline void wfrl_memory_update(wfrl_memory *m, const float *obs)
{
    const int a = m->prev_action;
    if (a >= WFRL_ACT_RESTORE && a < WFRL_ACT_RESTORE + WFRL_N_HOSTS) {
        const int h = a - WFRL_ACT_RESTORE;
        m->restored[h] = 1;
        m->decoys[h] = 0;
        m->comp_seen[h] = 0;
    } else if (a >= WFRL_DECOY_FIRST && a < WFRL_DECOY_FIRST + WFRL_N_DECOYS * WFRL_N_HOSTS) {
        const int k = (a - WFRL_DECOY_FIRST) / WFRL_N_HOSTS, h = (a - WFRL_DECOY_FIRST) % WFRL_N_HOSTS;
        if (wfrl_decoys_open(m, h) & (1u << k)) m->decoys[h] |= (uint8_t)(1u << k);
    }
    int newest = -1;
    for (int h = 0; h < WFRL_N_HOSTS; ++h) {
        const float *o = obs + 4 * h;
        const int act0 = o[0] != 0.0f, act1 = o[1] != 0.0f, comp1 = o[3] != 0.0f;
        if (act0 && !act1) {
            m->scanned[h] = 1;
            if (newest < 0) newest = h;
        }
        if ((act0 && act1) || comp1) m->comp_seen[h] = 1;
    }
    if (newest >= 0) m->last_scan = (int8_t)newest;
}

static inline void wfrl_memory_features(const wfrl_memory *m, float *out)
{
    const int H = WFRL_N_HOSTS;
    for (int h = 0; h < H; ++h) {
        const int useful = wfrl_popcount8(wfrl_decoy_useful[h]);
        out[h] = m->scanned[h];
        out[H + h] = (h == m->last_scan) ? 1.0f : 0.0f;
        out[2 * H + h] = m->comp_seen[h];
        out[3 * H + h] = m->restored[h];
        out[4 * H + h] = useful ? (float)wfrl_popcount8(m->decoys[h]) / (float)useful : 0.0f;
    }
    out[5 * H] = (float)m->t / (float)WFRL_EP_LEN;
}

/* allowed[a] = 1 if action a can do something given the memory. */
static inline void wfrl_memory_mask(const wfrl_memory *m, uint8_t *allowed)
{
    memset(allowed, 1, WFRL_N_ACTIONS);
    allowed[WFRL_MONITOR] = 0;
    for (int h = 0; h < WFRL_N_HOSTS; ++h) {
        const uint8_t open = wfrl_decoys_open(m, h);
        for (int k = 0; k < WFRL_N_DECOYS; ++k)
            allowed[WFRL_DECOY_FIRST + WFRL_N_HOSTS * k + h] = (uint8_t)((open >> k) & 1u);
    }
}

/* Record the action taken (its effect enters the memory at the next update). */
static inline void wfrl_memory_acted(wfrl_memory *m, int action)
{
    m->prev_action = (int16_t)action;
    m->t += 1;
}

#endif
