"""One PPO update (recipe settings, a recorded 50-episode B_line batch, fresh) on N torch threads:
    PYTHONPATH=. python docs/results/speed/2026-11-27_learner_threads/update_threads.py N
beside_busy_core.txt: run while another process (a single-process CybORG replay) held one of the
2 cores."""
import sys, time, numpy as np, torch
from wfrl.config import PPOConfig, preset_settings
from wfrl.ppo.batch import to_batch
from wfrl.ppo.learner import PPOLearner
from wfrl.workflow import Workflow
from wfrl.benchmarks import make_collector
nth = int(sys.argv[1]); torch.set_num_threads(nth)
_, pp = preset_settings("recipe"); ppo = PPOConfig(**pp); net = ppo.net()
wf = Workflow.parse("critical_first"); E = 50
cond = np.tile(wf.onehot(), (E, 1))
lrn = PPOLearner(ppo, seed=1)
c = make_collector("sequential", "sim", "B_lineAgent", net, 1, 30.0, False, 1, E)
c.collect(lrn.flat_weights(), 0, wf, 0, E)
batch = to_batch(c.buffer, cond, ppo.gamma, ppo.gae_lambda, net)
print("rows", len(batch), "in", batch.obs.shape)
for _ in range(3): lrn.update(batch)
t=time.perf_counter(); N=20
for _ in range(N): lrn.update(batch)
dt=(time.perf_counter()-t)/N
print(f"threads {nth}: update {dt*1000:.1f} ms, per mb step {dt/24*1000:.2f} ms")
if len(sys.argv)>2:
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(5): lrn.update(batch)
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
c.close()
