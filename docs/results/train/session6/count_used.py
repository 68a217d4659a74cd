"""Columns and actions a recorded default-search batch uses (recipe settings, B_line, critical_first,
three 50-episode batches of an untrained policy). Output: count_used.txt.
    PYTHONPATH=. python docs/results/train/session6/count_used.py"""
import numpy as np, torch
from wfrl.config import PPOConfig, preset_settings
from wfrl.ppo.batch import to_batch
from wfrl.ppo.learner import PPOLearner
from wfrl.workflow import Workflow
from wfrl.benchmarks import make_collector
_, pp = preset_settings("recipe"); ppo = PPOConfig(**pp); net = ppo.net()
print(ppo)
wf = Workflow.parse("critical_first"); E = 50
cond = np.tile(wf.onehot(), (E, 1))
lrn = PPOLearner(ppo, seed=1)
c = make_collector("sequential", "sim", "B_lineAgent", net, 1, 30.0, False, 1, E)
for b in range(3):
    c.collect(lrn.flat_weights(), 0, wf, b*E, E)
    batch = to_batch(c.buffer, cond, ppo.gamma, ppo.gae_lambda, net)
    x = batch.obs; nz = (x != 0).any(0)
    const = (x == x[0]).all(0)
    print("rows", x.shape, "nonzero cols", nz.sum(), "constant cols", const.sum(), "nonconst", (~const).sum())
    m = np.asarray(batch.masks)
    print(" mask", m.shape, m.dtype, "actions allowed somewhere", m.any(0).sum(), "allowed everywhere", m.all(0).sum())
c.close()
