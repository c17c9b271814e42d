"""Live-array samples (memory_growth's series): each is what the program held at its own step boundary, and the
growth read from them is not decided by one sample. Issue 37: under load a JAX run's last boundary, cut when the
session ended (after the loop's function had returned and dropped its arrays), was sampled there: 0 live arrays
ended a series rising by 2 a step, and the run had no memory_growth finding."""
from __future__ import annotations

import pytest


def test_jax_last_step_cut_at_the_sessions_end_is_not_sampled(tmp_path, monkeypatch):
    """A sample every 4 boundaries whatever a sample costs (as on a loaded machine, where a step is slow beside
    one), 25 steps: boundary 24 is a sampling one and is cut when the session ends, after train() returned."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from ptxla_perf.backends.jax import memory as jax_memory
    from ptxla_perf.session import Session
    monkeypatch.setattr(jax_memory, "_LIVE_SHARE", 1e9)  # a sample never costs more than its share: every 4

    def train(steps):
        step = jax.jit(lambda w: (w - 0.1 * jax.grad(lambda w: jnp.sum(w ** 2))(w), jnp.sum(w)))
        w, kept = jnp.ones((4, 2)), []
        for _ in range(steps):
            w, loss = step(w)
            kept.append(loss)  # one array kept a step
        return float(kept[-1])

    s = Session("jax", report_path=str(tmp_path / "r.json"), port=None, console=False, handle_signals=False)
    s.start()
    try:
        train(25)
    finally:
        report = s.finish()
    sampled = [(st["index"], st["live_arrays"]) for st in report["steps"] if st.get("live_arrays") is not None]
    assert report["summary"]["steps"] == 25 and sampled[-1][0] < 24, sampled
    counts = [n for _, n in sampled]
    assert counts == sorted(counts) and counts[-1] > counts[0], sampled
    assert [f for f in report["findings"] if f["kind"] == "memory_growth"], report["findings"]

