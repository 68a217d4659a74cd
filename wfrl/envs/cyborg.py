"""Real CybORG (csle-cyborg 0.0.3) as a wfrl backend: the reference for everything else.

One CybORG object is built per backend and reset between episodes. Red access is read from the
session table (a few microseconds), never from get_agent_state('True') (several milliseconds).

Randomness: CybORG draws every random number from Python's process-global `random`. Each backend
keeps its own Mersenne-Twister state and swaps it into `random` around reset/step, so two backends
in one process do not disturb each other and `seed` alone fixes an episode sequence. The price is
that after a step the global `random` holds this backend's state: code sharing the process should
use its own `random.Random` instance.
"""
from __future__ import annotations

import contextlib
import copy
import os
import random
from typing import TYPE_CHECKING, Any

import numpy as np

from wfrl.envs.actions import HOSTS, N_HOSTS
from wfrl.envs.base import check_red_agent
from wfrl.errors import BackendUnavailable

if TYPE_CHECKING:
    from csle_cyborg.simulator.state import State

_INSTALL_HINT = ("the cyborg backend needs the [cyborg] extra: pip install 'wfrl[cyborg]' -c "
                 "constraints.txt && pip install --no-deps gym-csle-cyborg==0.10.1 "
                 "(scripts/setup.sh does both)")

_HOST_INDEX = {h: i for i, h in enumerate(HOSTS)}
_PRIVILEGED = ("root", "SYSTEM")
# The process name of each decoy kind (wfrl.envs.actions.DECOY_KINDS order).
_DECOY_PROCESS = ("apache", "femitter", "haraka", "smss", "sshd", "svchost", "tomcat", "vsftpd")


def load_cyborg():
    """Import CybORG lazily; returns (Main, ChallengeWrapper, scenario dict, red agent classes)."""
    try:
        from wfrl.envs.reds import cyborg_agents_on_demand
        cyborg_agents_on_demand()
        from csle_cyborg.agents.simple_agents.b_line import B_lineAgent
        from csle_cyborg.agents.simple_agents.meander import RedMeanderAgent
        from csle_cyborg.agents.simple_agents.sleep_agent import SleepAgent
        from csle_cyborg.agents.wrappers.challenge_wrapper import ChallengeWrapper
        from csle_cyborg.main import Main
        from gym_csle_cyborg.constants.constants import CYBORG
    except ImportError as exc:
        raise BackendUnavailable(f"{_INSTALL_HINT} ({exc.name or exc} not importable)") from None
    from wfrl.envs.reds import B_LINE, MEANDER, SLEEP, family_classes
    # every red of wfrl.envs.reds.RED_SPECS: CAGE2's own classes and the variants'
    agents = {B_LINE: B_lineAgent, MEANDER: RedMeanderAgent, SLEEP: SleepAgent,
              **family_classes()}
    return Main, ChallengeWrapper, CYBORG.CYBORG_SCENARIO_2_DICT, agents


class _LeaderboardCode:
    """While active (a `with` block), the installed CybORG plays by the code the CAGE2 final
    leaderboard was scored on: the cage-challenge-2 repository before its fixes of 16 August 2022
    (ProcessVersion.parse_string returns an unlisted value as it is — before, anything but a
    listed string became UNKNOWN, so a Restore, which rebuilds processes from copies, left
    User3/User4's Haraka without a version and HarakaRCE failed there) and 19 August 2022 (a port
    scan clears red's port memory of the IP before storing the new ports — before, memory only
    grew). Those two changes are all the code between the leaderboard and the final commit;
    undoing them is done by swapping two methods in and out around every reset and step, so
    backends of both kinds can share a process (not two threads stepping them at once: the swap is
    of class attributes)."""

    def __init__(self):
        from csle_cyborg.shared.enums import ProcessVersion
        from csle_cyborg.simulator.session import RedAbstractSession
        self._enum, self._session = ProcessVersion, RedAbstractSession
        fixed_parse = ProcessVersion.__dict__["parse_string"]
        self._fixed = (fixed_parse, RedAbstractSession.__dict__["clearports"])

        def parse_before_fix(cls, version_string):
            value = fixed_parse.__func__(cls, version_string) if isinstance(version_string, str) \
                else None
            return value if isinstance(value, cls) else cls.UNKNOWN

        def keep_ports(self, ip_address):
            return None

        self._before = (classmethod(parse_before_fix), keep_ports)

    def _set(self, methods) -> None:
        self._enum.parse_string, self._session.clearports = methods

    def __enter__(self):
        self._set(self._before)
        return self

    def __exit__(self, *exc):
        self._set(self._fixed)
        return False


def challenge_env(red_agent: str = "B_lineAgent"):
    """CybORG as users drive it without wfrl: ChallengeWrapper around a fresh Scenario2 (the bare
    reference the benchmarks compare against)."""
    Main, ChallengeWrapper, scenario, agents = load_cyborg()
    return ChallengeWrapper(env=Main(copy.deepcopy(scenario), "sim",
                                     agents={"Red": agents[check_red_agent(red_agent, allow_mixed=False)]}),
                            agent_name="Blue", max_steps=None)


def available() -> bool:
    try:
        load_cyborg()
    except BackendUnavailable:
        return False
    return True


class CybORGBackend:
    """CybORG Scenario2 behind the wfrl backend contract (see wfrl.envs.base)."""

    def __init__(self, red_agent: str = "B_lineAgent", seed: int | None = None,
                 leaderboard: bool = False):
        self.red_agent = check_red_agent(red_agent, allow_mixed=False)
        Main, ChallengeWrapper, scenario, agents = load_cyborg()
        from wfrl.config.names import LEARNED_PREFIX, is_learned
        if is_learned(red_agent):   # a red's checkpoint, played from CybORG's red observation
            from wfrl.envs.duel import learned_red_class
            agents = {red_agent: learned_red_class(red_agent[len(LEARNED_PREFIX):],
                                                   leaderboard=bool(leaderboard))}
        self.leaderboard = bool(leaderboard)
        self._code = _LeaderboardCode() if leaderboard else contextlib.nullcontext()
        self._rng_state: tuple[Any, ...]   # set by seed()
        self.seed(seed)
        saved = random.getstate()
        random.setstate(self._rng_state)
        try:
            with self._code:
                self._cyborg = Main(copy.deepcopy(scenario), "sim",
                                    agents={"Red": agents[red_agent]})
                self._env = ChallengeWrapper(env=self._cyborg, agent_name="Blue", max_steps=None)
        finally:
            self._rng_state = random.getstate()
            random.setstate(saved)
        # Live views into CybORG's state; rebuilt objects are looked up again after reset.
        self._state: State | None = None
        self._red_access = np.zeros(N_HOSTS, dtype=np.uint8)

    def seed(self, seed: int | None) -> None:
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        self._rng_state = random.Random(seed).getstate()

    def reset(self):
        random.setstate(self._rng_state)
        with self._code:
            obs, _ = self._env.reset()
        self._rng_state = random.getstate()
        self._state = self._cyborg.environment_controller.state
        return np.asarray(obs, dtype=np.float32), self._read_red_access()

    def step(self, action: int):
        random.setstate(self._rng_state)
        with self._code:
            obs, reward, _done, _info, _ = self._env.step(int(action))
        self._rng_state = random.getstate()
        return np.asarray(obs, dtype=np.float32), float(reward), self._read_red_access()

    def _read_red_access(self) -> np.ndarray:
        ra = self._red_access
        ra[:] = 0
        assert self._state is not None   # called after reset
        for s in self._state.sessions["Red"].values():
            h = _HOST_INDEX[s.host]
            if s.username in _PRIVILEGED:
                ra[h] = 2
            elif ra[h] == 0:
                ra[h] = 1
        return ra.copy()

    def last_red_action(self):
        """Red's action in the last step: (name, target, success) (wfrl.envs.base.RED_ACTIONS)."""
        act = self._cyborg.get_last_action("Red")
        name = type(act).__name__ if act is not None else "Sleep"
        ok = str(self._cyborg.get_observation("Red").get("success")).upper().endswith("TRUE")
        ec = self._cyborg.environment_controller
        if getattr(act, "subnet", None) is not None:
            target = {v: k for k, v in ec.subnet_cidr_map.items()}.get(act.subnet, "")
        elif getattr(act, "ip_address", None) is not None:
            target = {v: k for k, v in ec.hostname_ip_map.items()}.get(act.ip_address, "")
        else:
            target = getattr(act, "hostname", "") or ""
        return name, str(target), ok

    def decoys(self) -> np.ndarray:
        """Decoys in place per host (uint8[13], bit k: wfrl.envs.actions.DECOY_KINDS[k]), read from
        the decoy processes of the true state."""
        from csle_cyborg.shared.enums import DecoyType
        out = np.zeros(N_HOSTS, np.uint8)
        assert self._state is not None   # called after reset
        for h, host in enumerate(HOSTS):
            for p in self._state.hosts[host].processes:
                if p.decoy_type != DecoyType.NONE:
                    kind = next((k for k, n in enumerate(_DECOY_PROCESS)
                                 if str(p.name).lower().startswith(n)), None)
                    if kind is not None:
                        out[h] |= 1 << kind
        return out

    def close(self) -> None:
        self._env = None
        self._cyborg = None
        self._state = None



class MixedCybORGBackend:
    """The mixed red, or a pool of wfrl.envs.reds.POOLS, on CybORG: one CybORG per member; every
    episode is played against the one its seed names (wfrl.envs.base.episode_red), as the
    simulator does."""

    def __init__(self, seed: int | None = None, leaderboard: bool = False,
                 red_agent: str = "mixed"):
        from wfrl.envs.reds import POOL_OF
        self.red_agent = red_agent
        self.leaderboard = bool(leaderboard)
        members = POOL_OF[red_agent].members
        self._envs = {red: CybORGBackend(red, seed, leaderboard) for red in members}
        self._current = self._envs[members[0]]
        self.seed(seed)

    def seed(self, seed: int | None) -> None:
        from wfrl.envs.base import episode_red
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        self._current = self._envs[episode_red(self.red_agent, seed)]
        self._current.seed(seed)

    @property
    def current_red(self) -> str:
        return self._current.red_agent

    def reset(self):
        return self._current.reset()

    def step(self, action: int):
        return self._current.step(action)

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
