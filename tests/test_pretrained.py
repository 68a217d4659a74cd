"""The policies shipped with the package: each loads by name, describes its network, is small, and
defends and complies on the simulator by the code it was trained for (fresh evaluation episodes,
not the ones it was selected on)."""
import numpy as np
import pytest

from wfrl.envs import make_backend
from wfrl.evaluate import play, weights_from_checkpoint
from wfrl.runlog import load_checkpoint, pretrained_names, resolve_checkpoint
from wfrl.workflow import Workflow

# name -> the backend it was trained on (and is held to here)
SHIPPED = {"critical_first": "sim", "critical_first_leaderboard": "sim:leaderboard"}


def test_every_shipped_policy_is_tested_here():
    assert set(pretrained_names()) == set(SHIPPED)


@pytest.mark.parametrize("name,backend", sorted(SHIPPED.items()))
def test_shipped_policy_loads_and_defends(name, backend):
    path = resolve_checkpoint(f"pretrained:{name}")
    assert path.stat().st_size < 400_000
    ck = load_checkpoint(f"pretrained:{name}")
    command = ck["provenance"]["command"]
    assert "optimizer" not in ck and command.startswith("python -m wfrl train")
    assert ("--backend sim:leaderboard" in command) == (backend == "sim:leaderboard")
    weights, net = weights_from_checkpoint(ck)
    assert net.memory and net.mask
    wf = Workflow.parse(ck["workflow"])
    assert wf == Workflow.parse("critical_first")
    for red, floor in (("B_lineAgent", -20.0), ("RedMeanderAgent", -25.0)):
        stats = play(make_backend(backend, red), weights, net, wf, 30.0, False,
                     range(5_000_000, 5_000_200), 4242, greedy=True)
        ret = np.array([s.env_return for s in stats])
        fixes = sum(s.fixes for s in stats)
        compliance = sum(s.compliant_fixes for s in stats) / max(fixes, 1)
        # a sleeping defender scores about -1,130 (B_line) and -970 (Meander) here
        assert ret.mean() > floor, (red, ret.mean())
        assert compliance >= 0.95, (red, compliance)
