import time, numpy as np, torch
from wfrl.config import PPOConfig, preset_settings
from wfrl.ppo.batch import to_batch
from wfrl.ppo.learner import PPOLearner
import wfrl.ppo.learner as L
from wfrl.workflow import Workflow
from wfrl.benchmarks import make_collector
from wfrl.protocol import first_fix_reward
torch.set_num_threads(1)
_, pp = preset_settings("recipe"); ppo = PPOConfig(**pp); net = ppo.net()
wf = Workflow.parse("critical_first"); E = 50
cond = np.tile(wf.onehot(), (E, 1))
c = make_collector("sequential", "sim", "B_lineAgent", net, 1, 30.0, False, 1, E)
l = PPOLearner(ppo, seed=1)
c.collect(l.flat_weights(), 0, wf, 0, E)
batch = to_batch(c.buffer, cond, ppo.gamma, ppo.gae_lambda, net, first_fix=first_fix_reward(ppo, c))
c.close()
for _ in range(3): l.update(batch, stale=True)
acc = {"actor": 0.0, "critic": 0.0, "prox": 0.0}
def wrap(name, f):
    def g(*a, **k):
        t = time.perf_counter(); r = f(*a, **k); acc[name] += time.perf_counter() - t; return r
    return g
l._actor_grads = wrap("actor", l._actor_grads); l._critic_grads = wrap("critic", l._critic_grads); l.proximal_weights = wrap("prox", l.proximal_weights)
N = 20; t = time.perf_counter()
for _ in range(N): l.update(batch, stale=True)
wall = (time.perf_counter() - t) / N * 1e3
print("wall ms", round(wall,1), {k: round(v / N * 1e3, 1) for k, v in acc.items()})
l.split = False; acc.update(actor=0, critic=0, prox=0); t = time.perf_counter()
for _ in range(N): l.update(batch, stale=True)
wall = (time.perf_counter() - t) / N * 1e3
print("one-thread wall ms", round(wall,1), {k: round(v / N * 1e3, 1) for k, v in acc.items()})
