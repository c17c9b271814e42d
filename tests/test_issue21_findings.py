"""Issue 21, findings that contradicted themselves or gave advice that did not fit (items 1-4, 9, 19): real
torch_xla runs of tiny scripts (tests/scripts/), each asserting what failed before the fix."""
from __future__ import annotations

import pytest

from conftest import SCRIPTS, planted_line, run_cli

pytestmark = pytest.mark.xdist_group("issue21_findings")  # the runs below are shared between tests


def _recompilation(report) -> dict:
    found = [f for f in report["findings"] if f["kind"] == "recompilation"]
    assert found, [(f["kind"], f["message"]) for f in report["findings"]]
    return found[0]


def test_batch_size_recompile_names_the_upload_line_and_says_where_the_graph_was_cut(profiled):
    """Items 1 and 2: a DataLoader's growing batches uploaded by `x, y = x.to(dev), y.to(dev)`: the finding points
    at that line (the advice - pad or bucket - is about it), names the `xm.mark_step()` line as where the graph was
    cut, and says which is which; its evidence agrees with its location."""
    path = SCRIPTS / "loader_batch_sizes.py"
    proc, report, _ = profiled(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    f = _recompilation(report)
    upload, cut = planted_line(path), planted_line(path, "CUT")
    assert f["severity"] == "warning" and f["evidence"]["cause"] == "input_shapes", f
    assert f["location"]["line"] == upload, f
    assert f["evidence"]["graph_cut_at"]["line"] == cut and f["evidence"]["changed_at"]["line"] == upload
    assert f["evidence"]["key"].endswith(f":{cut}")  # the graph identity is the cut line, and it is said so
    assert "cut at " in f["message"] and f":{cut} (<module>)" in f["message"], f["message"]
    assert "came from " in f["message"] and f":{upload} (<module>)" in f["message"], f["message"]
    assert any(d.startswith("input shape f32[") for d in f["evidence"]["differences"]), f["evidence"]


def test_multi_scale_resize_recompile_is_placed_at_the_resize_with_its_cause(profiled):
    """Item 2: a YOLOv5-style multi-scale loop (F.interpolate to a random multiple of the stride each step) was
    placed at the model's view/permute line with cause "argument structure changed (117 -> 116 inputs)": it is
    the resize line, cause internal_shapes (the inputs kept their shapes), and the differences say the resize's
    output size changed there."""
    path = SCRIPTS / "multi_scale.py"
    proc, report, _ = profiled(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    f = _recompilation(report)
    assert f["severity"] == "warning", f
    assert f["location"]["line"] == planted_line(path), f
    assert f["evidence"]["cause"] == "internal_shapes", f["evidence"]
    differences = f["evidence"]["differences"]
    assert any(d.startswith(f"shapes start to change inside interpolate(), called at multi_scale.py:"
                            f"{planted_line(path)}") for d in differences), differences
    assert "The size that changed is set at " in f["message"] and "cut at " in f["message"], f["message"]


def _warmup_run(tmp_path, *args: str, options: tuple[str, ...] = ()) -> dict:
    import json
    out = tmp_path / f"r{'_'.join(args + options).replace('-', '')}.json"
    proc = run_cli("profile", "--port", "none", "--report", str(out), *options, str(SCRIPTS / "warmup_lr.py"), *args,
                   cwd=tmp_path, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_warmup_cause_does_not_depend_on_flags_or_run_length(tmp_path):
    """Item 4: the same warm-up graphs (optimizer state appearing, then a learning rate of exactly 0 baked in as a
    special scalar, then a device value) got another cause with a loss read every step, and a run that ended
    while they still compiled (3 updates) was a `recompilation` warning, "again and again". Each warm-up compile
    keeps its own cause, whatever the flags and the run's length."""
    plain = _warmup_run(tmp_path)
    logged = _warmup_run(tmp_path, "6", "1", options=("--attribution", "always"))
    short = _warmup_run(tmp_path, "3")
    verdicts = []
    for report in (plain, logged, short):
        assert not [f for f in report["findings"] if f["kind"] == "recompilation"], report["findings"]
        (w,) = [f for f in report["findings"] if f["kind"] == "warmup_compiles"]
        verdicts.append((w["severity"], w["evidence"]["compile_causes"], w["evidence"]["special_scalars"],
                         w["evidence"]["cause"]))
    assert verdicts[0] == verdicts[1] == verdicts[2], verdicts
    assert verdicts[0][1] == ["argument_structure", "special_scalar"] and verdicts[0][2] is True, verdicts


def test_control_flow_reads_get_advice_that_fits(profiled):
    """Item 9: `if torch.isnan(loss): continue` and `if loss > limit: break` read the loss every step to decide
    what the host does next: deferring the read (xm.add_step_closure) does not fit; the advice keeps the decision
    on the device (a masked update / torch.where for a skip, a device flag read every N steps for a stop)."""
    path = SCRIPTS / "control_flow_reads.py"
    proc, report, _ = profiled(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reads = {f["location"]["line"]: f for f in report["findings"]
             if f["kind"] == "device_to_host_sync" and f["location"]}
    skip, stop = reads[planted_line(path, "SKIP")], reads[planted_line(path, "STOP")]
    for f in (skip, stop):
        assert f["severity"] == "warning" and "add_step_closure" not in f["message"], f["message"]
        assert "decides control flow" in f["message"]
    assert skip["evidence"]["control_flow"] == "skip" and "torch.where" in skip["message"]
    assert skip["evidence"]["statement"] == "if torch.isnan(loss): continue"
    assert stop["evidence"]["control_flow"] == "stop" and "every N steps" in stop["message"]
    assert stop["evidence"]["statement"] == "if loss.detach() > 1e6: break"


def test_control_flow_is_told_from_the_source_line(tmp_path):
    """The decision is read from the statement around the read's line, in any program (pure: ast)."""
    from ptxla_perf.rules import control_flow as cf
    src = tmp_path / "loop.py"
    src.write_text(
        "def step(loss):\n"
        "    if torch.isnan(loss).any():\n"          # 2: skip (a return out of the step function)
        "        return None\n"
        "    return loss\n"
        "for i in range(3):\n"
        "    if (loss\n"
        "            > limit):\n"                     # 7: the condition spans lines: stop
        "        print('diverged')\n"
        "        break\n"
        "    if loss.item() < best:\n"                # 10: branch (other work)
        "        best = loss.item()\n"                # 11: no decision on this line
        "    x = 1 if flag.item() else 2\n"           # 12: branch (conditional expression)
        "    assert not torch.isnan(loss)\n"          # 13: stop
        "    while err.item() > tol:\n"               # 14: stop
        "        err = err / 2\n"
        "    if bad.item():\n"                        # 16: skip
        "        for j in range(2):\n"
        "            break\n"
        "        continue\n")
    uses = {n: (u.use if u else None) for n in (2, 7, 10, 11, 12, 13, 14, 16) for u in [cf.read_use(str(src), n)]}
    assert uses == {2: "skip", 7: "stop", 10: "branch", 11: None, 12: "branch", 13: "stop", 14: "stop",
                    16: "skip"}, uses
    assert cf.read_use(str(src), 2).statement == "if torch.isnan(loss).any(): return None"
    assert cf.read_use(str(tmp_path / "missing.py"), 3) is None


def test_a_read_every_step_says_so_with_its_steps_as_ranges(tmp_path):
    """Item 19: a `.item()` in 29 of 30 steps printed "0.97 times per train step" and listed steps one by one: it is
    "once per train step, in 29 of 30", with the steps as ranges; the page lists a finding's steps as ranges."""
    import json
    from ptxla_perf.model import fmt
    script = tmp_path / "skip_one.py"
    script.write_text("import torch\nimport torch_xla\n\ndev = torch_xla.device()\n"
                      "model = torch.nn.Linear(16, 1).to(dev)\nopt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                      "total = 0.0\nfor step in range(30):\n"
                      "    loss = model(torch.randn(4, 16).to(dev)).pow(2).mean()\n"
                      "    loss.backward()\n    opt.step()\n    opt.zero_grad()\n    if step != 5:\n"
                      "        total += loss.item()\n    torch_xla.sync()\nprint('done', total > -1)\n")
    proc = run_cli("profile", "--port", "none", "--report", "r.json", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    (f,) = [f for f in report["findings"] if f["kind"] == "device_to_host_sync"]
    assert f["severity"] == "warning" and f["location"]["line"] == 14
    assert "once per train step, in 29 of 30 train steps (steps 0-4, 6-29)" in f["message"], f["message"]
    assert "0.97" not in f["message"] and "once per train step" in proc.stderr
    page = (tmp_path / "r.html").read_text()
    assert f"steps {fmt.ranges(f['steps'])}</div>" in page
    assert (fmt.ranges(range(3, 41)), fmt.ranges([1, 3, 4, 5, 9]), fmt.ranges([0, 2, 4, 6, 8, 10, 12, 14])) == \
        ("3-40", "1, 3-5, 9", "0, 2, 4, 6, 8, 10, ...")
    assert (fmt.times(0.97), fmt.times(2.02), fmt.times(3.0), fmt.times(1.5)) == ("once", "twice", "3 times",
                                                                                  "1.50 times")
