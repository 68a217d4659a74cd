/* A compiled CAGE Challenge 2 (CybORG Scenario2) as seen by a blue training loop.
 *
 * Behaviour follows CybORG's Scenario2 (csle-cyborg 0.0.3, bugs included); the real CybORG is
 * the reference, held statistically equal by tests/test_parity.py. Only what influences the blue
 * observation, the reward and red's future behaviour is modelled: red sessions are kept as counts
 * per host and kind, ports as bit masks, IPs as host indices (IPs are labels only).
 *
 * One env is a plain struct with its own RNG; no allocation, no globals, no Python.
 * Entry points: wfrl_cage2_reset, wfrl_cage2_step, wfrl_cage2_step_batch. */
#ifndef WFRL_CAGE2_H
#define WFRL_CAGE2_H

#include <stdint.h>
#include <string.h>

#include "wfrl_rng.h"
#include "wfrl_types.h"

/* ---- hosts (observation/action order) ------------------------------------------------------ */
enum { H_DEF, H_ENT0, H_ENT1, H_ENT2, H_OPH0, H_OPH1, H_OPH2, H_OPS0, H_U0, H_U1, H_U2, H_U3, H_U4 };
#define NH WFRL_N_HOSTS

enum { SUB_USER, SUB_ENT, SUB_OP, N_SUB };

/* ---- ports that matter, as bits --------------------------------------------------------- */
enum { P21, P22, P25, P53, P68, P80, P135, P139, P443, P445, P3389, P3390, N_PORTBITS };
#define PB(p) (1u << (p))

/* ---- exploits (CybORG's catalogue), in decreasing weight: index order = preference order ------ */
enum { X_FTP, X_HARAKA, X_SQLI, X_HTTPS, X_HTTP, X_EB, X_BK, X_SSH, N_EXPLOITS };
static const uint8_t cage2_exploit_port[N_EXPLOITS] = {P21, P25, P3390, P443, P80, P139, P3389, P22};

/* Result of exploiting the *real* service of a host: none there, fails, user or root session. */
enum { R_NONE = 0, R_FAIL, R_USER, R_PRIV };

/* ---- decoys ----------------------------------------------------------------------- */
enum { D_APACHE, D_FEMITTER, D_HARAKA, D_SMSS, D_SSHD, D_SVCHOST, D_TOMCAT, D_VSFTPD, N_DECOYS };
static const uint8_t cage2_decoy_port[N_DECOYS] = {P80, P21, P25, P139, P22, P3389, P443, P80};
/* Port that must be free for placement (Vsftpd checks 21 but opens 80: bug B4). */
static const uint8_t cage2_decoy_needs_free[N_DECOYS] = {P80, P21, P25, P139, P22, P3389, P443, P21};
/* OS requirement: 0 any, 1 Linux, 2 Windows. */
static const uint8_t cage2_decoy_os[N_DECOYS] = {0, 2, 1, 2, 0, 2, 0, 1};
/* The decoys that answer each exploit (same (type, port) as the real service), bit k for decoy
 * k: FTP femitter, Haraka haraka, HTTPS tomcat, HTTP apache and vsftpd, EternalBlue smss,
 * BlueKeep svchost, SSH sshd; none answers SQL injection. */
static const uint8_t cage2_exploit_decoys[N_EXPLOITS] = {
    1u << D_FEMITTER, 1u << D_HARAKA, 0, 1u << D_TOMCAT, (1u << D_APACHE) | (1u << D_VSFTPD),
    1u << D_SMSS, 1u << D_SVCHOST, 1u << D_SSHD};

/* ---- static host table -------------------------------------------------------------------- */
typedef struct {
    uint8_t subnet;
    uint8_t linux_os;
    uint8_t conf10;           /* confidentiality value in tenths */
    uint8_t n_conns;          /* listening connections (one scan event each) */
    uint16_t ports;           /* listening ports as bits */
    uint8_t real[N_EXPLOITS]; /* outcome of exploiting the real service (R_*) */
    int8_t link;              /* host whose IP red learns when escalating this one, or -1 */
} cage2_host;

static const cage2_host cage2_hosts[NH] = {
    /* Defender: 22 sshd(root); 53, 53; 68. SSH brute force always fails (no account). */
    {SUB_ENT, 1, 1, 4, PB(P22) | PB(P53) | PB(P68),
     {R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_FAIL}, -1},
    /* Enterprise0: 22 sshd(root); brute force gives `pi`. */
    {SUB_ENT, 1, 10, 1, PB(P22), {R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_USER}, -1},
    /* Enterprise1/2: 22, 135, 3389 rdp(SYSTEM), 445, 139 (smss: type unknown, bug B2), 80, 443 tomcat. */
    {SUB_ENT, 0, 10, 7, PB(P22) | PB(P135) | PB(P3389) | PB(P445) | PB(P139) | PB(P80) | PB(P443),
     {R_NONE, R_NONE, R_NONE, R_USER, R_USER, R_NONE, R_PRIV, R_USER}, -1},
    {SUB_ENT, 0, 10, 7, PB(P22) | PB(P135) | PB(P3389) | PB(P445) | PB(P139) | PB(P80) | PB(P443),
     {R_NONE, R_NONE, R_NONE, R_USER, R_USER, R_NONE, R_PRIV, R_USER}, H_OPS0},
    /* Op_Host0-2, Op_Server0: 22 sshd(root); `pi`. */
    {SUB_OP, 1, 1, 1, PB(P22), {R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_USER}, -1},
    {SUB_OP, 1, 1, 1, PB(P22), {R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_USER}, -1},
    {SUB_OP, 1, 1, 1, PB(P22), {R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_USER}, -1},
    {SUB_OP, 1, 10, 1, PB(P22), {R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_USER}, -1},
    /* User0/1: 22 sshd.exe, 21 femitter(SYSTEM); `vagrant`. */
    {SUB_USER, 0, 0, 2, PB(P22) | PB(P21),
     {R_PRIV, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_USER}, -1},
    {SUB_USER, 0, 1, 2, PB(P22) | PB(P21),
     {R_PRIV, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_USER}, H_ENT1},
    /* User2: 445, 139 smb(SYSTEM); 135; 3389 rdp(NetworkService). */
    {SUB_USER, 0, 1, 4, PB(P445) | PB(P139) | PB(P135) | PB(P3389),
     {R_NONE, R_NONE, R_NONE, R_NONE, R_NONE, R_PRIV, R_USER, R_NONE}, H_ENT1},
    /* User3: 80 apache, 3389 mysql (bug B3), 443 apache, 25 haraka(root). */
    {SUB_USER, 1, 1, 4, PB(P80) | PB(P3389) | PB(P443) | PB(P25),
     {R_NONE, R_PRIV, R_NONE, R_USER, R_USER, R_NONE, R_NONE, R_NONE}, H_ENT0},
    /* User4: 22 sshd, 80 apache, 3390 mysql(root), 443 apache, 25 haraka(root); `pi`. */
    {SUB_USER, 1, 1, 5, PB(P22) | PB(P80) | PB(P3390) | PB(P443) | PB(P25),
     {R_NONE, R_PRIV, R_PRIV, R_USER, R_USER, R_NONE, R_NONE, R_USER}, H_ENT0},
};

/* Hosts of each subnet in listing order (what DiscoverRemoteSystems reveals). */
static const int8_t cage2_subnet_hosts[N_SUB][5] = {
    {H_U0, H_U1, H_U2, H_U3, H_U4},
    {H_ENT0, H_ENT1, H_ENT2, H_DEF, -1},
    {H_OPS0, H_OPH0, H_OPH1, H_OPH2, -1},
};

/* ---- red agents ---------------------------------------------------------------------------- */
enum { RED_BLINE = 0, RED_MEANDER = 1, RED_SLEEP = 2, RED_MIXED = 3,
       /* pools: each episode's red drawn by its seed (wfrl_pool_red_code) */
       RED_POOL_FAMILY = 4, RED_POOL_TRAIN = 5, RED_POOL_HELDOUT = 6 };

/* OR-ed into the red kind given to wfrl_cage2_reset: play the episode by the CybORG code the CAGE2
 * final leaderboard was scored on (cage-challenge-2 before its fixes of 16 and 19 August 2022,
 * which the installed csle-cyborg 0.0.3 carries). Two differences:
 *  - a Restore rebuilds the host's processes from a backup that lost every process version, so
 *    HarakaRCE against the real smtp of a restored User3/User4 fails (event A only, a "Scan");
 *  - a port scan adds the ports it sees to red's memory of the IP instead of replacing it, so
 *    ports of decoys red once saw stay remembered after a Restore removed the decoys. */
#define WFRL_RED_LEADERBOARD 0x10

/* Variants of B_line and Meander (bits 5-7 of the red kind): the base agent decides as ever;
 * around it, when it acts and what else red does. A step the base agent does not act leaves its
 * memory of its last action's outcome (prev_success, prev_has_data) as it was, so it continues
 * where it stopped. Twins: wfrl/envs/reds.py.
 *  - DELAYED: red sleeps the first D steps, D uniform in 5..25 (drawn at reset);
 *  - BURSTY: red acts RV_BURST steps, then sleeps P steps, P uniform in 2..5 (drawn at each
 *    burst's end);
 *  - NOISY: before an exploit, with probability 1/2, red scans the target's services first
 *    (one more DiscoverNetworkServices; the exploit follows on the next step);
 *  - SCOUTING (B_line): once the user subnet is listed, red scans the services of User1-4 in a
 *    random order, then B_line enters through a Linux one (User3 or User4, the hosts showing
 *    smtp), so on through Enterprise0;
 *  - PERSISTENT (B_line): once B_line has escalated on a host beyond User0, each step with
 *    probability 1/2 red first checks one of the footholds it has escalated on (User,
 *    Enterprise, Enterprise2, Op_Server0; in turn) by escalating there again; a failed check is
 *    followed by a re-exploit and, if that succeeds, an escalation: a host restored or cleared
 *    is taken back at once, wherever B_line has got to;
 *  - ENTERPRISE (Meander): red never touches the operational subnet (its scans, exploits and
 *    escalations skip it): a target of the enterprise's hosts instead of the plant. */
#define WFRL_RED_VARIANT_SHIFT 5

/* OR-ed into the red kind given to wfrl_cage2_reset (bit 8, above the byte the kinds use): red
 * is an agent driven from outside. Each step plays the action wfrl_cage2_set_red_action gave it
 * (one of WFRL_RED_N_ACTIONS; Sleep if none was given), or the one wfrl_cage2_scripted_red chose
 * with the kind's own compiled decision (a scripted red driven through the external interface:
 * the same episodes, bit for bit, as the built-in one). Red sees wfrl_cage2_red_obs, may act as
 * wfrl_cage2_red_mask allows, and its reward is the negative of blue's. */
#define WFRL_RED_EXTERNAL 0x100

/* Red's actions, CAGE2's for Scenario2 (CybORG's red action space): Sleep;
 * DiscoverRemoteSystems per subnet (User, Enterprise, Operational); then per host, in the
 * observation's order, DiscoverNetworkServices, ExploitRemoteService, PrivilegeEscalate and
 * Impact, each a block of NH. */
#define WFRL_RED_N_ACTIONS (1 + 3 + 4 * WFRL_N_HOSTS)
#define WFRL_RED_ACT_DRS 1
#define WFRL_RED_ACT_DNS 4
/* What red knows, as floats: per host (NH blocks of 5) its IP known, its hostname known, its
 * services scanned, and the access red last saw there (user, privileged); then each subnet
 * known (3); whether red's last action succeeded and whether it failed (both 0 before its
 * first); the step (t / EP_LEN). */
#define WFRL_RED_HOST_FEATURES 5
#define WFRL_RED_OBS_DIM (WFRL_RED_HOST_FEATURES * WFRL_N_HOSTS + 3 + 2 + 1)
enum { RV_NONE = 0, RV_DELAYED = 1, RV_BURSTY = 2, RV_NOISY = 3, RV_SCOUTING = 4,
       RV_PERSISTENT = 5, RV_ENTERPRISE = 6 };
#define RV_DELAY_MIN 5
#define RV_DELAY_SPAN 21
#define RV_BURST 3
#define RV_PAUSE_MIN 2
#define RV_PAUSE_SPAN 4

/* The attacker of an episode of the mixed red (B_line or Meander, one half each), a function of
 * the episode's env seed alone so that every backend and collector plays the same one.
 * Twin: wfrl/envs/base.py:mixed_red_kind. */
static inline int wfrl_mixed_red_kind(uint64_t seed)
{
    uint64_t x = seed ^ 0x6D69786564726564ULL; /* "mixedred" */
    return (wfrl_splitmix64(&x) >> 63) ? RED_MEANDER : RED_BLINE;
}
/* The pools' members as red kind codes (base | variant << WFRL_RED_VARIANT_SHIFT). Twin:
 * wfrl/envs/reds.py:pool_member (the members in its POOLS table). family: the nine variants;
 * family-train: B_line, Meander and one variant of each schedule (delayed B_line, bursty
 * Meander, noisy B_line); family-heldout: the other six. */
#define RV(base, v) ((uint8_t)((base) | ((v) << WFRL_RED_VARIANT_SHIFT)))
static const uint8_t cage2_pool_family[9] = {RV(0, 1), RV(0, 2), RV(0, 3), RV(1, 1), RV(1, 2),
                                             RV(1, 3), RV(0, 4), RV(0, 5), RV(1, 6)};
static const uint8_t cage2_pool_train[5] = {RV(0, 0), RV(1, 0), RV(0, 1), RV(1, 2), RV(0, 3)};
static const uint8_t cage2_pool_heldout[6] = {RV(1, 1), RV(0, 2), RV(1, 3), RV(0, 4), RV(0, 5),
                                              RV(1, 6)};

static inline int wfrl_pool_red_code(int pool, uint64_t seed)
{
    const uint8_t *m = pool == RED_POOL_FAMILY ? cage2_pool_family :
                       pool == RED_POOL_TRAIN ? cage2_pool_train : cage2_pool_heldout;
    const uint64_t n = pool == RED_POOL_FAMILY ? 9 : pool == RED_POOL_TRAIN ? 5 : 6;
    uint64_t x = seed ^ (0x706F6F6C00000000ULL + (uint64_t)pool); /* "pool" */
    return m[(wfrl_splitmix64(&x) >> 32) % n];
}
enum { RA_SLEEP, RA_DRS, RA_DNS, RA_EXPLOIT, RA_ESCALATE, RA_IMPACT };

typedef struct {
    uint8_t type;    /* RA_* */
    int8_t target;   /* subnet for DRS, host otherwise */
} cage2_red_action;

/* B_line: 15 stages, failure jumps J. */
static const uint8_t cage2_bline_jump[15] = {0, 1, 2, 2, 2, 2, 5, 5, 5, 5, 9, 9, 9, 12, 13};

/* Blue observation classes. */
enum { ACT_NONE, ACT_SCAN, ACT_EXPLOIT };
enum { COMP_NO, COMP_UNKNOWN, COMP_USER, COMP_PRIV };

/* Entries blue's monitor sees on one host during one step. */
typedef struct {
    uint16_t n;          /* number of entries */
    uint16_t ports;      /* local ports (with a connection) as bits */
    uint8_t n_ephemeral; /* distinct ephemeral local ports (the 4444 callback's own port) */
    uint8_t has4444;
    uint8_t first_decoy;
} cage2_entries;

typedef struct {
    /* -- true state ------------------------------------------------------------------------ */
    uint8_t n_user_rm[NH];   /* user-level red sessions whose callback blue saw (Remove kills) */
    uint8_t n_user_keep[NH]; /* user-level red sessions Remove cannot kill (SSH, unseen callback) */
    uint8_t n_priv[NH];      /* root/SYSTEM red sessions besides the User0 foothold */
    uint8_t malware[NH];     /* a density-0.9 file is on the host (Analyse sees it) */
    uint8_t decoys[NH];      /* bit per placed decoy kind except Vsftpd */
    uint8_t n_vsftpd[NH];    /* Vsftpd decoys stack */
    uint8_t ot_running, ot_pid_valid;

    /* -- red knowledge (shared by both red agents) ----------------------------------------- */
    uint16_t known_ip, known_host;  /* bit h: red knows host h's IP / hostname */
    uint8_t known_subnets;      /* bit s: red knows subnet s (SUB_*) */
    uint8_t ports_stored[NH];   /* red stored a routable scan of this IP */
    uint16_t ports_mem[NH];     /* ports remembered from the last routable scan */
    uint8_t offered[NH];        /* bit x: exploit x is offered by ports_mem (set with it) */
    uint8_t ot_known;

    /* -- the leaderboard's CybORG (WFRL_RED_LEADERBOARD) ------------------------------------- */
    uint8_t leaderboard;
    uint8_t versions_lost[NH];  /* restored this episode: its processes have no version */

    /* -- red agent memory ------------------------------------------------------------------ */
    uint8_t red_kind;       /* RED_BLINE, RED_MEANDER or RED_SLEEP (mixed resolved) */
    uint8_t red_variant;    /* RV_*: see WFRL_RED_VARIANT_SHIFT */
    uint8_t red_code;       /* the red kind reset was given (a pool or mixed unresolved) */
    uint8_t v_delay, v_count, v_pause, v_queued;
    cage2_red_action v_next; /* NOISY: the exploit that follows the extra scan */
    uint8_t v_scouted;      /* SCOUTING: bit k, User(k+1) scanned */
    uint8_t v_phase;        /* PERSISTENT: 0 none, 1 checked, 2 re-exploited, 3 re-escalated */
    uint8_t v_taken;        /* PERSISTENT: bit k, B_line has escalated on foothold k */
    int8_t v_target;        /* PERSISTENT: the foothold of the phase */
    uint8_t v_ok;           /* the outcome of the variant's own last action */
    uint8_t prev_success;   /* 0 fail, 1 success, 2 unknown (start of episode) */
    uint8_t prev_has_data;  /* previous red action returned host data */
    uint8_t last_red_type;  /* red's action of the last step (RA_*) and its target, for viewers */
    int8_t last_red_target;
    /* red as an agent (WFRL_RED_EXTERNAL) */
    uint8_t red_external;   /* red's action comes from outside */
    uint8_t ext_own, ext_vact, ext_invalid;   /* the given action's bookkeeping (see step) */
    cage2_red_action ext_ra;                  /* the action given for the next step */
    uint8_t r_seen[NH];     /* the access red last saw on each host: 0 none, 1 user, 2 root */
    uint8_t r_last_ok;      /* red's last action: 0 failed, 1 succeeded, 2 none yet */
    /* B_line */
    uint8_t bl_stage, bl_user;
    uint16_t bl_cached;     /* bit k: stage k built */
    /* Meander (IPs are host indices) */
    uint8_t m_scanned_subnets;  /* bit s: subnet s scanned */
    uint16_t m_scanned_ip, m_exploited, m_escalated, m_in_map;   /* bit h: host h */
    uint16_t m_last_ip, m_last_host;   /* bit h: the IP / host of red's last exploit / escalation */

    /* -- blue view ------------------------------------------------------------------------- */
    uint8_t comp[NH];
    uint8_t act[NH];
    cage2_entries entries[NH];
    uint16_t touched;       /* bit h: entries[h] holds this step's entries (the rest are zero) */

    int32_t t;              /* blue steps taken in this episode */
    wfrl_rng rng;
} wfrl_cage2;

/* ---- small helpers ------------------------------------------------------------------------- */
static inline int cage2_has_priv(const wfrl_cage2 *e, int h)
{
    return (e->n_priv[h] > 0) | (h == H_U0); /* the foothold is SYSTEM and permanent */
}

static inline int cage2_n_sessions(const wfrl_cage2 *e, int h)
{
    return e->n_user_rm[h] + e->n_user_keep[h] + e->n_priv[h] + (h == H_U0);
}

/* Set bits of each byte value (portable builds have no popcnt instruction, and the builtin
 * becomes a call): two loads count a host set. */
#define CAGE2_POP2(n) n, n + 1, n + 1, n + 2
#define CAGE2_POP4(n) CAGE2_POP2(n), CAGE2_POP2(n + 1), CAGE2_POP2(n + 1), CAGE2_POP2(n + 2)
#define CAGE2_POP6(n) CAGE2_POP4(n), CAGE2_POP4(n + 1), CAGE2_POP4(n + 1), CAGE2_POP4(n + 2)
static const uint8_t cage2_pop8[256] = {CAGE2_POP6(0), CAGE2_POP6(1), CAGE2_POP6(1), CAGE2_POP6(2)};
#undef CAGE2_POP2
#undef CAGE2_POP4
#undef CAGE2_POP6

static inline int cage2_popcount16(uint16_t x)
{
    return cage2_pop8[x & 0xFFu] + cage2_pop8[x >> 8];
}

/* Index of the lowest set bit of x (x != 0). */
static inline int cage2_lowest_bit(uint32_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctz(x);
#else
    int i = 0;
    while (!(x >> i & 1)) ++i;
    return i;
#endif
}

/* cage2_sel8[v]: the positions of v's set bits, lowest first, one per nibble (0x76543210 for
 * 0xFF); the k-th set bit of the byte v is (cage2_sel8[v] >> 4k) & 15. */
static const uint32_t cage2_sel8[256] = {
    0x00000000u, 0x00000000u, 0x00000001u, 0x00000010u, 0x00000002u, 0x00000020u,
    0x00000021u, 0x00000210u, 0x00000003u, 0x00000030u, 0x00000031u, 0x00000310u,
    0x00000032u, 0x00000320u, 0x00000321u, 0x00003210u, 0x00000004u, 0x00000040u,
    0x00000041u, 0x00000410u, 0x00000042u, 0x00000420u, 0x00000421u, 0x00004210u,
    0x00000043u, 0x00000430u, 0x00000431u, 0x00004310u, 0x00000432u, 0x00004320u,
    0x00004321u, 0x00043210u, 0x00000005u, 0x00000050u, 0x00000051u, 0x00000510u,
    0x00000052u, 0x00000520u, 0x00000521u, 0x00005210u, 0x00000053u, 0x00000530u,
    0x00000531u, 0x00005310u, 0x00000532u, 0x00005320u, 0x00005321u, 0x00053210u,
    0x00000054u, 0x00000540u, 0x00000541u, 0x00005410u, 0x00000542u, 0x00005420u,
    0x00005421u, 0x00054210u, 0x00000543u, 0x00005430u, 0x00005431u, 0x00054310u,
    0x00005432u, 0x00054320u, 0x00054321u, 0x00543210u, 0x00000006u, 0x00000060u,
    0x00000061u, 0x00000610u, 0x00000062u, 0x00000620u, 0x00000621u, 0x00006210u,
    0x00000063u, 0x00000630u, 0x00000631u, 0x00006310u, 0x00000632u, 0x00006320u,
    0x00006321u, 0x00063210u, 0x00000064u, 0x00000640u, 0x00000641u, 0x00006410u,
    0x00000642u, 0x00006420u, 0x00006421u, 0x00064210u, 0x00000643u, 0x00006430u,
    0x00006431u, 0x00064310u, 0x00006432u, 0x00064320u, 0x00064321u, 0x00643210u,
    0x00000065u, 0x00000650u, 0x00000651u, 0x00006510u, 0x00000652u, 0x00006520u,
    0x00006521u, 0x00065210u, 0x00000653u, 0x00006530u, 0x00006531u, 0x00065310u,
    0x00006532u, 0x00065320u, 0x00065321u, 0x00653210u, 0x00000654u, 0x00006540u,
    0x00006541u, 0x00065410u, 0x00006542u, 0x00065420u, 0x00065421u, 0x00654210u,
    0x00006543u, 0x00065430u, 0x00065431u, 0x00654310u, 0x00065432u, 0x00654320u,
    0x00654321u, 0x06543210u, 0x00000007u, 0x00000070u, 0x00000071u, 0x00000710u,
    0x00000072u, 0x00000720u, 0x00000721u, 0x00007210u, 0x00000073u, 0x00000730u,
    0x00000731u, 0x00007310u, 0x00000732u, 0x00007320u, 0x00007321u, 0x00073210u,
    0x00000074u, 0x00000740u, 0x00000741u, 0x00007410u, 0x00000742u, 0x00007420u,
    0x00007421u, 0x00074210u, 0x00000743u, 0x00007430u, 0x00007431u, 0x00074310u,
    0x00007432u, 0x00074320u, 0x00074321u, 0x00743210u, 0x00000075u, 0x00000750u,
    0x00000751u, 0x00007510u, 0x00000752u, 0x00007520u, 0x00007521u, 0x00075210u,
    0x00000753u, 0x00007530u, 0x00007531u, 0x00075310u, 0x00007532u, 0x00075320u,
    0x00075321u, 0x00753210u, 0x00000754u, 0x00007540u, 0x00007541u, 0x00075410u,
    0x00007542u, 0x00075420u, 0x00075421u, 0x00754210u, 0x00007543u, 0x00075430u,
    0x00075431u, 0x00754310u, 0x00075432u, 0x00754320u, 0x00754321u, 0x07543210u,
    0x00000076u, 0x00000760u, 0x00000761u, 0x00007610u, 0x00000762u, 0x00007620u,
    0x00007621u, 0x00076210u, 0x00000763u, 0x00007630u, 0x00007631u, 0x00076310u,
    0x00007632u, 0x00076320u, 0x00076321u, 0x00763210u, 0x00000764u, 0x00007640u,
    0x00007641u, 0x00076410u, 0x00007642u, 0x00076420u, 0x00076421u, 0x00764210u,
    0x00007643u, 0x00076430u, 0x00076431u, 0x00764310u, 0x00076432u, 0x00764320u,
    0x00764321u, 0x07643210u, 0x00000765u, 0x00007650u, 0x00007651u, 0x00076510u,
    0x00007652u, 0x00076520u, 0x00076521u, 0x00765210u, 0x00007653u, 0x00076530u,
    0x00076531u, 0x00765310u, 0x00076532u, 0x00765320u, 0x00765321u, 0x07653210u,
    0x00007654u, 0x00076540u, 0x00076541u, 0x00765410u, 0x00076542u, 0x00765420u,
    0x00765421u, 0x07654210u, 0x00076543u, 0x00765430u, 0x00765431u, 0x07654310u,
    0x00765432u, 0x07654320u, 0x07654321u, 0x76543210u,
};

/* Index of the k-th lowest set bit of x (x < 2^16, k < its popcount), without a branch: the
 * low byte or the high one, then a table. Red's random choices among hosts and exploits land
 * here; a data-dependent loop would mispredict on most of them. */
static inline int cage2_select_bit(uint32_t x, uint32_t k)
{
    const uint32_t c = cage2_pop8[x & 0xFFu];       /* set bits in the low byte */
    const uint32_t m = 0u - (uint32_t)(k >= c);     /* all ones: the bit is in the high byte */
    k -= c & m;
    return (int)((8u & m) + ((cage2_sel8[(x >> (8u & m)) & 0xFFu] >> (4u * (k & 7u))) & 0xFu));
}

/* Uniform choice among the set bits of `ok` (hosts or exploits; the k-th set bit, k uniform, in
 * index order); -1 if none. */
static inline int cage2_pick(wfrl_cage2 *e, uint16_t ok)
{
    if (ok == 0) return -1;
    return cage2_select_bit(ok, wfrl_rng_below(&e->rng, (uint32_t)cage2_popcount16(ok)));
}

static inline void cage2_add_session(uint8_t *count)
{
    if (*count < 255) ++*count;
}

/* The decoy kinds placed on host h as bits (bit k: decoy k; Vsftpd's from its stack count). */
static inline uint32_t cage2_decoys_placed(const wfrl_cage2 *e, int h)
{
    return (e->decoys[h] & ~(1u << D_VSFTPD)) | ((uint32_t)(e->n_vsftpd[h] > 0) << D_VSFTPD);
}

/* Listening ports of a host now: static services plus its decoys' ports (Vsftpd stacks on port
 * 80). */
static inline uint16_t cage2_ports_now(const wfrl_cage2 *e, int h)
{
    uint32_t p = cage2_hosts[h].ports;
    const uint32_t d = cage2_decoys_placed(e, h);
    for (int k = 0; k < N_DECOYS; ++k)   /* unrolled: no branch on which decoys are placed */
        p |= PB(cage2_decoy_port[k]) & (0u - ((d >> k) & 1u));
    return (uint16_t)p;
}

static inline int cage2_conns_now(const wfrl_cage2 *e, int h)
{
    return cage2_hosts[h].n_conns + e->n_vsftpd[h] +
           cage2_popcount16((uint16_t)(e->decoys[h] & ~(1u << D_VSFTPD)));
}

/* User -> Operational traffic needs a red session on an Enterprise host. */
static inline int cage2_routable(const wfrl_cage2 *e, int h)
{
    if (cage2_hosts[h].subnet != SUB_OP) return 1;
    return cage2_n_sessions(e, H_ENT0) + cage2_n_sessions(e, H_ENT1) + cage2_n_sessions(e, H_ENT2) > 0;
}

/* Host h's monitor entries of this step, to add to (marked touched: cleared and classified). */
static inline cage2_entries *cage2_entries_of(wfrl_cage2 *e, int h)
{
    e->touched = (uint16_t)(e->touched | (1u << h));
    return &e->entries[h];
}

static inline void cage2_entry(wfrl_cage2 *e, int h, int count, int port_bit, int ephemeral,
                               int r4444)
{
    cage2_entries *x = cage2_entries_of(e, h);
    x->n = (uint16_t)(x->n + count);
    if (port_bit >= 0) x->ports |= (uint16_t)PB(port_bit);
    x->n_ephemeral = (uint8_t)(x->n_ephemeral + ephemeral);
    if (r4444) x->has4444 = 1;
}

/* Host sets as bits (bit h: host h). */
#define CAGE2_OP_HOSTS ((uint16_t)((1u << H_OPH0) | (1u << H_OPH1) | (1u << H_OPH2) | (1u << H_OPS0)))
#define CAGE2_ENT_HOSTS ((uint16_t)((1u << H_ENT0) | (1u << H_ENT1) | (1u << H_ENT2)))

/* ---- red actions ---------------------------------------------------------------------- */
static inline int cage2_red_drs(wfrl_cage2 *e, int subnet)
{
    if (subnet == SUB_OP && !cage2_routable(e, H_OPS0)) return 0;
    for (int i = 0; i < 5; ++i)
        if (cage2_subnet_hosts[subnet][i] >= 0)
            e->known_ip = (uint16_t)(e->known_ip | (1u << cage2_subnet_hosts[subnet][i]));
    return 1;
}

static inline int cage2_exploit_offered(uint16_t mem, int x)
{
    if (x == X_SQLI) return ((mem & PB(P3390)) != 0) & ((mem & (PB(P80) | PB(P443))) != 0);
    return (mem >> cage2_exploit_port[x]) & 1;
}

/* The exploits ports offer, as bits (bit x: exploit x). */
static inline uint8_t cage2_offered(uint16_t mem)
{
    uint32_t offered = 0;
    for (int x = 0; x < N_EXPLOITS; ++x)
        offered |= (uint32_t)cage2_exploit_offered(mem, x) << x;
    return (uint8_t)offered;
}

/* Always "succeeds"; returns whether it produced host data (routable). */
static inline int cage2_red_dns(wfrl_cage2 *e, int h)
{
    if (!cage2_routable(e, h)) return 0;
    /* the leaderboard's code adds to what red remembered; today's replaces it */
    e->ports_mem[h] = (uint16_t)(cage2_ports_now(e, h) | (e->leaderboard ? e->ports_mem[h] : 0));
    e->offered[h] = cage2_offered(e->ports_mem[h]);
    e->ports_stored[h] = 1;
    cage2_entries *x = cage2_entries_of(e, h);
    x->n = (uint16_t)(x->n + cage2_conns_now(e, h));
    x->ports |= e->ports_mem[h];
    return 1;
}

static inline int cage2_red_exploit(wfrl_cage2 *e, int h)
{
    if (!e->ports_stored[h]) return 0;
    const uint32_t offered = e->offered[h];
    if (offered == 0) return 0;
    int x = cage2_lowest_bit(offered);
    const uint32_t rest = offered & (offered - 1);
    if (rest) {
        /* Top weight with probability 0.75, otherwise uniform among the rest. */
        const int other = cage2_pick(e, (uint16_t)rest);
        x = wfrl_rng_uniform(&e->rng) < 0.75 ? x : other;
    }
    if (!cage2_routable(e, h)) return 0;
    const int port = cage2_exploit_port[x];
    int result = cage2_hosts[h].real[x];
    int decoy = 0;
    if (result == R_NONE) {
        decoy = (cage2_decoys_placed(e, h) & cage2_exploit_decoys[x]) != 0;
        if (!decoy) return 0; /* no process with that (type, port): silent failure */
    }
    if (x == X_SSH) {
        cage2_entry(e, h, 10, port, 0, 0);
        if (decoy || result == R_FAIL) return 0;
        cage2_entry(e, h, 1, port, 0, 0);
        cage2_add_session(&e->n_user_keep[h]); /* SSH sessions carry no PID: never removable */
        e->known_host = (uint16_t)(e->known_host | (1u << h));
        return 1;
    }
    cage2_entry(e, h, 1, port, 0, 0);            /* event A */
    if (decoy) {
        cage2_entry(e, h, 1, port, 0, 0);        /* event B */
        return 0;
    }
    if (x == X_HARAKA && e->versions_lost[h]) return 0; /* version unknown: not < 2.8.9 */
    const int seen = wfrl_rng_uniform(&e->rng) < 0.95;
    if (seen) cage2_entry(e, h, 1, -1, 1, 1);    /* event C: the 4444 callback */
    if (result == R_PRIV) cage2_add_session(&e->n_priv[h]);
    else if (seen) cage2_add_session(&e->n_user_rm[h]);
    else cage2_add_session(&e->n_user_keep[h]);
    e->malware[h] = 1;
    e->known_host = (uint16_t)(e->known_host | (1u << h));
    return 1;
}

static inline int cage2_red_escalate(wfrl_cage2 *e, int h)
{
    const int n_user = e->n_user_rm[h] + e->n_user_keep[h];
    if (!cage2_has_priv(e, h)) {
        if (n_user == 0) return 0;
        /* Upgrade one of red's sessions on the host, chosen uniformly. */
        if ((int)wfrl_rng_below(&e->rng, (uint32_t)n_user) < e->n_user_rm[h]) --e->n_user_rm[h];
        else --e->n_user_keep[h];
        cage2_add_session(&e->n_priv[h]);
        e->malware[h] = 1;
    }
    /* Success: red explores the host. */
    const int link = cage2_hosts[h].link;
    e->known_ip = (uint16_t)(e->known_ip | ((1u << (link & 15)) & (0u - (uint32_t)(link >= 0))));
    e->known_subnets = (uint8_t)(e->known_subnets | (((CAGE2_ENT_HOSTS >> h) & 1u) << SUB_ENT));
    if (h == H_OPS0) {
        e->known_subnets = (uint8_t)(e->known_subnets | (1u << SUB_OP));
        e->ot_known = 1;
    }
    return 1;
}

static inline int cage2_red_impact(wfrl_cage2 *e, int h)
{
    if (cage2_n_sessions(e, h) == 0 || !e->ot_known) return 0;
    if (h == H_OPS0 && e->ot_running && e->ot_pid_valid) e->ot_running = 0;
    return 1;
}

/* ---- red decisions -------------------------------------------------------------------- */
/* The Enterprise host B_line goes on to from its user host U (the one U's escalation reveals). */
static inline int cage2_bline_enterprise(int U)
{
    return (U == H_U1 || U == H_U2) ? H_ENT1 : H_ENT0;
}

static inline cage2_red_action cage2_bline_stage_action(const wfrl_cage2 *e, int a)
{
    const int U = e->bl_user;
    const int E = cage2_bline_enterprise(U);
    cage2_red_action r;
    switch (a) {
    case 0: r.type = RA_DRS; r.target = SUB_USER; break;
    case 1: r.type = RA_DNS; r.target = (int8_t)U; break;
    case 2: r.type = RA_EXPLOIT; r.target = (int8_t)U; break;
    case 3: r.type = RA_ESCALATE; r.target = (int8_t)U; break;
    case 4: r.type = RA_DNS; r.target = (int8_t)E; break;
    case 5: r.type = RA_EXPLOIT; r.target = (int8_t)E; break;
    case 6: r.type = RA_ESCALATE; r.target = (int8_t)E; break;
    case 7: r.type = RA_DRS; r.target = SUB_ENT; break;
    case 8: r.type = RA_DNS; r.target = H_ENT2; break;
    case 9: r.type = RA_EXPLOIT; r.target = H_ENT2; break;
    case 10: r.type = RA_ESCALATE; r.target = H_ENT2; break;
    case 11: r.type = RA_DNS; r.target = H_OPS0; break;
    case 12: r.type = RA_EXPLOIT; r.target = H_OPS0; break;
    case 13: r.type = RA_ESCALATE; r.target = H_OPS0; break;
    default: r.type = RA_IMPACT; r.target = H_OPS0; break;
    }
    return r;
}

static inline cage2_red_action cage2_bline_decide(wfrl_cage2 *e)
{
    int s = e->prev_success == 1;
    int a = e->bl_stage;
    for (;;) {
        a = s ? (a < 14 ? a + 1 : 14) : cage2_bline_jump[a];
        if (e->bl_cached >> a & 1) break;
        if (a == 1) {
            /* U drawn once per episode; a scouting red's among the Linux hosts it saw */
            e->bl_user = (uint8_t)(e->red_variant == RV_SCOUTING
                                   ? H_U3 + wfrl_rng_below(&e->rng, 2)
                                   : H_U1 + wfrl_rng_below(&e->rng, 4));
        } else if (a == 12 && !e->prev_has_data) {
            /* The Op_Server0 scan saw nothing (no Enterprise session): restart at stage 0 with the
             * same success flag, i.e. replay the stage-1 scan; stage 12 stays unbuilt. */
            a = 0;
            continue;
        }
        e->bl_cached = (uint16_t)(e->bl_cached | (1u << a));
        break;
    }
    e->bl_stage = (uint8_t)a;
    return cage2_bline_stage_action(e, a);
}

static inline void cage2_meander_bookkeeping(wfrl_cage2 *e)
{
    const uint32_t ip = e->m_last_ip, hb = e->m_last_host;
    e->m_last_ip = e->m_last_host = 0;
    if (e->prev_success == 1) {   /* mostly: one predictable branch */
        e->m_in_map = (uint16_t)(e->m_in_map | ip);
        return;
    }
    if (ip) {
        /* Failed exploit: forget it, then forget every Operational conquest, or else every
         * Enterprise one (bug B9's cascade). */
        const uint32_t op = e->m_escalated & CAGE2_OP_HOSTS, ent = e->m_escalated & CAGE2_ENT_HOSTS;
        const uint32_t drop = op ? op : ent;
        e->m_escalated = (uint16_t)(e->m_escalated & ~drop);
        e->m_exploited = (uint16_t)(e->m_exploited & ~(drop | ip));
    }
    /* failed escalation */
    e->m_escalated = (uint16_t)(e->m_escalated & ~hb);
    e->m_exploited = (uint16_t)(e->m_exploited & ~(hb & e->m_in_map));
}

static inline cage2_red_action cage2_meander_decide(wfrl_cage2 *e)
{
    cage2_red_action r;
    /* the hosts red may act on (ENTERPRISE: none operational) */
    const int no_op = e->red_variant == RV_ENTERPRISE;
    const uint16_t may = (uint16_t)(((1u << NH) - 1) & ~(CAGE2_OP_HOSTS & (0u - (uint32_t)no_op)));
    cage2_meander_bookkeeping(e);
    if (e->m_escalated & (1u << H_OPS0)) {
        e->m_last_host = 1u << H_OPS0;
        r.type = RA_IMPACT; r.target = H_OPS0;
        return r;
    }
    /* a known subnet not scanned yet, in the order Enterprise, Operational, User */
    const uint32_t todo = e->known_subnets & ~e->m_scanned_subnets & ~((uint32_t)no_op << SUB_OP);
    if (todo) {
        const int sn = todo & (1u << SUB_ENT) ? SUB_ENT : todo & (1u << SUB_OP) ? SUB_OP : SUB_USER;
        e->m_scanned_subnets = (uint8_t)(e->m_scanned_subnets | (1u << sn));
        r.type = RA_DRS; r.target = (int8_t)sn;
        return r;
    }
    int h = cage2_pick(e, (uint16_t)(may & e->known_ip & ~e->m_scanned_ip));
    if (h >= 0) {
        e->m_scanned_ip = (uint16_t)(e->m_scanned_ip | (1u << h));
        r.type = RA_DNS; r.target = (int8_t)h;
        return r;
    }
    h = cage2_pick(e, (uint16_t)(may & e->known_host & ~e->m_escalated &
                                 (~e->m_in_map | e->m_exploited)));
    if (h >= 0) {
        e->m_escalated = (uint16_t)(e->m_escalated | (1u << h));
        e->m_last_host = (uint16_t)(1u << h);
        r.type = RA_ESCALATE; r.target = (int8_t)h;
        return r;
    }
    h = cage2_pick(e, (uint16_t)(may & e->known_ip & ~e->m_exploited));
    if (h >= 0) {
        e->m_exploited = (uint16_t)(e->m_exploited | (1u << h));
        e->m_last_ip = (uint16_t)(1u << h);
        r.type = RA_EXPLOIT; r.target = (int8_t)h;
        return r;
    }
    r.type = RA_SLEEP; r.target = 0; /* CybORG raises here; never observed */
    return r;
}

/* Whether the base agent acts this step (a variant's schedule; see WFRL_RED_VARIANT_SHIFT). */
static inline int cage2_variant_acts(wfrl_cage2 *e)
{
    if (e->red_variant == RV_DELAYED) return e->t >= e->v_delay;
    if (e->red_variant == RV_BURSTY) {
        if (e->v_pause) {
            --e->v_pause;
            return 0;
        }
        if (++e->v_count == RV_BURST) {
            e->v_count = 0;
            e->v_pause = (uint8_t)(RV_PAUSE_MIN + wfrl_rng_below(&e->rng, RV_PAUSE_SPAN));
        }
    }
    return 1;
}

/* A variant's own action this step, if it takes one instead of the base agent's (SCOUTING's
 * scans, PERSISTENT's checks and retakes); 0 otherwise. */
static inline int cage2_variant_action(wfrl_cage2 *e, cage2_red_action *ra)
{
    if (e->red_kind != RED_BLINE) return 0;
    if (e->red_variant == RV_SCOUTING) {
        /* right after B_line listed the user subnet: each of User1-4 once, in a random order */
        if (e->bl_stage != 0 || !(e->bl_cached & 1) || e->v_scouted == 0xF) return 0;
        int left[4], n = 0;
        for (int k = 0; k < 4; ++k)
            if (!(e->v_scouted >> k & 1)) left[n++] = k;
        const int k = left[wfrl_rng_below(&e->rng, (uint32_t)n)];
        e->v_scouted = (uint8_t)(e->v_scouted | (1u << k));
        ra->type = RA_DNS;
        ra->target = (int8_t)(H_U1 + k);
        return 1;
    }
    if (e->red_variant == RV_PERSISTENT) {
        const int8_t h = e->v_target;
        if (e->v_phase == 1 && !e->v_ok) {          /* the check failed: take it back */
            e->v_phase = 2;
            ra->type = RA_EXPLOIT;
            ra->target = h;
            return 1;
        }
        if (e->v_phase == 2 && e->v_ok) {           /* re-exploited: escalate again */
            e->v_phase = 3;
            ra->type = RA_ESCALATE;
            ra->target = h;
            return 1;
        }
        e->v_phase = 0;
        if (!e->v_taken || !(wfrl_rng_uniform(&e->rng) < 0.5)) return 0;
        const int U = e->bl_user;
        const int8_t held[4] = {(int8_t)U, (int8_t)cage2_bline_enterprise(U), H_ENT2, H_OPS0};
        int k = e->v_count % 4;   /* the next foothold taken, in turn */
        while (!(e->v_taken >> k & 1)) k = (k + 1) % 4;
        e->v_count = (uint8_t)(k + 1);
        e->v_target = held[k];
        e->v_phase = 1;
        ra->type = RA_ESCALATE;
        ra->target = e->v_target;
        return 1;
    }
    return 0;
}

/* A scripted red's whole decision this step: the variant's schedule and own actions, else the
 * base agent's. *own: the base agent acted (its outcome is its memory); *vact: the variant's own
 * action (its outcome is the variant's). Draws from e->rng only. */
static inline cage2_red_action cage2_red_decide(wfrl_cage2 *e, int *own, int *vact)
{
    cage2_red_action ra;
    ra.type = RA_SLEEP;
    ra.target = 0;
    int acts = cage2_variant_acts(e);   /* 1: the base agent's own action this step */
    const int v = acts && cage2_variant_action(e, &ra);   /* the variant's instead */
    if (v) {
        acts = 0;
    } else if (acts && e->v_queued) {
        ra = e->v_next;
        e->v_queued = 0;
    } else if (acts) {
        if (e->red_kind == RED_BLINE) ra = cage2_bline_decide(e);
        else if (e->red_kind == RED_MEANDER) ra = cage2_meander_decide(e);
        if (e->red_variant == RV_NOISY && ra.type == RA_EXPLOIT &&
            wfrl_rng_uniform(&e->rng) < 0.5) {
            e->v_next = ra;
            e->v_queued = 1;
            ra.type = RA_DNS;   /* the extra scan; its outcome is not the base agent's */
            acts = 0;
        }
    }
    *own = acts;
    *vact = v;
    return ra;
}

/* ---- red as an agent (WFRL_RED_EXTERNAL) ---------------------------------------------- */
/* Red action index (WFRL_RED_N_ACTIONS) -> action, and back. */
static inline cage2_red_action wfrl_cage2_red_action_of(int a)
{
    cage2_red_action r;
    r.type = RA_SLEEP;
    r.target = 0;
    if (a >= WFRL_RED_ACT_DRS && a < WFRL_RED_ACT_DNS) {
        r.type = RA_DRS;
        r.target = (int8_t)(a - WFRL_RED_ACT_DRS);
    } else if (a >= WFRL_RED_ACT_DNS && a < WFRL_RED_N_ACTIONS) {
        r.type = (uint8_t)(RA_DNS + (a - WFRL_RED_ACT_DNS) / NH);
        r.target = (int8_t)((a - WFRL_RED_ACT_DNS) % NH);
    }
    return r;
}

static inline int wfrl_cage2_red_index(cage2_red_action r)
{
    if (r.type == RA_SLEEP) return 0;
    if (r.type == RA_DRS) return WFRL_RED_ACT_DRS + r.target;
    return WFRL_RED_ACT_DNS + (r.type - RA_DNS) * NH + r.target;
}

/* The red actions allowed now (mask[WFRL_RED_N_ACTIONS], 1 allowed), as CybORG's red action
 * space offers them: Sleep always; a subnet's discovery once red knows the subnet; a host's
 * service discovery and exploit once it knows the host's IP; its escalation and impact once it
 * knows its hostname. */
static inline void wfrl_cage2_red_mask(const wfrl_cage2 *e, uint8_t *mask)
{
    mask[0] = 1;
    for (int s = 0; s < N_SUB; ++s) mask[WFRL_RED_ACT_DRS + s] = (uint8_t)(e->known_subnets >> s & 1);
    for (int h = 0; h < NH; ++h) {
        const uint8_t ip = (uint8_t)(e->known_ip >> h & 1), host = (uint8_t)(e->known_host >> h & 1);
        mask[WFRL_RED_ACT_DNS + h] = ip;
        mask[WFRL_RED_ACT_DNS + NH + h] = ip;
        mask[WFRL_RED_ACT_DNS + 2 * NH + h] = host;
        mask[WFRL_RED_ACT_DNS + 3 * NH + h] = host;
    }
}

/* Whether the mask allows action a (one bit of what red knows, not the whole mask). */
static inline int wfrl_cage2_red_allowed(const wfrl_cage2 *e, int a)
{
    if (a < 0 || a >= WFRL_RED_N_ACTIONS) return 0;
    if (a < WFRL_RED_ACT_DRS) return 1;
    if (a < WFRL_RED_ACT_DNS) return e->known_subnets >> (a - WFRL_RED_ACT_DRS) & 1;
    const int k = (a - WFRL_RED_ACT_DNS) / NH, h = (a - WFRL_RED_ACT_DNS) % NH;
    return (k < 2 ? e->known_ip : e->known_host) >> h & 1;   /* scan, exploit: IP; else hostname */
}

/* What red knows (obs[WFRL_RED_OBS_DIM]; layout at WFRL_RED_OBS_DIM). */
static inline void wfrl_cage2_red_obs(const wfrl_cage2 *e, float *obs)
{
    for (int h = 0; h < NH; ++h) {
        float *o = obs + WFRL_RED_HOST_FEATURES * h;
        o[0] = (float)(e->known_ip >> h & 1);
        o[1] = (float)(e->known_host >> h & 1);
        o[2] = (float)(e->ports_stored[h] != 0);
        o[3] = (float)(e->r_seen[h] == 1);
        o[4] = (float)(e->r_seen[h] == 2);
    }
    float *o = obs + WFRL_RED_HOST_FEATURES * NH;
    for (int s = 0; s < N_SUB; ++s) o[s] = (float)(e->known_subnets >> s & 1);
    o[3] = (float)(e->r_last_ok == 1);
    o[4] = (float)(e->r_last_ok == 0);
    o[5] = (float)e->t / (float)WFRL_EP_LEN;
}

/* Give red's action for the next step (an external red). An action the mask does not allow is
 * played as CybORG plays an invalid one: nothing happens and it fails. Returns 0 for an index
 * outside 0..WFRL_RED_N_ACTIONS-1 (nothing given). */
static inline int wfrl_cage2_set_red_action(wfrl_cage2 *e, int a)
{
    if (a < 0 || a >= WFRL_RED_N_ACTIONS) return 0;
    e->ext_invalid = (uint8_t)!wfrl_cage2_red_allowed(e, a);
    e->ext_ra = wfrl_cage2_red_action_of(e->ext_invalid ? 0 : a);
    e->ext_own = e->ext_vact = 0;
    return 1;
}

/* The scripted red of e's kind decides red's action for the next step, as the built-in red does
 * inside the step (its compiled decision, on its own memory and e's RNG), and gives it: a
 * scripted red played through the external interface. Returns the action's index. */
static inline int wfrl_cage2_scripted_red(wfrl_cage2 *e)
{
    int own, vact;
    e->ext_ra = cage2_red_decide(e, &own, &vact);
    e->ext_own = (uint8_t)own;
    e->ext_vact = (uint8_t)vact;
    e->ext_invalid = 0;
    return wfrl_cage2_red_index(e->ext_ra);
}

/* ---- blue actions --------------------------------------------------------------------- */
static inline int cage2_decoy_placeable(const wfrl_cage2 *e, int h, int k)
{
    const int os = cage2_decoy_os[k], lin = cage2_hosts[h].linux_os;
    const int os_ok = (os == 0) | ((os == 1) & lin) | ((os == 2) & !lin);
    return os_ok & !((cage2_ports_now(e, h) >> cage2_decoy_needs_free[k]) & 1);
}

static inline void cage2_restore(wfrl_cage2 *e, int h)
{
    e->n_user_rm[h] = e->n_user_keep[h] = e->n_priv[h] = 0; /* the User0 foothold is implicit */
    e->malware[h] = 0;
    e->decoys[h] = 0;
    e->n_vsftpd[h] = 0;
    e->versions_lost[h] = e->leaderboard;
    if (h == H_OPS0) {
        e->ot_running = 1;
        e->ot_pid_valid = 0; /* bug B1: Impact never stops the service again this episode */
    }
}

/* ---- episode ------------------------------------------------------------------------------- */
static inline void wfrl_cage2_reset(wfrl_cage2 *e, uint64_t seed, int red_kind)
{
    memset(e, 0, sizeof(*e));
    wfrl_rng_seed(&e->rng, seed);
    e->red_code = (uint8_t)red_kind;
    e->red_external = (red_kind & WFRL_RED_EXTERNAL) != 0;
    e->leaderboard = (red_kind & WFRL_RED_LEADERBOARD) != 0;
    e->red_variant = (uint8_t)((red_kind >> WFRL_RED_VARIANT_SHIFT) & 7);
    red_kind &= 0x0F;
    if (red_kind >= RED_POOL_FAMILY) {
        const int code = wfrl_pool_red_code(red_kind, seed);
        e->red_variant = (uint8_t)(code >> WFRL_RED_VARIANT_SHIFT);
        red_kind = code & 0x0F;
    }
    e->red_kind = (uint8_t)(red_kind == RED_MIXED ? wfrl_mixed_red_kind(seed) : red_kind);
    if (e->red_variant == RV_DELAYED)
        e->v_delay = (uint8_t)(RV_DELAY_MIN + wfrl_rng_below(&e->rng, RV_DELAY_SPAN));
    e->ot_running = 1;
    e->ot_pid_valid = 1;
    e->known_ip = 1u << H_U0;
    e->known_host = 1u << H_U0;
    e->known_subnets = 1u << SUB_USER;
    e->prev_success = 2;
    e->r_seen[H_U0] = 2;   /* red's foothold: SYSTEM on User0 */
    e->r_last_ok = 2;
}

static inline void wfrl_cage2_red_access(const wfrl_cage2 *e, uint8_t *red_access)
{
    for (int h = 0; h < NH; ++h)
        red_access[h] = (uint8_t)(cage2_has_priv(e, h) + (cage2_n_sessions(e, h) > 0));
}

/* A host's four observation bits by activity (ACT_*) and compromise (COMP_*): the activity
 * bits are "any activity" and "an exploit", the compromise bits 01 unknown, 10 user, 11 root. */
static const float cage2_obs_bits[4][4][4] = {
    {{0, 0, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {0, 0, 1, 1}},
    {{1, 0, 0, 0}, {1, 0, 1, 0}, {1, 0, 0, 1}, {1, 0, 1, 1}},
    {{1, 1, 0, 0}, {1, 1, 1, 0}, {1, 1, 0, 1}, {1, 1, 1, 1}},
    {{0}},   /* no such activity: a row, so that a corrupt state cannot read past the table */
};

static inline void wfrl_cage2_obs(const wfrl_cage2 *e, float *obs)
{
    /* a table row per host: no branch on what the host shows (it changes from step to step) */
    for (int h = 0; h < NH; ++h)
        memcpy(obs + 4 * h, cage2_obs_bits[e->act[h] & 3][e->comp[h] & 3], 4 * sizeof(float));
}

static inline int cage2_classify(const cage2_entries *x)
{
    const int np = cage2_popcount16(x->ports) + x->n_ephemeral;
    if (x->n >= 3 && np >= 3) return ACT_SCAN;
    if (x->has4444) return ACT_EXPLOIT;
    if (x->n >= 3 && np == 1) return ACT_EXPLOIT;
    if (x->first_decoy) return ACT_NONE;
    return ACT_SCAN;
}

/* One blue step. Returns the reward in tenths (exact), writes obs[52] and red_access[13] (either
 * may be NULL). Order inside a step: blue, green (sleeps), red, reward, monitor, table. */
static inline int wfrl_cage2_step(wfrl_cage2 *e, int action, float *obs, uint8_t *red_access)
{
    /* clear last step's entries: only the hosts that had some */
    for (uint32_t m = e->touched; m; m &= m - 1)
        memset(&e->entries[cage2_lowest_bit(m)], 0, sizeof(cage2_entries));
    e->touched = 0;
    int analysed = -1, cost10 = 0;   /* analysed: a host Analyse finds malware on */

    /* 1. blue */
    if (action >= WFRL_ACT_ANALYSE && action < WFRL_ACT_ANALYSE + NH) {
        /* Blue acts first: Analyse reads the files red left up to the last step, not this
         * step's (whose table update it still follows). */
        if (e->malware[action - WFRL_ACT_ANALYSE]) analysed = action - WFRL_ACT_ANALYSE;
    } else if (action >= WFRL_ACT_REMOVE && action < WFRL_ACT_REMOVE + NH) {
        e->n_user_rm[action - WFRL_ACT_REMOVE] = 0;
    } else if (action >= WFRL_ACT_DECOY && action < WFRL_ACT_RESTORE) {
        const int k = (action - WFRL_ACT_DECOY) / NH, h = (action - WFRL_ACT_DECOY) % NH;
        if (cage2_decoy_placeable(e, h, k)) {
            if (k == D_VSFTPD) {
                if (e->n_vsftpd[h] < 255) ++e->n_vsftpd[h];
            } else {
                e->decoys[h] = (uint8_t)(e->decoys[h] | (1u << k));
            }
            cage2_entries *x = cage2_entries_of(e, h);
            x->n = 1;
            x->first_decoy = 1;
        }
    } else if (action >= WFRL_ACT_RESTORE && action < WFRL_ACT_RESTORE + NH) {
        cage2_restore(e, action - WFRL_ACT_RESTORE);
        cost10 = 10;
    }

    /* 3. red: its own decision, or (WFRL_RED_EXTERNAL) the action given from outside, once */
    cage2_red_action ra;
    int own, vact;
    if (e->red_external) {
        ra = e->ext_ra;
        own = e->ext_own;
        vact = e->ext_vact;
        e->ext_ra.type = RA_SLEEP;
        e->ext_ra.target = 0;
        e->ext_own = e->ext_vact = 0;
    } else {
        ra = cage2_red_decide(e, &own, &vact);
    }
    int ok = 1, data = 0;
    switch (ra.type) {
    case RA_DRS: ok = cage2_red_drs(e, ra.target); break;
    case RA_DNS: data = cage2_red_dns(e, ra.target); ok = 1; break;
    case RA_EXPLOIT:
        ok = cage2_red_exploit(e, ra.target);
        /* what red saw: a new session whose level CybORG's observation does not show (a user
         * one as far as red knows; it keeps a root one it had) */
        e->r_seen[ra.target] = (uint8_t)(e->r_seen[ra.target] + (ok & (e->r_seen[ra.target] == 0)));
        break;
    case RA_ESCALATE:
        ok = cage2_red_escalate(e, ra.target);
        e->r_seen[ra.target] = (uint8_t)(2 * ok);   /* a failure: no session there */
        break;
    case RA_IMPACT: ok = cage2_red_impact(e, ra.target); break;
    default: break;
    }
    /* red's view of its outcome: a sleep has none; a masked action, played as nothing, failed */
    e->r_last_ok = (uint8_t)(e->ext_invalid ? 0 : ra.type == RA_SLEEP ? 2 : ok);
    e->ext_invalid = 0;
    if (own) {
        e->prev_success = (uint8_t)ok;
        e->prev_has_data = (uint8_t)data;
        if (e->red_variant == RV_PERSISTENT && ok && ra.type == RA_ESCALATE) {
            /* B_line's escalation stages 3, 6, 10, 13: its footholds 0..3 */
            const int k = e->bl_stage == 3 ? 0 : e->bl_stage == 6 ? 1 : e->bl_stage == 10 ? 2 : 3;
            e->v_taken = (uint8_t)(e->v_taken | (1u << k));
        }
    } else if (vact) {
        e->v_ok = (uint8_t)ok;
    }
    e->last_red_type = ra.type;
    e->last_red_target = ra.target;

    /* 4. reward from the true state */
    int r10 = e->ot_running ? 0 : -100;
    for (int h = 0; h < NH; ++h)
        r10 -= cage2_has_priv(e, h) * cage2_hosts[h].conf10;   /* no branch on red's hosts */
    r10 -= cost10;

    /* 5-6. monitor and blue table */
    if (action >= 132 && action < 132 + NH) {
        e->comp[action - 132] = COMP_NO;
    } else if (action >= 15 && action < 15 + NH) {
        if (e->comp[action - 15] != COMP_NO) e->comp[action - 15] = COMP_UNKNOWN;
    }
    memset(e->act, ACT_NONE, sizeof(e->act));
    for (uint32_t m = e->touched; m; m &= m - 1) {   /* the hosts with entries this step */
        const int h = cage2_lowest_bit(m);
        e->act[h] = (uint8_t)cage2_classify(&e->entries[h]);
        if (e->act[h] == ACT_EXPLOIT) e->comp[h] = COMP_USER;
    }
    if (analysed >= 0) e->comp[analysed] = COMP_PRIV;

    ++e->t;
    if (obs) wfrl_cage2_obs(e, obs);
    if (red_access) wfrl_cage2_red_access(e, red_access);
    return r10;
}

/* Step n envs with actions[i]; writes obs [n, 52], reward [n], done [n] (1 on an episode's
 * EP_LEN-th step) and red_access [n, 13]. Envs are not reset here: the caller resets a done env
 * (wfrl_cage2_reset) with the seed of its next episode, so episode seeds stay explicit. */
static inline void wfrl_cage2_step_batch(wfrl_cage2 *envs, int64_t n, const int32_t *actions,
                                         float *obs, float *reward, uint8_t *done,
                                         uint8_t *red_access)
{
    for (int64_t i = 0; i < n; ++i) {
        wfrl_cage2 *e = &envs[i];
        const int r10 = wfrl_cage2_step(e, actions[i], obs + i * WFRL_OBS_DIM,
                                        red_access + i * NH);
        reward[i] = (float)r10 / 10.0f;
        done[i] = e->t >= WFRL_EP_LEN;
    }
}

/* Step one env for n_steps with uniform random blue actions drawn from its own stream `seed`,
 * starting a new episode every EP_LEN steps. Returns the summed reward in tenths. The C-side loop
 * measures the simulator's own per-step cost (bench/) with no Python call in between. */
static inline int64_t wfrl_cage2_random_rollout(wfrl_cage2 *e, int64_t n_steps, uint64_t seed)
{
    wfrl_rng policy;
    wfrl_rng_seed(&policy, seed);
    float obs[WFRL_OBS_DIM];
    uint8_t access[NH];
    int64_t total = 0;
    const int red = e->red_code | (e->red_external ? WFRL_RED_EXTERNAL : 0);
    for (int64_t i = 0; i < n_steps; ++i) {
        if (e->t >= WFRL_EP_LEN) wfrl_cage2_reset(e, wfrl_rng_next(&policy), red);
        total += wfrl_cage2_step(e, (int)wfrl_rng_below(&policy, WFRL_N_ACTIONS), obs, access);
    }
    return total;
}

#endif
