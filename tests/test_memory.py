"""Device memory (issue 20): per-graph figures from XLA's compiled-memory analysis, capacity and headroom, live
memory per step and the memory findings (memory_growth, missing_donation, memory_headroom), on real runs.

Runs (each once, shared through the `profiled` fixture): tests/scripts/memory_jax.py (nodonate+keep,
donate+item), tests/scripts/memory_torch.py (matmul, keep, item)."""
from __future__ import annotations

import json

import pytest

from conftest import SCRIPTS, planted_line

from ptxla_perf import SCHEMA_ID, peaks
from ptxla_perf.analysis import memory
from ptxla_perf.xla import buffer_assignment
from ptxla_perf.diff import from_report
from ptxla_perf.model.records import StepRecord

# the `profiled` runs are read by several tests each: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("memory")

JAX_SCRIPT = SCRIPTS / "memory_jax.py"
TORCH_SCRIPT = SCRIPTS / "memory_torch.py"
PARAM_BYTES = 4 * (64 * 128 + 128 * 8)  # memory_jax.py's w1 and w2, float32
FIXTURE = SCRIPTS.parent / "fixtures" / "buffer_assignment"  # written by its make.py (jax 0.10.2, CPU)
M, K, N = 64, 128, 32  # memory_torch.py's matmul


def _jax(profiled, *args):
    pytest.importorskip("jax")
    return profiled(JAX_SCRIPT, "--backend", "jax", args=args)


def _kinds(report, kind):
    return [f for f in report["findings"] if f["kind"] == kind]


def _expected(proc) -> dict:
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("EXPECTED "))
    return json.loads(line.split(" ", 1)[1])


def test_jax_graph_figures_are_xlas_memory_analysis(profiled):
    run = _jax(profiled, "nodonate", "keep")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    mem = run.report["memory"]
    assert mem["source"] == "xla_memory_analysis", mem
    (g,) = [g for g in mem["graphs"] if g["id"] == "train_step"]
    want = _expected(run.proc)
    for key, value in want.items():
        assert g[key] == value, (key, g, want)
    assert g["argument_bytes"] >= PARAM_BYTES and g["donates"] is False
    assert mem["largest_graph"] == "train_step" and mem["peak_bytes"] == g["peak_bytes"] > 0
    assert run.report["summary"]["peak_bytes"] == g["peak_bytes"]
    assert run.report["summary"]["temp_bytes"] == g["temp_bytes"]
    # the CPU says nothing of its capacity: unknown, no headroom, no headroom finding
    assert mem["capacity"]["source"] == "unknown" and mem["headroom_bytes"] is None
    assert not _kinds(run.report, "memory_headroom")
    assert any(ln.startswith("  memory      peak ") for ln in run.proc.stderr.splitlines()), run.proc.stderr[-2000:]
    page = run.path.with_suffix(".html").read_text()  # the page's memory panel: a bar per graph, live memory
    assert 'id="memory"' in page and "train_step: temps" in page and "Live device memory" in page


def test_jax_largest_buffers_name_the_big_temporary_and_its_line(profiled):
    run = _jax(profiled, "nodonate", "keep")
    (g,) = [g for g in run.report["memory"]["graphs"] if g["id"] == "train_step"]
    rows = g["largest_buffers"]
    assert 0 < len(rows) <= 5 and [r["bytes"] for r in rows] == sorted((r["bytes"] for r in rows), reverse=True)
    big = [r for r in rows if r["shape"] == "f32[512,512]"]
    assert big and rows[0] in big, rows  # the (512, 512) score matrix is the largest buffer
    for r in big:
        assert r["bytes"] == 512 * 512 * 4 and r["kind"] == "temp" and r["dtype"] == "f32" and r["op"], r
        assert r["location"]["file"].endswith("memory_jax.py") and r["location"]["function"] == "loss_fn", r
        assert r["location"]["line"] == planted_line(JAX_SCRIPT, "BIG"), r
    w1 = next(r for r in rows if r["kind"] == "parameter")  # the largest argument: params['w1'], 64 x 128 float32
    assert (w1["bytes"], w1["shape"], w1["op"], w1["op_name"]) == (4 * 64 * 128, "f32[64,128]", "parameter",
                                                                   "params['w1']")
    assert sum(r["bytes"] for r in rows) <= g["peak_bytes"]  # rows in distinct memory: never more than the peak
    page = run.path.with_suffix(".html").read_text()  # the memory panel lists them
    assert "Largest buffers at the peak: train_step" in page and "f32[512,512]" in page
    line = ("  memory      largest buffer 1.00 MiB f32[512,512] temp (fusion) at "
            f"memory_jax.py:{planted_line(JAX_SCRIPT, 'BIG')}")
    assert line in run.proc.stderr.splitlines(), run.proc.stderr[-2000:]  # the console names it too
    assert f"memory_jax.py:{planted_line(JAX_SCRIPT, 'BIG')}" in page


def test_jax_missing_donation_only_when_nothing_is_donated(profiled):
    off = _jax(profiled, "nodonate", "keep")
    (f,) = _kinds(off.report, "missing_donation")
    assert f["severity"] == "info" and f["evidence"]["bytes"] == PARAM_BYTES and f["evidence"]["arrays"] == 2
    assert f["evidence"]["argument"] == ["params"]
    on = _jax(profiled, "donate", "item")
    assert on.proc.returncode == 0, on.proc.stderr[-3000:]
    assert not _kinds(on.report, "missing_donation")
    (g,) = [g for g in on.report["memory"]["graphs"] if g["id"] == "train_step"]
    assert g["donates"] is True
    assert g["alias_bytes"] == _expected(on.proc)["alias_bytes"] == PARAM_BYTES  # XLA aliased the parameters
    (g_off,) = [g for g in off.report["memory"]["graphs"] if g["id"] == "train_step"]
    assert g_off["alias_bytes"] == 0


def test_jax_kept_losses_grow_at_their_line(profiled):
    run = _jax(profiled, "nodonate", "keep")
    (f,) = _kinds(run.report, "memory_growth")
    # 4 bytes a step: 4 MB in a million steps, info with that figure (issue 31: rated by what it costs)
    assert f["severity"] == "info" and f["evidence"]["holder_found"] is True
    assert f["evidence"]["projected_bytes"] == pytest.approx(4e6, rel=0.1), f["evidence"]
    assert f["location"]["line"] == planted_line(JAX_SCRIPT), f
    ev = f["evidence"]
    # one f32 per step; the growth is of every live array between the first and last samples, so a step output
    # still alive at one sample and not at the other moves it by a fraction of an array (JAX dispatches async)
    assert ev["holder"] == "losses" and ev["bytes_per_step"] == pytest.approx(4.0, rel=0.1)
    assert ev["arrays_per_step"] == pytest.approx(1.0, rel=0.1)
    live = run.report["memory"]["live"]
    assert live["bytes_per_step"] == pytest.approx(4.0, rel=0.1) and live["holder"]["location"]["line"] == f["location"]["line"]
    assert run.report["summary"]["live_bytes_per_step"] == live["bytes_per_step"]
    sampled = [s for s in run.report["steps"] if s.get("live_arrays") is not None]
    assert len(sampled) >= 4 and all(s["live_bytes"] > 0 for s in sampled)


def test_jax_python_floats_kept_do_not_grow(profiled):
    run = _jax(profiled, "donate", "item")
    assert not _kinds(run.report, "memory_growth")
    assert abs(run.report["memory"]["live"]["arrays_per_step"]) < 0.5


def test_torch_xla_matmul_arguments_are_the_inputs(profiled):
    run = profiled(TORCH_SCRIPT, args=("matmul",))
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    mem = run.report["memory"]
    assert mem["source"] == "xla_memory_analysis", mem
    graphs = [g for g in mem["graphs"] if g["peak_bytes"] is not None]
    assert any(g["argument_bytes"] == 4 * (M * K + K * N) and g["output_bytes"] >= 4 * M * N for g in graphs), graphs
    assert run.report["summary"]["peak_bytes"] == mem["peak_bytes"] >= 4 * (M * K + K * N + M * N)
    assert not _kinds(run.report, "memory_growth")
    # its largest buffers: the two inputs (parameters of the graph, the inputs' sizes) and the product
    (g,) = [g for g in graphs if g["argument_bytes"] == 4 * (M * K + K * N)]
    rows = g["largest_buffers"]
    params = sorted((r["bytes"], r["shape"]) for r in rows if r["kind"] == "parameter")
    assert params == [(4 * K * N, f"f32[{K},{N}]"), (4 * M * K, f"f32[{M},{K}]")], rows
    assert all(r["op"] == "parameter" and r["at_peak"] for r in rows if r["kind"] == "parameter")
    out = [r for r in rows if r["kind"] == "output"]
    assert out and out[0]["bytes"] >= 4 * M * N and out[0]["op"] and out[0]["instruction"], rows
    # the graph was captured on a graph-capture attribution step (IR debug on): its ops carry the user's line
    product = next(n for n, text in enumerate(TORCH_SCRIPT.read_text().splitlines(), 1) if "y = x @ w" in text)
    assert out[0]["location"]["line"] == product and out[0]["location"]["file"].endswith("memory_torch.py"), out


def test_torch_xla_kept_losses_grow_at_their_line(profiled):
    run = profiled(TORCH_SCRIPT, args=("keep",))
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    (f,) = _kinds(run.report, "memory_growth")
    assert f["severity"] == "info" and f["location"]["line"] == planted_line(TORCH_SCRIPT), f  # 4 B a step
    ev = f["evidence"]
    assert ev["holder"] == "losses" and ev["arrays_per_step"] == pytest.approx(1.0, rel=0.05)
    assert ev["bytes_per_step"] == pytest.approx(4.0, rel=0.05)  # a float32 scalar per step


def test_torch_xla_growth_rated_against_device_memory_gb(profiled):
    """The same 4 B a step, against --device-memory-gb 0.02 (10 % of it ~2.1 MB < the 4 MB a million steps keep):
    a warning, rated against the memory section's capacity, which says it is the user's."""
    run = profiled(TORCH_SCRIPT, "--device-memory-gb", "0.02", args=("keep",))
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    (f,) = _kinds(run.report, "memory_growth")
    assert f["severity"] == "warning", f
    assert f["evidence"]["capacity_source"] == "user" == run.report["memory"]["capacity"]["source"]
    assert f["evidence"]["capacity_bytes"] == run.report["memory"]["capacity"]["bytes"]
    assert "(--device-memory-gb)" in f["message"], f["message"]


def test_torch_xla_loss_item_kept_does_not_grow(profiled):
    run = profiled(TORCH_SCRIPT, args=("item",))
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert not _kinds(run.report, "memory_growth")
    assert _kinds(run.report, "device_to_host_sync")  # the .item() per step is still found


def test_would_it_fit_override(tmp_path, profile):
    proc, report = profile(TORCH_SCRIPT, "matmul", options=("--device-memory-gb", "0.00004"))
    mem = report["memory"]
    assert mem["capacity"] == {"bytes": int(0.00004 * 2**30), "source": "user", "name": "4e-05 GiB",
                               "detail": mem["capacity"]["detail"], "kind": "user", "set_by": None,
                               "device_bytes": None, "device_source": None}
    assert mem["headroom_bytes"] == mem["capacity"]["bytes"] - mem["peak_bytes"] < 0
    (f,) = _kinds(report, "memory_headroom")
    assert f["severity"] == "warning" and f["evidence"]["capacity_source"] == "user"
    bufs = f["evidence"]["largest_buffers"]  # the largest graph's largest buffers, named in the message
    assert bufs and bufs[0]["bytes"] == max(b["bytes"] for b in bufs) and "Its largest buffers: " in f["message"]
    assert bufs[0]["shape"] in f["message"]
    assert report["summary"]["device_memory_bytes"] == mem["capacity"]["bytes"]


# --- pure logic on figures the real libraries produced ---------------------------------------------------------
def _fixture(prefix: str = ""):
    return ((FIXTURE / f"{prefix}buffer_assignment.pb").read_bytes(), (FIXTURE / f"{prefix}module.pb").read_bytes())


def test_buffer_assignment_decoder_reads_what_xla_wrote():
    """The fixture: XLA's buffer assignment and optimized module of make.py's `ranked` (jax 0.10.2 on the CPU).
    The decoded allocations add up to the CompiledMemoryStats figures XLA computed from the same assignment."""
    data, module = _fixture()
    stats = json.loads((FIXTURE / "stats.json").read_text())["ranked"]
    ba = buffer_assignment.decode_buffer_assignment(data)
    allocs = [a for a in ba["buffer_allocations"] if not a.get("is_thread_local")]
    kinds = {}
    for a in allocs:
        kinds.setdefault(buffer_assignment._kind(a), []).append(a["size"])
        assert all(x["size"] + x.get("offset", 0) <= a["size"] for x in a["assigned"])  # slices inside it
    assert sum(kinds["parameter"]) == stats["argument_bytes"] == 2 * 256 * 256 * 4
    assert sum(kinds["output"]) == stats["output_bytes"] and sum(kinds["temp"]) == stats["temp_bytes"]
    ids = {b.get("id", 0) for b in ba["logical_buffers"]}
    assert all(x.get("logical_buffer_id", 0) in ids for a in allocs for x in a["assigned"])
    mod = buffer_assignment.decode_hlo_module(module)
    assert mod["name"] == "jit_ranked" and mod["stack_frame_index"]["file_names"][0].endswith("make.py")

    out = buffer_assignment.largest(data, [module])
    rows = out["rows"]
    assert len(rows) == 5 and all(r["bytes"] == 256 * 256 * 4 and r["shape"] == "f32[256,256]" for r in rows[:4])
    assert sum(r["bytes"] for r in rows) <= stats["argument_bytes"] + stats["output_bytes"] + stats["temp_bytes"]
    assert sorted(r["parameter_number"] for r in rows if r["kind"] == "parameter") == [0, 1]
    assert {r["op_name"] for r in rows if r["kind"] == "parameter"} == {"w", "x"}
    # at the temp allocation's peak (by the schedule: the CPU keeps no heap trace): the sort's output and the
    # tanh it sorts, both live while the sort runs
    temps = {r["op_name"]: r for r in rows if r["kind"] == "temp"}
    assert set(temps) == {"jit(ranked)/jit(sort)/sort", "jit(ranked)/tanh"} and all(r["at_peak"] for r in rows)
    srt = temps["jit(ranked)/jit(sort)/sort"]
    assert srt["op"] == "sort" and srt["location"]["line"] == planted_line(FIXTURE / "make.py", "SORTED")
    assert srt["location"]["function"] == "ranked" and "schedule" in out["note"]
    # what cannot be read gives no rows and says why, never raises
    assert buffer_assignment.largest(data[:-7], [module])["rows"] == []
    assert "unreadable" in buffer_assignment.largest(b"\xff" * 12, [module])["note"]
    bare = buffer_assignment.largest(data, [])  # no optimized HLO: sizes and kinds, no ops, temporaries by size
    assert bare["rows"][0]["bytes"] == 256 * 256 * 4 and bare["rows"][0]["op"] is None and bare["note"]
    assert sum(r["bytes"] for r in bare["rows"] if r["kind"] == "temp") <= stats["temp_bytes"]


@pytest.mark.parametrize("prefix, fn", [("", "ranked"), ("looped_", "looped")])
def test_liveness_by_the_schedule_fills_xlas_temp_allocation(prefix, fn):
    """Read from the schedule, the most bytes live at once in the temp allocation are the allocation's size: the
    liveness agrees with the heap XLA laid out (straight-line code, and a while loop whose body is a computation)."""
    data, module = _fixture(prefix)
    ba = buffer_assignment.decode_buffer_assignment(data)
    mod = buffer_assignment.module_index([module])
    defined = {b.get("id", 0): b["defined_at"].get("instruction_id") for b in ba["logical_buffers"]}
    (temp,) = [a for a in ba["buffer_allocations"] if buffer_assignment._kind(a) == "temp"
               and not a.get("is_thread_local") and a["size"] > 1024]
    assert temp["size"] == json.loads((FIXTURE / "stats.json").read_text())[fn]["temp_bytes"]
    peak, live = buffer_assignment.schedule_peak(temp["assigned"], defined, mod)
    assert peak == temp["size"] and live
    # a liveness that puts two values in the same bytes at once is refused (None), never reported
    clash = [dict(a, offset=0) for a in temp["assigned"]]
    assert buffer_assignment.schedule_peak(clash, defined, mod) is None


def test_heap_trace_peak_is_the_moment_most_bytes_are_live():
    A, F, S = buffer_assignment.ALLOC, buffer_assignment.FREE, buffer_assignment.SHARE_WITH
    sizes = {1: 100, 2: 50, 3: 80, 4: 80}
    events = [(A, 1), (A, 2), (F, 1), (A, 3), (S, 4), (F, 2), (F, 3), (F, 4)]
    trace = {"events": [{"kind": k, "buffer_id": b} for k, b in events]}
    assert buffer_assignment.heap_peak(trace, sizes) == (150, {1, 2})
    assert buffer_assignment.heap_peak({"events": []}, sizes) == (0, set())


def test_protobuf_wire_reader():
    # field 1 varint 150, field 2 "hi", field 3 packed [1, 300], field 4 a negative int64
    msg = bytes([0x08, 0x96, 0x01, 0x12, 0x02]) + b"hi" + bytes([0x1A, 0x03, 0x01, 0xAC, 0x02]) + \
        bytes([0x20]) + bytes([0xFF] * 9 + [0x01])
    spec = {1: ("a", "int"), 2: ("b", "str"), 3: ("c", "ints"), 4: ("d", "int")}
    assert buffer_assignment._decode(msg, spec) == {"a": 150, "b": "hi", "c": [1, 300], "d": -1}
    with pytest.raises(ValueError):
        list(buffer_assignment.fields(bytes([0x12, 0x05, 0x01])))
def test_capacity_sources():
    assert memory.capacity({"bytes_limit": 1000}, ["TPU v5 lite"], None)["source"] == "runtime"
    tpu = memory.capacity(None, ["TPU v5 lite"], None)
    assert tpu["source"] == "table" and tpu["bytes"] == 16 * 2**30 and tpu["name"] == "TPU v5e"
    assert memory.capacity(None, ["cpu"], None) == {**memory.capacity(None, ["cpu"], None), "bytes": None,
                                                    "source": "unknown"}
    assert memory.capacity({"bytes_limit": 1000}, ["TPU v5 lite"], 2)["bytes"] == 2 * 2**30
    assert peaks.memory_from_table("NVIDIA H100 80GB HBM3")[1] == 80 * 2**30


def test_growth_needs_a_steady_rise():
    def steps(counts):
        return [StepRecord(index=i, wall_time_s=0.01, live=None if c is None else (c, 4 * c))
                for i, c in enumerate(counts)]
    rising = memory.growth(steps([10, 11, 12, 13, 14, 15]), 1)
    assert rising["arrays_per_step"] == 1 and rising["bytes_per_step"] == 4 and memory.grows(rising)
    flat = memory.growth(steps([10, 11, 10, 11, 10, 11]), 1)
    assert not memory.grows(flat)
    assert memory.growth(steps([10, None, None]), 0) is None


def test_growth_rated_against_the_sections_capacity():
    """memory_growth reads the one capacity the memory section derives (memory.capacity: the user's
    --device-memory-gb, the runtime's, the spec table) and says where it came from; unknown, the 1 GiB floor."""
    from ptxla_perf.rules.iteration import analyze
    from ptxla_perf.model.records import Event, Location
    line = Location("/x/train.py", 20, "<module>")

    def steps():  # one f32 kept a step by `losses`: 4 B/step, 4 MB over a million steps
        out = [StepRecord(index=i, wall_time_s=0.01, executions=1, optimizer_steps=1, backward_calls=1,
                          live=(10 + i, 4 * (10 + i)))
               for i in range(12)]
        out[6].events.append(Event("memory_growth", line, {"call": "list", "holder": "losses", "items": 6,
                                                           "bytes": 24, "bytes_per_item": 4}))
        return out

    def growth(cap):
        (f,) = [f for f in analyze(steps(), capacity=cap).findings if f.kind == "memory_growth"]
        return f
    unknown = growth(None)
    assert unknown.severity == "info" and unknown.evidence.capacity_source == "unknown"
    assert unknown.evidence.capacity_bytes is None and "that would matter on any accelerator" in unknown.message
    small = memory.capacity(None, ["cpu"], 0.02)  # --device-memory-gb 0.02: 10 % of it is ~2.1 MB < 4 MB
    f = growth(small)
    assert f.severity == "warning" and f.evidence.capacity_source == "user"
    assert f.evidence.capacity_bytes == small["bytes"] and "(--device-memory-gb)" in f.message, f.message
    tpu = memory.capacity({"bytes_limit": 16 * 2**30}, ["TPU v5 lite"], None)  # torch_xla / JAX runtime figure
    f = growth(tpu)
    assert f.severity == "info" and f.evidence.capacity_source == "runtime"
    assert "of the device's 16.00 GiB (TPU v5 lite, the runtime's figure)" in f.message, f.message
    table = memory.capacity(None, ["TPU v5 lite"], None)
    assert growth(table).evidence.capacity_source == "table"
    # an offline report.build reads the capacity of the memory section it is given
    from ptxla_perf.report import assemble as report_mod
    sec = memory.section({"graphs": []}, None, ["cpu"], 0.02, None)
    rep = report_mod.build(backend="torch_xla", run={"status": "completed"}, env={}, steps=steps(), memory=sec)
    (g,) = [g for g in rep["findings"] if g["kind"] == "memory_growth"]
    assert g["severity"] == "warning" and g["evidence"]["capacity_source"] == "user"


def test_console_line_and_diff_metrics():
    sec = memory.section({"graphs": [{"id": "g", "argument_bytes": 1 << 30, "output_bytes": 1 << 29,
                                      "alias_bytes": 0, "temp_bytes": 2 << 30, "peak_bytes": int(3.5 * 2**30),
                                      "source": "xla_memory_analysis"}]},
                         None, ["TPU v5 lite"], None, None).to_json()
    (line,) = memory.summary_line(sec)
    assert line == "  memory      peak 3.5 GiB of 16 GiB (TPU v5e) · args 1.00 GiB · temps 2.00 GiB", line
    assert sec["headroom_bytes"] == 16 * 2**30 - int(3.5 * 2**30)
    report = {"schema": SCHEMA_ID, "summary": {"steps": 4, **memory.MemorySection.from_json(sec).summary_fields()}, "run": {"status": "completed"}}
    src = from_report(report, "r")
    assert src.values["peak_bytes"] == (float(int(3.5 * 2**30)), "B")
    assert src.values["temp_bytes"] == (float(2 << 30), "B")


def test_tensorboard_scalars_of_live_memory():
    from ptxla_perf.report.tb_scalars import SCALARS
    from ptxla_perf.model.summary import StepRow
    row = StepRow.from_json
    assert SCALARS["live_mib"](row({"live_bytes": 3 * 2**20})) == 3.0 and SCALARS["live_mib"](row({})) is None
    assert SCALARS["live_arrays"](row({"live_arrays": 7})) == 7 and SCALARS["live_arrays"](row({})) is None


def test_analysis_compile_overrides_keep_the_figures(monkeypatch):
    """The memory figures' compile turns the CPU's fusion emitters off where the jaxlib has the option (hlo_cost:
    a quarter to a half of the compile time): the same figures, to the byte, as with XLA's defaults; where the
    jaxlib does not know the option (0.12 dropped it), the compile is made again without it, the figures kept."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from ptxla_perf.xla import hlo_cost

    def loss(w, x):
        for _ in range(3):
            x = jnp.tanh(x @ w)
        return jnp.mean(x ** 2)

    step = jax.jit(lambda w, x: w - 0.1 * jax.grad(loss)(w, x))
    proto = step.lower(jnp.ones((64, 64)), jnp.ones((32, 64))).compiler_ir("hlo").as_serialized_hlo_module_proto()
    figures = {}
    for name, overrides in (("defaults", []), ("ours", hlo_cost._ANALYSIS_OVERRIDES),
                            ("unknown", [("xla_cpu_no_such_option", False)])):
        monkeypatch.setattr(hlo_cost, "_ANALYSIS_OVERRIDES", overrides)
        monkeypatch.setattr(hlo_cost, "_overrides_ok", True)
        figures[name] = memory.from_hlo_proto(proto).to_json()
        assert figures[name]["source"] == "xla_memory_analysis" and figures[name]["note"] is None, figures[name]
    assert hlo_cost._overrides_ok is False  # the unknown option: retried without, and not tried again
    assert figures["ours"] == figures["defaults"] == figures["unknown"]
