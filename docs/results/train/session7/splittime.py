import sys, time, numpy as np, torch
from wfrl.config import PPOConfig, preset_settings
from wfrl.ppo.batch import to_batch
from wfrl.ppo.learner import PPOLearner
from wfrl.workflow import Workflow
from wfrl.benchmarks import make_collector
from wfrl.protocol import first_fix_reward
torch.set_num_threads(1)
_, pp = preset_settings("recipe"); ppo = PPOConfig(**pp); net = ppo.net()
wf = Workflow.parse("critical_first"); E = 50
cond = np.tile(wf.onehot(), (E, 1))
c = make_collector("sequential", "sim", "B_lineAgent", net, 1, 30.0, False, 1, E)
l0 = PPOLearner(ppo, seed=1)
c.collect(l0.flat_weights(), 0, wf, 0, E)
ff = first_fix_reward(ppo, c)
batch = to_batch(c.buffer, cond, ppo.gamma, ppo.gae_lambda, net, first_fix=ff)
ls = {"one": PPOLearner(ppo, seed=1, split=False), "split": PPOLearner(ppo, seed=1)}
for l in ls.values():
    for _ in range(3): l.update(batch, stale=True)
res = {k: [] for k in ls}
for r in range(8):
    for k, l in ls.items():
        t = time.perf_counter()
        for _ in range(5): l.update(batch, stale=True)
        res[k].append((time.perf_counter() - t) / 5 * 1e3)
for k in res: print(k, 'median ms', round(float(np.median(res[k])), 1), [round(x,1) for x in res[k]])
print('ratio', np.median(res['one'])/np.median(res['split']))
c.close()
