import time, numpy as np
from wfrl.envs import make_backend
from wfrl.collect.rollout import make_policy, run_episodes
from wfrl.ppo.netspec import NetSpec
from wfrl.workflow import Workflow
wf = Workflow.parse("op_server,enterprise,defender,op_host,user")
rng = np.random.default_rng(0)
net = NetSpec(64, True, True)
w = (rng.standard_normal(net.n_params) * 0.1).astype(np.float32)
pol = make_policy(w, net, wf, 30.0)
b = make_backend("sim", "B_lineAgent")
t = time.perf_counter(); run_episodes(b, pol, range(0, 10000), 1); dt = time.perf_counter() - t
print(f"{dt/10000*1e3:.3f} ms/episode")
