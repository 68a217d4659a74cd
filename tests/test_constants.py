"""The Python constants and their C counterparts (csrc/*.h, exported by wfrl._core) are the same
numbers: a change on one side only fails here, not silently in a rollout."""
import pathlib
import re

import pytest
import wfrl._core as core

from wfrl import features, workflow
from wfrl.envs import actions, base, reds
from wfrl.ppo import netspec

CSRC = pathlib.Path(__file__).resolve().parents[1] / "csrc"


def _defines():
    """Every numeric `#define WFRL_NAME value` in csrc/*.h, evaluated (values may use earlier
    defines); attribute macros (WFRL_SIMD_CLONES and the like) are not numbers and are left out."""
    raw = {}
    for h in sorted(CSRC.glob("*.h")):
        for m in re.finditer(r"^#define (WFRL_[A-Z0-9_]+) (.+?)\s*(?:/\*.*)?$", h.read_text(), re.M):
            if "__attribute__" in m.group(2) or m.group(2).endswith("\\"):
                continue
            raw[m.group(1)] = m.group(2)
    out = {}

    def value(name):
        if name not in out:
            expr = re.sub(r"WFRL_[A-Z0-9_]+", lambda m: repr(value(m.group(0))), raw[name])
            expr = re.sub(r"\b(0x[0-9A-Fa-f]+|[0-9]+)U?L{0,2}\b", r"\1", expr)  # 1ULL -> 1
            out[name] = eval(expr.rstrip("f").replace("f)", ")"), {})  # noqa: S307 (our headers)
        return out[name]

    for name in raw:
        value(name)
    return out


C = _defines()

PAIRS = [
    ("WFRL_OBS_DIM", base.OBS_DIM), ("WFRL_N_ACTIONS", actions.N_ACTIONS),
    ("WFRL_N_HOSTS", actions.N_HOSTS), ("WFRL_N_HOSTS", len(actions.HOSTS)),
    ("WFRL_EP_LEN", base.EP_LEN), ("WFRL_N_UNIT_TYPES", workflow.N_TYPES),
    ("WFRL_COND_DIM", workflow.COND_DIM), ("WFRL_IN_DIM", netspec.IN_DIM),
    ("WFRL_MEM_DIM", features.MEM_DIM), ("WFRL_N_DECOYS", actions.N_DECOYS),
    ("WFRL_N_DECOYS", len(actions.DECOY_KINDS)),
    ("WFRL_ACT_DECOY", actions.DECOY_FIRST), ("WFRL_DECOY_FIRST", actions.DECOY_FIRST),
    ("WFRL_ACT_ANALYSE", actions.ANALYSE_FIRST), ("WFRL_ACT_REMOVE", actions.REMOVE_FIRST),
    ("WFRL_ACT_RESTORE", actions.RESTORE_FIRST), ("WFRL_MONITOR", actions.MONITOR),
    ("WFRL_DECOY_APACHE", actions.DECOY_KINDS.index("Apache")),
    ("WFRL_DECOY_VSFTPD", actions.DECOY_KINDS.index("Vsftpd")),
    ("WFRL_USER0", workflow.USER0), ("WFRL_MASKED_LOGIT", features.MASKED_LOGIT),
    ("WFRL_POP_MAX", reds.POPULATION_MAX), ("WFRL_POP_SALT", reds.POPULATION_SALT),
]


@pytest.mark.parametrize("name,python", PAIRS, ids=[f"{n}={v}" for n, v in PAIRS])
def test_header_define_equals_python_constant(name, python):
    assert C[name] == python, f"{name}: C {C[name]} vs Python {python}"


def test_extension_exports_equal_python_constants():
    assert (core.OBS_DIM, core.N_ACTIONS, core.N_HOSTS, core.EP_LEN, core.COND_DIM) == (
        base.OBS_DIM, actions.N_ACTIONS, actions.N_HOSTS, base.EP_LEN, workflow.COND_DIM)
    assert core.IN_DIM == netspec.IN_DIM and core.MEM_DIM == features.MEM_DIM
    assert core.in_dim(True) == netspec.IN_DIM + features.MEM_DIM


def test_the_red_table_and_the_c_enums_agree():
    # wfrl.envs.reds declares every red and pool once; csrc/wfrl_cage2.h's enums, variant shift
    # and pool arrays, and csrc/wfrl_belief.h's particle bits, are its C twin
    from wfrl.envs import reds
    e = core.C_RED_ENUM
    assert {n: e[c] for n, c in (("B_lineAgent", "RED_BLINE"), ("RedMeanderAgent", "RED_MEANDER"),
                                 ("SleepAgent", "RED_SLEEP"))} == reds.BASE_CODES
    assert {v: e[f"RV_{v.upper()}"] for v in reds.VARIANTS} == reds.VARIANTS
    assert e["WFRL_RED_VARIANT_SHIFT"] == reds.VARIANT_SHIFT
    assert {p.name: p.code for p in reds.POOL_SPECS} == {
        "mixed": e["RED_MIXED"], "family": e["RED_POOL_FAMILY"],
        "family-train": e["RED_POOL_TRAIN"], "family-heldout": e["RED_POOL_HELDOUT"]}
    for pool in reds.POOL_SPECS[1:]:
        assert core.C_POOL_MEMBERS[pool.code] == tuple(reds.red_code(m) for m in pool.members)
    assert {r: C[f"WFRL_PLAN_RED_{k}"] for r, k in (("B_lineAgent", "BLINE"),
                                                   ("RedMeanderAgent", "MEANDER"),
                                                   ("SleepAgent", "SLEEP"))} == \
        features.PARTICLE_RED_BITS
    # every code distinct, and the simulator plays each red as its code says
    codes = reds.red_codes()
    assert len(set(codes.values())) == len(codes) == len(base.TRAIN_RED_AGENTS)
    for spec in reds.RED_SPECS:
        sim = core.Cage2Sim(1, spec.name)
        assert sim.red_kind == spec.code == core.red_kind_code(spec.name)
        assert core.red_kind_code(spec.name, True) == spec.code | C["WFRL_RED_LEADERBOARD"]
    with pytest.raises(ValueError, match="unknown red agent 'EvilAgent'"):
        core.red_kind_code("EvilAgent")


def test_action_layout_covers_the_145_actions():
    # Sleep, Monitor, then 13 × Analyse, 13 × Remove, 8 × 13 decoys, 13 × Restore
    assert C["WFRL_ACT_ANALYSE"] == 2
    assert C["WFRL_ACT_REMOVE"] == C["WFRL_ACT_ANALYSE"] + actions.N_HOSTS
    assert C["WFRL_ACT_DECOY"] == C["WFRL_ACT_REMOVE"] + actions.N_HOSTS
    assert C["WFRL_ACT_RESTORE"] == C["WFRL_ACT_DECOY"] + actions.N_DECOYS * actions.N_HOSTS
    assert C["WFRL_ACT_RESTORE"] + actions.N_HOSTS == actions.N_ACTIONS


def test_action_names_follow_the_layout():
    names = [actions.action_name(a) for a in range(actions.N_ACTIONS)]
    assert len(set(names)) == actions.N_ACTIONS
    assert names[:3] == ["Sleep", "Monitor", "Analyse Defender"]
    assert names[actions.REMOVE_FIRST + 12] == "Remove User4"
    assert names[actions.DECOY_FIRST + 2 * actions.N_HOSTS] == "DecoyHarakaSMPT Defender"
    assert names[actions.RESTORE_FIRST - 1] == "DecoyVsftpd User4"
    assert names[actions.RESTORE_FIRST + actions.HOSTS.index("Op_Server0")] == "Restore Op_Server0"
