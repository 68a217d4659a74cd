"""Where a CAGE2 defender's cost comes from: every step's reward split by host and cause.

CAGE2's blue reward at a step is the sum of three kinds of loss, all read from the state after
red has acted:

- **privileged**: each host on which red holds a root/SYSTEM session costs its confidentiality
  value (PRIVILEGED_COST: 1.0 for Enterprise0-2 and Op_Server0, 0.1 for the Defender, the
  operational hosts and User1-4, 0 for User0, red's foothold);
- **restore**: a Restore costs 1.0 on the step blue takes it, charged to the restored host;
- **impact**: -10 on every step red's Impact keeps Op_Server0's service stopped.

`step_costs` applies that split to one step from what every backend reports (blue's action, the
reward, red's access per host after the step) and puts whatever the split does not explain under
**other**, which is 0 when the backend scores as described (tests/test_attribution.py holds it at
0 on the simulator and on CybORG). Summed over an episode, the columns add up to its return.
"""
from __future__ import annotations

import numpy as np

from wfrl.envs.actions import RESTORE_FIRST
from wfrl.stats import standard_error

HOST_NAMES = ("Defender", "Enterprise0", "Enterprise1", "Enterprise2", "Op_Host0", "Op_Host1",
              "Op_Host2", "Op_Server0", "User0", "User1", "User2", "User3", "User4")
N_HOSTS = len(HOST_NAMES)
# Reward lost per step a host holds a privileged red session (csrc/wfrl_cage2.h, cage2_hosts).
PRIVILEGED_COST = np.array([0.1, 1.0, 1.0, 1.0, 0.1, 0.1, 0.1, 1.0, 0.0, 0.1, 0.1, 0.1, 0.1])
RESTORE_COST = 1.0
IMPACT_COST = 10.0
PRIVILEGED = 2                  # red access level of a root/SYSTEM session
# Columns of a cost vector: privileged per host, restore per host, impact, other.
PRIV, RESTORE = slice(0, N_HOSTS), slice(N_HOSTS, 2 * N_HOSTS)
IMPACT, OTHER = 2 * N_HOSTS, 2 * N_HOSTS + 1
N_COLUMNS = 2 * N_HOSTS + 2
IMPACT_HOST = HOST_NAMES.index("Op_Server0")


def step_costs(action: int, reward: float, red_access_after, out: np.ndarray) -> None:
    """Add one step's reward, split by host and cause, to the cost vector `out` [N_COLUMNS]
    (reward units: the entries are ≤ 0 and sum to `reward`)."""
    access = np.asarray(red_access_after)
    priv = -PRIVILEGED_COST * (access == PRIVILEGED)
    out[PRIV] += priv
    explained = float(priv.sum())
    if RESTORE_FIRST <= action < RESTORE_FIRST + N_HOSTS:
        out[N_HOSTS + action - RESTORE_FIRST] -= RESTORE_COST
        explained -= RESTORE_COST
    rest = round(float(reward) - explained, 6)
    if abs(rest + IMPACT_COST) < 1e-4:
        out[IMPACT] -= IMPACT_COST
    elif abs(rest) >= 1e-4:
        out[OTHER] += rest


class CostRecorder:
    """Cost vectors of consecutive episodes: call `step` for every step and `end_episode` after
    each episode; `costs` is then [episodes, N_COLUMNS]."""

    def __init__(self):
        self._rows: list[np.ndarray] = []
        self._current = np.zeros(N_COLUMNS)

    def step(self, action: int, reward: float, red_access_after) -> None:
        step_costs(int(action), reward, red_access_after, self._current)

    def end_episode(self) -> None:
        self._rows.append(self._current)
        self._current = np.zeros(N_COLUMNS)

    @property
    def costs(self) -> np.ndarray:
        return np.array(self._rows).reshape(len(self._rows), N_COLUMNS)


class ActionRecorder:
    """Each episode's actions (an observer as in wfrl.collect.rollout.run_episodes), passing every
    call on to `then` (another observer) if given."""

    def __init__(self, then=None):
        self.then, self.episodes, self._now = then, [], []

    def step(self, action, reward, red_access_after) -> None:
        self._now.append(int(action))
        if self.then is not None:
            self.then.step(action, reward, red_access_after)

    def end_episode(self) -> None:
        self.episodes.append(self._now)
        self._now = []
        if self.then is not None:
            self.then.end_episode()


def summarise(costs: np.ndarray) -> dict:
    """The JSON-ready breakdown of per-episode cost vectors [n, N_COLUMNS]: the mean per episode
    of every (host, cause) with its standard error, and the totals per cause."""
    costs = np.asarray(costs, dtype=np.float64)
    n = costs.shape[0]

    def stat(col: np.ndarray) -> dict:
        se = standard_error(col)
        return {"mean": round(float(col.mean()), 4), "se": round(se, 4)}

    hosts = {}
    for h, name in enumerate(HOST_NAMES):
        row = {}
        if PRIVILEGED_COST[h] > 0:
            row["privileged"] = stat(costs[:, h])
        row["restore"] = stat(costs[:, N_HOSTS + h])
        if h == IMPACT_HOST:
            row["impact"] = stat(costs[:, IMPACT])
        row["total"] = stat(costs[:, h] + costs[:, N_HOSTS + h]
                            + (costs[:, IMPACT] if h == IMPACT_HOST else 0.0))
        hosts[name] = row
    return {"n": n, "by_host": hosts,
            "by_cause": {"privileged": stat(costs[:, PRIV].sum(axis=1)),
                         "restore": stat(costs[:, RESTORE].sum(axis=1)),
                         "impact": stat(costs[:, IMPACT]), "other": stat(costs[:, OTHER])},
            "total": stat(costs.sum(axis=1))}


def format_costs(columns: dict[str, dict]) -> str:
    """Side-by-side text table of breakdowns (`summarise` results), one column per label: rows
    per host (privileged + restore + impact), then per cause, then the total."""
    labels = list(columns)
    width = max(12, *(len(k) for k in labels))
    head = f"{'cost per episode':24s}" + "".join(f" {k:>{width}s}" for k in labels)
    lines = [head]

    def line(name, get):
        cells = []
        for k in labels:
            v = get(columns[k])
            cells.append(f" {'':>{width}s}" if v is None else
                         f" {v['mean']:>{width - 7}.2f} ± {v['se']:4.2f}")
        lines.append(f"{name:24s}" + "".join(cells))

    for name in HOST_NAMES:
        line(f"  {name}", lambda c, n=name: c["by_host"][n]["total"])
    for cause in ("privileged", "restore", "impact", "other"):
        line(f"{cause} (all hosts)", lambda c, k=cause: c["by_cause"][k])
    line("total", lambda c: c["total"])
    return "\n".join(lines)
