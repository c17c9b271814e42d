"""Quiet what is ours to quiet: lines our own recipes and imports cause that say nothing to the user (gloo's
"[Gloo] Rank N is connected ..." from the dp_jax ranks; torch_xla's "Defaulting to PJRT_DEVICE=CPU" from a recipe
started without PJRT_DEVICE). Never used around a user's program: its output is its own."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading

PJRT_DEFAULT = "Defaulting to PJRT_DEVICE=CPU"


class _DropMessage(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.text


def drop_pjrt_default() -> None:
    """torch_xla warns on the root logger when it picks the CPU because PJRT_DEVICE is unset; a recipe on the CPU
    is what `ptxla_perf.run` documents, so the line is noise there (the summary names the device). The root
    logger's filter only sees records logged on the root logger itself, which is where torch_xla logs it."""
    logging.getLogger().addFilter(_DropMessage(PJRT_DEFAULT))


@contextlib.contextmanager
def drop_stdout_lines(prefix: str):
    """Forward the process's file descriptor 1 (C++ libraries write there, past sys.stdout) line by line, leaving
    out lines that start with `prefix`. For a recipe's own processes only."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 1)
        os.close(write_fd)
    except (OSError, ValueError):  # no usable fd 1 (a closed stdout): nothing to filter
        yield
        return
    want = prefix.encode()

    def pump() -> None:
        with os.fdopen(read_fd, "rb") as src:
            for line in src:
                if not line.startswith(want):
                    os.write(saved, line)

    thread = threading.Thread(target=pump, name="ptxla_perf-stdout-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os.dup2(saved, 1)  # closes the pipe's last write end: the pump reads to its end and stops
        thread.join(timeout=5)
        os.close(saved)
