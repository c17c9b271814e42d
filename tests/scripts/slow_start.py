"""A training script that prepares its data before importing its framework (a tokenizer, a dataset index: seconds of
plain Python). argv[1]: a file it creates once the preparation is under way. Ctrl-C there interrupts the program
before any framework is imported, so before any ptxla_perf session exists."""
import pathlib
import sys
import time

pathlib.Path(sys.argv[1]).write_text("preparing")
deadline = time.monotonic() + 120
while time.monotonic() < deadline:  # the preparation, interruptible at every tick
    time.sleep(0.05)

import torch_xla  # noqa: E402,F401 - never reached in the test
