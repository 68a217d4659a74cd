"""The defender's memory and action mask in plain Python: the twin of csrc/wfrl_memory.h; and
the truth block of the full-information bound: the twin of csrc/wfrl_truth.h (at the end).

Both are computed only from what the defender has seen and done — the observation of every step
and its own earlier actions — never from the true state, so the same features exist on every
backend and at evaluation time.

Memory, updated before each action (first from the previous own action, then from the
observation just received); per host h, in observation order:

- scanned[h]    a Scan (activity bits 1,0) was seen on h this episode;
- last_scan     one-hot of the host of the most recent Scan (lowest index if several at once);
- comp_seen[h]  an Exploit (activity 1,1) or a User/Privileged flag was seen on h since my last
                Restore of h;
- restored[h]   I restored h this episode (a Restore of Op_Server0 disarms Impact for good);
- decoy_frac[h] decoy kinds I placed on h since its last Restore, over the kinds useful there;
- and t / 100, the share of the episode already played.

Mask: Monitor (in CAGE2 identical to Sleep) and every decoy that cannot be placed on a host or
cannot catch an exploit there are never chosen: a kind whose port a real service holds or that
needs the other operating system, Vsftpd on User3/User4 (their real web server answers first),
a kind already placed since the host's last Restore, and the second of Apache/Vsftpd (both take
port 80). The action space stays CAGE2's 145 actions.
"""
from __future__ import annotations

import numpy as np

from wfrl.envs.actions import DECOY_FIRST, DECOY_KINDS, MONITOR, N_ACTIONS, N_DECOYS, N_HOSTS, RESTORE_FIRST
from wfrl.envs.base import EP_LEN
from wfrl.envs.reds import RED_SPECS
from wfrl.rng import MASK, Xoshiro256, splitmix64

MEM_DIM = 5 * N_HOSTS + 1
MASKED_LOGIT = -1.0e9     # csrc/wfrl_mlp.h WFRL_MASKED_LOGIT: the logit a masked action gets
APACHE, VSFTPD = 0, 7      # indices in DECOY_KINDS

# Decoy kinds that can be placed on each host and catch an exploit there (bit k = DECOY_KINDS[k]).
_LINUX_SERVER = {"Apache", "HarakaSMPT", "Tomcat", "Vsftpd"}
DECOY_USEFUL = tuple(sum(1 << DECOY_KINDS.index(k) for k in kinds) for kinds in (
    _LINUX_SERVER,                              # Defender
    _LINUX_SERVER,                              # Enterprise0
    {"Femitter"}, {"Femitter"},                 # Enterprise1, Enterprise2
    _LINUX_SERVER, _LINUX_SERVER, _LINUX_SERVER,  # Op_Host0-2
    _LINUX_SERVER,                              # Op_Server0
    {"Apache", "Smss", "Svchost", "Tomcat"},    # User0
    {"Apache", "Smss", "Svchost", "Tomcat"},    # User1
    {"Apache", "Femitter", "SSHD", "Tomcat"},   # User2
    {"SSHD"},                                   # User3
    set(),                                      # User4
))
_PORT80 = (1 << APACHE) | (1 << VSFTPD)
_USEFUL_COUNT = np.array([bin(u).count("1") for u in DECOY_USEFUL], dtype=np.float32)


def decoy_action(kind: int, host: int) -> int:
    return DECOY_FIRST + N_HOSTS * kind + host


def open_decoys(useful, placed):
    """Decoy kinds still worth placing (bit sets; works elementwise on integer arrays)."""
    open_ = useful & ~placed
    return np.where((placed & _PORT80) != 0, open_ & ~_PORT80, open_)


class MemoryTracker:
    """One episode's memory, step by step (the plain form of csrc/wfrl_memory.h)."""

    def __init__(self):
        self.scanned = np.zeros(N_HOSTS, np.uint8)
        self.comp_seen = np.zeros(N_HOSTS, np.uint8)
        self.restored = np.zeros(N_HOSTS, np.uint8)
        self.decoys = [0] * N_HOSTS
        self.last_scan = -1
        self.t = 0
        self.prev_action = -1

    def update(self, obs: np.ndarray) -> None:
        a = self.prev_action
        if RESTORE_FIRST <= a < RESTORE_FIRST + N_HOSTS:
            h = a - RESTORE_FIRST
            self.restored[h] = 1
            self.decoys[h] = 0
            self.comp_seen[h] = 0
        elif DECOY_FIRST <= a < DECOY_FIRST + N_DECOYS * N_HOSTS:
            k, h = divmod(a - DECOY_FIRST, N_HOSTS)
            if int(open_decoys(DECOY_USEFUL[h], self.decoys[h])) & (1 << k):
                self.decoys[h] |= 1 << k
        o = np.asarray(obs).reshape(N_HOSTS, 4) != 0
        scan = o[:, 0] & ~o[:, 1]
        self.scanned |= scan
        self.comp_seen |= (o[:, 0] & o[:, 1]) | o[:, 3]
        if scan.any():
            self.last_scan = int(np.argmax(scan))

    def features(self) -> np.ndarray:
        out = np.zeros(MEM_DIM, np.float32)
        H = N_HOSTS
        out[:H] = self.scanned
        if self.last_scan >= 0:
            out[H + self.last_scan] = 1.0
        out[2 * H:3 * H] = self.comp_seen
        out[3 * H:4 * H] = self.restored
        placed = np.array([bin(d).count("1") for d in self.decoys], np.float32)
        out[4 * H:5 * H] = np.divide(placed, _USEFUL_COUNT, out=np.zeros(H, np.float32),
                                     where=_USEFUL_COUNT > 0)
        out[5 * H] = self.t / EP_LEN
        return out

    def mask(self) -> np.ndarray:
        allowed = np.ones(N_ACTIONS, bool)
        allowed[MONITOR] = False
        for h in range(N_HOSTS):
            open_ = int(open_decoys(DECOY_USEFUL[h], self.decoys[h]))
            for k in range(N_DECOYS):
                allowed[decoy_action(k, h)] = bool(open_ >> k & 1)
        return allowed

    def acted(self, action: int) -> None:
        self.prev_action = int(action)
        self.t += 1


def memory_and_masks(obs: np.ndarray, actions: np.ndarray, memory: bool = True,
                     mask: bool = True):
    """Memory features [rows, T, MEM_DIM] (or None) and allowed-action masks [rows, T, 145]
    (or None) of recorded episodes: obs [rows, T, 52] is the observation each action was chosen
    on, actions [rows, T] the actions. Vectorised over rows; the same numbers as MemoryTracker."""
    rows, T = actions.shape
    H = N_HOSTS
    o = obs.reshape(rows, T, H, 4) != 0
    scan = o[..., 0] & ~o[..., 1]                       # [rows, T, H]
    seen = (o[..., 0] & o[..., 1]) | o[..., 3]
    acts = actions.astype(np.int64)
    useful = np.array(DECOY_USEFUL, np.int64)
    feats = np.zeros((rows, T, MEM_DIM), np.float32) if memory else None
    allowed = np.ones((rows, T, N_ACTIONS), bool) if mask else None
    scanned = np.zeros((rows, H), bool)
    comp_seen = np.zeros((rows, H), bool)
    restored = np.zeros((rows, H), bool)
    decoys = np.zeros((rows, H), np.int64)
    last_scan = np.full(rows, -1, np.int64)
    r = np.arange(rows)
    decoy_cols = DECOY_FIRST + H * np.arange(N_DECOYS)[None, :] + np.arange(H)[:, None]  # [H, K]
    for t in range(T):
        if t > 0:
            a = acts[:, t - 1]
            rest = (a >= RESTORE_FIRST) & (a < RESTORE_FIRST + H)
            rh = np.where(rest, a - RESTORE_FIRST, 0)
            restored[r[rest], rh[rest]] = True
            decoys[r[rest], rh[rest]] = 0
            comp_seen[r[rest], rh[rest]] = False
            dec = (a >= DECOY_FIRST) & (a < DECOY_FIRST + N_DECOYS * H)
            k, h = np.divmod(np.where(dec, a - DECOY_FIRST, 0), H)
            ok = dec & ((open_decoys(useful[h], decoys[r, h]) >> k) & 1).astype(bool)
            decoys[r[ok], h[ok]] |= 1 << k[ok]
        scanned |= scan[:, t]
        comp_seen |= seen[:, t]
        has = scan[:, t].any(axis=1)
        last_scan = np.where(has, np.argmax(scan[:, t], axis=1), last_scan)
        if feats is not None:
            f = feats[:, t]
            f[:, :H] = scanned
            f[r[last_scan >= 0], H + last_scan[last_scan >= 0]] = 1.0
            f[:, 2 * H:3 * H] = comp_seen
            f[:, 3 * H:4 * H] = restored
            placed = np.zeros((rows, H), np.float32)
            for kk in range(N_DECOYS):
                placed += (decoys >> kk) & 1
            f[:, 4 * H:5 * H] = np.divide(placed, _USEFUL_COUNT, out=np.zeros_like(placed),
                                          where=_USEFUL_COUNT > 0)
            f[:, 5 * H] = t / EP_LEN
        if allowed is not None:
            m = allowed[:, t]
            m[:, MONITOR] = False
            open_ = open_decoys(useful[None, :], decoys)          # [rows, H]
            bits = ((open_[:, :, None] >> np.arange(N_DECOYS)) & 1).astype(bool)  # [rows, H, K]
            m[:, decoy_cols.reshape(-1)] = bits.reshape(rows, -1)
    return feats, allowed


# ---- The truth block (csrc/wfrl_truth.h): the true state as policy input ---------------------
# Not something a defender can see: only for the full-information bound (docs/limit.md). For host
# h in observation order, floats 3h, 3h + 1, 3h + 2 are the one-hot of red's access level there
# (0 none, 1 user, 2 privileged) at the step the action is chosen on; a level outside 0..2 gives
# three zeros. Red's access is the one part of the true state both backends expose alike
# (info["red_access"]) and the trajectory buffer records at every step.
TRUTH_LEVELS = 3
TRUTH_DIM = TRUTH_LEVELS * N_HOSTS


def truth_features(red_access: np.ndarray) -> np.ndarray:
    """The truth block of red access levels uint8 [..., 13] → float32 [..., TRUTH_DIM]."""
    ra = np.asarray(red_access)
    if ra.shape[-1] != N_HOSTS:
        raise ValueError(f"red_access must end in {N_HOSTS} hosts, got shape {ra.shape}")
    onehot = ra[..., None] == np.arange(TRUTH_LEVELS)             # [..., 13, 3]
    return onehot.astype(np.float32).reshape(ra.shape[:-1] + (TRUTH_DIM,))


# -- the belief block (csrc/wfrl_belief.h) --------------------------------------------------------
BELIEF_KINDS = 3            # B_line, Meander, Sleep
BELIEF_DIM = TRUTH_DIM + BELIEF_KINDS
# the particles' red kinds as the compiled filter takes them (WFRL_PLAN_RED_* bits); "mixture"
# is every kind in equal shares
PARTICLE_RED_BITS = {spec.name: spec.belief_bit for spec in RED_SPECS if spec.belief_bit}
MIXTURE_RED_BITS = 7


def belief_features(red_access: np.ndarray, red_kinds: np.ndarray) -> np.ndarray:
    """The belief block of N particles (plain form of csrc/wfrl_belief.h): red access uint8
    [N, 13] and red kinds [N] (0 B_line, 1 Meander, 2 Sleep) → float32 [BELIEF_DIM], the truth
    block averaged over the particles, then the share of each red kind."""
    ra = np.asarray(red_access)
    kinds = np.asarray(red_kinds)
    n = len(ra)
    acc = np.zeros(BELIEF_DIM, np.float64)
    if n:
        acc[:TRUTH_DIM] = truth_features(ra).astype(np.float64).sum(axis=0)
        acc[TRUTH_DIM:] = [(kinds == k).sum() for k in range(BELIEF_KINDS)]
    return (acc * (1.0 / n if n else 0.0)).astype(np.float32)


# The stream of (an episode's action seed, key 0) the rollout loop's filter is seeded from
# (wfrl_belief_seed); the planner's filter and search use streams 1 and 2 of its own seed.
ROLLOUT_BELIEF_STREAM = 3


def stream_seed(seed: int, key: int, stream: int) -> int:
    """Twin of wfrl_stream_seed (csrc/wfrl_belief.h)."""
    x = (seed ^ ((key * 0x9E3779B97F4A7C15) & MASK) ^ ((stream * 0xD1B54A32D192ED03) & MASK)) & MASK
    return splitmix64(x)[1]


def comp_of_obs(obs) -> np.ndarray:
    """Blue's table per host from an observation (twin of wfrl_comp_of_obs): 0 no, 1 unknown,
    2 user, 3 privileged."""
    o = np.asarray(obs).reshape(13, 4) != 0
    return np.where(o[:, 2], np.where(o[:, 3], 3, 1), np.where(o[:, 3], 2, 0)).astype(np.uint8)


class ParticleFilterReference:
    """Plain-Python twin of the compiled particle filter (advance, reject, resample; csrc/
    wfrl_belief.h): particles are envs of a Cage2Sim stepped one by one from Python, survivors and
    resampling computed here, RNGs drawn from the Python xoshiro. reset(..., key, stream) seeds
    the filter stream with stream_seed(seed, key, stream): the planner's filter is stream 1 of
    (planner seed, episode key), the rollout loop's ROLLOUT_BELIEF_STREAM of (the episode's
    action seed, 0)."""

    def __init__(self, particles: int, seed: int):
        self.n = particles
        self.seed = seed

    def reset(self, red_bits: int, leaderboard: bool = False, key: int = 0, stream: int = 1):
        from wfrl._core import Cage2Sim, cage2_state, seed_cage2_rng, set_cage2_state
        self.filter = Xoshiro256(stream_seed(self.seed, key, stream))
        kinds = [name for name, bit in PARTICLE_RED_BITS.items() if red_bits & bit]
        starts = []
        for name in kinds:
            one = Cage2Sim(1, name, leaderboard)
            one.reset(0, 0)
            starts.append(cage2_state(one, 0))
        self.sim = Cage2Sim(self.n, "B_lineAgent", leaderboard)
        for i in range(self.n):
            set_cage2_state(self.sim, i, starts[i % len(starts)])
            seed_cage2_rng(self.sim, i, self.filter.next())
        self.fallbacks = 0

    def observe(self, action: int, obs) -> int:
        from wfrl._core import cage2_state, seed_cage2_rng, set_cage2_comp, set_cage2_state
        obs = np.asarray(obs, np.float32)
        mism = [int(np.count_nonzero(self.sim.step(i, action)[0] != obs)) for i in range(self.n)]
        surv = [i for i, m in enumerate(mism) if m == 0]
        exact = len(surv)
        if not surv:
            best = min(mism)
            surv = [i for i, m in enumerate(mism) if m == best]
            self.fallbacks += 1
        u = self.filter.uniform()
        S = len(surv)
        picked = [cage2_state(self.sim, surv[min(int((k + u) * S / self.n), S - 1)])
                  for k in range(self.n)]
        comp = comp_of_obs(obs)
        for k, st in enumerate(picked):
            set_cage2_state(self.sim, k, st)
            if not exact:
                set_cage2_comp(self.sim, k, comp)
            seed_cage2_rng(self.sim, k, self.filter.next())
        return exact

    def belief(self) -> np.ndarray:
        """The belief block of the particles now (wfrl.features.belief_features)."""
        from wfrl._core import cage2_red_access, cage2_red_kind
        return belief_features(np.stack([cage2_red_access(self.sim, i) for i in range(self.n)]),
                               np.array([cage2_red_kind(self.sim, i) for i in range(self.n)]))

    def states(self) -> np.ndarray:
        from wfrl._core import cage2_state
        return np.stack([np.frombuffer(cage2_state(self.sim, i), np.uint8)
                         for i in range(self.n)])
