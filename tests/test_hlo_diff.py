"""The recompile explainer on HLO that the real torch_xla prints (IR debug on: source metadata per op)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("PJRT_DEVICE", "CPU")
torch = pytest.importorskip("torch")
torch_xla = pytest.importorskip("torch_xla")

from ptxla_perf import hlo_diff  # noqa: E402

X = torch_xla._XLAC


@pytest.fixture(scope="module")
def dev():
    X._set_ir_debug(True)
    yield torch_xla.device()
    X._set_ir_debug(False)


def hlo(*tensors):
    return X._get_xla_tensors_hlo(list(tensors))


def test_int_index_is_a_baked_constant_at_its_line(dev):
    table = torch.randn(8, 4, device=dev)
    torch_xla.sync()
    a = hlo(table[1] * 2)
    b = hlo(table[2] * 2)
    d = hlo_diff.diff_hlo(a, b)
    assert not d.same and d.cause == "constant"
    changed = d.first_changed_sources()
    assert changed[0].op == "slice" and changed[0].source_file == __file__
    assert any("[1:2]" in line and "[2:3]" in line for line in d.summary_lines())


def test_shape_change_is_input_shapes(dev):
    w = torch.randn(4, 4, device=dev)
    x1, x2 = torch.randn(2, 4).to(dev), torch.randn(3, 4).to(dev)
    torch_xla.sync()
    d = hlo_diff.diff_hlo(hlo((x1 @ w).sum()), hlo((x2 @ w).sum()))
    assert d.cause == "input_shapes"
    assert ("f32[2,4]", "f32[3,4]") in d.input_shapes


def test_first_graph_that_also_initialised_is_graph_structure_not_input_shapes(dev):
    """Step 0's graph also ran `torch.randn` (its only input: the RNG seed, s64[]); step 1's takes the result
    (f32[16,16]). One input each, other shapes - but other ops: warm-up, not a shape change."""
    w0 = torch.randn(16, 16, device=dev)
    first = hlo((w0 * 0.5).tanh())
    torch_xla.sync()
    d = hlo_diff.diff_hlo(first, hlo((w0 * 0.87).tanh()))
    assert d.input_shapes and d.cause == "graph_structure", (d.input_shapes, d.cause, d.size)


def test_identical_graphs_are_same(dev):
    w = torch.randn(4, 4, device=dev)
    torch_xla.sync()
    assert hlo_diff.diff_hlo(hlo(w.relu()), hlo(w.relu())).same


def test_extra_op_is_graph_structure(dev):
    w = torch.randn(4, 4, device=dev)
    torch_xla.sync()
    d = hlo_diff.diff_hlo(hlo(w.relu()), hlo(w.relu().exp()))
    assert d.cause == "graph_structure" and d.added


def test_special_scalar_zero_then_value(dev):
    """lr=0 is baked in as constant 0; lr=0.37 is fed as device data: the extra compile MMF's scheduler causes."""
    w = torch.randn(4, 4, device=dev)
    torch_xla.sync()
    d = hlo_diff.diff_hlo(hlo(w * 0.0), hlo(w * 0.37))
    assert hlo_diff.special_scalar_change(d), d.summary_lines()
    d = hlo_diff.diff_hlo(hlo(w * 0.5), hlo(w * 0.37))
    assert not hlo_diff.special_scalar_change(d)


def test_parser_tolerates_junk():
    assert hlo_diff.parse_hlo("not hlo\n\n%x = = broken(") == []
    assert hlo_diff.diff_hlo("", "").same
