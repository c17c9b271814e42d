"""Where a step's time goes (issue 18): every step's wall time split into data, host, launch, compile, read wait,
device and other, from what the adapters measure on every run (no capture), and the findings named from it with
the user's line (the stack sampler): host_bound for a heavy pure-Python block, the parts of many tiny torch_xla
steps, launch_bound for tiny torch_xla steps over many inputs and for tiny JAX steps over many leaves, input_bound
for a JAX loop fed by a generator doing heavy NumPy work.

End to end, these runs assert what does not depend on the machine's load: the parts and their sum, the lines the
sampler saw, where a finding points when it is made. Which part is largest, and so which verdict, depends on the
load: tests/test_timing_verdicts.py judges those on the steps these scripts recorded."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SCRIPTS, cli_env, planted_line, sampled_lines, warnings_of

# the `profiled` runs are read by several tests each: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("breakdown")

PARTS = ("data", "host", "launch", "compile", "read_wait", "device", "profiler", "other")


def assert_parts_sum_to_wall_time(report: dict) -> None:
    """Each iteration's parts sum to its time: its wall time, where a wait for several queued steps was spread
    (pacing.py) less its part of it plus its share."""
    steps = [s for s in report["steps"] if s.get("phase") != "eval"]
    assert steps
    for s in steps:
        parts = s["time_breakdown"]
        assert parts is not None and set(parts) == set(PARTS), s
        assert all(v >= 0 for v in parts.values())
        paced = s["wall_time_s"] - s.get("spread_out_s", 0.0) + s.get("spread_in_s", 0.0)  # pacing.py
        assert sum(parts.values()) == pytest.approx(paced, rel=0.05, abs=1e-6)
    summary = report["summary"]["time_breakdown"]
    assert summary["steps"] == report["summary"]["steady_steps"]
    assert sum(summary["components_s"].values()) == pytest.approx(summary["wall_s"], rel=0.05)
    assert summary["largest"] == max(PARTS, key=lambda k: summary["components_s"][k])


def at_most_one(report: dict, kind: str) -> dict | None:
    """The report's one finding of a timing kind, or None where this run's load did not make it."""
    found = [f for f in report["findings"] if f["kind"] == kind]
    assert len(found) <= 1, [(f["kind"], f["severity"], f["message"]) for f in report["findings"]]
    return found[0] if found else None


def test_heavy_python_block_is_host_bound_at_its_line(profiled):
    script = SCRIPTS / "host_heavy.py"
    run = profiled(script)
    assert run.proc.returncode == 0 and "done True" in run.proc.stdout, run.proc.stderr[-2000:]
    rep = run.report
    assert_parts_sum_to_wall_time(rep)
    # the thread's own CPU time on every steady step, and the sampler's hottest line is the planted block
    assert all(s["host_cpu_s"] > 0 for s in rep["steps"] if s["steady"])
    assert sampled_lines(rep, script, "user")[:1] == [planted_line(script)], rep["steps"][-1]["hot_lines"]
    f = at_most_one(rep, "host_bound")  # the verdict itself: test_timing_verdicts.py
    assert f is None or (f["location"]["line"] == planted_line(script)
                         and f["evidence"]["lines"][0]["line"] == planted_line(script)), f
    split = rep["summary"]["time_breakdown"]
    assert f"time/step   {split['largest'].replace('_', ' ')} " in run.proc.stderr  # the largest part first
    assert not warnings_of(rep), rep["findings"]


def test_many_tiny_steps_split_launch_device_and_host(profiled):
    """Many tiny torch_xla steps: each sync's own CPU time (launch) and the device's time on each graph
    (ExecuteTime, read in batches) are measured on every step; the roofline verdict names the largest part. On the
    CPU a cached tiny graph launches in ~20 us, less than tracing it and torch_xla's own Python around the sync, so
    the launch part stays below launch_bound's share: the rule runs and says nothing."""
    script = SCRIPTS / "tiny_steps.py"
    run = profiled(script)
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    rep = run.report
    assert_parts_sum_to_wall_time(rep)
    steady = [s for s in rep["steps"] if s["steady"]]
    assert all(s["device_time_s"] is not None and s["device_time_s"] > 0 for s in steady)  # one graph each
    assert all(s["launch_time_s"] > 0 for s in steady)
    # a sync waits for the graphs still running when it began (the step before's, on the CPU often its own too, and
    # under load earlier ones still queued): its wait is at most the device's busy time on them inside its span.
    # Syncs run one after another, so their waits never count one graph's busy time twice: summed over the steps,
    # the waits are at most the device times (the first steady step's sync may wait for a warm-up graph's)
    waits = sum(s["device_wait_s"] for s in steady[1:])
    busy = sum(s["device_time_s"] or 0.0 for s in rep["steps"] if s["index"] <= steady[-1]["index"])
    assert waits <= busy + 1e-9 * len(steady), (waits, busy)
    split = rep["summary"]["time_breakdown"]
    assert rep["roofline"]["bound_by"]["component"] == split["largest"]
    assert "launch_bound" in rep["rules"]["judged"]
    launch = [f for f in rep["findings"] if f["kind"] == "launch_bound"]
    measured = split["wall_s"] - split["components_s"]["other"] - split["components_s"]["profiler"]  # as the rule
    if split["components_s"]["launch"] < 0.3 * measured:
        assert not launch
    if launch:
        assert launch[0]["evidence"]["share"] >= 0.4
    assert not [x for x in rep["findings"] if x["kind"] == "input_bound"]


def test_tiny_torch_xla_steps_over_many_inputs_are_launch_bound_at_the_sync(profiled):
    """A tiny graph over 512 small input tensors: the sync call hands the runtime a buffer per input, so launching
    each graph costs more than tracing it (one stack and mean) and more than the device's measured time on it:
    launch_bound, a warning at the sync's line, with the launch's ms per step and the device's."""
    script = SCRIPTS / "tiny_steps_many_inputs.py"
    run = profiled(script)
    assert run.proc.returncode == 0 and "done" in run.proc.stdout, run.proc.stderr[-2000:]
    rep = run.report
    assert_parts_sum_to_wall_time(rep)
    steady = [s for s in rep["steps"] if s["steady"]]
    assert steady and all(s["executions"] == 1 and s["launch_time_s"] > 0 for s in steady)  # one launch each
    split = rep["summary"]["time_breakdown"]
    parts = split["components_s"]
    f = at_most_one(rep, "launch_bound")  # the verdict itself: test_timing_verdicts.py
    if f is not None:
        ev = f["evidence"]
        assert f["location"]["line"] == planted_line(script) and ev["graphs_per_step"] == pytest.approx(1.0)
        assert ev["ms_per_step"] == pytest.approx(parts["launch"] * 1e3, abs=1e-3)
        assert "launch_bound" in run.proc.stderr and f"tiny_steps_many_inputs.py:{planted_line(script)}" in \
            run.proc.stderr
    # the roofline's verdict names the largest part of the whole step: launching, unless the step waited longer
    # for a CPU (`other`, a loaded host: seen with 2 busy processes per core) or in ptxla_perf's own boundary work
    # (its GIL waits under load) than anything took - then it says overhead-bound by that part, not launch
    roof = rep["roofline"]
    if split["largest"] in ("other", "profiler"):
        assert roof["verdict"] == "overhead-bound" and roof["bound_by"]["component"] == split["largest"], roof
        assert parts[split["largest"]] > parts["launch"]
    else:
        assert roof.get("bound_by", {"component": split["largest"]})["component"] == split["largest"], roof
        assert split["largest"] != "launch" or roof["verdict"] == "launch-bound", roof
    assert not warnings_of(rep), rep["findings"]


def test_time_blocked_in_wait_device_ops_is_the_device_part(profiled):
    """A loop that waits for the device after each sync (xm.wait_device_ops()): the main thread is blocked there
    until the device finished the step's graph, so that time is the breakdown's `device` part (at most the busy time
    of the graphs it waited for), not `other`; the roofline names the step device-bound (or compute-bound, near the
    prediction)."""
    script = SCRIPTS / "wait_device_ops_loop.py"
    run = profiled(script)
    assert run.proc.returncode == 0 and "done" in run.proc.stdout, run.proc.stderr[-2000:]
    rep = run.report
    assert_parts_sum_to_wall_time(rep)
    split = rep["summary"]["time_breakdown"]  # its largest part, device: test_timing_verdicts.py
    steady = [s for s in rep["steps"] if s["steady"]]
    assert steady and all(s["device_wait_s"] > 0 and s["time_breakdown"]["device"] > 0 for s in steady), steady
    by_index = {s["index"]: s for s in rep["steps"]}
    for s in (s for s in rep["steps"] if s["steady"]):  # at most the busy time of the graphs it waited for: the
        before = by_index[s["index"] - 1]["device_time_s"]  # one the step before launched, and the step's own
        assert before is None or s["time_breakdown"]["device"] <= before + s["device_time_s"] + 1e-6, (s, before)
    roof = rep["roofline"]  # the device's time near the prediction, or the largest part of a slower step
    if split["largest"] == "device":
        assert roof["verdict"] in ("compute-bound", "memory-bound", "device-bound"), roof["explanation"]
    assert roof.get("bound_by", {"component": split["largest"]})["component"] == split["largest"], roof


def test_jax_generator_with_heavy_numpy_is_input_bound_at_its_line(profiled):
    script = SCRIPTS / "jax_generator.py"
    run = profiled(script)
    assert run.proc.returncode == 0 and "done True" in run.proc.stdout, run.proc.stderr[-2000:]
    rep = run.report
    assert_parts_sum_to_wall_time(rep)
    # the generator's work, sampled: its heavy line inside the generator, pulled at the loop's line
    assert sampled_lines(rep, script, "data")[:1] == [planted_line(script)], rep["steps"][-1]["hot_lines"]
    assert rep["summary"]["time_breakdown"]["components_s"]["data"] > 0
    f = at_most_one(rep, "input_bound")  # the verdict itself: test_timing_verdicts.py
    if f is not None:
        assert f["evidence"]["measured"] == "sampled"
        assert f["location"]["line"] == planted_line(script, "LOOP")  # the loop's line that pulls the batch
        assert f["evidence"]["lines"][0]["line"] == planted_line(script)  # the line inside the generator


def test_jax_tiny_steps_over_many_leaves_are_launch_bound_at_the_call(profiled):
    """A jitted step over a tree of 300 small arrays: each call's dispatch (flattening the tree, one buffer per
    leaf) costs far more than the device's few FLOPs, so launching is the largest part and launch_bound names the
    call's line. JAX's device time is only seen on sampled steps, from its outputs' readiness seen by a thread that
    needs the GIL the dispatching main thread holds: an upper bound, here often about as long as the step. The
    finding is a warning where even that bound is below the launch cost, else info (the device may be the bound)."""
    script = SCRIPTS / "jax_many_leaves.py"
    run = profiled(script)
    assert run.proc.returncode == 0 and "done" in run.proc.stdout, run.proc.stderr[-2000:]
    rep = run.report
    assert_parts_sum_to_wall_time(rep)
    steady = [s for s in rep["steps"] if s["steady"]]
    assert steady and all(s["launch_time_s"] > 0 for s in steady)  # each call's dispatch, measured
    assert [s for s in steady if s["device_time_s"] is not None]  # sampled steps: 30-31, 62-63, ... of the 200
    f = at_most_one(rep, "launch_bound")  # the verdict itself: test_timing_verdicts.py
    if f is not None:
        device, launch = f["evidence"]["device_ms_per_step"], f["evidence"]["ms_per_step"]
        assert device is not None and f["location"]["line"] == planted_line(script)
        assert f["severity"] == ("warning" if device < launch else "info")
        assert f["evidence"]["graphs_per_step"] == pytest.approx(1.0)
    largest = rep["summary"]["time_breakdown"]["largest"]
    assert rep["roofline"].get("bound_by", {"component": largest})["component"] == largest, rep["roofline"]
    assert not warnings_of(rep), rep["findings"]


def _device_sampled(report: dict) -> list[dict]:
    return [s for s in report["steps"] if s["device_time_s"] is not None]


def test_jax_device_time_on_sampled_steps_and_the_wait_for_it(profiled):
    """A JAX loop whose step is ~60 MFLOP of matmuls and waits for its loss (jax.block_until_ready): on the sampled
    steps (the second of each pair, every 32 steps) the device's busy time is measured from when the step's outputs
    became ready, more than nothing and at most the step's wall time (the step waited for them); the wait itself is
    the breakdown's `device` part on every step, the largest one."""
    script = SCRIPTS / "jax_device_time.py"
    run = profiled(script, args=("wait",))
    assert run.proc.returncode == 0 and "done" in run.proc.stdout, run.proc.stderr[-2000:]
    rep = run.report
    assert_parts_sum_to_wall_time(rep)
    sampled = _device_sampled(rep)
    assert [s["index"] for s in sampled] == [31]  # steps 30 and 31 of the 40: 30 tells where the device began 31
    assert all(0 < s["device_time_s"] <= s["wall_time_s"] for s in sampled)
    steady = [s for s in rep["steps"][:-1] if s["steady"]]  # the last step ends where its call returned
    assert all(s["device_wait_s"] > 0 and s["time_breakdown"]["device"] > 0 for s in steady)
    # the largest part, device: test_timing_verdicts.py (on a busy machine, waiting for a CPU can outgrow it)


@pytest.mark.parametrize("mode", ["donate", "donate_state"])
def test_jax_donated_loop_is_unchanged_while_its_outputs_are_watched(profiled, tmp_path, mode):
    """The state is donated to the next call while the sampled steps' outputs are watched from the thread: the
    program prints the same numbers as without ptxla_perf and no "donated buffers were not usable" warning.
    `donate`: the thread waits on the loss, never donated, so the sampled step's device time is known (the loop
    reads nothing until the end: the host runs ahead, the device time is not bounded by the step's wall time).
    `donate_state`: the step returns only the state, the array the thread watches is the one the next call
    donates - waited on before the donation, or found deleted (the time then unknown)."""
    script = SCRIPTS / "jax_device_time.py"
    run = profiled(script, args=(mode,))
    plain = subprocess.run([sys.executable, str(script), mode], cwd=tmp_path, env=cli_env(),
                           capture_output=True, text=True, timeout=300)
    assert run.proc.returncode == 0 == plain.returncode, run.proc.stderr[-2000:]
    done = [line for line in run.proc.stdout.splitlines() if line.startswith("done")]
    assert done == [line for line in plain.stdout.splitlines() if line.startswith("done")] and done
    assert "donated buffers" not in run.proc.stderr + plain.stderr
    sampled = _device_sampled(run.report)
    if mode == "donate":
        assert [s["index"] for s in sampled] == [31] and sampled[0]["device_time_s"] > 0
    assert all(s["device_time_s"] > 0 and s["index"] == 31 for s in sampled)
    assert all(s["device_wait_s"] == 0 for s in run.report["steps"])  # nothing waited on the main thread


def test_jax_device_busy_time_merges_a_call_whose_end_is_unknown():
    """The sampled step's busy time over calls run in order (backends/jax/ready.py _busy): each call from its dispatch start
    or the previous end to its end; a call whose end was not seen (late, donated) is merged into the next span."""
    from ptxla_perf.backends.jax.ready import _busy
    # the step before ended at 1.0; calls dispatched at 0.5 (host ahead) and 1.6 (after a device gap)
    assert _busy([(0.5, 1.2), (1.6, 2.0)], prev=1.0) == pytest.approx(0.2 + 0.4)
    assert _busy([(0.5, None), (1.6, 2.0)], prev=1.0) == pytest.approx(1.0)  # merged: 1.0 -> 2.0
    assert _busy([(1.5, 1.7)], prev=1.0) == pytest.approx(0.2)  # the device waited for the dispatch
