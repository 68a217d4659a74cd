"""One PPO update (recipe settings, a recorded 50-episode B_line batch, stale: the decoupled
objective, as in an overlapped run) with the full-width and the compact (default) minibatch
steps, on one and two torch threads, alternated six times; medians.
    PYTHONPATH=. python docs/results/speed/2026-11-27_learner_threads/update_variants.py"""
import time

import numpy as np
import torch

from wfrl.benchmarks import make_collector
from wfrl.config import PPOConfig, preset_settings
from wfrl.ppo.batch import to_batch
from wfrl.ppo.learner import PPOLearner
from wfrl.workflow import Workflow

_, pp = preset_settings("recipe")
ppo = PPOConfig(**pp)
net = ppo.net()
wf = Workflow.parse("critical_first")
E = 50
c = make_collector("sequential", "sim", "B_lineAgent", net, 1, 30.0, False, 1, E)
c.collect(PPOLearner(ppo, seed=1).flat_weights(), 0, wf, 0, E)
batch = to_batch(c.buffer, np.tile(wf.onehot(), (E, 1)), ppo.gamma, ppo.gae_lambda, net)
c.close()
variants = {"full width, 1 thread": (False, 1), "full width, 2 threads": (False, 2),
            "compact, 1 thread": (True, 1), "compact, 2 threads": (True, 2)}
learners = {k: PPOLearner(ppo, seed=1, compact=cmp) for k, (cmp, _) in variants.items()}
times = {k: [] for k in variants}
for _ in range(6):
    for k, (_, threads) in variants.items():
        torch.set_num_threads(threads)
        t = time.perf_counter()
        for _ in range(5):
            learners[k].update(batch, stale=True)
        times[k].append((time.perf_counter() - t) / 5)
for k, v in times.items():
    print(f"{k:24s} median {np.median(v) * 1e3:6.1f} ms per update "
          f"({E / np.median(v):5.0f} episodes/s)")
