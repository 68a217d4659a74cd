"""The red agents: their table (wfrl.config.names: RED_SPECS, POOL_SPECS; re-exported here), and
the CybORG red agent classes of the variants of B_line and Meander.

The variants wrap an instance of the CAGE2 agent they vary (what each does differently and why a
defender might fail against it: docs/robustness.md):

- `DelayedB_lineAgent`, `DelayedMeanderAgent`: red sleeps the first D steps (D uniform in
  5..25), then attacks as the base agent;
- `BurstyB_lineAgent`, `BurstyMeanderAgent`: red acts 3 steps, then sleeps 2..5 steps, again
  and again;
- `NoisyB_lineAgent`, `NoisyMeanderAgent`: before an exploit, with probability 1/2, red scans
  the target's services once more;
- `ScoutingB_lineAgent` (path): once B_line has listed the user subnet, red scans the services
  of every other user host, in a random order, and B_line is shown only the Linux ones (those
  offering smtp, User3 and User4): it enters there and goes on through Enterprise0;
- `PersistentB_lineAgent` (persistence): once B_line has escalated on a host beyond User0, each
  step with probability 1/2 red first checks one of the footholds B_line has escalated on (its
  user host, its Enterprise host, Enterprise2, Op_Server0; in turn) by escalating there again;
  if the check fails it re-exploits the host and, if that succeeds, escalates again;
- `EnterpriseMeanderAgent` (target): Meander shown an action space without the operational
  subnet: it takes user and enterprise hosts and never the plant.

A step the base agent does not act (a sleep, the extra scan, a scout's scan, a check or retake)
is not shown to it: it gets, at its next action, the observation of its own last action, as if
nothing had happened between. The delays, pauses, orders and coin flips draw from Python's
`random`, which the CybORG backend seeds per episode (wfrl.envs.cyborg).
"""
from __future__ import annotations

import functools
from typing import Any

# the red table, declared once (numpy-free, so the command line's checks import it cheaply)
from wfrl.config.names import (  # noqa: F401
    ATTACKERS,
    B_LINE,
    BASE_CODES,
    BELIEF_REDS,
    CAGE2_REDS,
    CHANGES,
    FAMILY,
    FAMILY_VIEW,
    MEANDER,
    MIXED,
    MIXED_REDS,
    POOL_CODES,
    POOL_OF,
    POOL_SPECS,
    POOLED,
    POOLS,
    POPULATION_MAX,
    RED_AGENTS,
    RED_METAVAR,
    RED_SPECS,
    REDS,
    SLEEP,
    TRAIN_RED_AGENTS,
    VARIANT_SHIFT,
    VARIANTS,
    PoolSpec,
    RedSpec,
    UnknownRed,
    base_red,
    check_red_agent,
    episode_red,
    pool_member,
    red_code,
    red_codes,
    red_spec,
)
from wfrl.errors import UserError

DELAY = (5, 25)    # the delayed variants' sleep at the start: uniform, steps
BURST = 3          # the bursty variants' actions in a row
PAUSE = (2, 5)     # and their pause after each burst: uniform, steps
NOISE_P = 0.5      # the noisy variants' chance of a scan before an exploit
CHECK_P = 0.5      # the persistent variant's chance, each step it holds a foothold, of a check
SMTP = 25          # the port that marks a Linux user host to the scouting variant


def _ports(observation) -> set:
    """The local ports of every process in a scan's observation."""
    out: set = set()
    for key, value in observation.items():
        if key == "success" or not isinstance(value, dict):
            continue
        for proc in value.get("Processes", ()):
            out.update(c.get("local_port") for c in proc.get("Connections", ()))
    return out


def _succeeded(observation) -> bool:
    return bool(observation.get("success") == True)  # noqa: E712 (a TrinaryEnum compares so)


@functools.cache
def cyborg_agents_on_demand() -> None:
    """Make `csle_cyborg.agents` a package whose agent names load on first use.

    Its __init__.py imports every agent CybORG ships, BlueLoadAgent among them, which imports
    Stable-Baselines3 and so torch: about 1.3 CPU-s and 190 MB in every process that builds a
    CybORG, though no CAGE2 red or scenario agent needs it. CybORG itself finds the scenario's
    agents by name on that package (getattr). So the package is put in sys.modules unexecuted,
    with a module __getattr__ that imports a name from where that same __init__.py's
    `from M import N` lines say it lives: BlueLoadAgent (and torch) only if something asks
    for it. Nothing is done if the package is already imported or its __init__.py holds
    anything but such lines. Once per process."""
    import ast
    import importlib
    import importlib.util
    import sys
    name = "csle_cyborg.agents"
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.submodule_search_locations:
        return
    with open(spec.origin, encoding="utf-8") as f:
        body = ast.parse(f.read()).body
    where = {}
    for node in body:
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            return
        for alias in node.names:
            if alias.name == "*":
                return
            where[alias.asname or alias.name] = (node.module, alias.name)
    package = importlib.util.module_from_spec(spec)

    def __getattr__(attr):
        if attr not in where:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        module, member = where[attr]
        value = getattr(importlib.import_module(module), member)
        setattr(package, attr, value)
        return value

    package.__getattr__ = __getattr__           # type: ignore[method-assign]
    package.__all__ = sorted(where)  # type: ignore[attr-defined]  # `import *`: every name
    sys.modules[name] = package
    sys.modules["csle_cyborg"].agents = package  # type: ignore[attr-defined]


@functools.cache
def family_classes() -> dict:
    """name -> CybORG red agent class of every variant (CybORG imported here, on first use)."""
    import random

    cyborg_agents_on_demand()
    from csle_cyborg.agents.simple_agents.b_line import B_lineAgent
    from csle_cyborg.agents.simple_agents.base_agent import BaseAgent
    from csle_cyborg.agents.simple_agents.meander import RedMeanderAgent
    from csle_cyborg.shared.actions.abstract_actions.discover_network_services import DiscoverNetworkServices
    from csle_cyborg.shared.actions.abstract_actions.exploit_remote_service import ExploitRemoteService
    from csle_cyborg.shared.actions.action import Sleep

    # B_line's stages that escalate on, and exploit, its footholds: user host, Enterprise host,
    # Enterprise2, Op_Server0 (its actions cached by stage in action_history)
    escalates, exploits = (3, 6, 10, 13), (2, 5, 9, 12)

    class VariantRed(BaseAgent):
        """A CAGE2 red agent (`base`) with a variant (`mode`) around it."""
        base: type = B_lineAgent
        mode: str = "delayed"

        def __init__(self):
            self.agent = self.base()
            self._start()

        def _start(self) -> None:
            self.t = 0
            self.seen: Any = None     # the observation of the base agent's last own action
            self.fresh = True         # the last step was the base agent's own action
            self.count = self.pause = 0
            self.delay: int | None = None
            self.queued: Any = None   # (noisy) the exploit that follows the extra scan
            self.mine: Any = None     # the variant's own last action: ("scout", ip) or "check"
            self.ok = False           # and whether it succeeded
            self.listing: Any = None  # (scouting) B_line's listing of the user subnet
            self.scouts: list = []    # (scouting) hosts still to scan
            self.linux: list = []     # (scouting) those offering smtp
            self.scouted = False
            self.phase = self.k = self.checks = 0   # (persistent) see csrc/wfrl_cage2.h
            self.taken: set = set()   # (persistent) footholds B_line has escalated on
            self.op_ips: set = set()  # (enterprise) addresses of the operational subnet seen

        def _acts(self) -> bool:
            if self.mode == "delayed":
                if self.delay is None:
                    self.delay = random.randint(*DELAY)
                return self.t >= self.delay
            if self.mode == "bursty":
                if self.pause:
                    self.pause -= 1
                    return False
                self.count += 1
                if self.count == BURST:
                    self.count = 0
                    self.pause = random.randint(*PAUSE)
            return True

        def _saw(self, observation) -> None:
            """The outcome of the variant's own last action."""
            if isinstance(self.mine, tuple):          # a scout's scan
                if SMTP in _ports(observation):
                    self.linux.append(self.mine[1])
            elif self.mine is not None:
                self.ok = _succeeded(observation)
            self.mine = None

        def _own(self):
            """The variant's own action this step instead of the base agent's, or None."""
            if self.mode == "scouting":
                return self._scout()
            if self.mode == "persistent":
                return self._persist()
            return None

        def _scout(self):
            ag = self.agent
            if not self.scouted and ag.action == 0 and 0 in ag.action_history:
                # B_line has just listed the user subnet (self.seen): scan every other host
                self.scouted = True
                self.listing = self.seen
                self.scouts = [v["Interface"][0]["IP Address"] for k, v in self.seen.items()
                               if k != "success"
                               and v["Interface"][0]["IP Address"] != ag.initial_ip]
                random.shuffle(self.scouts)
            if self.scouts:
                ip = self.scouts.pop()
                self.mine = ("scout", ip)
                return DiscoverNetworkServices(session=0, agent="Red", ip_address=ip)
            if self.listing is not None:
                # done: B_line sees its listing with only the Linux hosts in it
                keep = set(self.linux)
                self.seen = {k: v for k, v in self.listing.items()
                             if k == "success" or v["Interface"][0]["IP Address"] in keep}
                self.listing = None
            return None

        def _persist(self):
            history = self.agent.action_history
            if self.phase == 1 and not self.ok:        # the check failed: take it back
                self.phase, self.mine = 2, "retake"
                return history[exploits[self.k]]
            if self.phase == 2 and self.ok:            # re-exploited: escalate again
                self.phase, self.mine = 3, "retake"
                return history[escalates[self.k]]
            self.phase = 0
            if not self.taken or not random.random() < CHECK_P:
                return None
            k = self.checks % 4                        # the next foothold taken, in turn
            while k not in self.taken:
                k = (k + 1) % 4
            self.k, self.checks = k, k + 1
            self.phase, self.mine = 1, "check"
            return history[escalates[self.k]]

        def _space(self, observation, action_space):
            """(enterprise) The action space without the operational subnet."""
            for key, value in observation.items():
                if isinstance(key, str) and key.startswith("Op_") and isinstance(value, dict):
                    self.op_ips.update(i["IP Address"] for i in value.get("Interface", ())
                                       if "IP Address" in i)
            nets = [n for n in action_space["subnet"] if any(ip in n for ip in self.op_ips)]
            space = dict(action_space)
            space["subnet"] = {n: v and n not in nets for n, v in action_space["subnet"].items()}
            space["ip_address"] = {ip: v and ip not in self.op_ips
                                   and not any(ip in n for n in nets)
                                   for ip, v in action_space["ip_address"].items()}
            space["hostname"] = {h: v and not h.startswith("Op_")
                                 for h, v in action_space["hostname"].items()}
            return space

        def get_action(self, observation, action_space):
            if self.fresh or self.seen is None:
                self.seen = observation
                if (self.mode == "persistent" and self.agent.action in escalates
                        and _succeeded(observation)):   # B_line escalated: a foothold taken
                    self.taken.add(escalates.index(self.agent.action))
            else:
                self._saw(observation)
            if self.mode == "enterprise":
                action_space = self._space(observation, action_space)
            own = self._acts()
            self.t += 1
            self.fresh = own
            if not own:
                return Sleep()
            if self.queued is not None:
                action, self.queued = self.queued, None
                return action
            mine = self._own()
            if mine is not None:
                self.fresh = False
                return mine
            try:
                action = self.agent.get_action(self.seen, action_space)
            except NotImplementedError:   # Meander out of options (the enterprise variant can)
                return Sleep()
            if (self.mode == "noisy" and isinstance(action, ExploitRemoteService)
                    and random.random() < NOISE_P):
                self.queued = action
                self.fresh = False
                return DiscoverNetworkServices(session=action.session, agent="Red",
                                               ip_address=action.ip_address)
            return action

        def end_episode(self):
            self.agent.end_episode()
            self._start()

        def train(self, results):
            pass

        def set_initial_values(self, action_space, observation):
            pass

    bases = {B_LINE: B_lineAgent, MEANDER: RedMeanderAgent}
    return {name: type(name, (VariantRed,), {"base": bases[REDS[name].base],
                                             "mode": REDS[name].variant, "__module__": __name__})
            for name in FAMILY}



# -- populations: population:PATH ---------------------------------------------------------------
POPULATION_SALT = 0x706F70756C617465   # WFRL_POP_SALT ("populate")
UNIT = 1 << 53          # a member's share is counted in 2^-53


class Population:
    """Reds and their weights, of which each episode plays the one its env seed draws: the red
    of `population:PATH` (on the simulator, in every collector; csrc/wfrl_rollout.h
    wfrl_population is the compiled twin). PATH is a JSON file

        {"members": [{"red": "B_lineAgent", "weight": 0.5},
                     {"red": "learned:rounds/001/best.pt", "weight": 0.5}]}

    whose reds are scripted reds or learned reds (a learned red's relative path is read from
    the file's folder); weights are non-negative with a positive sum (normalised here)."""

    def __init__(self, members, weights, path: str = "<population>"):
        members, weights = tuple(members), tuple(float(w) for w in weights)
        if not 1 <= len(members) <= POPULATION_MAX or len(weights) != len(members):
            raise UserError(f"{path}: a population holds 1 to {POPULATION_MAX} reds, one weight "
                            "each")
        for name in members:
            check_red_agent(name, allow_pools=False)
        if not all(w >= 0.0 and w < float("inf") for w in weights) or sum(weights) <= 0.0:
            raise UserError(f"{path}: weights must be finite, non-negative and not all zero")
        total = sum(weights)
        self.members, self.path = members, str(path)
        self.weights = tuple(w / total for w in weights)
        upto, acc = [], 0.0
        for w in self.weights:
            acc += w
            upto.append(min(UNIT, int(round(acc * UNIT))))
        upto[-1] = UNIT
        self.upto = tuple(upto)

    def member(self, env_seed: int) -> int:
        """The index of the member the episode with this env seed plays (twin of
        wfrl_population_draw)."""
        from wfrl.rng import MASK, splitmix64
        _, out = splitmix64((int(env_seed) ^ POPULATION_SALT) & MASK)
        u = out >> 11
        return next((k for k, t in enumerate(self.upto[:-1]) if u < t), len(self.upto) - 1)

    def episode_red(self, env_seed: int) -> str:
        return self.members[self.member(env_seed)]

    def to_dict(self) -> dict:
        return {"members": [{"red": m, "weight": w} for m, w in zip(self.members, self.weights)]}


def load_population(name: str) -> Population:
    """The Population of population:PATH (or of PATH): one-line UserError for a missing or
    damaged file or a bad member; a learned member's relative path is taken from the file's
    folder when it is there."""
    import json
    from pathlib import Path

    from wfrl.config.names import LEARNED_PREFIX, POPULATION_PREFIX, is_learned
    path = Path(name.removeprefix(POPULATION_PREFIX))
    try:
        d = json.loads(path.read_text())
        rows = d["members"]
        members = [str(r["red"]) for r in rows]
        weights = [float(r["weight"]) for r in rows]
    except OSError:
        raise UserError(f"population {path}: no such file or it cannot be read") from None
    except (ValueError, KeyError, TypeError):
        raise UserError(f"population {path}: not a population file (a JSON object whose "
                        "`members` are {\"red\": NAME, \"weight\": W})") from None
    resolved = []
    for m in members:
        if is_learned(m):
            rel = path.parent / m[len(LEARNED_PREFIX):]
            if not Path(m[len(LEARNED_PREFIX):]).is_absolute() and rel.exists():
                m = LEARNED_PREFIX + str(rel)
        resolved.append(m)
    return Population(resolved, weights, str(path))


def write_population(path, members, weights) -> Population:
    """Write a population file (atomically; a learned member's path relative to the file's
    folder, so the folder can move); returns the Population it holds."""
    import json
    import os
    from pathlib import Path

    from wfrl.config.names import LEARNED_PREFIX, is_learned
    path = Path(path)
    pop = Population(members, weights, str(path))
    rows = []
    for m, w in zip(pop.members, pop.weights):
        if is_learned(m):
            p = Path(m[len(LEARNED_PREFIX):])
            if p.exists():
                try:
                    m = LEARNED_PREFIX + os.path.relpath(p.resolve(), path.parent.resolve())
                except ValueError:
                    pass
        rows.append({"red": m, "weight": w})
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"members": rows}, indent=1) + "\n")
    os.replace(tmp, path)
    return pop
