"""JAX data parallel over N local processes: each runs `jax.distributed.initialize` on localhost with gloo CPU
collectives, trains a linear model on its shard of the global batch (the gradient all-reduce crosses processes)
and writes its own report; the parent merges them (docs/multiprocess.md).

`slow_rank`/`slow_ms`: that rank sleeps before each step, as a slow input pipeline would (timed in
`session.data_wait()`). JAX dispatches asynchronously, so at first the other ranks run ahead (their calls return
at once) and the slow rank's step time stands out; once their dispatch queue is full they wait for it at the
gradient all-reduce and every rank's step is as long - its wait for input data still names it (`straggler`). `read_loss_rank`: that rank alone reads the loss every step (a
rank-0-only log line): the `rank_divergence` finding points at the line.
"""
from __future__ import annotations

import multiprocessing
import os
import socket
import sys
import time


STOP_GRACE_S = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def run(cfg, session) -> dict:
    """The parent: start the ranks, wait, hand their reports to the session (finish() merges them)."""
    from omegaconf import OmegaConf
    n = int(cfg.processes)
    if n < 1:
        raise ValueError(f"recipe.processes must be at least 1, not {n}")
    port = int(cfg.get("coordinator_port") or _free_port())
    plan = session.plan
    conf = OmegaConf.to_container(cfg, resolve=True)
    ctx = multiprocessing.get_context("spawn")  # children re-import nothing of the parent's state
    procs = [ctx.Process(target=worker, args=(i, n, port, conf, plan.to_json()), name=f"dp_jax-rank{i}")
             for i in range(n)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + float(cfg.get("timeout_s") or 300)
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
        procs[0].join(0.2) if procs[0].is_alive() else next(p for p in procs if p.is_alive()).join(0.2)
        if session.pending_stop() is not None:  # forwarded to the ranks by the session (spawn.py)
            # ranks stop at their next step; one blocked in a collective whose peer stopped first never gets
            # there (JAX's distributed service would keep it alive for minutes): it gets a few seconds
            deadline = min(deadline, time.monotonic() + STOP_GRACE_S)
    killed = [i for i, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()  # SIGTERM is JAX's preemption notice once distributed is up: it would not stop the rank
            p.join()
    if killed:
        session.extra["killed_ranks"] = killed
    root, ext = os.path.splitext(plan.report_path)
    session.child_reports = [f"{root}.rank{i}{ext}" for i in range(n) if os.path.exists(f"{root}.rank{i}{ext}")]
    stop = session.pending_stop()
    if stop is not None:
        raise stop
    failed = [(i, p.exitcode) for i, p in enumerate(procs) if p.exitcode]
    if failed:
        raise RuntimeError("; ".join(f"rank {i} exited with code {c}" for i, c in failed))
    return {"processes": n, "coordinator": f"localhost:{port}", "slow_rank": cfg.get("slow_rank"),
            "slow_ms": cfg.get("slow_ms")}


def worker(rank: int, n: int, port: int, cfg: dict, plan_json: str) -> None:
    """One rank (a spawned process), its stdout without gloo's "[Gloo] Rank N is connected" lines."""
    from ptxla_perf.runner.quiet import drop_stdout_lines
    with drop_stdout_lines("[Gloo] "):
        _worker(rank, n, port, cfg, plan_json)


def _worker(rank: int, n: int, port: int, cfg: dict, plan_json: str) -> None:
    """One rank: its own session, opened before JAX starts its backend."""
    from ptxla_perf import spawn
    from ptxla_perf.model.outcome import outcome
    from ptxla_perf.session import Session
    spawn.child_main_thread()  # SIGINT/SIGTERM: stop at the next step, write the report
    os.environ.setdefault("JAX_PROCESS_ID", str(rank))  # the rank until JAX says (a crash before the first step)
    session = spawn.child_session(spawn.ChildPlan.from_json(plan_json), rank=None, local_rank=rank,
                                  factory=Session)
    try:
        import jax
        jax.config.update("jax_platforms", os.environ.get("JAX_PLATFORMS") or "cpu")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=n, process_id=rank)
        session.extra.update(train(cfg, session))
    except BaseException as exc:
        end = outcome(exc)
        status, code, reason = end.status, end.exit_code, end.reason
        if status == "crashed":
            import traceback
            traceback.print_exc()
        spawn.child_done(status, code, reason)
        sys.exit(code or 0)
    spawn.child_done("completed", 0)


def train(cfg: dict, session) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    rank = jax.process_index()
    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    rng = np.random.default_rng(int(cfg.get("seed", 0)))
    f, b = int(cfg["features"]), int(cfg["batch_size"])
    w0 = rng.standard_normal((f, 1)).astype(np.float32)
    w = jax.make_array_from_callback(w0.shape, replicated, lambda idx: w0[idx])
    local = np.random.default_rng(int(cfg.get("seed", 0)) + 1 + rank)
    batches = []
    for _ in range(4):  # on the device once, before the loop: each rank its own shard of the global batch
        x = local.standard_normal((b, f)).astype(np.float32)
        y = (x @ w0 * 0.5).astype(np.float32)
        batches.append((jax.make_array_from_process_local_data(sharded, x),
                        jax.make_array_from_process_local_data(sharded, y)))
    lr = float(cfg["lr"])

    @jax.jit
    def train_step(w, x, y):
        loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)  # grad: all-reduced over ranks
        return w - lr * grad, loss

    slow = float(cfg.get("slow_ms") or 0) / 1e3 if cfg.get("slow_rank") == rank else 0.0
    session.set_step_info(samples=b, phase="train")
    loss = None
    for step in range(int(cfg["steps"])):
        with session.data_wait():  # the step's input: what a straggling input pipeline costs, per rank
            if slow:
                time.sleep(slow)  # this rank's input pipeline is slow
            x, y = batches[step % len(batches)]
        w, loss = train_step(w, x, y)
        if cfg.get("block_each_step"):
            jax.block_until_ready(loss)  # lockstep: every rank waits for the slowest at the all-reduce (no copy)
        if cfg.get("read_loss_rank") == rank:
            print(f"step {step} loss {float(loss):.4f}")  # only this rank syncs the host every step
    final = float(loss)  # one read after the loop: not a finding
    return {"rank": rank, "processes": jax.process_count(), "devices": len(jax.devices()), "final_loss": final,
            "slowed_ms": slow * 1e3}
