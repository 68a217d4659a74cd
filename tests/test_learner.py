"""The learner learns: PPO on a tiny task with a known optimum, through the real buffer, GAE and
batch path the collectors use (no CybORG)."""
import numpy as np
import pytest

from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
from wfrl.ppo.batch import to_batch
from wfrl.ppo.learner import PPOConfig, PPOLearner
from wfrl.ppo.policy import IN_DIM, NumpyPolicy
from wfrl.workflow import Workflow

K, L = 6, 10  # targets, steps per episode
WF_A = Workflow.parse("balanced")
WF_B = Workflow.parse("reverse")


def correct_action(target, wf):
    # The best action depends on the observation and on the workflow conditioning.
    return 15 + target if wf == WF_A else 132 + target


def play(policy, wf, rng, buffer=None, row=0, greedy=False):
    x = np.zeros(IN_DIM, np.float32)
    x[52:] = wf.onehot()
    total = 0.0
    for t in range(L):
        target = int(rng.integers(K))
        x[:52] = 0
        x[target] = 1
        a, logp, v = policy.act(x, rng, greedy)
        r = 1.0 if a == correct_action(target, wf) else 0.0
        total += r
        if buffer is not None:
            buffer.push(row, x[:52].copy(), a, logp, v, r, t == L - 1, np.zeros(13, np.uint8))
    return total


@pytest.mark.slow
def test_ppo_reaches_the_known_optimum():
    # gamma 0: every step is an independent decision, so the optimum is reachable exactly.
    learner = PPOLearner(PPOConfig(hidden=32, gamma=0.0), seed=0)
    rng = np.random.default_rng(0)
    n_rows = 32
    buffer = compiled_buffer(allocate_trajectory(n_rows, L))
    wfs = [WF_A if i % 2 == 0 else WF_B for i in range(n_rows)]
    row_cond = np.stack([w.onehot() for w in wfs])
    first = None
    for update in range(100):
        policy = NumpyPolicy(learner.flat_weights(), 32)
        buffer.clear()
        returns = [play(policy, wfs[i], rng, buffer, i) for i in range(n_rows)]
        first = np.mean(returns) if first is None else first
        stats = learner.update(to_batch(buffer, row_cond, 0.0, 0.95))
    policy = NumpyPolicy(learner.flat_weights(), 32)
    greedy = [play(policy, wf, rng, greedy=True) for wf in (WF_A, WF_B) for _ in range(20)]
    assert first < 1.0                   # starts near random (10/145 per episode)
    assert np.mean(greedy) >= 0.95 * L   # optimum is L
    assert stats["value_loss"] < 0.05      # the critic learned the per-step value too
    assert learner.version == 100
