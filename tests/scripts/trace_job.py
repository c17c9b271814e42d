"""Child jobs for the capture/analyze/browser tests: small real torch_xla and JAX loops on the CPU.

  trace_job.py txla_server PORT SECONDS         torch_xla loop with a profiler server (prints READY)
  trace_job.py txla_window LOGDIR START NUM STEPS   torch_xla loop with a StepWindowCapture
  trace_job.py jax_window LOGDIR START NUM STEPS [STOP_AT]   8-device JAX loop (all-reduce) with a StepWindowCapture;
                                                  STOP_AT: leave the loop after that step and close() (Ctrl-C path)
  trace_job.py jax_server PORT SECONDS [idle]   JAX loop (or an idle process) with a profiler server
"""
import os
import sys
import time

os.environ.setdefault("PJRT_DEVICE", "CPU")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):  # 8 devices, other flags kept
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))


def txla_model():
    import torch
    import torch_xla

    dev = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(i):
        import torch_xla.debug.profiler as xp

        x = torch.randn(32, 64).to(dev)
        y = torch.randint(0, 10, (32,)).to(dev)
        with xp.StepTrace("train_step", step_num=i):
            with xp.Trace("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        return loss

    return step


def jax_model():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("data",))
    state = {"w": jax.device_put(jnp.ones((128, 128)) * 0.01, NamedSharding(mesh, P()))}
    x = jax.device_put(jnp.ones((8 * 32, 128)), NamedSharding(mesh, P("data")))

    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    @jax.jit
    def update(w, x):  # the gradient of replicated w over a batch sharded on 8 devices needs an all-reduce
        return w - 0.1 * jax.grad(loss)(w, x)

    def step(i):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            state["w"] = update(state["w"], x)
            state["w"].block_until_ready()

    return step, lambda: state["w"]


def main():
    mode = sys.argv[1]
    if mode == "txla_server":
        import torch_xla.debug.profiler as xp

        port, seconds = int(sys.argv[2]), float(sys.argv[3])
        server = xp.start_server(port)  # keep a reference: the server stops when garbage-collected
        step = txla_model()
        step(0)
        print("READY", flush=True)
        t0, i = time.time(), 1
        while time.time() - t0 < seconds:
            step(i)
            i += 1
        del server
    elif mode in ("txla_window", "jax_window"):
        from ptxla_perf.trace.capture import StepWindowCapture

        logdir, start, num, steps = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        stop_at = int(sys.argv[6]) if len(sys.argv) > 6 else None
        if mode == "txla_window":
            step = txla_model()
            window = StepWindowCapture(logdir, start, num, backend="torch_xla")
        else:
            step, out = jax_model()
            window = StepWindowCapture(logdir, start, num, backend="jax", sync_outputs=out)
        try:
            for i in range(steps):
                step(i)
                window.on_step_end(i)
                if stop_at is not None and i == stop_at:
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass
        finally:
            path = window.close()
        print("XPLANE", path, window.steps_captured, flush=True)
    elif mode == "jax_server":
        import jax

        port, seconds = int(sys.argv[2]), float(sys.argv[3])
        idle = len(sys.argv) > 4 and sys.argv[4] == "idle"
        step = None if idle else jax_model()[0]
        if step:
            step(0)
        jax.profiler.start_server(port)
        print("READY", flush=True)
        t0, i = time.time(), 1
        while time.time() - t0 < seconds:
            if step:
                step(i)
                i += 1
            else:
                time.sleep(0.05)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
