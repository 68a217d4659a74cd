"""Any Python agent on wfrl's backends, through the interface of CAGE Challenge 2's own evaluation.

An agent is an object with `get_action(observation, action_space)` (and, optionally,
`end_episode()`), built by a factory named `MODULE:FACTORY` (a module importable from the
current directory or PYTHONPATH, or a path to a .py file, and a callable in it taking no
arguments). As in the challenge's evaluation.py: the observation is the ChallengeWrapper's
52-entry int64 vector, the action space is the integer 145, the action is an integer in
[0, 145) in CybORG's order, and `end_episode()` follows every episode.

Agents run in worker processes (spawned, so an agent can never take the evaluation down with it):
one agent per worker, built once. Before every episode the process-global `random`, numpy and
(if imported) torch generators are seeded from the episode's own seed, so a deterministic agent
scores the same whichever worker plays which episode. The parent watches two limits through
shared memory — the time of one get_action call and of one episode (the agent's construction
counts as an episode) — and ends a worker that exceeds one.

Only time the worker could run counts against those limits. The watchdog checks every worker at
least every _WATCH_PERIOD seconds and counts the interval between two checks unless the worker
was stopped at either of them (state T or t in /proc/PID/stat: SIGSTOP, a debugger) or the
interval is longer than _WATCH_GAP (the watchdog itself did not run: the whole evaluation was
stopped, as by Ctrl-Z, or the machine slept). A worker stopped and then continued goes on where
it was; one that is slow, sleeps or hangs while it could run is still ended on time.
"""
from __future__ import annotations

import importlib
import importlib.util
import multiprocessing as mp
import operator
import os
import sys
import time
from pathlib import Path

import numpy as np

from wfrl.envs.actions import N_ACTIONS
from wfrl.errors import UserError
from wfrl.evaluation.attribution import ActionRecorder, CostRecorder


class AgentFailed(UserError):
    """The agent crashed, returned an invalid action or exceeded a time limit."""


def load_factory(spec: str):
    """The factory callable named by MODULE:FACTORY (or FILE.py:FACTORY)."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"--agent takes MODULE:FACTORY (got {spec!r})")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            if not path.is_file():
                raise UserError(f"agent {spec}: no file {module_name}")
            if str(path.parent) not in sys.path:
                sys.path.insert(0, str(path.parent))
            mspec = importlib.util.spec_from_file_location(f"_wfrl_agent_{path.stem}", path)
            # (a .py file: the source loader's spec)
            assert mspec is not None and mspec.loader is not None
            module = importlib.util.module_from_spec(mspec)
            mspec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except UserError:
        raise
    except Exception as exc:   # noqa: BLE001 - any import failure of the user's module
        raise UserError(f"agent {spec}: importing {module_name} failed: {_describe(exc)}") \
            from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UserError(f"agent {spec}: {module_name} has no callable {attr}")
    return factory


def make_agent(spec: str, workflow: str | None = None):
    """The agent MODULE:FACTORY builds. A factory with a `workflow` parameter is given the
    evaluation's --workflow (when there is one), so one factory can follow any order."""
    factory = load_factory(spec)
    if workflow is not None and _takes_workflow(factory):
        agent = _call(spec, "building the agent", lambda: factory(workflow=workflow))
    else:
        agent = _call(spec, "building the agent", factory)
    if not callable(getattr(agent, "get_action", None)):
        raise AgentFailed(f"agent {spec}: {type(agent).__name__} has no get_action(observation, "
                          "action_space)")
    return agent


def _takes_workflow(factory) -> bool:
    import inspect
    try:
        return "workflow" in inspect.signature(factory).parameters
    except (TypeError, ValueError):    # a builtin or C callable: called without arguments
        return False


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _call(spec, where, fn, *args):
    try:
        return fn(*args)
    except Exception as exc:   # noqa: BLE001 - the agent's own failure, reported in one line
        raise AgentFailed(f"agent {spec} crashed {where}: {_describe(exc)}") from None


def check_action(spec: str, action, where: str) -> int:
    """The agent's action as an int, or AgentFailed (CybORG's enumerated actions take anything
    with __index__ — ints, numpy integers, 0-d integer arrays — and nothing else)."""
    try:
        a = operator.index(action)
    except TypeError:
        raise AgentFailed(f"agent {spec} returned {action!r} ({type(action).__name__}) {where}: "
                          f"an action is an integer in [0, {N_ACTIONS})") from None
    if not 0 <= a < N_ACTIONS:
        raise AgentFailed(f"agent {spec} returned action {a} {where}: an action is an integer "
                          f"in [0, {N_ACTIONS})")
    return a


def seed_globals(seed: int) -> None:
    """Seed the process-global generators an agent may draw from (random, numpy, torch)."""
    import random
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed % 2**63)


def setting_name(backend: str, red: str, steps: int) -> str:
    return f"{red}, {steps} steps on {backend}"


# Shared clock of a worker (doubles): when the running get_action call started (0: none), when
# the running episode (or the agent's construction) started (0: none), and where it is.
_ACTION_T, _EPISODE_T, _SETTING, _EPISODE, _STEP = range(5)


def play_episodes(spec, agent, backend, backend_name, red, steps, episodes, seed, workflow=None,
                  clock=None, k=0, record=None, observer=None):
    """Play global episodes `episodes` (seeds as wfrl.rng.episode_seeds(seed, ...)) of `steps`
    blue steps with the agent; returns (returns, fixes, compliant fixes, episode compliance)
    arrays (compliance only with a workflow: NaN without). record(t, obs, action, reward,
    red_access_before, red_access_after), if given, sees every step; observer as in
    wfrl.collect.rollout.run_episodes."""
    from wfrl.collect.worker import stress_delay
    from wfrl.rng import episode_seeds
    from wfrl.workflow import ComplianceTracker, Workflow, fix_target
    episodes = np.asarray(episodes, dtype=np.int64)
    env_seeds, act_seeds = episode_seeds(seed, episodes)
    wf = Workflow.parse(workflow) if workflow else None
    out = np.zeros((4, len(episodes)))
    for i, (ep, es, ac) in enumerate(zip(episodes, env_seeds, act_seeds)):
        if clock is not None:
            clock[_SETTING], clock[_EPISODE], clock[_STEP] = k, float(ep), 0
            clock[_EPISODE_T] = time.monotonic()
        seed_globals(int(ac))
        tracker = ComplianceTracker(wf, 0.0) if wf else None
        fixes = 0
        backend.seed(int(es))
        obs, access = backend.reset()
        total = 0.0
        for t in range(steps):
            where = f"on {setting_name(backend_name, red, steps)} (episode {int(ep)}, step {t})"
            if clock is not None:
                clock[_STEP] = t
                clock[_ACTION_T] = time.monotonic()
                stress_delay()
            raw = _call(spec, where, agent.get_action, obs.astype(np.int64), N_ACTIONS)
            if clock is not None:
                clock[_ACTION_T] = 0.0
            a = check_action(spec, raw, where)
            if tracker is not None:
                tracker.step(a, access)
            fixes += fix_target(a) >= 0
            next_obs, reward, next_access = backend.step(a)
            if record is not None:
                record(t, obs, a, reward, access, next_access)
            if observer is not None:
                observer.step(a, reward, next_access)
            total += reward
            obs, access = next_obs, next_access
        if callable(getattr(agent, "end_episode", None)):
            _call(spec, f"in end_episode() after episode {int(ep)} of "
                        f"{setting_name(backend_name, red, steps)}", agent.end_episode)
        if clock is not None:
            clock[_EPISODE_T] = 0.0
        if observer is not None:
            observer.end_episode()
        out[:, i] = (total, fixes, tracker.compliant if tracker else 0,
                     tracker.rate if tracker else np.nan)
    return out[0], out[1].astype(np.int64), out[2].astype(np.int64), out[3]


def _worker(spec, conn, clock, out=None, workflow=None):
    """Worker process: build the agent, then play the chunks sent until None. Whatever the
    agent prints goes to `out`, the parent's drain (wfrl.collect.output): stdout carries the
    table / JSON, and a slowly read stderr never blocks the agent."""
    from wfrl.collect.output import redirect
    from wfrl.envs import make_backend
    if out is None:
        os.dup2(2, 1)    # (the planted no-drain hook: the inherited stderr, as before)
    redirect(out)
    try:
        clock[_EPISODE_T] = time.monotonic()
        agent = make_agent(spec, workflow)
        clock[_EPISODE_T] = 0.0
        while True:
            msg = conn.recv()
            if msg is None:
                return
            tid, (k, backend_name, red, steps, seed, first, n, workflow, *more) = msg
            costs = CostRecorder() if more and more[0] else None
            actions = ActionRecorder(costs) if len(more) > 1 and more[1] else None
            backend = make_backend(backend_name, red, seed=seed)
            try:
                res = play_episodes(spec, agent, backend, backend_name, red, steps,
                                    range(first, first + n), seed, workflow, clock, k,
                                    observer=actions or costs)
            finally:
                backend.close()
            res = (*res, np.zeros(0), None if costs is None else costs.costs, None,
                   None if actions is None else actions.episodes)
            conn.send(("done", tid, res))
    except UserError as exc:
        conn.send(("error", None, str(exc)))
    except BaseException as exc:   # noqa: BLE001 - SystemExit and the like from the agent
        conn.send(("error", None, f"agent {spec} stopped its process: {_describe(exc)}"))


# how often the watchdog checks the workers at least, and the longest interval between two of its
# checks that it counts (a longer one: it was not running, nor, as a rule, were the workers)
_WATCH_PERIOD = 0.2
_WATCH_GAP = 1.0


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP or SIGTSTP, or by a debugger): state T or t in
    /proc/PID/stat. False where that cannot be read (no /proc, the process gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def overdue(clock, now, action_timeout, episode_timeout, describe=None) -> str | None:
    """What a worker's clock says is overdue at `now` (None: nothing). The worker writes the
    clock while it is read, so each entry is read once and only that copy is used: read twice,
    a get_action that ends between the two reads looks `now` seconds old (its start time reads
    as 0 the second time)."""
    action_t, episode_t, k, episode, step = clock[:5]
    where = (f"on {describe(int(k))} (episode {int(episode)}, step {int(step)})"
             if describe else "while being built")
    if action_t and now - action_t > action_timeout:
        return f"no action within {action_timeout:g} s (--action-timeout) {where}"
    if episode_t and now - episode_t > episode_timeout:
        return f"the episode took over {episode_timeout:g} s (--episode-timeout) {where}"
    return None


class _Worker:
    def __init__(self, ctx, spec, drain, name, workflow=None):
        self.conn, child = ctx.Pipe()
        self.clock = ctx.Array("d", 5, lock=False)
        out = drain.child_end(name)
        self.proc = ctx.Process(target=_worker, args=(spec, child, self.clock, out, workflow),
                                daemon=True)
        self.proc.start()
        child.close()
        if out is not None:
            out.close()
        self.task = None
        # the watchdog's last check of this worker, whether the worker was stopped then, the
        # get_action / episode starts it saw running and the time the worker could run since each
        self.checked, self.was_stopped = time.monotonic(), False
        self.started, self.ran = [0.0, 0.0], [0.0, 0.0]

    def run_clock(self, now: float) -> list:
        """The worker's clock (read once) as `overdue` judges it at `now`: each running start
        moved to `now` less the time the worker could run since it. The interval since the last
        check counts unless the worker was stopped at either end or it is over _WATCH_GAP long
        (see the module docstring)."""
        clock = list(self.clock[:5])
        stopped = _stopped(self.proc.pid)
        counts = not (stopped or self.was_stopped) and now - self.checked <= _WATCH_GAP
        for i, slot in enumerate((_ACTION_T, _EPISODE_T)):
            start = clock[slot]
            if start != self.started[i]:              # a new call or episode (or none)
                self.started[i], self.ran[i] = start, 0.0
            if start:
                if counts:
                    self.ran[i] += max(0.0, now - max(self.checked, start))
                clock[slot] = now - self.ran[i]
        self.checked, self.was_stopped = now, stopped
        return clock

    def stop(self, kill=False):
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def run_tasks(spec, tasks, n_workers, describe, action_timeout, episode_timeout, done,
              output=None):
    """Play tasks [(k, (k, backend, red, steps, seed, first, n, workflow[, attribute[, actions]])),
    …] (attribute: each result also carries the episodes' cost vectors, wfrl.evaluation.attribution;
    actions: their actions, as wfrl.evaluation.cage2.run_task's results) on n_workers
    agent processes; done(task index, result) for each finished one, in completion order.
    describe(k) names setting k. What the agents print goes to `output` (a file) or, prefixed
    with the worker, to stderr, never blocking them (wfrl.collect.output). Raises AgentFailed on
    the first failure (workers ended)."""
    from wfrl.collect.output import OutputDrain
    load_factory(spec)   # a bad MODULE:FACTORY fails here, before any process starts
    ctx = mp.get_context("spawn")
    drain = OutputDrain(to=output, what="agent output")
    try:
        _run_tasks(spec, ctx, drain, tasks, n_workers, describe, action_timeout,
                   episode_timeout, done)
    finally:
        drain.close()


def _run_tasks(spec, ctx, drain, tasks, n_workers, describe, action_timeout, episode_timeout,
               done):
    workers = []
    queue = list(enumerate(tasks))
    try:
        for i in range(max(1, min(n_workers, len(tasks)))):
            workers.append(_Worker(ctx, spec, drain, f"agent worker {i + 1}",
                                   tasks[0][1][7] if tasks else None))
        while queue or any(w.task is not None for w in workers):
            for w in workers:
                if w.task is None and queue:
                    w.task = queue.pop(0)
                    w.conn.send((w.task[0], w.task[1][1]))
            by_conn = {w.conn: w for w in workers}
            by_sentinel = {w.proc.sentinel: w for w in workers}
            ready = mp.connection.wait(list(by_conn) + list(by_sentinel),
                                       timeout=_WATCH_PERIOD)
            for r in ready:
                w = by_conn.get(r) or by_sentinel[r]
                msg = None
                if w.conn.poll():
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):   # the process is gone: reported below
                        w.proc.join(5)
                if msg is not None:
                    kind, tid, payload = msg
                    if kind == "error":
                        raise AgentFailed(payload)
                    done(tid, payload)
                    w.task = None
                elif not w.proc.is_alive():
                    where = f" on {describe(w.task[1][0])}" if w.task else ""
                    raise AgentFailed(f"agent {spec}: its process died{where} (exit code "
                                      f"{w.proc.exitcode})")
            now = time.monotonic()
            for w in workers:
                late = overdue(w.run_clock(now), now, action_timeout, episode_timeout,
                               describe if w.task else None)
                if late:
                    raise AgentFailed(f"agent {spec} hung: {late}")
    except BaseException:
        for w in workers:
            w.stop(kill=True)
        raise
    for w in workers:
        w.stop()


class CheckpointAgent:
    """A wfrl checkpoint (a file or pretrained:NAME) behind CAGE2's agent interface, played
    greedily on the observations handed to it — what `wfrl.load_agent` returns, and what CAGE2's
    own evaluation.py can run as its agent. `workflow` conditions an order-conditioned policy
    (default: the checkpoint's own). leaderboard: a policy with the belief input runs its particle
    filter by the leaderboard's CybORG code (default: the installed code)."""

    def __init__(self, checkpoint: str, workflow: str | None = None, leaderboard: bool = False):
        from wfrl._core import Actor
        from wfrl.collect.rollout import make_policy
        from wfrl.envs.actions import N_HOSTS
        from wfrl.evaluation.checkpoint import policy_of_checkpoint
        from wfrl.workflow import Workflow
        weights, net, self.workflow, lam, foothold = policy_of_checkpoint(checkpoint, workflow)
        if net.truth_input:
            raise UserError(f"{checkpoint} is a full-information policy (--truth-input): it needs "
                            "red's true access, which a CAGE2 agent is never given")
        self.actor = Actor(make_policy(weights, net, Workflow.parse(self.workflow), lam,
                                       foothold, greedy=True), leaderboard)
        self.actor.begin(0)
        self._access = np.zeros(N_HOSTS, np.uint8)   # greedy actions do not depend on it

    def get_action(self, observation, action_space=N_ACTIONS) -> int:
        return int(self.actor.act(np.asarray(observation, np.float32).reshape(-1),
                                  self._access)[0])

    def end_episode(self) -> None:
        self.actor.begin(0)


def load_agent(checkpoint: str, workflow: str | None = None,
               leaderboard: bool = False) -> CheckpointAgent:
    """`wfrl.load_agent("pretrained:critical_first")`: the checkpoint as a CAGE2 agent
    (CheckpointAgent; leaderboard: a belief policy's particles play by the leaderboard's CybORG
    code); a bad checkpoint or workflow raises wfrl.errors.UserError in one line."""
    return CheckpointAgent(checkpoint, workflow, leaderboard)


class WorkflowFollower:
    """The non-learning defender that follows a workflow by hand, from the observation alone:
    each step it Restores the host of the highest-priority unit type that the observation shows
    compromised (User or Privileged: an exploit was seen there since its last Restore; ties: the
    lower host index; User0, red's permanent foothold, is left out). With no such host it places
    a decoy — the first kind still open on the host of the latest scan, else on the
    highest-priority host with one open — and otherwise Sleeps. Every fix it makes is the top of
    its own view of the order."""

    def __init__(self, workflow: str = "critical_first"):
        from wfrl.envs.actions import N_HOSTS
        from wfrl.workflow import USER0, Workflow
        self.workflow = Workflow.parse(workflow)
        priority = self.workflow.host_priority()
        self._order = [h for h in sorted(range(N_HOSTS), key=lambda h: (priority[h], h))
                       if h != USER0]
        self.end_episode()

    def end_episode(self):
        from wfrl.features import MemoryTracker
        self.memory = MemoryTracker()

    def get_action(self, observation, action_space=N_ACTIONS):
        from wfrl.envs.actions import RESTORE_FIRST
        from wfrl.features import DECOY_USEFUL, decoy_action, open_decoys
        obs = np.asarray(observation).reshape(-1)
        mem = self.memory
        mem.update(obs)
        flagged = (obs[2::4] != 0) | (obs[3::4] != 0)
        action = next((RESTORE_FIRST + h for h in self._order if flagged[h]), None)
        if action is None:
            action = 0
            for h in ([mem.last_scan] if mem.last_scan >= 0 else []) + self._order:
                open_ = int(open_decoys(DECOY_USEFUL[h], mem.decoys[h]))
                if open_:
                    action = decoy_action((open_ & -open_).bit_length() - 1, h)
                    break
        mem.acted(action)
        return action


def follower(workflow: str = "critical_first") -> WorkflowFollower:
    """`--agent wfrl.evaluation.agents:follower`: the WorkflowFollower of the evaluation's --workflow."""
    return WorkflowFollower(workflow)
