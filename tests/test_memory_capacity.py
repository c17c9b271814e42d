"""Memory capacity says what it is (issue 36): on a GPU, `memory_stats()['bytes_limit']` is JAX's (or torch_xla's)
allocator limit - 75 % of the device's memory by default, XLA_PYTHON_CLIENT_MEM_FRACTION sets it - not the device's
memory; the section says which, with the variable that sets it and the device's physical memory where the spec
table knows it. A real JAX run on this CPU for the fields; the GPU- and TPU-shaped figures as data."""
from __future__ import annotations

import pytest

from conftest import SCRIPTS

from ptxla_perf.analysis import memory
from ptxla_perf.rules import memory as memory_rules
from ptxla_perf.commands.doctor import peak_and_capacity

H200 = "NVIDIA H200"
LIMIT = int(105 * 2**30)  # what the H200 run's memory_stats() said: 75 % of the device's memory


def _jax_gpu(env: dict) -> dict:
    jax_memory = pytest.importorskip("ptxla_perf.backends.jax.memory")
    return {"bytes_limit": LIMIT, "bytes_in_use": 2**30, "peak_bytes_in_use": 2**31,
            **jax_memory.limit_kind("gpu", env)}


def test_a_gpu_limit_is_the_allocators_with_the_variable_that_sets_it():
    cap = memory.capacity(_jax_gpu({}), [H200], None)
    assert cap["bytes"] == LIMIT and cap["source"] == "runtime" and cap["kind"] == "allocator_limit"
    assert cap["set_by"] == "XLA_PYTHON_CLIENT_MEM_FRACTION unset (default 75 %)"
    assert cap["device_bytes"] == 141 * 2**30 and cap["device_source"] == "table"  # peaks.MEMORY_GIB's H200 row
    sec = memory.section({"graphs": [{"id": "step", "peak_bytes": 3 * 2**30}]}, _jax_gpu({}), [H200], None, None)
    (line,) = memory.summary_line(sec.to_json())
    assert "of 105 GiB (NVIDIA H200 allocator limit, XLA_PYTHON_CLIENT_MEM_FRACTION unset (default 75 %); " \
           "device 141 GiB)" in line
    assert memory_rules._source(cap) == "NVIDIA H200, the runtime's allocator limit"


def test_the_fraction_set_is_named():
    cap = memory.capacity(_jax_gpu({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".9", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
                          [H200], None)
    assert cap["set_by"] == "XLA_PYTHON_CLIENT_MEM_FRACTION=.9; XLA_PYTHON_CLIENT_PREALLOCATE=false"
    cap = memory.capacity(_jax_gpu({"XLA_CLIENT_MEM_FRACTION": ".5"}), [H200], None)
    assert cap["set_by"] == "XLA_CLIENT_MEM_FRACTION=.5"


def test_a_tpu_limit_is_the_devices_memory():
    jax_memory = pytest.importorskip("ptxla_perf.backends.jax.memory")
    cap = memory.capacity({"bytes_limit": 16 * 2**30, **jax_memory.limit_kind("tpu", {})}, ["TPU v5 lite"], None)
    assert (cap["kind"], cap["set_by"], cap["device_bytes"], cap["device_source"]) == \
        ("device_memory", None, 16 * 2**30, "runtime")
    assert memory.capacity_words(cap) == "TPU v5 lite"


def test_a_runtime_figure_of_unsaid_nature_and_the_table_and_the_user():
    assert memory.capacity({"bytes_limit": 1000}, [H200], None)["kind"] == "runtime_limit"
    table = memory.capacity(None, [H200], None)
    assert (table["kind"], table["device_bytes"]) == ("device_memory", 141 * 2**30)
    user = memory.capacity(_jax_gpu({}), [H200], 80)
    assert (user["kind"], user["bytes"], user["device_bytes"]) == ("user", 80 * 2**30, 141 * 2**30)


def test_torch_xla_gpu_limit_names_its_variable():
    torch_memory = pytest.importorskip("ptxla_perf.backends.torch_xla.memory")
    assert torch_memory.limit_kind("CUDA", {"PJRT_ALLOCATOR_FRACTION": "0.6"}) == {
        "limit_kind": "allocator", "limit_set_by": "PJRT_ALLOCATOR_FRACTION=0.6"}
    assert torch_memory.limit_kind("TPU", {}) == {"limit_kind": "device"}
    assert torch_memory.limit_kind("CPU", {}) == {}


def test_doctor_says_what_the_capacity_is():
    jax_memory = pytest.importorskip("ptxla_perf.backends.jax.memory")
    dev = {"platform": "gpu", "device_kind": H200, "count": 1, "bytes_limit": LIMIT,
           **jax_memory.limit_kind("gpu", {})}
    cap = peak_and_capacity(dev)["memory_capacity"]
    assert cap["kind"] == "allocator_limit" and cap["device_bytes"] == 141 * 2**30


def test_a_real_jax_cpu_run_says_its_capacity_is_unknown(profile):
    pytest.importorskip("jax")
    proc, report = profile(SCRIPTS / "memory_jax.py", "donate", "none", options=("--backend", "jax"))
    cap = report["memory"]["capacity"]
    assert (cap["source"], cap["kind"], cap["set_by"], cap["device_bytes"]) == ("unknown", "unknown", None, None)
    assert report["memory"]["runtime"] is None  # the CPU's memory_stats() says nothing
    assert "(device capacity unknown)" in proc.stderr
