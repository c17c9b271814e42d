"""The stack sampler against a collection that starts while it makes a frame object of the training thread, with
the training thread returning from that frame before the object is made (Python 3.11: the object then points at a
dead frame and its next read segfaults). Each round the training thread waits at the bottom of a deep stack (its
frames over several chunks of the interpreter's frame stack, freed as it returns) while the sampler walks it; a gc
callback holds any collection that starts on the sampler's `frame.f_back` line until the training thread has
returned. Then the same rounds at the default threshold, where one walk of the stack allocates past it: the sampler
still samples, making room as it walks. Prints `ROUNDS n SAMPLES m` (m: the second phase's samples)."""
import gc
import linecache
import sys
import threading
import time

from ptxla_perf.backends.sampler import StackSampler
from ptxla_perf.model.training_thread import TRAINING

DEPTH = 600  # ~100 bytes a frame: several 16 KiB chunks
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
in_gc = threading.Event()  # a collection started where the sampler makes a frame object
unwound = threading.Event()  # the training thread has returned from the deep frames


def on_gc(phase, info):
    if phase != "start" or threading.current_thread().name != "ptxla_perf-sampler":
        return
    f = sys._getframe(1)  # where the sampler was when the collection started
    if f.f_code.co_name == "_chain" and ".f_back" in linecache.getline(f.f_code.co_filename, f.f_lineno):
        in_gc.set()
        unwound.wait(2.0)  # the GIL is released while this waits: the training thread runs on
        unwound.clear()


def hold(depth):
    if depth:
        return hold(depth - 1) + 1
    in_gc.wait(0.05)  # the sampler walks this stack meanwhile
    return 0


def one_round():
    hold(DEPTH)
    in_gc.clear()
    unwound.set()
    time.sleep(0.002)


TRAINING.reset()
sampler = StackSampler(interval=0.001).start()
gc.callbacks.append(on_gc)
threshold = gc.get_threshold()
gc.set_threshold(1)  # a collection at every other allocation of a tracked object: frame objects' too
for _ in range(ROUNDS):
    one_round()
gc.set_threshold(*threshold)
before = sampler.samples  # at the default threshold a 600-frame walk allocates past it: room is made mid-walk
end = time.perf_counter() + 0.3
while time.perf_counter() < end:
    one_round()
sampler.stop()
gc.callbacks.remove(on_gc)
print("ROUNDS", ROUNDS, "SAMPLES", sampler.samples - before)
