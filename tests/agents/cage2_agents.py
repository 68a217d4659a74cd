"""Agents written as a CAGE2 participant writes them — outside wfrl, with CAGE2's evaluation
interface (get_action(observation, action_space), end_episode()) — for `wfrl eval --cage2 --agent`
and `wfrl replay --agent`. Factories take no arguments."""
import os
import time

import numpy as np


class CheckpointAgent:
    """A wfrl checkpoint played greedily through the agent interface: the policy sees only the
    observations handed to it, like any submission."""

    def __init__(self, checkpoint):
        from wfrl._core import Actor

        from wfrl.collect.rollout import make_policy
        from wfrl.evaluation.cage2 import policy_of_checkpoint
        from wfrl.workflow import Workflow
        weights, net, wf, lam, foothold = policy_of_checkpoint(checkpoint)
        self.actor = Actor(make_policy(weights, net, Workflow.parse(wf), lam, foothold,
                                       greedy=True))
        self.actor.begin(0)
        self.unknown_access = np.zeros(13, np.uint8)   # greedy actions do not depend on it

    def get_action(self, observation, action_space):
        assert action_space == 145 and observation.shape == (52,), (action_space, observation)
        assert observation.dtype == np.int64 and set(np.unique(observation)) <= {0, 1}
        action, _, _, _ = self.actor.act(observation.astype(np.float32), self.unknown_access)
        return action

    def end_episode(self):
        self.actor.begin(0)


def critical_first():
    return CheckpointAgent(os.environ.get("WFRL_TEST_CHECKPOINT", "pretrained:critical_first"))


class Restorer:
    """Restores the first host the observation flags as compromised, else sleeps; returns numpy
    integers, as a torch/numpy agent does."""

    def get_action(self, observation, action_space):
        print("restorer: a line an agent prints")   # must not reach the --json output
        flagged = np.flatnonzero(observation.reshape(13, 4)[:, 2:].any(axis=1))
        return np.int64(132 + flagged[0]) if flagged.size else np.int64(0)

    def end_episode(self):
        pass


def restorer():
    return Restorer()


class Sleeper:
    """Never acts: red runs its whole plan (B_line reaches Op_Server0 and impacts it)."""

    def get_action(self, observation, action_space):
        return 0


def sleeper():
    return Sleeper()


class Stopping(Sleeper):
    """Sleeps, but its WFRL_TEST_STOP_AT-th get_action (default 5) is stopped by SIGSTOP for
    WFRL_TEST_STOP_FOR seconds (default 2), then continued by a helper process outside the
    group, as a user's Ctrl-Z and fg or a debugger stop it: WFRL_TEST_STOP=worker stops its own
    process, group (the default) its whole process group, the evaluation's included. Continued,
    the call takes 0.25 s more, so that the watchdog sees it running after the stop."""

    def __init__(self):
        self.calls = 0

    def get_action(self, observation, action_space):
        import signal
        import subprocess
        import sys
        self.calls += 1
        if self.calls == int(os.environ.get("WFRL_TEST_STOP_AT", "5")):
            seconds = float(os.environ.get("WFRL_TEST_STOP_FOR", "2"))
            whole = os.environ.get("WFRL_TEST_STOP", "group") == "group"
            target = -os.getpgrp() if whole else os.getpid()
            subprocess.Popen([sys.executable, "-c", f"import os, time; time.sleep({seconds}); "
                              f"os.kill({target}, {int(signal.SIGCONT)})"],
                             start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            os.kill(target, signal.SIGSTOP)
            time.sleep(0.25)
        return 0


def stopping():
    return Stopping()


class _Bad:
    def __init__(self, mode):
        self.mode, self.calls = mode, 0

    def get_action(self, observation, action_space):
        self.calls += 1
        after = int(os.environ.get("WFRL_TEST_FAIL_AFTER", "0"))   # good actions before failing
        if self.calls <= after:
            return 0
        if self.mode == "crash":
            raise ValueError("the agent's own bug")
        if self.mode == "out_of_range":
            return 145
        if self.mode == "not_int":
            return 3.0
        if self.mode == "hang":
            time.sleep(3600)
        if self.mode == "slow":
            time.sleep(0.2)
            return 0
        if self.mode == "exit":
            os._exit(3)
        return 0


def crashing():
    return _Bad("crash")


def out_of_range():
    return _Bad("out_of_range")


def not_int():
    return _Bad("not_int")


def hanging():
    return _Bad("hang")


def slow():
    return _Bad("slow")


def exiting():
    return _Bad("exit")


def broken_factory():
    raise RuntimeError("cannot load my model")


class NoGetAction:
    pass


def no_get_action():
    return NoGetAction()


class Chatty(Restorer):
    """The restorer, printing about 1 KB to stdout and to stderr at every step (a verbose model
    or debug output): tests/test_stress.py reads its evaluation's stderr slowly."""

    def get_action(self, observation, action_space):
        import sys
        print("chatty: " + "x" * 500)
        print("chatty on stderr: " + "y" * 500, file=sys.stderr)
        return super().get_action(observation, action_space)


def chatty():
    return Chatty()
