"""Where a default search's wall time goes: wrappers accumulate time in the main thread's pieces."""
import sys, time, collections
t_start = time.perf_counter()
acc = collections.defaultdict(float); cnt = collections.Counter()
def wrap(owner, name, key=None):
    f = getattr(owner, name); key = key or f"{owner.__name__}.{name}"
    def g(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally: acc[key] += time.perf_counter() - t; cnt[key] += 1
    setattr(owner, name, g)
import wfrl.search.loop as loop, wfrl.protocol as proto, wfrl.runlog as runlog, wfrl.ppo.learner as L
import wfrl.search.optimizer as O, wfrl.search.plots as P, wfrl.ppo.batch as B, wfrl.search.state as S
t_imp = time.perf_counter() - t_start
for owner, name in [(loop.WorkflowSearch, "_commit"), (loop.WorkflowSearch, "_record_visit"), (loop.WorkflowSearch, "_pick_next"),
                    (loop.WorkflowSearch, "_learner_for"), (runlog.CsvLog, "append"), (O.WorkflowOptimizer, "ask"), (O.WorkflowOptimizer, "tell"),
                    (L.PPOLearner, "update"), (proto._Background, "wait"), (loop.WorkflowSearch, "_close"), (loop.WorkflowSearch, "_train_update"),
                    (S, "save_state")]:
    wrap(owner, name)
proto.to_batch = (lambda f: (lambda *a, **k: (lambda t: (f(*a, **k), acc.__setitem__('to_batch', acc['to_batch'] + time.perf_counter() - t))[0])(time.perf_counter())))(proto.to_batch)
P.plot_run = (lambda f: (lambda *a, **k: (lambda t: (f(*a, **k), acc.__setitem__('plot_run', acc['plot_run'] + time.perf_counter() - t))[0])(time.perf_counter())))(P.plot_run)
# direct (non-overlapped) collections in LearnerSteps.step
orig_step = proto.LearnerSteps.step
from wfrl.cli import main
t0 = time.perf_counter()
rc = main(["train", "--out", sys.argv[1], "--force"])
wall = time.perf_counter() - t0
print(f"imports before main {t_imp:.2f} s; main {wall:.2f} s")
for k in sorted(acc, key=lambda k: -acc[k]): print(f"{k:40s} {acc[k]:7.2f} s  n={cnt[k]}")
