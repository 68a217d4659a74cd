"""The policy shipped with the package: it loads by name, describes its network, is small, and
defends and complies on the simulator (fresh evaluation episodes, not the ones it was selected on)."""
import numpy as np

from wfrl.envs import make_backend
from wfrl.evaluate import play, weights_from_checkpoint
from wfrl.runlog import load_checkpoint, pretrained_names, resolve_checkpoint
from wfrl.workflow import Workflow


def test_shipped_policy_loads_and_defends():
    assert "critical_first" in pretrained_names()
    path = resolve_checkpoint("pretrained:critical_first")
    assert path.stat().st_size < 400_000
    ck = load_checkpoint("pretrained:critical_first")
    assert "optimizer" not in ck and ck["provenance"]["command"].startswith("python -m wfrl train")
    weights, net = weights_from_checkpoint(ck)
    assert net.memory and net.mask
    wf = Workflow.parse(ck["workflow"])
    assert wf == Workflow.parse("critical_first")
    for red, floor in (("B_lineAgent", -20.0), ("RedMeanderAgent", -25.0)):
        stats = play(make_backend("sim", red), weights, net, wf, 30.0, False,
                     range(5_000_000, 5_000_200), 4242, greedy=True)
        ret = np.array([s.env_return for s in stats])
        fixes = sum(s.fixes for s in stats)
        compliance = sum(s.compliant_fixes for s in stats) / max(fixes, 1)
        # a sleeping defender scores about -1,130 (B_line) and -970 (Meander) here
        assert ret.mean() > floor, (red, ret.mean())
        assert compliance >= 0.95, (red, compliance)
