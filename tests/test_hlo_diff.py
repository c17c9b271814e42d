"""The recompile explainer on HLO that the real torch_xla prints (IR debug on: source metadata per op)."""
from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PJRT_DEVICE", "CPU")
torch = pytest.importorskip("torch")
torch_xla = pytest.importorskip("torch_xla")

from ptxla_perf.xla import hlo_diff  # noqa: E402

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


def test_differences_read_as_a_person_reads_them(dev):
    """Issue 21 item 3: differences printed HLO fragments (`transpose: f32[10,512] %), dimensions={1,0}`,
    `constant: s64[] 2531011) -> f32[] 0)`): each line is the op, its shape and only what changed."""
    w = torch.randn(16, 8, device=dev)
    x1, x2 = torch.randn(10, 16).to(dev), torch.randn(12, 16).to(dev)
    torch_xla.sync()
    d = hlo_diff.diff_hlo(hlo((x1 @ w).t().relu()), hlo((x2 @ w).t().relu()))
    lines = d.summary_lines()
    assert "input shape f32[10,16] -> f32[12,16]" in lines, lines
    assert "transpose f32[8,10] -> f32[8,12]" in lines, lines
    for line in lines:  # no operand names, dangling brackets or metadata
        assert "%" not in line and "metadata" not in line and ")," not in line and not line.endswith(")"), line
    # a constant (an exponent is baked in): its value, old -> new
    d = hlo_diff.diff_hlo(hlo(w.pow(2)), hlo(w.pow(3)))
    assert d.cause == "constant" and d.summary_lines() == ["constant f32[]: 2 -> 3"], d.summary_lines()
    # an attribute: name=old -> new
    table = torch.randn(8, 4, device=dev)
    torch_xla.sync()
    d = hlo_diff.diff_hlo(hlo(table[1] * 2), hlo(table[2] * 2))
    assert any(line.startswith("slice f32[1,4]: slice={[1:2], [0:4]} -> {[2:3], [0:4]}") for line in
               d.summary_lines()), d.summary_lines()
    # the user's line of an op, where the caller can tell it
    a = hlo(table[1] * 2)
    b, here = hlo(table[2] * 2), sys._getframe().f_lineno
    placed = hlo_diff.diff_hlo(a, b).summary_lines(
        place=lambda i: f"{os.path.basename(i.source_file)}:{i.source_line}" if i.source_file == __file__ else None)
    assert any(line.endswith(f"(at {os.path.basename(__file__)}:{here})") for line in placed), placed


def test_a_size_made_in_python_is_internal_shapes_from_its_root(dev):
    """Issue 21 item 2: a resize to a new output size (multi-scale training) keeps the graph's inputs and ops; the
    shapes inside change from the resize on. Cause internal_shapes (it was "attributes", or "argument_structure"
    when a scalar input came or went with it); the roots are the resize's own ops, not the model's ops after it."""
    import torch.nn.functional as F
    img = torch.rand(2, 3, 16, 16).to(dev)
    torch_xla.sync()

    def graph(size):
        return hlo(F.interpolate(img, size=[size, size], mode="bilinear", align_corners=False).relu().sum())
    d = hlo_diff.diff_hlo(graph(8), graph(24))
    assert d.cause == "internal_shapes" and not d.input_shapes, (d.cause, d.summary_lines())
    roots = d.shape_roots()
    assert roots and {os.path.basename(i.source_file) for i in roots if i.source_file} <= {"functional.py",
                                                                                          "test_hlo_diff.py"}
    assert not any(i.op == "maximum" for i in roots)  # relu only follows the new shape
    # a 0/1 constant traded for a scalar input, and nothing else: a special scalar; with shapes changing: not
    w = torch.randn(4, 4, device=dev)
    torch_xla.sync()
    assert hlo_diff.special_scalar_change(hlo_diff.diff_hlo(hlo(w * 0.0), hlo(w * 0.37)))
    x1, x2 = torch.randn(2, 4).to(dev), torch.randn(3, 4).to(dev)
    torch_xla.sync()
    assert not hlo_diff.special_scalar_change(hlo_diff.diff_hlo(hlo((x1 @ w) * 0.0), hlo((x2 @ w) * 0.37)))
