"""FLOPs that hold on any backend (issue 36): where the compiled cost analysis is missing, negative or below what the
program's dots imply (a GPU counts each cuBLAS call as -1; every backend counts a loop body once), the FLOPs are
counted from the HLO before optimization, loop bodies times their trip counts (hlo_flops.py).

The GPU's figures are simulated on the CPU (PTXLA_PERF_COMPILED_COST=negative|missing|low) on real JAX programs:
a matmul, a trained feed-forward block (forward, backward, Adam update) and a small transformer step whose layers
run in a `lax.scan` and whose attention heads run in a `fori_loop`; the count must match the compiled count within
1 %: XLA's cost analysis of the optimized program the CPU runs, where the optimizer annotated each loop's trip count
(`known_trip_count`), each loop body times it (the compiled `cost_analysis()` counts a body once)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import SCRIPTS, load_report, run_cli

from ptxla_perf.analysis.iterset import Iterations
from ptxla_perf.xla import hlo_cost, hlo_flops
from ptxla_perf import peaks
from ptxla_perf.analysis import roofline
from ptxla_perf.model.records import StepRecord

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
optax = pytest.importorskip("optax")

TOL = 0.01
D, F, T, H, LAYERS, BATCH = 256, 1024, 32, 2, 2, 4  # elementwise FLOPs 0.4 % of the dots'


def _matmul():
    a, b = jnp.ones((128, 256)), jnp.ones((256, 64))
    return jax.jit(lambda a, b: a @ b), (a, b)


def _ffw():
    opt = optax.adam(1e-3)
    params = {"w1": jnp.ones((D, F)) * 0.01, "w2": jnp.ones((F, D)) * 0.01}
    x = jnp.ones((BATCH * T, D))

    def loss(p, x):
        return jnp.mean((jax.nn.gelu(x @ p["w1"]) @ p["w2"] - x) ** 2)

    def step(p, s, x):
        g = jax.grad(loss)(p, x)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s
    return jax.jit(step), (params, opt.init(params), x)


def _transformer():
    """Pre-norm blocks: multi-head causal attention (the heads in a fori_loop) and an MLP, the layers in a
    lax.scan."""
    k = jax.random.PRNGKey(0)
    layer = {"qkv": jax.random.normal(k, (LAYERS, D, 3 * D)) * 0.02, "o": jax.random.normal(k, (LAYERS, D, D)) * 0.02,
             "w1": jax.random.normal(k, (LAYERS, D, F)) * 0.02, "w2": jax.random.normal(k, (LAYERS, F, D)) * 0.02}
    x = jax.random.normal(k, (BATCH, T, D))
    opt = optax.sgd(1e-2)

    def norm(h):
        return (h - h.mean(-1, keepdims=True)) * jax.lax.rsqrt(h.var(-1, keepdims=True) + 1e-5)

    def head(q, k, v, i):
        sl = lambda a: jax.lax.dynamic_slice_in_dim(a, i * (D // H), D // H, axis=-1)  # noqa: E731
        s = jnp.einsum("btd,bsd->bts", sl(q), sl(k)) / (D // H) ** 0.5
        s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9)
        return jnp.einsum("bts,bsd->btd", jax.nn.softmax(s), sl(v))

    def block(h, w):
        q, k_, v = jnp.split(norm(h) @ w["qkv"], 3, axis=-1)
        out = jax.lax.fori_loop(0, H, lambda i, acc: jax.lax.dynamic_update_slice_in_dim(
            acc, head(q, k_, v, i), i * (D // H), axis=-1), jnp.zeros_like(q))
        h = h + out @ w["o"]
        return h + jax.nn.gelu(norm(h) @ w["w1"]) @ w["w2"]

    def loss(p, x):
        h, _ = jax.lax.scan(lambda h, w: (block(h, w), None), x, p)
        return jnp.mean((h - x) ** 2)

    def step(p, s, x):
        g = jax.grad(loss)(p, x)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s
    return jax.jit(step), (layer, opt.init(layer), x)


def _compiled(fn, args):
    lowered = fn.lower(*args)
    compiled = lowered.compile()
    return hlo_cost.from_properties(compiled.cost_analysis()), lowered.as_text(dialect="hlo"), compiled.as_text()


_BUILT: dict = {}


def _program(name: str):
    """Each program compiled once per module (compiling is most of this file's time)."""
    if name not in _BUILT:
        _BUILT[name] = _compiled(*{"matmul": _matmul, "ffw": _ffw, "transformer": _transformer}[name]())
    return _BUILT[name]


def _check(name: str, partitions: int = 1):
    """What the JAX adapter does (backends/jax/cost.py): the compiled cost, checked against the lowered HLO."""
    compiled, text, _ = _program(name)
    return compiled, hlo_flops.checked(replace(compiled), lambda: text, partitions)


def _truth(name: str) -> float:
    """The compiled count, loops counted: XLA's analysis of the optimized program, each loop body times the trip
    count XLA's optimizer annotated (`known_trip_count`, read by hlo_flops.trip_count)."""
    _, _, optimized = _program(name)
    mod = hlo_flops.parse(optimized)
    assert "known_trip_count" in optimized or not hlo_flops.dot_flops(mod).loops
    return hlo_flops.loop_cost(mod, hlo_cost.xla_text_cost)[0]["flops"]


@pytest.mark.parametrize("how", ["negative", "missing", "low"])
@pytest.mark.parametrize("program", ["matmul", "ffw", "transformer"])
def test_gpu_shaped_compiled_costs_fall_back_to_the_hlo_count(monkeypatch, program, how):
    truth = _truth(program)
    assert truth > 0
    monkeypatch.setenv(hlo_flops.SIMULATE_ENV, how)
    _, cost = _check(program)
    assert cost.flops_source == "hlo", cost
    assert cost.flops == pytest.approx(truth, rel=TOL), (cost, truth)
    assert not cost.flops_lower_bound
    assert cost.bytes_accessed is None if how == "negative" else cost.bytes_lower_bound
    assert cost.bytes_accessed is None or cost.bytes_accessed >= 0
    assert "cost analysis gave" in cost.note


@pytest.mark.parametrize("program", ["matmul", "ffw"])
def test_a_compiled_count_that_holds_is_kept(program):
    compiled, cost = _check(program)
    assert cost.flops_source == "compiled" and cost.flops == compiled.flops
    assert not cost.flops_lower_bound and not cost.bytes_lower_bound and cost.note is None


def test_a_loop_counted_once_by_the_compiler_is_counted_times_its_trips():
    """On the CPU too: XLA's compiled count has the scanned layers' body once (half of the layers' FLOPs)."""
    truth = _truth("transformer")
    compiled, cost = _check("transformer")
    assert compiled.flops < 0.7 * truth  # what the compiler says (the reason for this fallback)
    assert cost.flops_source == "hlo" and cost.flops == pytest.approx(truth, rel=TOL)
    assert "each loop body times its trip count" in cost.note


def test_trip_counts_of_scan_and_fori_loop():
    def f(w, x):
        def body(c, _):
            c = jax.lax.fori_loop(0, 5, lambda i, c: jnp.tanh(c @ w), c)
            return c, None
        return jax.lax.scan(body, x, None, length=7)[0].sum()
    w, x = jnp.ones((32, 32)), jnp.ones((8, 32))
    mod = hlo_flops.parse(jax.jit(f).lower(w, x).as_text(dialect="hlo"))
    count = hlo_flops.dot_flops(mod)
    assert count.flops == 7 * 5 * 2 * 8 * 32 * 32 and count.loops == 2 and count.unknown_loops == 0


def test_a_loop_of_unknown_trip_count_is_a_lower_bound(monkeypatch):
    def f(w, x, n):
        return jax.lax.while_loop(lambda c: c[1] < n, lambda c: (jnp.tanh(c[0] @ w), c[1] + 1), (x, 0))[0].sum()
    w, x = jnp.ones((32, 32)), jnp.ones((8, 32))
    monkeypatch.setenv(hlo_flops.SIMULATE_ENV, "negative")
    compiled, text, _ = _compiled(jax.jit(f), (w, x, 3))
    cost = hlo_flops.checked(compiled, lambda: text)
    assert cost.flops_source == "hlo" and cost.flops_lower_bound
    assert cost.flops >= 2 * 8 * 32 * 32 and "unknown trip count" in cost.note


def test_without_jaxlib_the_dots_alone_are_a_lower_bound(monkeypatch):
    monkeypatch.setenv(hlo_flops.SIMULATE_ENV, "negative")
    monkeypatch.setenv(hlo_cost.DISABLE_ENV, "1")
    _, cost = _check("matmul")
    assert cost.flops_source == "hlo_text" and cost.flops_lower_bound
    assert cost.flops == 2 * 128 * 256 * 64


def test_a_partitioned_program_is_counted_per_device(monkeypatch):
    monkeypatch.setenv(hlo_flops.SIMULATE_ENV, "missing")
    _, cost = _check("matmul", partitions=4)
    assert cost.flops == pytest.approx(2 * 128 * 256 * 64 / 4, rel=TOL)
    assert "divided over the 4 devices" in cost.note


def test_no_negative_figure_survives_without_hlo():
    cost = hlo_flops.checked(hlo_cost.GraphCost(-1.0, -1.0, -1.0, hlo_cost.XLA), lambda: None)
    assert (cost.flops, cost.bytes_accessed, cost.transcendentals) == (None, None, None)
    assert cost.flops_source is None and "unknown" in cost.note


# --- no report carries a negative or partial figure as a measurement (roofline.py's guard) -----------------------
PEAK = peaks.Peak(1e12, 1e11, "bf16", "test chip", "test")


def _steps(flops, nbytes, n=4):
    return [StepRecord(index=i, wall_time_s=1e-3, executions=1, flops=flops, bytes_accessed=nbytes) for i in range(n)]


def _numbers(d, path=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _numbers(v, f"{path}{k}.")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, dict):
                    yield from _numbers(x, f"{path}{k}[{i}].")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield f"{path}{k}", v


def test_the_roofline_carries_no_negative_figure():
    """What the GPU's report carried before (flops -1 per step, achieved_flops_per_s -321): the steps' negative
    FLOPs are unknown, negative bytes count as none (a lower bound), a graph's -1 is null."""
    graphs = [{"id": "step", "flops": -1.0, "bytes_accessed": -1.0, "transcendentals": 0.0,
               "source": "xla_cost_analysis"}]
    sec = roofline.section(Iterations(_steps(-1.0, -1.0)), {"source": "xla_cost_analysis", "graphs": graphs}, PEAK).to_json()
    assert not [(k, v) for k, v in _numbers(sec) if v < 0], sec
    assert sec["flops_per_step"] is None and sec["achieved_flops_per_s"] is None and sec["hfu"] is None
    assert sec["graphs"][0]["flops"] is None and any("negative FLOP count" in n for n in sec["notes"])
    sec = roofline.section(Iterations(_steps(1e9, -1.0)), {"source": "xla_cost_analysis", "graphs": graphs}, PEAK).to_json()
    assert sec["bytes_per_step"] == 0 and sec["bytes_lower_bound"] and sec["achieved_bytes_per_s"] == 0
    assert any(n.startswith("bytes per step are a lower bound") for n in sec["notes"])


def test_partial_flops_print_as_a_lower_bound():
    graphs = [{"id": "step", "flops": 1e9, "source": "xla_cost_analysis", "flops_source": "hlo_text",
               "flops_lower_bound": True}]
    sec = roofline.section(Iterations(_steps(1e9, 1e7)), {"source": "xla_cost_analysis", "graphs": graphs}, PEAK).to_json()
    assert sec["flops_source"] == "hlo_text" and sec["flops_lower_bound"]
    line = roofline.summary_lines(sec)[0]
    assert "≥ 1 GFLOP/step (hlo_text)" in line and "HFU ≥ " in line and "TFLOP/s achieved" in line


# --- end to end: `profile` with a GPU's compiled figures ---------------------------------------------------------
MB, D_IN, D_H, D_OUT = 256, 256, 512, 128  # tests/scripts/roofline_programs.py's mlp
MLP_FLOPS = 2 * MB * (2 * D_IN * D_H + 3 * D_H * D_OUT)  # its dots; elementwise ops ~0.3 % on top


@pytest.mark.parametrize("backend", ["jax", "torch_xla"])
def test_profile_with_a_gpus_negative_compiled_count(tmp_path, backend):
    out = tmp_path / "report.json"
    env = {"JAX_PLATFORMS": "cpu"} if backend == "jax" else {}
    proc = run_cli("profile", "--port", "none", "--backend", backend, "--report", str(out),
                   str(SCRIPTS / "roofline_programs.py"), backend, "mlp", cwd=tmp_path,
                   **env, **{hlo_flops.SIMULATE_ENV: "negative"})
    assert out.exists(), proc.stderr[-3000:]
    report = load_report(out)  # the schema: no negative FLOP or byte figure in steps[] or the roofline
    roof = report["roofline"]
    assert roof["flops_source"] == "hlo" and not roof["flops_lower_bound"], roof
    assert roof["flops_per_step"] == pytest.approx(MLP_FLOPS, rel=TOL)
    assert roof["bytes_lower_bound"] and any("-1 FLOPs" in (g.get("note") or "") for g in roof["graphs"])
    assert not [(k, v) for k, v in _numbers(roof) if v < 0]
    assert all((s["flops"] or 0) >= 0 and (s["bytes_accessed"] or 0) >= 0 for s in report["steps"])
    assert "FLOP/step (hlo)" in proc.stderr


def test_a_conditional_runs_one_branch():
    def f(w, x, p):
        return jax.lax.cond(p, lambda x: x @ w @ w, lambda x: x @ w, x).sum()
    w, x = jnp.ones((32, 32)), jnp.ones((8, 32))
    mod = hlo_flops.parse(jax.jit(f).lower(w, x, True).as_text(dialect="hlo"))
    assert hlo_flops.dot_flops(mod).flops == 2 * 8 * 32 * 32  # the smaller branch: what it runs at least


# jax 0.10.2's HLO of `jit(shard_map(lambda x, w: jnp.tanh(x @ w), mesh=4 devices, in_specs=(P("d"), P())))` (and
# of a pmap, which it builds the same way): the body's shapes are one device's
SHARD_MAP_HLO = """HloModule jit__lambda, entry_computation_layout={(f32[64,32]{1,0}, f32[32,64]{1,0})->f32[64,64]{1,0}}

xla.sdy.manual_computation_body.1 {
  shard_map.5 = f32[16,32]{1,0} parameter(0)
  shard_map.6 = f32[32,64]{1,0} parameter(1)
  dot_general.1 = f32[16,64]{1,0} dot(shard_map.5, shard_map.6), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT tanh.1 = f32[16,64]{1,0} tanh(dot_general.1)
}

ENTRY main.2 {
  x.1 = f32[64,32]{1,0} parameter(0)
  w.1 = f32[32,64]{1,0} parameter(1)
  shard_map.9 = (f32[16,32]{1,0}, f32[32,64]{1,0}) custom-call(x.1, w.1), custom_call_target="xla.sdy.GlobalToLocalShape"
  shard_map.10 = f32[16,32]{1,0} get-tuple-element(shard_map.9), index=0
  shard_map.11 = f32[32,64]{1,0} get-tuple-element(shard_map.9), index=1
  shard_map.12 = f32[16,64]{1,0} call(shard_map.10, shard_map.11), to_apply=xla.sdy.manual_computation_body.1
  ROOT shard_map.13 = f32[64,64]{1,0} custom-call(shard_map.12), custom_call_target="xla.sdy.LocalToGlobalShape"
}
"""


def test_a_shard_map_body_is_one_devices_already():
    """pmap and shard_map bodies have one device's shapes in the HLO before optimization: not divided again."""
    assert hlo_flops.split_over(SHARD_MAP_HLO, 4) == 1 and hlo_flops.split_over("ENTRY main {}", 4) == 4
    cost = hlo_flops.checked(hlo_cost.GraphCost(-1.0, -1.0, 0.0, hlo_cost.XLA), lambda: SHARD_MAP_HLO, 4)
    assert cost.flops == pytest.approx(2 * 16 * 32 * 64, rel=TOL) and cost.flops_source == "hlo"
    assert not cost.flops_lower_bound  # the shard_map's shape custom calls only annotate


def test_a_kernel_of_its_own_makes_the_count_a_lower_bound():
    """A custom call that does work (a Pallas kernel, cuDNN attention) in the HLO before optimization: XLA's
    analysis cannot count it (-1), so the figure is a lower bound."""
    text = SHARD_MAP_HLO.replace('custom_call_target="xla.sdy.LocalToGlobalShape"', 'custom_call_target="my_kernel"')
    cost = hlo_flops.checked(hlo_cost.GraphCost(None, None, None, hlo_cost.XLA), lambda: text)
    assert cost.flops_source == "hlo" and cost.flops_lower_bound and "custom call" in cost.note
