"""CAGE2 as a two-player game: blue (the defender) and red (the attacker) are both agents.

`make_duel(backend="sim", seed=...)` is a PettingZoo Parallel env with agents "blue" and "red":

- blue: CAGE2's 52-float observation and 145 actions, rewarded with CAGE2's blue reward;
- red: CAGE2's red actions for Scenario2 (RED_ACTION_NAMES, 56: Sleep; DiscoverRemoteSystems per
  subnet; DiscoverNetworkServices, ExploitRemoteService, PrivilegeEscalate and Impact per host),
  masked to what red knows as CybORG's red action space is (infos["red"]["action_mask"]: a
  subnet once red knows it, a host's scan and exploit once it knows the IP, its escalation and
  impact once it knows the hostname); its observation is what red knows (RED_OBS_DIM floats:
  per host IP known, hostname known, services scanned, the access red last saw (user, root);
  each subnet known; its last action's success and failure; the step); its reward is the
  negative of blue's (zero-sum: blue's return is the one score).

An action the mask does not allow is played as CybORG plays an invalid one: nothing happens, and
red sees it fail. Episodes are 100 steps (max_steps: fewer), truncated, never terminated.

Either side can be a fixed policy through the single-agent views: `RedView` (gymnasium: red
against a fixed blue, for any single-agent learner) and `BlueView` (blue against a fixed red:
a scripted red of wfrl.envs.reds driven through the external interface, or a red policy).

The simulator's external red (csrc/wfrl_cage2.h, WFRL_RED_EXTERNAL) is the engine: the scripted
reds keep their compiled code, and a scripted red driven through this interface
(`Cage2Sim.scripted_red`) plays the built-in episodes bit for bit (tests/test_duel.py).
"""
from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wfrl.config.names import DUEL_BACKENDS
from wfrl.envs.actions import HOSTS, N_ACTIONS
from wfrl.envs.base import EP_LEN, OBS_DIM, RED_SUBNETS, backend_engine, is_leaderboard
from wfrl.envs.gym_env import action_index
from wfrl.errors import UserError

BLUE, RED = "blue", "red"
AGENTS = (BLUE, RED)
RED_N_ACTIONS = 1 + len(RED_SUBNETS) + 4 * len(HOSTS)
RED_HOST_FEATURES = ("ip_known", "hostname_known", "scanned", "user_seen", "root_seen")
RED_OBS_DIM = len(RED_HOST_FEATURES) * len(HOSTS) + len(RED_SUBNETS) + 3
# Red's actions by index (csrc/wfrl_cage2.h WFRL_RED_N_ACTIONS: the same order)
RED_ACTION_NAMES = (("Sleep",)
                    + tuple(f"DiscoverRemoteSystems {s}" for s in RED_SUBNETS)
                    + tuple(f"{kind} {h}" for kind in ("DiscoverNetworkServices",
                                                       "ExploitRemoteService",
                                                       "PrivilegeEscalate", "Impact")
                            for h in HOSTS))


def red_masks(obs) -> np.ndarray:
    """Red's allowed actions (bool [N, 145]: red's RED_N_ACTIONS first, the rest never, as red's
    network sees its head) from red's observations [N, RED_OBS_DIM]: the rule of csrc/
    wfrl_cage2.h wfrl_cage2_red_mask, read from what the observation says red knows (a subnet,
    a host's IP, its hostname)."""
    obs = np.asarray(obs)
    k, h = len(RED_HOST_FEATURES), len(HOSTS)
    ip = obs[:, 0:k * h:k] != 0
    host = obs[:, 1:k * h:k] != 0
    out = np.zeros((len(obs), N_ACTIONS), bool)
    out[:, 0] = True
    out[:, 1:4] = obs[:, k * h:k * h + 3] != 0
    out[:, 4:4 + h] = ip
    out[:, 4 + h:4 + 2 * h] = ip
    out[:, 4 + 2 * h:4 + 3 * h] = host
    out[:, 4 + 3 * h:4 + 4 * h] = host
    return out


def check_duel_backend(backend: str) -> str:
    """A backend the two-player env plays on (the simulator, either code), else one line."""
    if backend not in DUEL_BACKENDS:
        raise UserError(f"the two-player env plays on {' or '.join(DUEL_BACKENDS)}, not "
                        f"{backend!r}")
    return backend


def red_action_index(action) -> int:
    """A red action as an int in 0..RED_N_ACTIONS-1; anything else is a ValueError in one line."""
    return action_index(action, RED_N_ACTIONS, "red action")


class DuelCore:
    """One simulator env with an external red: the game's state and step, without the
    multi-agent API (DuelEnv, RedView and BlueView are views of it). `script`: the scripted red
    whose compiled decision scripted_red() plays (a red of wfrl.envs.reds; SleepAgent when red
    is only ever given actions)."""

    def __init__(self, backend: str = "sim", seed: int | None = None,
                 script: str = "SleepAgent", max_steps: int = EP_LEN):
        from wfrl._core import RED_N_ACTIONS as C_N
        from wfrl._core import RED_OBS_DIM as C_DIM
        from wfrl.envs.gym_env import check_max_steps
        from wfrl.envs.reds import red_spec
        from wfrl.envs.sim import SimBackend
        assert (C_N, C_DIM) == (RED_N_ACTIONS, RED_OBS_DIM)   # the C layout (tests hold it)
        check_duel_backend(backend)
        self.backend = backend
        self.leaderboard = is_leaderboard(backend)
        self.max_steps = check_max_steps(max_steps)
        # the simulator backend's env and episode seed chain, its red external
        self.env = SimBackend(red_spec(script).name, seed, self.leaderboard, external=True)
        self.sim = self.env.sim
        self.t = 0

    def seed(self, seed: int | None) -> None:
        self.env.seed(seed)

    def reset(self, seed: int | None = None) -> np.ndarray:
        """A new episode (from `seed`, else the next of the chain); returns blue's observation."""
        if seed is not None:
            self.env.seed(seed)
        obs, _ = self.env.reset()
        self.t = 0
        return obs

    def red_obs(self) -> np.ndarray:
        return self.sim.red_obs(0)

    def red_mask(self) -> np.ndarray:
        return self.sim.red_mask(0)

    def scripted_red(self) -> int:
        """The scripted red's action for the next step (given already)."""
        return self.sim.scripted_red(0)

    def step(self, blue_action, red_action=None) -> tuple[np.ndarray, float, np.ndarray, bool]:
        """One step: red plays red_action (None: the one scripted_red() gave, else Sleep).
        Returns (blue's observation, blue's reward, red's access per host, truncated)."""
        if self.t >= self.max_steps:
            raise RuntimeError("step() after the episode was truncated; call reset()")
        b = action_index(blue_action)
        if red_action is not None:
            self.sim.set_red_action(0, red_action_index(red_action))
        obs, reward, access = self.sim.step(0, b)
        self.t += 1
        return obs, reward, access, self.t >= self.max_steps


class DuelEnv:
    """The PettingZoo Parallel API over DuelCore (module docstring). Made by make_duel, which
    gives it PettingZoo's ParallelEnv as its base."""

    metadata = {"name": "wfrl_cage2_duel_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
        self.core = DuelCore(backend, seed, "SleepAgent", max_steps)
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.observation_spaces = {
            BLUE: spaces.Box(0.0, 1.0, (OBS_DIM,), dtype=np.float32),
            RED: spaces.Box(0.0, 1.0, (RED_OBS_DIM,), dtype=np.float32)}
        self.action_spaces = {BLUE: spaces.Discrete(N_ACTIONS),
                              RED: spaces.Discrete(RED_N_ACTIONS)}
        self.render_mode = None

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def _infos(self, access=None) -> dict:
        blue: dict[str, Any] = {} if access is None else {"red_access": access}
        return {BLUE: blue, RED: {"action_mask": self.core.red_mask().astype(np.int8)}}

    def reset(self, seed=None, options=None):
        obs = self.core.reset(seed)
        self.agents = list(AGENTS)
        return {BLUE: obs, RED: self.core.red_obs()}, self._infos()

    def step(self, actions: dict):
        if not self.agents:
            raise RuntimeError("step() with no agents: call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"step() needs an action of every live agent; missing {missing}")
        obs, reward, access, done = self.core.step(actions[BLUE], actions[RED])
        out = {BLUE: obs, RED: self.core.red_obs()}
        rewards = {BLUE: float(reward), RED: -float(reward)}
        terms = {a: False for a in AGENTS}
        truncs = {a: done for a in AGENTS}
        infos = self._infos(access)
        if done:
            self.agents = []
        return out, rewards, terms, truncs, infos

    def render(self):
        return None

    def close(self):
        pass


def fixed_blue(blue):
    """A fixed blue policy: an object with get_action(observation, action_space) and
    end_episode() (a checkpoint: wfrl.load_agent(checkpoint, workflow)), or "sleep"."""
    if hasattr(blue, "get_action") and hasattr(blue, "end_episode"):
        return blue
    if blue == "sleep":
        return _Sleeper()
    raise UserError(f"a fixed blue is 'sleep' or an agent with get_action and end_episode (a "
                    f"checkpoint: wfrl.load_agent(checkpoint)), not {blue!r}")


class _Sleeper:
    def get_action(self, observation, action_space=None) -> int:
        return 0

    def end_episode(self) -> None:
        pass


class RedView(gym.Env):
    """Red against a fixed blue, as a gymnasium env (made by red_env): Box(0, 1, (RED_OBS_DIM,))
    observations, Discrete(RED_N_ACTIONS) actions, red's reward (the negative of blue's), the
    mask in info["action_mask"] and action_masks() (sb3-contrib's MaskablePPO reads it)."""

    metadata = {"render_modes": []}

    def __init__(self, blue, backend: str = "sim", seed: int | None = None,
                 max_steps: int = EP_LEN):
        self.core = DuelCore(backend, seed, "SleepAgent", max_steps)
        self.blue = fixed_blue(blue)
        self.observation_space = spaces.Box(0.0, 1.0, (RED_OBS_DIM,), dtype=np.float32)
        self.action_space = spaces.Discrete(RED_N_ACTIONS)
        self._blue_obs = np.zeros(OBS_DIM, np.float32)

    def action_masks(self) -> np.ndarray:
        return self.core.red_mask()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._blue_obs = self.core.reset(seed)
        self.blue.end_episode()
        return self.core.red_obs(), {"action_mask": self.core.red_mask()}

    def step(self, action):
        b = int(self.blue.get_action(self._blue_obs, N_ACTIONS))
        self._blue_obs, reward, access, done = self.core.step(b, action)
        return (self.core.red_obs(), -float(reward), False, done,
                {"action_mask": self.core.red_mask(), "blue_action": b, "red_access": access})

    def close(self):
        pass


class BlueView(gym.Env):
    """Blue against a fixed red, as a gymnasium env (made by blue_env): a scripted red of
    wfrl.envs.reds driven through the external interface (the same episodes as the built-in
    red), or a red policy with get_action(red_observation, action_mask) and end_episode()."""

    metadata = {"render_modes": []}

    def __init__(self, red, backend: str = "sim", seed: int | None = None,
                 max_steps: int = EP_LEN):
        scripted = isinstance(red, str)
        self.core = DuelCore(backend, seed, red if scripted else "SleepAgent", max_steps)
        self.red = None if scripted else red
        self.observation_space = spaces.Box(0.0, 1.0, (OBS_DIM,), dtype=np.float32)
        self.action_space = spaces.Discrete(N_ACTIONS)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        obs = self.core.reset(seed)
        if self.red is not None:
            self.red.end_episode()
        return obs, {}

    def step(self, action):
        if self.red is None:
            self.core.scripted_red()
            red_action = None
        else:
            red_action = int(self.red.get_action(self.core.red_obs(), self.core.red_mask()))
        obs, reward, access, done = self.core.step(action, red_action)
        return obs, float(reward), False, done, {"red_access": access}

    def close(self):
        pass


def red_env(blue, backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
    """Red against a fixed blue: a gymnasium Env (RedView)."""
    return RedView(blue, backend, seed, max_steps)


def blue_env(red, backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
    """Blue against a fixed red: a gymnasium Env (BlueView)."""
    return BlueView(red, backend, seed, max_steps)


@functools.cache
def _parallel_class():
    try:
        from pettingzoo import ParallelEnv
    except ImportError:
        raise UserError("the two-player env needs PettingZoo: pip install 'wfrl[duel]' "
                        "(scripts/setup.sh installs it)") from None
    return type("DuelEnv", (DuelEnv, ParallelEnv), {"__module__": __name__,
                                                     "__doc__": DuelEnv.__doc__})


def make_duel(backend: str = "sim", seed: int | None = None, max_steps: int = EP_LEN):
    """CAGE2's two-player env (module docstring): a PettingZoo ParallelEnv, agents blue and
    red."""
    if backend_engine(backend) != "sim":
        check_duel_backend(backend)
    return _parallel_class()(backend, seed, max_steps)


# -- what red knows, read from CybORG's red observations ----------------------------------------
# Each subnet's hosts in the order CybORG's DiscoverRemoteSystems lists their addresses (csrc/
# wfrl_cage2.h cage2_subnet_hosts: the same order).
SUBNET_LISTING = (("User0", "User1", "User2", "User3", "User4"),
                  ("Enterprise0", "Enterprise1", "Enterprise2", "Defender"),
                  ("Op_Server0", "Op_Host0", "Op_Host1", "Op_Host2"))
HOST_SUBNET = {h: s for s, hosts in enumerate(SUBNET_LISTING) for h in hosts}


def _true(value) -> int:
    """CybORG's success (a TrinaryEnum) as 1 true, 0 false, 2 unknown."""
    text = str(value).upper()
    return 1 if text.endswith("TRUE") else 0 if text.endswith("FALSE") else 2


CYBORG_PACKAGES = ("csle_cyborg", "CybORG")


def cyborg_red_classes(package: str | None = None):
    """A CybORG's BaseAgent and red's action classes (a namespace): csle-cyborg's (`csle_cyborg`)
    or the cage-challenge-2 repository's own package (`CybORG`), which hold the same Scenario2
    code under other module names. package None: the first of CYBORG_PACKAGES importable.
    BackendUnavailable (one line) where none is."""
    import importlib
    from types import SimpleNamespace

    from wfrl.errors import BackendUnavailable
    csle = "csle_cyborg.shared.actions.abstract_actions."
    where = {   # class -> module, per package
        "csle_cyborg": {"BaseAgent": "csle_cyborg.agents.simple_agents.base_agent",
                        "Sleep": "csle_cyborg.shared.actions.action",
                        "DiscoverRemoteSystems": csle + "discover_remote_systems",
                        "DiscoverNetworkServices": csle + "discover_network_services",
                        "ExploitRemoteService": csle + "exploit_remote_service",
                        "PrivilegeEscalate": csle + "privilege_escalate",
                        "Impact": csle + "impact"},
        "CybORG": {"BaseAgent": "CybORG.Agents.SimpleAgents.BaseAgent",
                   **{k: "CybORG.Shared.Actions" for k in (
                       "Sleep", "DiscoverRemoteSystems", "DiscoverNetworkServices",
                       "ExploitRemoteService", "PrivilegeEscalate", "Impact")}}}
    if package is not None and package not in where:
        raise UserError(f"unknown CybORG package {package!r} (choose from "
                        f"{', '.join(CYBORG_PACKAGES)})")
    for name in (package,) if package else CYBORG_PACKAGES:
        try:
            found = {k: getattr(importlib.import_module(m), k) for k, m in where[name].items()}
        except ImportError:
            continue
        return SimpleNamespace(package=name, **found)
    raise BackendUnavailable("a learned red on CybORG needs csle-cyborg (the [cyborg] extra) or "
                             "the cage-challenge-2 repository's CybORG package importable")


class RedKnowledge:
    """What red knows in a CybORG episode, from what CybORG shows red: the observation of its
    last action and its action space. vector() is the simulator's red observation
    (csrc/wfrl_cage2.h wfrl_cage2_red_obs), mask() its mask, action(a) CybORG's action for red
    action a. Hosts are identified as CybORG shows them: a subnet's discovery lists its addresses
    in a fixed host order (SUBNET_LISTING), an escalation names the hosts it reveals, an exploit
    the host it landed on."""

    def __init__(self, package: str | None = None):
        self.classes = cyborg_red_classes(package)
        self.begin()

    def begin(self) -> None:
        self.ip_of: dict[int, Any] = {}        # host index -> its address (as CybORG gives it)
        self.host_of: dict[str, int] = {}      # str(address) -> host index
        self.cidr_of: dict[int, Any] = {}      # subnet index -> its network
        self.known_ip: set[int] = set()
        self.known_host: set[int] = set()
        self.known_subnets: set[int] = set()
        self.scanned: set[int] = set()
        self.seen = [0] * len(HOSTS)
        self.last_ok = 2
        self.t = 0
        self.last: int | None = None          # red's last action (an index)

    def _name(self, h: int, ip) -> None:
        self.ip_of[h] = ip
        self.host_of[str(ip)] = h

    def observe(self, observation: dict, action_space: dict) -> None:
        """Take in the observation of red's last action (or the episode's first) and the action
        space red acts from now."""
        last = None if self.last is None else RED_ACTION_NAMES[self.last].split(" ")
        listed = []
        for key, value in observation.items():
            if key == "success" or not isinstance(value, dict):
                continue
            name = (value.get("System info") or {}).get("Hostname") or (key if key in HOSTS
                                                                          else None)
            # a root or SYSTEM shell shown on a named host (red's foothold at the start, an
            # escalation): root seen there
            if name is not None and any(str(x.get("Username")) in ("root", "SYSTEM")
                                        for x in value.get("Sessions") or ()):
                self.seen[HOSTS.index(name)] = 2
            for iface in value.get("Interface") or ():
                ip = iface.get("IP Address")
                if ip is None:
                    continue
                if name is not None:
                    self._name(HOSTS.index(name), ip)
                elif str(ip) not in self.host_of:
                    listed.append(ip)
        if last is not None and last[0] == "DiscoverRemoteSystems" and listed:
            listing = SUBNET_LISTING[RED_SUBNETS.index(last[1])]
            rest = [HOSTS.index(h) for h in listing if HOSTS.index(h) not in self.ip_of]
            for h, ip in zip(rest, listed):
                self._name(h, ip)
        ok = _true(observation.get("success"))
        self.last_ok = ok
        if last is not None and len(last) == 2 and last[1] in HOSTS:
            h = HOSTS.index(last[1])
            ip = self.ip_of.get(h)
            if last[0] == "DiscoverNetworkServices" and ip is not None:
                found = observation.get(str(ip))
                if isinstance(found, dict) and found.get("Processes"):
                    self.scanned.add(h)
            elif last[0] == "ExploitRemoteService" and ok == 1:
                self.seen[h] = max(self.seen[h], 1)
            elif last[0] == "PrivilegeEscalate" and ok != 2:
                self.seen[h] = 2 * ok
        # what red may act on now
        for cidr, on in action_space.get("subnet", {}).items():
            if on:
                sub = next((HOST_SUBNET[HOSTS[h]] for h, ip in self.ip_of.items() if ip in cidr),
                           None)
                if sub is not None:
                    self.cidr_of[sub] = cidr
        known_cidrs = {str(c) for c, on in action_space.get("subnet", {}).items() if on}
        self.known_subnets = {s for s, c in self.cidr_of.items() if str(c) in known_cidrs}
        self.known_ip = {self.host_of[str(ip)] for ip, on in
                         action_space.get("ip_address", {}).items()
                         if on and str(ip) in self.host_of}
        self.known_host = {HOSTS.index(n) for n, on in action_space.get("hostname", {}).items()
                           if on and n in HOSTS}

    def vector(self) -> np.ndarray:
        """Red's observation (RED_OBS_DIM floats), as the simulator computes it."""
        out = np.zeros(RED_OBS_DIM, np.float32)
        k = len(RED_HOST_FEATURES)
        for h in range(len(HOSTS)):
            out[k * h:k * h + k] = (h in self.known_ip, h in self.known_host, h in self.scanned,
                                    self.seen[h] == 1, self.seen[h] == 2)
        o = k * len(HOSTS)
        for s in self.known_subnets:
            out[o + s] = 1
        out[o + 3] = self.last_ok == 1
        out[o + 4] = self.last_ok == 0
        out[o + 5] = self.t / EP_LEN
        return out

    def mask(self) -> np.ndarray:
        """Red's allowed actions now (bool [RED_N_ACTIONS]), read from vector() by red_masks."""
        return red_masks(self.vector()[None])[0, :RED_N_ACTIONS]

    def action(self, a: int, session: int = 0):
        """CybORG's action for red action a (allowed by mask()); remembered as red's last."""
        c = self.classes
        self.last = int(a)
        self.t += 1
        kind, *rest = RED_ACTION_NAMES[a].split(" ")
        if kind == "Sleep":
            return c.Sleep()
        if kind == "DiscoverRemoteSystems":
            return c.DiscoverRemoteSystems(subnet=self.cidr_of[RED_SUBNETS.index(rest[0])],
                                         agent="Red", session=session)
        h = HOSTS.index(rest[0])
        if kind == "DiscoverNetworkServices":
            return c.DiscoverNetworkServices(ip_address=self.ip_of[h], agent="Red", session=session)
        if kind == "ExploitRemoteService":
            return c.ExploitRemoteService(ip_address=self.ip_of[h], agent="Red", session=session)
        if kind == "PrivilegeEscalate":
            return c.PrivilegeEscalate(hostname=HOSTS[h], agent="Red", session=session)
        return c.Impact(hostname=HOSTS[h], agent="Red", session=session)


# -- learned reds: a red checkpoint (wfrl attack) as a CybORG red agent ---------------------------
def learned_red_class(checkpoint: str, greedy: bool = False, leaderboard: bool | None = None,
                      package: str | None = None):
    """A CybORG red agent class that plays a red checkpoint (a red's best.pt of `wfrl attack`)
    from CybORG's red observation: RedKnowledge (wfrl.envs.duel) turns what CybORG shows red into
    the simulator's red observation and mask, the network chooses (sampling from Python's
    `random`, which the CybORG backend seeds per episode; or greedily), and RedKnowledge turns
    the choice into CybORG's action. Copies none of CybORG's code. package: the CybORG package
    it plays in (cyborg_red_classes: csle-cyborg's or the cage-challenge-2 repository's; None,
    the first importable). One-line UserError for a file that is not a red's checkpoint."""
    classes = cyborg_red_classes(package)
    weights, hidden = red_weights(checkpoint, leaderboard)

    base: Any = classes.BaseAgent

    class LearnedRedAgent(base):
        def __init__(self):
            from wfrl._core import RedPolicy
            self.policy = RedPolicy(weights, hidden)
            self.knowledge = RedKnowledge(classes.package)

        def get_action(self, observation, action_space):
            import random
            k = self.knowledge
            k.observe(observation, action_space)
            self.acted_on = k.vector()       # (what red chose on: tests, red_obs_parity.py)
            logits = self.policy.logits(self.acted_on)
            mask = red_masks(self.acted_on[None])[0, :RED_N_ACTIONS]
            z = np.where(mask, logits.astype(np.float64), -np.inf)
            if greedy:
                a = int(np.argmax(z))
            else:
                p = np.exp(z - z.max())
                a = int(np.searchsorted(np.cumsum(p), random.random() * p.sum(), side="right"))
                a = min(a, RED_N_ACTIONS - 1)
                while not mask[a]:          # (rounding at the top end: the last allowed one)
                    a -= 1
            session = next(iter(action_space.get("session", {0: True})), 0)
            return k.action(a, session)

        def end_episode(self):
            self.knowledge.begin()

        def train(self, results):
            pass

        def set_initial_values(self, action_space, observation):
            pass

    LearnedRedAgent.__module__ = __name__
    return LearnedRedAgent


def shipped_reds() -> list[str]:
    """The learned reds shipped with the package (wfrl/pretrained/reds/NAME.pt: learned:NAME)."""
    from importlib import resources
    folder = resources.files("wfrl") / "pretrained" / "reds"
    if not folder.is_dir():
        return []
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".pt"))


def red_checkpoint_path(checkpoint: str) -> str:
    """A red's checkpoint file: PATH itself, or a shipped red's file for a name of
    shipped_reds() that is no file here."""
    import os
    if os.path.exists(checkpoint) or checkpoint not in shipped_reds():
        return checkpoint
    from importlib import resources
    return str(resources.files("wfrl") / "pretrained" / "reds" / f"{checkpoint}.pt")


def red_weights(checkpoint: str, leaderboard: bool | None = None):
    """(flat weights, hidden width) of a red's checkpoint (a file, or a shipped red's name: see
    shipped_reds) — its actor-critic's parameters in order, flattened; one line for anything
    else, and (leaderboard given) for a red trained on the other CybORG code."""
    from wfrl.runlog import load_checkpoint
    ck = load_checkpoint(red_checkpoint_path(checkpoint))
    theirs = (ck.get("config") or {}).get("backend") if isinstance(ck.get("config"), dict) else None
    if leaderboard is not None and isinstance(theirs, str) \
            and is_leaderboard(theirs) != bool(leaderboard):
        code = {True: "the leaderboard's CybORG code", False: "the installed CybORG code"}
        raise UserError(f"{checkpoint} learned to attack on {code[is_leaderboard(theirs)]}; this "
                        f"backend plays {code[bool(leaderboard)]}")
    net = ck.get("net")
    if not isinstance(net, dict) or not net.get("red"):
        raise UserError(f"{checkpoint} is a defender's checkpoint; a red's (wfrl attack's "
                        "best.pt) is wanted here")
    from wfrl._core import mlp_n_params
    hidden = int(ck["hidden"])
    try:
        weights = np.concatenate([t.numpy().astype(np.float32).ravel()
                                  for t in ck["model"].values()])
    except (AttributeError, TypeError, ValueError):
        raise UserError(f"{checkpoint}: its weights are damaged") from None
    if weights.shape != (mlp_n_params(hidden, RED_OBS_DIM),):
        raise UserError(f"{checkpoint}: its weights do not fit a red network of width {hidden}")
    return weights, hidden
