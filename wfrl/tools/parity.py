"""Parity between the compiled simulator and the real CybORG under the same blue policies.

Built-in blue policies (pure functions of the observation, the step and the policy's own RNG, so
they behave identically on both backends):

    sleep          always Sleep.
    random         uniform over the 145 actions.
    react-restore  Restore the lowest-index host whose observation shows it compromised
                   (User or Privileged); otherwise Sleep.
    react-remove   Remove the lowest-index host whose activity this step is Exploit; otherwise Sleep.
    decoy          every step a decoy action, 28 + (37·t mod 104): all 8 kinds on all 13 hosts,
                   placeable or not, Vsftpd stacks included.
    decoy-restore  decoy on even steps, react-restore on odd ones (Sleep when nothing shows
                   compromised): decoys that Restores take away again, what red's port memory
                   and a restored host's processes are tested with.

A learned blue policy — a checkpoint file or pretrained:NAME with a workflow of its own — is
played greedily, a deterministic function of the episode's observations, on both backends alike.

Equivalence of mean returns is a two-one-sided-tests (TOST) procedure at α = 0.05 with margin
max(5, 3 % of |CybORG mean|, 0.15 × CybORG standard deviation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from wfrl.config.tools import BLUE_POLICIES, check_blue_policy
from wfrl.envs.actions import N_ACTIONS, N_HOSTS, REMOVE_FIRST, RESTORE_FIRST, SLEEP
from wfrl.envs.base import EP_LEN, OBS_DIM
from wfrl.envs.reds import ATTACKERS, FAMILY
from wfrl.errors import UserError
from wfrl.stats import mean_se

Z_95 = 1.6448536269514722  # one-sided 5 % normal quantile


def blue_action(policy: str, obs: np.ndarray, t: int, rng: np.random.Generator) -> int:
    if policy == "sleep":
        return 0
    if policy == "random":
        return int(rng.integers(N_ACTIONS))
    if policy == "react-restore":
        comp = obs[3::4]  # second compromised bit: User or Privileged
        hosts = np.flatnonzero(comp)
        return RESTORE_FIRST + int(hosts[0]) if len(hosts) else SLEEP
    if policy == "react-remove":
        exploit = obs[1::4]
        hosts = np.flatnonzero(exploit)
        return REMOVE_FIRST + int(hosts[0]) if len(hosts) else SLEEP
    if policy == "decoy":
        return 28 + (37 * t) % 104
    if policy == "decoy-restore":
        return blue_action("decoy" if t % 2 == 0 else "react-restore", obs, t, rng)
    raise UserError(f"unknown blue policy {policy!r} (choose from {', '.join(BLUE_POLICIES)})")


def blue_actions(policy: str, obs: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """blue_action for a batch of observations [n, 52] (same rules, int32[n])."""
    n = len(obs)
    if policy == "sleep":
        return np.zeros(n, np.int32)
    if policy == "random":
        return rng.integers(N_ACTIONS, size=n).astype(np.int32)
    if policy in ("react-restore", "react-remove"):
        bits = obs[:, 3::4] if policy == "react-restore" else obs[:, 1::4]
        any_ = bits.any(axis=1)
        base = RESTORE_FIRST if policy == "react-restore" else REMOVE_FIRST
        return np.where(any_, base + bits.argmax(axis=1), 0).astype(np.int32)
    if policy == "decoy":
        return np.full(n, 28 + (37 * t) % 104, np.int32)
    if policy == "decoy-restore":
        return blue_actions("decoy" if t % 2 == 0 else "react-restore", obs, t, rng)
    raise UserError(f"unknown blue policy {policy!r} (choose from {', '.join(BLUE_POLICIES)})")


def is_learned(policy: str) -> bool:
    """Whether a blue policy is a checkpoint rather than a built-in one."""
    return policy not in BLUE_POLICIES


class LearnedBlue:
    """A checkpoint played greedily on n episodes at once: one actor (its own compliance memory)
    per episode, all on the same weights. leaderboard: a belief input's particles play by the
    leaderboard's CybORG code. A belief policy plays at most BELIEF_EPISODES episodes at once
    (each actor holds its own particle filter)."""

    BELIEF_EPISODES = 256

    def __init__(self, spec: str, n: int, leaderboard: bool = False):
        from wfrl._core import Actor
        from wfrl.evaluation.agents import CheckpointAgent
        first = CheckpointAgent(spec, leaderboard=leaderboard).actor
        if first.policy.belief and n > self.BELIEF_EPISODES:
            raise UserError(f"{spec} has the belief input: parity plays it on at most "
                            f"{self.BELIEF_EPISODES} simulator episodes (give --sim-episodes)")
        self.actors = [first] + [Actor(first.policy, leaderboard) for _ in range(n - 1)]
        self._access = np.zeros(N_HOSTS, np.uint8)   # greedy actions do not depend on it
        self.begin()

    def begin(self) -> None:
        for a in self.actors:
            a.begin(0)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions (int32 [n]) for observations [n, 52]."""
        from wfrl._core import actors_act
        out = np.empty(len(self.actors), np.int32)
        actors_act(self.actors, np.ascontiguousarray(obs, np.float32), self._access, out)
        return out


@dataclass
class EpisodeRecords:
    """Per-episode statistics of a batch of episodes on one backend."""

    returns: np.ndarray          # float64 [n]
    first_impact: np.ndarray     # int [n], step index of the first −10 (EP_LEN if none)
    access_freq: np.ndarray      # float64 [n, 13, 3]: fraction of steps with red_access == level
    obs_freq: np.ndarray         # float64 [n, 52]: fraction of steps each observation bit is 1
    rewards: np.ndarray          # float32 [n, 100]
    obs: np.ndarray              # uint8 [n, 100, 52]
    access: np.ndarray           # uint8 [n, 100, 13]: red_access per step

    @property
    def n(self):
        return len(self.returns)


def run_episodes(backend, policy: str, n: int, seed: int, start: int = 0,
                 leaderboard: bool = False) -> EpisodeRecords:
    """n episodes of `policy` on `backend`; episode i (from `start`) uses seeds from (seed, i).
    leaderboard: the backend plays by the leaderboard's code (a learned blue's belief follows)."""
    check_blue_policy(policy)
    learned = LearnedBlue(policy, 1, leaderboard) if is_learned(policy) else None
    rewards = np.zeros((n, EP_LEN), np.float32)
    obs_all = np.zeros((n, EP_LEN, OBS_DIM), np.uint8)
    access = np.zeros((n, EP_LEN, N_HOSTS), np.uint8)
    for i in range(n):
        ss = np.random.SeedSequence([seed, start + i]).generate_state(2, dtype=np.uint64)
        backend.seed(int(ss[0]))
        rng = np.random.default_rng(int(ss[1]))
        obs, _ = backend.reset()
        if learned is not None:
            learned.begin()
        for t in range(EP_LEN):
            a = (int(learned.act(obs[None])[0]) if learned is not None
                 else blue_action(policy, obs, t, rng))
            obs, r, ra = backend.step(a)
            rewards[i, t] = r
            obs_all[i, t] = obs
            access[i, t] = ra
    return _records(rewards, obs_all, access)


def run_sim_episodes(red_agent: str, policy: str, n: int, seed: int,
                     leaderboard: bool = False) -> EpisodeRecords:
    """n simulator episodes of `policy`, all stepped together through the batched C call
    (leaderboard: by the leaderboard's CybORG code, the backend sim:leaderboard)."""
    from wfrl._core import Cage2Sim, learned_red_policy
    check_blue_policy(policy)
    sim = Cage2Sim(n, red_agent, leaderboard)
    red = learned_red_policy(red_agent, leaderboard)   # a learned red chooses in each env
    learned = LearnedBlue(policy, n, leaderboard) if is_learned(policy) else None
    seeds = np.random.SeedSequence([seed, 1]).generate_state(n, dtype=np.uint64)
    rng = np.random.default_rng([seed, 2])
    obs = np.zeros((n, OBS_DIM), np.float32)
    ra = np.zeros((n, N_HOSTS), np.uint8)
    rew = np.zeros(n, np.float32)
    done = np.zeros(n, np.uint8)
    sim.reset_batch(seeds, obs, ra)
    if red is not None:
        for i in range(n):
            sim.seed_red(i, int(seeds[i]))
    rewards = np.zeros((n, EP_LEN), np.float32)
    obs_all = np.zeros((n, EP_LEN, OBS_DIM), np.uint8)
    access = np.zeros((n, EP_LEN, N_HOSTS), np.uint8)
    for t in range(EP_LEN):
        act = learned.act(obs) if learned is not None else blue_actions(policy, obs, t, rng)
        if red is not None:
            sim.act_red_all(red)
        sim.step_batch(act, obs, rew, done, ra)
        rewards[:, t] = rew
        obs_all[:, t] = obs
        access[:, t] = ra
    return _records(rewards, obs_all, access)


def _records(rewards, obs_all, access) -> EpisodeRecords:
    impacted = rewards <= -10.0  # only a stopped OTService costs 10 or more in one step
    first = np.where(impacted.any(axis=1), impacted.argmax(axis=1), EP_LEN)
    freq = np.stack([(access == lvl).mean(axis=1) for lvl in range(3)], axis=-1)
    # Sum in float64 over the exact tenths, as CybORG's own float sums drift by ~1e-12.
    returns = np.round(rewards.astype(np.float64) * 10).sum(axis=1) / 10
    return EpisodeRecords(returns=returns, first_impact=first, access_freq=freq,
                          obs_freq=obs_all.mean(axis=1), rewards=rewards, obs=obs_all,
                          access=access)


def concat_records(parts) -> EpisodeRecords:
    return EpisodeRecords(*(np.concatenate([getattr(p, f) for p in parts])
                            for f in EpisodeRecords.__dataclass_fields__))


def mean_se_dict(x) -> dict:
    mean, se = mean_se(x)
    return {"mean": mean, "se": se, "n": len(x)}


def equivalence_margin(cyborg_returns) -> float:
    x = np.asarray(cyborg_returns, dtype=np.float64)
    return max(5.0, 0.03 * abs(float(x.mean())), 0.15 * float(x.std(ddof=1)))


def tost(sim_returns, cyborg_returns, alpha: float = 0.05) -> dict:
    """Two one-sided tests (normal approximation, Welch standard error) of |μ_sim − μ_cyborg| < δ."""
    s, c = mean_se_dict(sim_returns), mean_se_dict(cyborg_returns)
    diff = s["mean"] - c["mean"]
    se = math.sqrt(s["se"] ** 2 + c["se"] ** 2)
    margin = equivalence_margin(cyborg_returns)
    z = Z_95 if alpha == 0.05 else _normal_quantile(1 - alpha)
    if se == 0:
        equivalent = abs(diff) < margin
        p = 0.0 if equivalent else 1.0
    else:
        p_low = 1 - _normal_cdf((diff + margin) / se)
        p_high = 1 - _normal_cdf((margin - diff) / se)
        p = max(p_low, p_high)
        equivalent = (diff + margin) / se > z and (margin - diff) / se > z
    return {"sim": s, "cyborg": c, "diff": diff, "diff_se": se, "margin": margin, "p": p,
            "equivalent": bool(equivalent)}


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _normal_quantile(p: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _normal_cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def parity(red_agent: str, policy: str, episodes: int, sim_episodes: int | None = None,
           seed: int = 0) -> dict:
    """Run `policy` on both backends; returns the TOST result (keys sim, cyborg, diff, equivalent…)."""
    from wfrl.envs import make_backend
    check_blue_policy(policy)
    rc = run_episodes(make_backend("cyborg", red_agent), policy, episodes, seed)
    rs = run_sim_episodes(red_agent, policy, sim_episodes or max(episodes, 10000), seed + 1)
    out = tost(rs.returns, rc.returns)
    out.update({"red_agent": red_agent, "blue": policy})
    return out


# --------------------------------------------------------------------------------------------
# The recorded CybORG reference: the parity suite's CybORG episodes, kept as compact per-episode
# statistics so every test run compares the simulator against the full sample without replaying
# it (scripts/record_parity.py makes the file; a live replay of a sample checks it still holds).

REFERENCE_REDS = ATTACKERS   # CAGE2's two attackers (wfrl.envs.reds)
# CybORG episodes per blue policy (≥ 300); the high-variance policies get more for power (a pair
# whose margin is 0.15 sd needs ~800 for the test to have ~99 % power at equal means).
REFERENCE_EPISODES = {"sleep": 300, "react-restore": 400, "random": 800, "react-remove": 800,
                      "decoy": 800}
REFERENCE_SEED = 20261126
# The full trajectories (rewards and observations) are kept for this pair only.
FULL_TRAJECTORY_PAIR = ("B_lineAgent", "sleep")
TIME_WINDOWS = 10  # the observation-bit counts are kept per tenth of the episode
REFERENCE_VERSION = 1


@dataclass(frozen=True)
class Reference:
    """One recorded CybORG reference: the file under tests/data, the CybORG backend that played
    it and its blue policies with their episode counts."""

    name: str
    backend: str
    episodes: dict
    reds: tuple = REFERENCE_REDS

    @property
    def policies(self) -> tuple:
        return tuple(self.episodes)

    @property
    def file(self) -> str:
        return f"{self.name}.npz"

    @property
    def leaderboard(self) -> bool:
        from wfrl.envs.base import is_leaderboard
        return is_leaderboard(self.backend)


# installed: the CybORG wfrl runs on. leaderboard: the same with the code the CAGE2 leaderboard
# was scored on (wfrl.envs.cyborg._LeaderboardCode) — only the policies that restore hosts, as
# nothing else differs between the two codes.
REFERENCES = {
    "installed": Reference("cyborg_parity", "cyborg", REFERENCE_EPISODES),
    "leaderboard": Reference("cyborg_parity_leaderboard", "cyborg:leaderboard",
                             {"react-restore": 400, "decoy-restore": 800}),
    # the variants of B_line and Meander (wfrl.envs.reds) on the installed code, and on the
    # leaderboard's (the policies that restore hosts, as above)
    "family": Reference("cyborg_parity_family", "cyborg", {"sleep": 800, "react-restore": 400},
                        FAMILY),
    "family_leaderboard": Reference("cyborg_parity_family_leaderboard", "cyborg:leaderboard",
                                    {"react-restore": 400, "decoy-restore": 800}, FAMILY),
    # a learned blue (the shipped specialist of each code, greedy) against every red but Sleep
    "learned": Reference("cyborg_parity_learned", "cyborg", {"pretrained:critical_first": 300},
                         REFERENCE_REDS + FAMILY),
    "learned_leaderboard": Reference("cyborg_parity_learned_leaderboard", "cyborg:leaderboard",
                                     {"pretrained:critical_first_leaderboard": 300},
                                     REFERENCE_REDS + FAMILY),
    # shipped learned reds (wfrl attack's best responses, sampling) against a scripted blue and
    # the shipped specialist of each code: the red network choosing from CybORG's red view
    # (wfrl.envs.duel.RedKnowledge) against choosing inside the simulator
    "learned_red": Reference("cyborg_parity_learned_red", "cyborg",
                             {"react-restore": 300, "pretrained:critical_first": 300},
                             ("learned:vs_any_workflow", "learned:vs_critical_first")),
    "learned_red_leaderboard": Reference(
        "cyborg_parity_learned_red_leaderboard", "cyborg:leaderboard",
        {"react-restore": 300, "pretrained:critical_first_leaderboard": 300},
        ("learned:vs_critical_first_leaderboard",)),
}


@dataclass
class EpisodeSummary:
    """What the parity tests compare, per episode, in integers where the data are counts."""

    returns: np.ndarray          # float64 [n]
    first_impact: np.ndarray     # int16 [n]
    access_counts: np.ndarray    # uint8 [n, 13, 3]: steps at each red_access level
    obs_counts: np.ndarray       # uint8 [n, TIME_WINDOWS, 52]: steps each bit is 1, per window
    digest: np.ndarray           # uint64 [n]: hash of the episode's rewards, observations, access

    @property
    def n(self):
        return len(self.returns)

    @property
    def access_freq(self):
        return self.access_counts.astype(np.float64) / EP_LEN

    @property
    def obs_freq(self):
        return self.obs_counts.sum(axis=1, dtype=np.float64) / EP_LEN

    @property
    def obs_freq_windows(self):
        """[n, TIME_WINDOWS, 52] per-window frequency of each observation bit."""
        return self.obs_counts.astype(np.float64) / (EP_LEN // TIME_WINDOWS)


def _tenths(rewards: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(rewards, np.float64) * 10).astype(np.int16)


def episode_digests(rewards, obs, access) -> np.ndarray:
    """One 64-bit BLAKE2b digest per episode of its reward tenths, observations and red access."""
    import hashlib
    r, o, a = _tenths(rewards), np.asarray(obs, np.uint8), np.asarray(access, np.uint8)
    out = np.zeros(len(r), np.uint64)
    for i in range(len(r)):
        h = hashlib.blake2b(digest_size=8)
        for part in (r[i], o[i], a[i]):
            h.update(np.ascontiguousarray(part).tobytes())
        out[i] = int.from_bytes(h.digest(), "little")
    return out


def summarise(rec: EpisodeRecords) -> EpisodeSummary:
    n = rec.n
    counts = np.rint(rec.access_freq * EP_LEN).astype(np.uint8)
    windows = rec.obs.reshape(n, TIME_WINDOWS, EP_LEN // TIME_WINDOWS, OBS_DIM).sum(
        axis=2, dtype=np.int32).astype(np.uint8)
    digest = episode_digests(rec.rewards, rec.obs, rec.access)
    return EpisodeSummary(returns=rec.returns.astype(np.float64),
                          first_impact=rec.first_impact.astype(np.int16),
                          access_counts=counts, obs_counts=windows, digest=digest)


def pair_key(red: str, policy: str) -> str:
    return f"{red}/{policy}"


def save_reference(path, summaries: dict, full: dict, meta: dict) -> None:
    """Write the reference (a compressed .npz) atomically: a crash never leaves half a file."""
    import json
    import os
    import tempfile
    arrays: dict[str, Any] = {"meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)}
    for key, s in summaries.items():
        for field in EpisodeSummary.__dataclass_fields__:
            arrays[f"{key}:{field}"] = getattr(s, field)
    for key, (rewards, obs) in full.items():
        arrays[f"{key}:rewards_tenths"] = _tenths(rewards)
        arrays[f"{key}:obs_bits"] = np.packbits(np.asarray(obs, np.uint8), axis=-1)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:  # a file object: numpy would append ".npz" to a name
            np.savez_compressed(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_reference(path):
    """(meta, {pair key: EpisodeSummary}, {pair key: (reward tenths int16 [n,100], obs uint8
    [n,100,52])}) from a file written by save_reference; a damaged file raises UserError."""
    import json
    import zipfile
    try:
        with np.load(path) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(bytes(data.pop("meta")).decode())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"cannot read the CybORG reference {path}: {exc}") from None
    summaries, full = {}, {}
    keys = {k.rsplit(":", 1)[0] for k in data}
    for key in sorted(keys):
        fields: dict[str, Any] = {f: data.get(f"{key}:{f}") for f in EpisodeSummary.__dataclass_fields__}
        if any(v is None for v in fields.values()):
            raise UserError(f"the CybORG reference {path} lacks fields for {key}")
        summaries[key] = EpisodeSummary(**fields)
        if f"{key}:rewards_tenths" in data:
            full[key] = (data[f"{key}:rewards_tenths"],
                         np.unpackbits(data[f"{key}:obs_bits"], axis=-1, count=OBS_DIM))
    return meta, summaries, full
