"""The mlp recipe in each execution mode torch_xla teaches beside the lazy loop (`recipe.mode`, docs/modes.md): each
runs under the runner at a tiny size and leaves a report that names its mode and says what that mode's rules
found, with no warning (the lazy mode is the other mlp tests' default). The three runs go one after the other,
each forked as conftest.run_app does."""
from __future__ import annotations

import pytest

from conftest import load_report, run_app, warnings_of

MODES = {"dynamo": "dynamo_graphs", "eager": "eager_ops", "spmd": "spmd"}


@pytest.fixture(scope="module")
def recipe_runs(tmp_path_factory) -> dict:
    cwd = tmp_path_factory.mktemp("recipe_modes")
    out = {}
    for m in MODES:
        # recipe.entry: the worktree's recipe module, as `ptxla_perf.recipes.mlp` is in an installed package
        proc = run_app("+recipe=mlp", "recipe.entry=recipes.mlp:run", f"recipe.mode={m}", "recipe.steps=4",
                       "recipe.batch_size=8", "profiler.port=null", "profiler.scalars=false", f"hydra.run.dir=out_{m}",
                       cwd=cwd)
        out[m] = (proc.returncode, proc.stderr, cwd / f"out_{m}" / "report.json")
    return out


@pytest.mark.xdist_group("recipe_modes")
@pytest.mark.parametrize("mode", list(MODES))
def test_mlp_recipe_mode(recipe_runs, mode):
    rc, stderr, path = recipe_runs[mode]
    assert rc == 0, stderr[-3000:]
    report = load_report(path)
    assert mode in report["environment"]["execution_modes"]
    assert report["summary"]["steps"] == 4
    assert report["extra"]["mode"] == mode
    kinds = {f["kind"]: f for f in report["findings"]}
    assert MODES[mode] in kinds and kinds[MODES[mode]]["severity"] == "info", sorted(kinds)
    assert not [f["message"] for f in warnings_of(report)]
    if mode == "spmd":
        assert report["environment"]["spmd"]["devices"] == 4 and report["extra"]["mesh_devices"] == 4
