"""Write tests/corpus/<name>.truth.json for every corpus script: the hand-written spec below + markers in the
script (`# PLANTED: kind` = the warning the report must give at that line, `# INFO: kind` = an info it must give
there, `# ALSO-LINE: kind` = another line accepted for that expected finding) + the raw counters that measure.py
records WITHOUT ptxla_perf. The measured iteration count must equal the spec's, or nothing is written.

    python tests/corpus/make_truth.py            # re-measure every script (fresh process each)
    python tests/corpus/make_truth.py --only xla_eval_item jax_nnx_loop
    python tests/corpus/make_truth.py --keep-raw  # spec/markers changed: rewrite without re-measuring
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = re.compile(r"#\s*(PLANTED|INFO|ALSO-LINE):\s*([a-z_]+)")

INPUT_BATCH = {"kind": "host_to_device_transfer", "severity": "warning",
               "why": "the NumPy batch passed to the jitted step is the data pipeline's input (the Flax/JAX examples' "
                      "idiom); it has to reach the device once per step and is not a mistake"}
RECOMPILE_WARN = {"kind": "recompilation", "severity": "warning"}
SYNC_WARN = {"kind": "device_to_host_sync", "severity": "warning"}

# name -> spec. iterations: optimizer updates (torch_xla) / step-function calls (JAX). why: per marker kind.
SPEC: dict[str, dict] = {
    "xla_loader_closure_log": dict(
        iterations=20, failure="issue 9 #1, #6",
        forbidden=[dict(SYNC_WARN, why="the loss is read inside xm.add_step_closure every 10 steps: the pattern "
                                       "the torch_xla docs recommend, 2 reads in 20 iterations"),
                   dict(RECOMPILE_WARN, why="all compiles happen in the first iterations and never again")],
        notes="MpDeviceLoader syncs when it fetches a batch and xm.optimizer_step does not: one sync per iteration "
              "plus the loader's first/last. The report must count 20 steps, not one per sync."),
    "xla_ddp_bucket_rebuild": dict(
        iterations=12, failure="issue 9 #2",
        forbidden=[dict(RECOMPILE_WARN, why="DDP rebuilds its buckets after the first iterations: one more graph "
                                            "at iteration 2, never again (a one-off)"),
                   dict(SYNC_WARN, why="DDP's own reads happen only in the first two iterations")],
        notes="dist.init_process_group('xla', init_method='xla://') works in one process on the CPU (world 1)."),
    "xla_decoder_pad_longest": dict(
        cause={"recompilation": "input_shapes"},
        iterations=8, failure="issue 9 #3",
        why={"recompilation": "collate() pads each batch to its longest sequence: almost every batch has a new "
                              "sequence length, so a new graph compiles after warm-up on most iterations (most of "
                              "the wall time); the new shape enters the device at this line"}),
    "xla_eval_partial_batch": dict(
        cause={"recompilation": "input_shapes"},
        iterations=16, eval_iterations=8, failure="issue 9 #3",
        why={"recompilation": "the eval set's last batch is smaller (drop_last=False): the eval graph compiles once "
                              "more for it in epoch 0 and is cached in epoch 1 (a one-off: info, with the cause "
                              "'input shapes changed: batch 16 -> 5')"},
        forbidden=[dict(RECOMPILE_WARN, why="the partial-batch graph compiles once and is cached after that")]),
    "xla_eval_item": dict(
        iterations=10, eval_iterations=6, failure="issue 9 #5",
        also_accept={"graph_break": ["device_to_host_sync"]},
        why={"graph_break": ".item() in the middle of every eval step runs the pending graph early: each eval step "
                            "executes 2 graphs and waits for the device once"}),
    "xla_print_loss": dict(
        iterations=12, failure="issue 9 #5",
        also_accept={"device_to_host_sync": ["graph_break"]},
        why={"device_to_host_sync": "print(loss) before backward reads the loss every iteration: the forward graph "
                                    "runs early and backward+update is a second graph"}),
    "xla_log_every_n_item": dict(
        iterations=20, failure="issue 9 #6",
        why={"device_to_host_sync": "loss.item() every 5th iteration: an info with its amortised cost, not a "
                                    "per-step warning"},
        forbidden=[dict(SYNC_WARN, why="one read per 5 iterations, after the sync: it does not cost every step")]),
    "xla_hf_tqdm_scheduler": dict(
        iterations=16,
        forbidden=[dict(RECOMPILE_WARN, why="the scheduler's lr never becomes 0 or 1: no special-scalar recompile")]),
    "xla_tqdm_postfix_item": dict(
        iterations=16,
        why={"device_to_host_sync": "pbar.set_postfix(loss=loss.item()) reads the loss on every iteration"}),
    "xla_grad_accum": dict(
        iterations=10,
        notes="2 micro-batches per optimizer update, a sync after each: 20 syncs, 10 iterations."),
    "xla_step_context": dict(iterations=12),
    "xla_steptrace_bincount": dict(
        iterations=10,
        why={"op_fallback": "torch.bincount has no XLA lowering: aten::bincount runs on the CPU every iteration"}),
    "xla_sync_before_clip": dict(
        iterations=12,
        why={"graph_break": "xm.mark_step() between loss.backward() and clip/optimizer.step(): one backward per "
                            "update, so not accumulation - every iteration runs two graphs"}),
    "xla_index_cached_batches": dict(
        cause={"recompilation": "constant"},
        iterations=20,
        why={"recompilation": "batches_x[step % n] with a Python int: the index is a constant in the graph, so each "
                              "of the 5 batches compiles a graph of its own in the first iterations (not warm-up: "
                              "a changed constant, as many graphs as index values)"}),
    "jax_batch_size_varies": dict(
        cause={"recompilation": "input_shapes"},
        iterations=10, failure="issue 9 #2",
        why={"recompilation": "the token-budget batcher changes the batch size on every step from step 0: "
                              "train_step recompiles for each new size (input shapes changed); not warm-up"}),
    "jax_mnist_eager_accuracy": dict(
        cause={"recompilation": "input_shapes"},
        iterations=9, failure="issue 9 #4",
        why={"recompilation": "update compiles once more for the last, smaller batch of the epoch (input shapes "
                              "changed): a one-off per run here, info",
             "eager_compile": "accuracy() is not jitted: each jnp op in it compiles once on first use (info; "
                              "jit it to make it one compile)"},
        forbidden=[dict(RECOMPILE_WARN, why="one recompile for the last batch, never again; the eager compiles "
                                            "are first compiles, not recompiles"), INPUT_BATCH]),
    "jax_eval_step_first_compile": dict(
        iterations=12, eval_iterations=4, failure="issue 9 #4",
        why={"new_graph": "eval_step is a separately jitted function: its first call compiles it once (a new "
                          "function), not a recompile of train_step"},
        forbidden=[dict(RECOMPILE_WARN, why="no function compiles twice"), INPUT_BATCH]),
    "jax_linen_trainstate": dict(
        iterations=20,
        why={"device_to_host_sync": "jax.device_get(metrics) every 5 steps: an info with its amortised cost"},
        forbidden=[dict(SYNC_WARN, why="one read per 5 steps")]),
    "jax_nnx_loop": dict(
        iterations=20,
        why={"device_to_host_sync": "metrics.compute() read with float() once per epoch (every 10 steps): info"},
        forbidden=[dict(SYNC_WARN, why="one read per epoch"), INPUT_BATCH]),
    "jax_static_step_number": dict(
        cause={"recompilation": "static_argument"},
        iterations=6,
        why={"recompilation": "the step number is a static argument (static_argnums=(3, 4)): every call has a new "
                              "static value and compiles again"}),
    "jax_jit_inside_loop": dict(
        cause={"recompilation": "new_function_object"},
        iterations=8, step_fn="loss_fn",
        notes="measure.py is told the step function: optax's own jitted bias correction, called twice per step by "
              "the eager tx.update, is the most-called jitted function (the report must not take it for the step).",
        why={"recompilation": "jax.jit(jax.value_and_grad(loss_fn)) is called inside the loop: a new jitted object "
                              "every step, so the same function traces and compiles on every step (each call is "
                              "still one training step)"}),
    "jax_partial_train_eval": dict(
        iterations=15, eval_iterations=3,
        why={"new_graph": "eval_step = jit(partial(step, train=False)) is its own function: its first call, after "
                          "epoch 0, compiles it once - not a recompile of train_step (same code, other binding)",
             "device_to_host_sync": "the eval loss and accuracy are read once per eval pass, after its loop: the "
                                    "pass's result, not a per-step cost"},
        forbidden=[dict(SYNC_WARN, why="one read of each eval result per epoch"),
                   dict(RECOMPILE_WARN, why="TrainState.step starts as a Python int and comes back as a weak int32 "
                                            "scalar: the same abstract value, no recompile; eval is a new function")]),
    "jax_float_loss_every_step": dict(
        iterations=16,
        why={"device_to_host_sync": "float(loss) on every step waits for the step and copies the loss to the host"}),
}


def markers(script: Path) -> list[tuple[int, str, str]]:
    out = []
    for n, line in enumerate(script.read_text().splitlines(), 1):
        m = MARKER.search(line)
        if m:
            out.append((n, m.group(1), m.group(2)))
    return out


def expected_from_markers(script: Path, spec: dict) -> list[dict]:
    found = markers(script)
    also = {}
    for n, tag, kind in found:
        if tag == "ALSO-LINE":
            also.setdefault(kind, []).append(n)
    expected = []
    for n, tag, kind in found:
        if tag == "ALSO-LINE":
            continue
        entry = {"kind": kind, "line": n, "severity": "warning" if tag == "PLANTED" else "info",
                 "planted": tag == "PLANTED", "why": spec.get("why", {}).get(kind, "")}
        if also.get(kind):
            entry["also_lines"] = also[kind]
        if spec.get("cause", {}).get(kind):
            entry["cause"] = spec["cause"][kind]
        if spec.get("also_accept", {}).get(kind):
            entry["also_kinds"] = spec["also_accept"][kind]
        expected.append(entry)
    return expected


def truth_for(name: str, raw: dict | None = None) -> dict:
    script = HERE / f"{name}.py"
    spec = SPEC[name]
    backend = "torch_xla" if name.startswith("xla_") else "jax"
    truth = {"backend": backend, "args": spec.get("args", []), "iterations": spec["iterations"],
             "eval_iterations": spec.get("eval_iterations"),
             "expected": expected_from_markers(script, spec),
             "forbidden": spec.get("forbidden", []),
             "raw": raw or {},
             "measured_with": "python tests/corpus/measure.py " + (f"--step-fn {spec['step_fn']} " if spec.get("step_fn")
                                                                   else "") + f"tests/corpus/{name}.py",
             "notes": " ".join(x for x in (spec.get("failure", ""), spec.get("notes", "")) if x)}
    return truth


def dumps(obj) -> str:
    """JSON with short lists of scalars kept on one line."""
    text = json.dumps(obj, indent=1, sort_keys=False)
    return re.sub(r"\[\s*([-\d.,\s]*?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",") if x.strip()) + "]", text)


def measure_in_subprocess(name: str) -> dict:
    env = dict(os.environ)
    env.setdefault("PJRT_DEVICE", "CPU")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "xla_force_host_platform_device_count" not in env.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    out = HERE / f".{name}.measure.json"
    step_fn = ["--step-fn", SPEC[name]["step_fn"]] if SPEC[name].get("step_fn") else []
    proc = subprocess.run([sys.executable, str(HERE / "measure.py"), "--json", str(out), *step_fn,
                           str(HERE / f"{name}.py"), *SPEC[name].get("args", [])],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode or not out.exists():
        raise RuntimeError(f"{name}: measure failed (rc {proc.returncode})\n{proc.stderr[-3000:]}")
    raw = json.loads(out.read_text())
    out.unlink()
    return raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME")
    parser.add_argument("--keep-raw", action="store_true",
                        help="rewrite the truth files from the spec and markers, keeping their measured raw counters")
    ns = parser.parse_args(argv)
    names = ns.only or sorted(SPEC)
    bad = 0
    for name in names:
        if name not in SPEC:
            print(f"unknown corpus script {name!r}", file=sys.stderr)
            return 2
        old = HERE / f"{name}.truth.json"
        if ns.keep_raw and old.exists():
            (HERE / f"{name}.truth.json").write_text(dumps(truth_for(name, json.loads(old.read_text())["raw"])) + "\n")
            print(f"{name}: rewritten (raw kept)")
            continue
        try:
            raw = measure_in_subprocess(name)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(e, file=sys.stderr)
            bad += 1
            continue
        raw.pop("backend", None)
        if raw["iterations"] != SPEC[name]["iterations"]:
            print(f"{name}: measured {raw['iterations']} iterations, spec says {SPEC[name]['iterations']}: "
                  f"not written", file=sys.stderr)
            bad += 1
            continue
        (HERE / f"{name}.truth.json").write_text(dumps(truth_for(name, raw)) + "\n")
        print(f"{name}: {raw['iterations']} iterations, compiles at iterations {raw['iterations_with_compiles']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
