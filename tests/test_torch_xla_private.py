"""The torch_xla backend's private names (backends/torch_xla/_private.py): all present in the installed torch_xla,
and a missing one turns its feature off with a note, never an exception."""
import pytest

pytest.importorskip("torch_xla")

import torch  # noqa: E402

from ptxla_perf.backends.torch_xla import _private as P  # noqa: E402
from ptxla_perf.analysis.step_predicates import early_not_read  # noqa: E402
from ptxla_perf.model.records import StepRecord, Transfers  # noqa: E402


def test_every_name_is_present_in_the_installed_torch_xla():
    caps = P.probe()
    assert caps.missing == (), caps.notes()
    assert caps.notes() == []


def test_a_missing_name_turns_one_feature_off_with_a_note(monkeypatch):
    monkeypatch.delattr(P.X, "_xla_counter_names")
    caps = P.probe()
    assert not caps.fallback_ops and caps.steps and caps.graph_capture
    assert caps.notes() == ["not measured: fallback_ops (needs X._xla_counter_names)"]


def test_a_torch_xla_newer_than_measured_is_said_in_the_notes_as_doctor_says_it(monkeypatch):
    """Issue 38: one range everywhere; a newer release is not refused, it is "not measured here"."""
    import torch_xla
    monkeypatch.setattr(torch_xla, "__version__", "2.10.0")
    assert P.probe().notes() == ["torch_xla 2.10.0 is newer than measured (2.8.0 to 2.9.0): not "
                                 "measured here"]


def test_the_adapter_runs_without_a_feature_and_says_so(monkeypatch):
    """Graph capture off (its hash binding gone): the run is measured, no graph is captured, the note is there."""
    from ptxla_perf.backends.torch_xla import TorchXlaAdapter
    from ptxla_perf.backends.torch_xla._private import X
    monkeypatch.delattr(X, "_get_graph_hash")
    monkeypatch.setattr(P, "CAPS", P.probe())
    adapter = TorchXlaAdapter()
    assert "not measured: graph_capture (needs X._get_graph_hash)" in adapter.notes
    recs = []
    adapter.start(recs.append)
    try:
        import torch_xla
        w = torch.ones(4, 4, device=torch_xla.device())
        for _ in range(3):
            w = w * 2
            torch_xla.sync()
    finally:
        adapter.stop()
    assert len(recs) == 3 and recs[0].compiles >= 1
    assert not any(r.graph_hashes for r in recs)  # no graph-capture step without the binding


def test_rearming_counts_early_graphs_as_the_rule_does():
    """A step whose early graph is a fallback's own copy is not a graph break (op_fallback tells it)."""
    plain = StepRecord(index=0, wall_time_s=0.1, early_executions=2, device_to_host=Transfers(1, 4))
    fell_back = StepRecord(index=1, wall_time_s=0.1, early_executions=2, device_to_host=Transfers(1, 4),
                           fallback_ops={"aten::nonzero": 1})
    assert early_not_read(plain) == 1 and early_not_read(fell_back) == 0
