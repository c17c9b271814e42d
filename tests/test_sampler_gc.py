"""The stack sampler never leaves a frame object pointing at a dead frame (Python 3.11: a collection that starts
while the sampler makes another thread's frame object runs finalizers, which can hand the GIL to that thread; if it
returns from the frame meanwhile, the object's next read segfaults - one CI run lost a profiled JAX script so, with
no output at all). tests/scripts/sampler_gc_race.py makes that collection happen at the sampler's `f_back` on every
round; before the fix it crashed every time on 3.11 (3.10 and 3.12+ make frames or collect otherwise: it passes
there either way)."""
from __future__ import annotations

import subprocess
import sys

from conftest import SCRIPTS, cli_env


def test_a_collection_while_the_sampler_walks_a_returning_stack_is_survived():
    proc = subprocess.run([sys.executable, str(SCRIPTS / "sampler_gc_race.py"), "20"], env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    words = proc.stdout.split()
    assert words[:2] == ["ROUNDS", "20"], proc.stdout
    assert int(words[3]) > 0, proc.stdout  # at the default threshold, 600 frames deep, the sampler still samples
