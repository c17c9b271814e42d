"""The notebook API (docs/notebook.md) as a person uses it: the example notebook executed top to bottom in a real
Jupyter kernel (nbclient + ipykernel, real torch_xla on the CPU and real JAX) with its cells' outputs checked; in
the same kernel, an interrupt during a profiled loop and more profiled cells after it; a 0.4.0 report loaded into
DataFrames; `compare` against the diff command's own comparison and gate; the inline page in headless Chromium."""
from __future__ import annotations

import html
import json
import re
import shutil
import signal
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import ptxla_perf
from ptxla_perf import diff as D
from ptxla_perf.notebook import Report, ReportLoadError, tables

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "profile_in_notebook.ipynb"
V040 = ROOT / "tests" / "fixtures" / "reports" / "v0.4.0_item_per_step.json"  # `profile tests/scripts/item_per_step.py`
V010 = ROOT / "tests" / "fixtures" / "metrics"  # reports of 0.1.0


# --- reports as data ------------------------------------------------------------------------------------------
def test_a_040_report_loads_into_dataframes():
    data = json.loads(V040.read_text())
    assert data["tool_version"] == "0.4.0"
    r = ptxla_perf.load(str(V040))
    assert r.summary.steps == 8 and r.summary.device_to_host_per_step == 1.0
    assert r.summary.compiles == data["summary"]["compiles"] and r.status == "completed"
    f = r.findings.set_index("kind").loc["device_to_host_sync"]
    assert f["line"] == 15 and f["file"].endswith("item_per_step.py") and f["severity"] == "warning"
    assert f["where"].endswith("item_per_step.py:15")
    old = next(x for x in data["findings"] if x["kind"] == "device_to_host_sync")  # 0.4.0: no `cost`, its evidence
    assert "cost" not in old and f["ms_per_step"] == old["evidence"]["wait_ms_per_step"] > 0
    assert list(r.steps.index) == [s["index"] for s in data["steps"]]
    assert list(r.steps["host_reads"]) == [s["host_reads"] for s in data["steps"]]
    assert list(r.compiles["step"]) == [s["index"] for s in data["steps"] if s["compiles"]]
    assert r.time_breakdown.loc[3, "read_wait"] == data["steps"][3]["time_breakdown"]["read_wait"]
    assert list(r.memory["peak_bytes"]) == [g["peak_bytes"] for g in data["memory"]["graphs"]]
    assert list(r.ranks.index) == [0] and r.ranks.loc[0, "steps"] == 8
    assert r.steps is r.steps  # built once


def test_a_010_report_loads_with_missing_values():
    r = ptxla_perf.load(V010 / "report_item.json")
    assert r.tool_version == "0.1.0" and len(r.steps) == len(r.data["steps"]) == 5
    assert r.memory.empty and len(r.ranks) == 1 and r.summary.mfu is None


def test_load_from_urls(tmp_path):
    shutil.copy(V040, tmp_path / "r.json")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/r.json"
        assert ptxla_perf.load(url).summary.steps == 8
        assert ptxla_perf.load((tmp_path / "r.json").as_uri()).summary.steps == 8
        with pytest.raises(ReportLoadError, match=r"^cannot read http://.*/missing\.json: ") as err:
            ptxla_perf.load(url.replace("r.json", "missing.json"))
        assert "\n" not in str(err.value)
    finally:
        server.shutdown()


def test_bad_inputs_are_one_line(tmp_path):
    (tmp_path / "x.json").write_text('{"schema": "something/else"}')
    (tmp_path / "y.json").write_text("not json")
    for path, pattern in ((tmp_path / "none.json", "cannot read"), (tmp_path / "x.json", "not a ptxla_perf report"),
                          (tmp_path / "y.json", "is not JSON")):
        with pytest.raises(ReportLoadError, match=pattern) as err:
            ptxla_perf.load(path)
        assert "\n" not in str(err.value)


def test_missing_pandas_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    r = Report(json.loads(V040.read_text()))
    with pytest.raises(ImportError) as err:
        r.findings
    assert str(err.value) == "ptxla_perf: report tables need pandas: pip install 'ptxla_perf[notebook]'"
    assert "ptxla_perf" in r._repr_html_()  # the page needs no pandas


def test_compare_is_the_diff_commands_comparison_and_gate():
    a, b = V010 / "report_item.json", V010 / "report_fixed.json"
    cmp = ptxla_perf.compare(a, b, labels=["item", "fixed"], fail_on="device_to_host_per_step>0,compiles>+0")
    ref = D.compare(D.load(a), D.load(b))
    broken = D.check(ref, "device_to_host_per_step>0,compiles>+0")
    frame = cmp.figures
    assert list(frame.index) == [row.name for row in ref.rows]
    for row in ref.rows:
        assert (frame.loc[row.name, "item"], frame.loc[row.name, "fixed"]) == (row.a, row.b)
        assert frame.loc[row.name, "status fixed"] == row.status
    assert [v.message for v in cmp.violations[0]] == [v.message.replace("report_fixed.json", "fixed") for v in broken]
    assert cmp.passed == (not broken)
    # the fixed run reads nothing per step: the gate on it alone passes, as `diff --fail-on` would
    assert ptxla_perf.compare(b, b, fail_on="device_to_host_per_step>0").passed
    assert not ptxla_perf.compare(b, a, fail_on="device_to_host_per_step>0").passed
    three = ptxla_perf.compare(a, b, a)  # more than two runs: each against the first
    assert list(three.figures.columns[2:5]) == ["report_item.json", "report_fixed.json", "report_item.json (2)"]
    assert "device_to_host_per_step" in three._repr_html_()
    with pytest.raises(D.RuleError):
        ptxla_perf.compare(a, b, fail_on="nonsense")


def test_report_diff_is_compare():
    a, b = ptxla_perf.load(V010 / "report_item.json"), ptxla_perf.load(V010 / "report_fixed.json")
    assert a.diff(b).figures.equals(ptxla_perf.compare(a, b).figures)


# --- the inline page in a browser -------------------------------------------------------------------------------
@pytest.mark.browser
def test_inline_page_renders_in_chromium(tmp_path):
    from test_html_browser import _open
    from test_tensorboard_browser import _chromium
    chrome = _chromium()
    r = ptxla_perf.load(V040)
    # the notebook's output cell, and a probe (the test's own) that copies what the iframe rendered into the DOM
    page = tmp_path / "cell.html"
    page.write_text("<!DOCTYPE html><html><body><div class=\"output\">" + r._repr_html_() + "</div>"
                    "<pre id=\"probe\"></pre><script>const f = document.querySelector('iframe');"
                    "f.addEventListener('load', () => { const d = f.contentDocument;"
                    "document.getElementById('probe').textContent = 'READY=' + d.documentElement.dataset.ptxlaReady + '\\n' +"
                    " d.querySelector('h1').textContent + '\\n' + d.body.innerText; });</script></body></html>")
    got = _open(chrome, page, tmp_path, "--dump-dom")
    assert got["console"] == [] and got["requests"] == []
    probe = html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', got["dom"], re.S).group(1))
    assert "READY=1" in probe, "the page's script did not run inside the iframe"
    assert "ptxla_perf — item_per_step.py" in probe and "completed" in probe.splitlines()[1]
    assert "step time p50" in probe and "device_to_host_sync" in probe


# --- in a real kernel -------------------------------------------------------------------------------------------
def _outputs(cell) -> tuple[str, str]:
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    rich = "".join(o["data"].get("text/html", "") + o["data"].get("text/plain", "")
                   for o in cell.outputs if "data" in o)
    return text, rich


class _Kernel:
    """nbclient's kernel client and manager (asyncio ones), called synchronously."""

    def __init__(self, client):
        from jupyter_core.utils import run_sync
        self.execute = client.kc.execute
        self.get_iopub_msg = run_sync(client.kc.get_iopub_msg)
        self.get_shell_msg = run_sync(client.kc.get_shell_msg)
        self.interrupt = run_sync(client.km.interrupt_kernel)


def _run(kc: _Kernel, code: str, timeout: float = 120) -> tuple[dict, str]:
    """Run `code` in the kernel; its reply's content and its stdout (and errors). A request the kernel aborts (ipykernel
    aborts what reaches it right after a cell's error, here the interrupt) is sent again once."""
    content, out = _run_once(kc, code, timeout)
    return _run_once(kc, code, timeout) if content["status"] == "aborted" else (content, out)


def _run_once(kc: _Kernel, code: str, timeout: float) -> tuple[dict, str]:
    msg_id = kc.execute(code)
    out = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":  # the cell's prints (the progress
            out.append(msg["content"]["text"])  # bar's stderr can arrive interleaved with them)
        elif msg["msg_type"] == "error":
            out.append("ERROR " + msg["content"]["ename"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"], "".join(out)


INTERRUPTED = """
import signal
sigint_before = signal.getsignal(signal.SIGINT)
with ptxla_perf.profile("torch_xla", report_path={path!r}) as long_run:
    for step in range(1_000_000):
        x = torch.randn(8, 16).to(dev)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        if step == 3:
            print("LOOPING", signal.getsignal(signal.SIGINT) is sigint_before, flush=True)
"""

AGAIN = """
with ptxla_perf.profile("torch_xla", display=False) as again:
    for step in range(3):
        loss = model(torch.randn(8, 16).to(dev)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
print(again.report.status, again.report.summary.steps)
"""


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory):
    """The example notebook executed in one kernel, then an interrupted profiled loop and more cells in it."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    tmp = tmp_path_factory.mktemp("nb")
    # this Python's ipykernel, whatever kernels the machine has installed under the name python3
    spec = tmp / "kernels" / "ptxla_perf_test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "ptxla_perf test", "language": "python"}))
    km = AsyncKernelManager(kernel_name="ptxla_perf_test",
                            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, km=km, timeout=300, resources={"metadata": {"path": str(tmp)}})
    extra = {}
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        kc = _Kernel(client)
        report = tmp / "interrupted.json"
        msg_id = kc.execute(INTERRUPTED.format(path=str(report)))
        seen, deadline = "", time.time() + 120
        while "LOOPING" not in seen and time.time() < deadline:
            msg = kc.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] in ("stream", "error"):
                seen += msg["content"].get("text") or f"ERROR {msg['content']['ename']}: {msg['content']['evalue']}"
                assert "ERROR" not in seen, seen
        kc.interrupt()
        while True:
            reply = kc.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        extra["interrupt"] = (seen, reply["content"], report)
        while not (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                   and msg["content"]["execution_state"] == "idle"):
            msg = kc.get_iopub_msg(timeout=120)
        extra["after"] = _run(kc, "print(long_run.report.status, long_run.report.summary.steps > 3, "
                                  "long_run.report.source, signal.getsignal(signal.SIGINT) is sigint_before)")
        extra["again"] = _run(kc, AGAIN)
    return nb, extra


def _cell(nb, needle: str):
    return next(c for c in nb.cells if c.cell_type == "code" and needle in c.source)


def _line_of(cell, needle: str) -> int:
    return next(i for i, line in enumerate(cell.source.splitlines(), 1) if needle in line)


def _row(rich_html: str, first: str) -> str:
    return next(r for r in rich_html.split("<tr") if f"<td>{first}</td>" in r)


@pytest.mark.slow
@pytest.mark.xdist_group("notebook_kernel")  # one kernel run (kernel_run) for them all
@pytest.mark.parametrize("backend,read", [("torch_xla", "losses.append(loss.item())"),
                                          ("jax", "history.append(float(loss))")])
def test_notebook_finding_points_at_the_cells_line(kernel_run, backend, read):
    nb, _ = kernel_run
    loop = _cell(nb, read)
    text, summary = _outputs(loop)
    assert f"ptxla_perf [{backend}] api: 6 steps" in summary and "device_to_host_sync" in summary
    assert "ptxla_perf:" in text and "step" in text  # the progress bar
    table = _cell(nb, "before.report.findings[" if backend == "torch_xla" else "jax_before.report.findings[")
    _, rich = _outputs(table)
    row = _row(rich, "device_to_host_sync")
    cells = re.findall(r"<td>(.*?)</td>", row)
    # kind, severity, cell (In[N]), line in that cell
    assert cells[1] == "warning"
    assert float(cells[2]) == loop.execution_count and float(cells[3]) == _line_of(loop, read)
    assert cells[5].endswith(f".py:{_line_of(loop, read)}")


@pytest.mark.slow
@pytest.mark.xdist_group("notebook_kernel")  # one kernel run (kernel_run) for them all
def test_notebook_shows_the_page_inline(kernel_run):
    nb, _ = kernel_run
    _, rich = _outputs(next(c for c in nb.cells if c.cell_type == "code" and c.source.strip() == "before.report"))
    src = html.unescape(re.search(r'srcdoc="(.*?)"', rich, re.S).group(1))
    assert src.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in src
    headline = re.search(r"<h1>(.*?)</h1>", src, re.S).group(1)
    assert headline.startswith("ptxla_perf — api") and ">completed<" in headline
    assert 'data-k="reads"' in src and "device_to_host_sync" in src


@pytest.mark.slow
@pytest.mark.xdist_group("notebook_kernel")  # one kernel run (kernel_run) for them all
def test_notebook_comparison_before_and_after(kernel_run):
    nb, _ = kernel_run
    for needle, steps_before in (("cmp.figures.loc", 1.0), ("jax_cmp.figures.loc", None)):
        cell = _cell(nb, needle)
        text, rich = _outputs(cell)
        assert "gate passed: True" in text or needle == "cmp.figures.loc"
        cells = re.findall(r"<td>(.*?)</td>", _row(rich.replace("<th>", "<td>").replace("</th>", "</td>"),
                                                   "device_to_host_per_step"))
        before, after = float(cells[1]), float(cells[2])
        assert after == 0.0
        assert before == steps_before if steps_before else before >= 0.8  # JAX: the last step's read trails it
    gate = _cell(nb, "cmp = ptxla_perf.compare(")
    text, rich = _outputs(gate)
    assert "gate passed: True" in text and "device_to_host_per_step" in rich


@pytest.mark.slow
@pytest.mark.xdist_group("notebook_kernel")  # one kernel run (kernel_run) for them all
def test_interrupt_writes_the_report_and_the_kernel_stays_usable(kernel_run):
    _, extra = kernel_run
    seen, reply, report = extra["interrupt"]
    assert "LOOPING True" in seen  # the block installed no SIGINT handler of its own
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    written = json.loads(report.read_text())
    assert written["run"]["status"] == "interrupted" and written["summary"]["steps"] > 3
    assert report.with_suffix(".html").exists()
    content, out = extra["after"]
    assert content["status"] == "ok" and out.split() == ["interrupted", "True", str(report), "True"], out
    content, out = extra["again"]
    assert content["status"] == "ok" and out.split()[-2:] == ["completed", "3"], out


def test_backend_is_found_from_the_callers_imports(monkeypatch):
    import types

    from ptxla_perf.notebook.profile import detect_backend
    from ptxla_perf.model.outcome import SessionError
    txla, jax = types.ModuleType("torch_xla"), types.ModuleType("jax.numpy")
    assert detect_backend({"torch_xla": txla, "np": types.ModuleType("numpy")}) == "torch_xla"
    assert detect_backend({"jnp": jax}) == "jax"
    with pytest.raises(SessionError, match="name the backend"):
        detect_backend({"torch_xla": txla, "jnp": jax})
    for name in ("torch_xla", "jax", "flax"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(SessionError, match="no backend found"):
        detect_backend({})


JAX_CELL_1 = """
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def train_step(params, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean(jnp.tanh(x @ p) ** 2))(params)
    return params - 0.01 * grads, loss


params = jax.device_put(np.ones((16, 4), np.float32))
x = jax.device_put(np.ones((8, 16), np.float32))
params, loss = train_step(params, x)  # compiled here, before any profiling
"""
JAX_CELL_2 = """
with ptxla_perf.profile("jax", display=False) as prof:
    for step in range(5):
        params, loss = train_step(params, x)
        float(loss)
"""


@pytest.mark.slow
def test_jax_step_jitted_before_the_block_is_seen_without_a_recompile(tmp_path):
    """A notebook jits its step in one cell and profiles the loop in another: the step is seen, nothing is
    compiled again, and the notebook's name is its own jitted function again after the block."""
    pytest.importorskip("jax")
    ns = {"ptxla_perf": ptxla_perf}
    for i, src in enumerate((JAX_CELL_1, JAX_CELL_2)):
        path = tmp_path / f"cell{i}.py"
        path.write_text(src)
        exec(compile(src, str(path), "exec"), ns)
        if i == 0:
            original = ns["train_step"]
    r = ns["prof"].report
    assert ns["train_step"] is original and type(original).__name__ == "PjitFunction"
    assert r.summary.steps >= 4 and r.summary.compiles == 0
    f = r.findings.set_index("kind").loc["device_to_host_sync"]
    assert f["file"] == str(tmp_path / "cell1.py") and f["line"] == 5
    written = next(x for x in r.data["findings"] if x["kind"] == "device_to_host_sync")
    assert f["ms_per_step"] == written["cost"]["ms_per_step"]  # the table's column is the finding's cost
