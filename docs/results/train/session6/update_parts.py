import sys, time, numpy as np, torch
from wfrl.config import PPOConfig, preset_settings
from wfrl.ppo.batch import to_batch
from wfrl.ppo.learner import PPOLearner
from wfrl.workflow import Workflow
from wfrl.benchmarks import make_collector
from wfrl.protocol import first_fix_reward
nth = int(sys.argv[1]); torch.set_num_threads(nth)
_, pp = preset_settings("recipe"); ppo = PPOConfig(**pp); net = ppo.net()
wf = Workflow.parse("critical_first"); E = 50
cond = np.tile(wf.onehot(), (E, 1))
lrn = PPOLearner(ppo, seed=1)
c = make_collector("sequential", "sim", "B_lineAgent", net, 1, 30.0, False, 1, E)
c.collect(lrn.flat_weights(), 0, wf, 0, E)
ff = first_fix_reward(ppo, c)
N=20
t=time.perf_counter()
for _ in range(N): batch = to_batch(c.buffer, cond, ppo.gamma, ppo.gae_lambda, net, first_fix=ff)
print(f"to_batch {(time.perf_counter()-t)/N*1e3:.1f} ms")
for _ in range(3): lrn.update(batch)
for stale in (False, True):
    t=time.perf_counter()
    for _ in range(N): lrn.update(batch, stale=stale)
    print(f"threads {nth} stale {stale}: update {(time.perf_counter()-t)/N*1e3:.1f} ms")
obs=torch.from_numpy(batch.obs); act=torch.from_numpy(batch.actions.astype(np.int64)); lp=torch.from_numpy(batch.logprobs); mk=torch.from_numpy(batch.masks.view(np.uint8))
t=time.perf_counter()
for _ in range(N): lrn.proximal_weights(obs, act, lp, mk)
print(f"proximal {(time.perf_counter()-t)/N*1e3:.1f} ms")
t=time.perf_counter()
for _ in range(N): c.collect(lrn.flat_weights(), 0, wf, 0, E)
print(f"collect {(time.perf_counter()-t)/N*1e3:.1f} ms")
c.close()
