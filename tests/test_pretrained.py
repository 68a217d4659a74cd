"""The policies shipped with the package: each loads by name, describes its network, is small, and
defends and complies on the simulator by the code it was trained for (fresh evaluation episodes,
not the ones it was selected on)."""
import numpy as np
import pytest

from wfrl.envs import make_backend
from wfrl.evaluation.checkpoint import weights_from_checkpoint
from wfrl.evaluation.returns import play
from wfrl.runlog import load_checkpoint, pretrained_names, resolve_checkpoint
from wfrl.workflow import Workflow

# name -> the backend it was trained on (and is held to here)
SHIPPED = {"critical_first": "sim", "critical_first_leaderboard": "sim:leaderboard",
           # the recipe trained on the family-train pool of reds (docs/robustness.md)
           "generalising": "sim"}
# order-conditioned policies that follow any workflow named to them
ANY_WORKFLOW = {"any_workflow": "sim", "any_workflow_leaderboard": "sim:leaderboard"}
# the full-information bounds, shipped as the teachers of --teacher (docs/limit.md)
TEACHERS = {"bound": "sim", "bound_leaderboard": "sim:leaderboard"}


def test_every_shipped_policy_is_tested_here():
    assert set(pretrained_names()) == set(SHIPPED) | set(ANY_WORKFLOW) | set(TEACHERS)


@pytest.mark.parametrize("name,backend", sorted(TEACHERS.items()))
def test_the_shipped_bound_reads_the_truth_and_defends(name, backend):
    """A teacher: the truth input on, small, no optimiser, its command and code recorded; on the
    simulator by its code it defends at the bound's strength (fresh episodes, with red's true
    access as its input); --teacher takes it for its own code only."""
    from wfrl.errors import UserError
    from wfrl.training.steps import load_teacher
    assert resolve_checkpoint(f"pretrained:{name}").stat().st_size < 400_000
    ck = load_checkpoint(f"pretrained:{name}")
    command = ck["provenance"]["command"]
    assert "optimizer" not in ck and "--truth-input" in command
    assert ("--backend sim:leaderboard" in command) == (backend == "sim:leaderboard")
    assert ck["config"]["backend"] == backend
    weights, net = weights_from_checkpoint(ck)
    assert net.truth_input and net.memory and net.mask and not net.belief
    wf = Workflow.parse(ck["workflow"])
    for red, floor in (("B_lineAgent", -13.0), ("RedMeanderAgent", -14.0)):
        stats = play(make_backend(backend, red), weights, net, wf, 30.0, False,
                     range(5_000_000, 5_000_200), 4242, greedy=True)
        assert np.mean([s.env_return for s in stats]) > floor, (name, red)
    assert load_teacher(f"pretrained:{name}", backend).net == net
    other = "sim" if backend == "sim:leaderboard" else "sim:leaderboard"
    with pytest.raises(UserError, match="the other CybORG code"):
        load_teacher(f"pretrained:{name}", other)


@pytest.mark.parametrize("name,backend", sorted(ANY_WORKFLOW.items()))
def test_any_workflow_policy_follows_every_workflow(name, backend):
    """Every one of the 120 workflows is accepted and followed (a short greedy check per
    workflow against B_line: 3 episodes; the 1,000-episode table is in docs/findings.md)."""
    from wfrl.evaluation.cage2 import policy_of_checkpoint
    from wfrl.workflow import all_workflows
    ck = load_checkpoint(f"pretrained:{name}")
    assert ck["any_workflow"] and "workflow" not in ck and "optimizer" not in ck
    assert ("--backend sim:leaderboard" in ck["provenance"]["command"]) == (
        backend == "sim:leaderboard")
    env = make_backend(backend, "B_lineAgent")
    fixes = compliant = 0
    returns = []
    for wf in all_workflows():
        weights, net, got, lam, foothold = policy_of_checkpoint(f"pretrained:{name}", str(wf))
        assert Workflow.parse(got) == wf
        stats = play(env, weights, net, wf, lam, foothold, range(5_000_000, 5_000_003), 4242,
                     greedy=True)
        returns += [s.env_return for s in stats]
        fixes += sum(s.fixes for s in stats)
        compliant += sum(s.compliant_fixes for s in stats)
    env.close()
    assert np.mean(returns) > -20.0 and compliant / fixes >= 0.95, (np.mean(returns),
                                                                    compliant / fixes)


def test_any_workflow_policy_asks_for_a_workflow_in_one_line(capsys):
    from wfrl.cli import main
    for argv in (["eval", "--checkpoint", "pretrained:any_workflow", "--episodes", "2"],
                 ["eval", "--cage2", "--checkpoint", "pretrained:any_workflow", "--episodes", "2"],
                 ["eval", "--checkpoint", "pretrained:any_workflow", "--workflow",
                  "user,user,op_host,defender,enterprise", "--episodes", "2"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("wfrl: error: "), err
    assert main(["eval", "--cage2", "--checkpoint", "pretrained:any_workflow", "--workflow",
                 "reverse", "--episodes", "2", "--json"]) == 0
    assert '"complete": true' in capsys.readouterr().out


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


def test_generalising_policy_holds_against_a_held_out_red():
    """The policy trained on family-train defends against the noisy Meander it never saw better
    than the specialist trained on B_line and Meander alone (fresh simulator episodes, the
    installed code; on CybORG, both codes: docs/robustness.md)."""
    backend, suffix = "sim", ""
    means = {}
    for name in ("generalising", "critical_first"):
        ck = load_checkpoint(f"pretrained:{name}{suffix}")
        weights, net = weights_from_checkpoint(ck)
        stats = play(make_backend(backend, "NoisyMeanderAgent"), weights, net,
                     Workflow.parse("critical_first"), 30.0, False, range(5_000_000, 5_000_300),
                     4242, greedy=True)
        means[name] = float(np.mean([s.env_return for s in stats]))
    assert means["generalising"] > means["critical_first"] + 1.0, means
