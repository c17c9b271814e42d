"""A loop whose step function leaves a pending-IR tensor in a local when it returns, right before the sync: the
sync's graph is `w + 1` alone, unless something keeps that returned call's frame (and so `scratch`) alive through
the sync - then `scratch` is an extra output, another graph, one compile more than the plain run.
tests/test_frames_at_sync.py holds the stack sampler's frames once, while `update` runs at step HOLD_STEP (its hook
sets HELD). Prints the UncachedCompile count after each step."""
import time

import torch
import torch_xla
import torch_xla.debug.metrics as met

HOLD_STEP = 3
HOLD = False  # the test's hook holds the sampler's frames when it finds `update` running with HOLD set
HELD = False  # set by the hook once it holds them

dev = torch_xla.device()
w = torch.zeros(4).to(dev)  # device data: step 0's graph is every step's graph


def update():
    global w
    scratch = w * 3 + 2  # pending IR, dropped when this call returns
    w = w + 1
    t0 = time.perf_counter()
    while HOLD and not HELD and time.perf_counter() - t0 < 20:  # until the sampler took this frame
        pass
    return scratch.shape  # (uses scratch: it is a live local up to the return)


counts = []
for step in range(6):
    HOLD = step == HOLD_STEP
    update()
    torch_xla.sync()
    counts.append(met.counter_value("UncachedCompile") or 0)
print("held", HELD)
print("compiles", " ".join(map(str, counts)))
