import itertools

import numpy as np
import pytest

from wfrl.envs.actions import HOSTS
from wfrl.errors import UserError
from wfrl.workflow import (
    ALL_WORKFLOWS,
    CANONICAL,
    COND_DIM,
    HOST_TYPE,
    UNIT_TYPES,
    Workflow,
    all_workflows,
    kendall_distance,
)


def test_parse_comma_and_arrow_forms_agree():
    a = Workflow.parse("defender,enterprise,op_server,op_host,user")
    b = Workflow.parse("defender → enterprise → op_server → op_host → user")
    c = Workflow.parse(" defender -> enterprise->op_server -> op_host ->user ")
    assert a == b == c
    assert a.names == UNIT_TYPES
    assert str(a) == "defender,enterprise,op_server,op_host,user"
    assert Workflow.parse(a.arrow()) == a


@pytest.mark.parametrize("text,msg", [
    ("defender,enterprise,op_server,op_host,printer", "unknown unit type 'printer'"),
    ("defender,enterprise,op_server,op_host,defender", "more than once"),
    ("defender,enterprise,op_server,op_host", "got 4"),
    ("defender,enterprise,op_server,op_host,user,user", "more than once"),
    ("", "got 0"),
])
def test_parse_rejects_bad_orders(text, msg):
    with pytest.raises(UserError, match=msg):
        Workflow.parse(text)


def test_enumeration_is_complete_and_index_stable():
    wfs = all_workflows()
    assert len(wfs) == 120 == len(set(wfs))
    assert [w.index for w in wfs] == list(range(120))
    assert all(Workflow.from_index(w.index) == w for w in wfs)
    assert ALL_WORKFLOWS[0] == (0, 1, 2, 3, 4)
    assert ALL_WORKFLOWS[119] == (4, 3, 2, 1, 0)
    assert Workflow.parse("user,op_host,op_server,enterprise,defender").index == 119
    with pytest.raises(UserError, match=r"workflow index 120 outside \[0, 120\)"):
        Workflow.from_index(120)


def test_onehot_is_position_major():
    w = Workflow.parse("op_server,user,defender,enterprise,op_host")
    v = w.onehot()
    assert v.shape == (COND_DIM,) and v.dtype == np.float32 and v.sum() == 5
    for pos, name in enumerate(w.names):
        assert v[5 * pos + UNIT_TYPES.index(name)] == 1.0
    onehots = {tuple(x.onehot()) for x in all_workflows()}
    assert len(onehots) == 120


def test_kendall_distance_properties():
    wfs = all_workflows()
    ident = Workflow.parse("balanced")
    rev = Workflow.parse("reverse")
    assert kendall_distance(ident, ident) == 0.0
    assert kendall_distance(ident, rev) == 1.0
    swap = Workflow.parse("enterprise,defender,op_server,op_host,user")
    assert kendall_distance(ident, swap) == pytest.approx(0.1)
    rng = np.random.default_rng(0)
    for _ in range(200):
        a, b, c = (wfs[i] for i in rng.integers(0, 120, 3))
        assert kendall_distance(a, b) == kendall_distance(b, a)
        assert kendall_distance(a, c) <= kendall_distance(a, b) + kendall_distance(b, c) + 1e-12
        assert 0.0 <= kendall_distance(a, b) <= 1.0
        assert (kendall_distance(a, b) == 0) == (a == b)


def test_kendall_matches_bubble_sort_count():
    # Independent definition: adjacent swaps needed to turn one order into the other.
    def swaps(a, b):
        seq = [b.order.index(t) for t in a.order]
        return sum(1 for i, j in itertools.combinations(range(5), 2) if seq[i] > seq[j])
    wfs = all_workflows()
    for a in wfs[::7]:
        for b in wfs[::11]:
            assert kendall_distance(a, b) == pytest.approx(swaps(a, b) / 10)


def test_host_types_follow_design():
    expected = {"Defender": "defender", "Enterprise0": "enterprise", "Enterprise1": "enterprise",
                "Enterprise2": "enterprise", "Op_Server0": "op_server", "Op_Host0": "op_host",
                "Op_Host1": "op_host", "Op_Host2": "op_host", "User0": "user", "User1": "user",
                "User2": "user", "User3": "user", "User4": "user"}
    assert {h: UNIT_TYPES[t] for h, t in zip(HOSTS, HOST_TYPE)} == expected


def test_canonical_names_parse():
    assert set(CANONICAL) == {"critical_first", "enterprise_focus", "user_priority",
                              "operational_focus", "balanced", "reverse"}
    for name, order in CANONICAL.items():
        assert Workflow.parse(name).names == order
