import sys, time
from pathlib import Path
from wfrl.search.state import load_state
from wfrl.search.optimizer import WorkflowOptimizer
st, _ = load_state(Path(sys.argv[1]))
WorkflowOptimizer.from_state(st.optimizer).ask()
ts = []
for _ in range(4):
    opt = WorkflowOptimizer.from_state(st.optimizer); t = time.perf_counter(); opt.ask(); ts.append(time.perf_counter() - t)
print(sys.argv[2], "ask s", [round(x, 3) for x in ts])
