"""The loop that trains is the loop that counts (issue 36): a warm-up loop, or an evaluation loop run before
training, does not capture the step count; the main loop's iterations are the steps; a jitted step reached as a
module's attribute (`import train as T; T.train_step`) is found like one imported by name, under the CLI and in a
notebook's `with ptxla_perf.profile():` block (the function jitted before the block, in a module)."""
from __future__ import annotations

import runpy
import sys
from collections import Counter

import pytest

pytest.importorskip("jax")

import ptxla_perf  # noqa: E402
from conftest import SCRIPTS, planted_line  # noqa: E402

pytestmark = pytest.mark.xdist_group("jax_warmup")

LOOPS = SCRIPTS / "jax_warmup_loops.py"


def _phases(steps: list[dict]) -> Counter:
    return Counter(s.get("phase") or "train" for s in steps)


def _at(steps: list[dict], script, tag: str) -> int:
    line = planted_line(script, tag)
    return sum(1 for s in steps if (s.get("site") or {}).get("line") == line)


def test_a_warm_up_loop_before_the_timed_loop_leaves_its_30_steps_counted(profiled):
    """3 warm-up calls of `T.train_step` (a module's attribute) from one line, then 30 from the timed loop: every
    training call is a step (33, none evaluation), the timed loop's 30 among them."""
    script = SCRIPTS / "jax_module_step.py"
    run = profiled(script, "--backend", "jax")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    steps = run.report["steps"]
    assert _phases(steps) == {"train": 33}, _phases(steps)
    assert _at(steps, script, "MAIN") >= 30
    detection = run.report["run"]["step_detection"]
    assert "train_step" in detection and f":{planted_line(script, 'MAIN')}" in detection, detection


def _profile_script(*argv: str):
    """The script run in this process inside `with ptxla_perf.profile("jax")` (what a notebook cell does)."""
    saved = sys.argv
    sys.argv = [str(LOOPS), *argv]
    try:
        with ptxla_perf.profile("jax", display=False, progress=False) as prof:
            runpy.run_path(str(LOOPS), run_name="__main__")
    finally:
        sys.argv = saved
    return prof.report.data


@pytest.mark.parametrize("mode,main", [("warmup", 30), ("warmup_fn", 30)])
def test_warm_up_calls_from_another_line_are_steps_and_the_timed_loop_counts(mode, main):
    """The same jitted function, its warm-up calls from another line (at module level, or in a helper function):
    the timed loop's calls are steps, not an evaluation of the warmed-up step."""
    data = _profile_script(mode)
    assert _phases(data["steps"]) == {"train": 3 + main}, _phases(data["steps"])
    assert _at(data["steps"], LOOPS, "MAIN") >= main


@pytest.mark.parametrize("n_eval", [5, 1200])
def test_an_evaluation_loop_before_training_is_not_the_step(n_eval):
    """`eval_step` (no gradients) over a validation set before training: the training calls are the steps. A
    short evaluation loop never is the step; a long one (more calls than the no-gradient fallback waits for) is
    decided as the step, then gives way when training begins, with a note."""
    data = _profile_script("eval_first", str(n_eval))
    steps = data["steps"]
    detection = data["run"]["step_detection"]
    assert "train_step" in detection and "eval_step" not in detection, detection
    assert _at(steps, LOOPS, "MAIN") >= 29  # the first training call's step ends at the second's line
    assert _phases(steps)["eval"] == 0, _phases(steps)
    if n_eval < 1000:
        assert _phases(steps) == {"train": 30}
    else:
        assert any("before training began" in n for n in data["run"]["attribution"]["notes"])


def test_an_inference_loop_after_its_warm_up_is_the_step():
    """No function computes gradients: the step is the one called most from one line (the timed loop), not the
    first called again (the warm-up)."""
    data = _profile_script("infer")
    assert _phases(data["steps"]) == {"train": 30}, _phases(data["steps"])
    assert f":{planted_line(LOOPS, 'INFER')}" in data["run"]["step_detection"]


@pytest.mark.parametrize("mode", ["eval_static", "eval_grad_loop"])
def test_the_step_function_called_to_evaluate_from_another_line_is_evaluation(mode):
    """Every 10 steps, the same jitted function from another line: `train_step(..., train=False)` (that program
    computes no gradients), or a loop of training calls over held-out data whose results are dropped (the
    parameters stay as they were: nothing is carried from call to call): evaluation records, not steps."""
    data = _profile_script(mode)
    phases = _phases(data["steps"])
    assert phases["train"] == 30 and phases["eval"] >= 2, phases


TRAIN_MODULE = '''
import jax
import jax.numpy as jnp


@jax.jit
def train_step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.01 * g, loss
'''
FORMS = {  # how the notebook reaches the step function jitted in its module
    "module": ("import {mod} as T", "T.train_step"),
    "package": ("from {pkg} import {mod}", "{mod}.train_step"),
    "dict": ("import {mod} as T\nsteps = {{'train': T.train_step}}", "steps['train']"),
    "instance": ("import {mod} as T\nclass Trainer:\n    def __init__(self):\n        self.step = T.train_step\n"
                 "trainer = Trainer()", "trainer.step"),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_step_jitted_in_an_imported_module_is_found_in_a_notebook_block(tmp_path, monkeypatch, form):
    """A notebook imports the module that jits the step (and warms it up) in one cell and profiles 100 calls of
    `T.train_step(...)` in another: 100 steps, nothing compiled again, and the module's function is its own
    jitted object again after the block."""
    pkg, mod = f"nbpkg_{form}", f"nbtrain_{form}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / f"{mod}.py").write_text(TRAIN_MODULE)
    (tmp_path / f"{mod}.py").write_text(TRAIN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    setup, call = (s.format(mod=mod, pkg=pkg) for s in FORMS[form])
    cell1 = f"{setup}\nimport jax\nimport numpy as np\nw = jax.device_put(np.ones((16, 4), np.float32))\n" \
            f"x = jax.device_put(np.ones((8, 16), np.float32))\nw, loss = {call}(w, x)\n"
    cell2 = f"with ptxla_perf.profile('jax', display=False, progress=False) as prof:\n" \
            f"    for i in range(100):\n        w, loss = {call}(w, x)\n"
    ns = {"ptxla_perf": ptxla_perf, "__name__": "__main__"}  # a kernel's namespace is __main__'s
    try:
        for i, src in enumerate((cell1, cell2)):
            path = tmp_path / f"cell{i}.py"
            path.write_text(src)
            exec(compile(src, str(path), "exec"), ns)
        module = sys.modules[f"{pkg}.{mod}" if form == "package" else mod]
        r = ns["prof"].report
        assert r.summary.steps >= 99, r.data["run"]["step_detection"]
        assert r.summary.compiles == 0
        assert "train_step" in r.data["run"]["step_detection"]
        assert not [f for f in r.data["findings"] if f["kind"] == "no_steps"]
        assert type(module.train_step).__name__ == "PjitFunction"  # put back
        assert type(eval(call, ns)).__name__ == "PjitFunction"
    finally:
        for name in (mod, pkg, f"{pkg}.{mod}"):
            sys.modules.pop(name, None)
