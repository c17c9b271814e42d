"""Graph capture never changes the graph the sync runs (issue 37). torch_xla's tensors are functionalization
wrappers, and every binding that takes one (`_xla_get_tensor_id`, `_get_graph_hash`, the HLO dumps) first brings it
up to date with the mutations made through its aliases. transformers 2.3's AdamW updates each parameter through
`p.data.addcdiv_(...)`: the parameter's wrapper stays out of date until the next forward uses it. The capture's heap
scan used to sync every wrapper it found, so on capture steps the sync ran another graph (214 outputs instead of
217): the first step without capture compiled the plain run's graph, one compile more than the plain run, and a
`recompilation` warning. The loop here is a BERT masked-LM fine-tuning loop in the style of transformers 2.3's
run_lm_finetuning.py, ported to XLA as its run_glue.py --tpu path does (tests/scripts/bert_mlm_finetune.py)."""
from __future__ import annotations

import json

import pytest

from conftest import SCRIPTS, cli_env, load_report, run_cli
from plain_runs import run_plain

pytestmark = pytest.mark.slow  # real torch_xla runs

SCRIPT = SCRIPTS / "bert_mlm_finetune.py"
UPDATES, BLOCK = "5", "16"  # the 4th update is the first without capture; the 5th runs at a learning rate of 0.0

pytest.importorskip("transformers")


def _compiles(tmp_path, *options: str) -> tuple[list[int], dict]:
    """The script's UncachedCompile count after each update (cumulative), run plain (`options` ("plain",)) or under
    `profile`; and the report."""
    out = tmp_path / f"compiles{'_'.join(options) or '_plain'}.txt"
    if options == ("plain",):
        proc = run_plain(SCRIPT, UPDATES, BLOCK, cwd=tmp_path, timeout=400,
                         env=cli_env(PTXLA_TEST_COMPILES=str(out)))
        report = {}
    else:
        path = tmp_path / f"r{'_'.join(options)}.json"
        proc = run_cli("profile", "--port", "none", "--report", str(path), *options, str(SCRIPT), UPDATES, BLOCK,
                       cwd=tmp_path, timeout=400, PTXLA_TEST_COMPILES=str(out))
        report = load_report(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [int(v) for v in out.read_text().split()], report


def test_profile_compiles_the_bert_mlm_loop_as_the_plain_run_does(tmp_path):
    plain, _ = _compiles(tmp_path, "plain")
    per_update = [b - a for a, b in zip([0] + plain, plain)]
    # the loop's own compiles: the read's graph and the step's at the first update, the step with optimizer state at
    # the second, the rate reaching 0.0 (a special scalar, baked in) at the last
    assert per_update[0] == 2 and per_update[1] == 1 and per_update[-1] == 1 and not any(per_update[2:-1]), plain
    for options in (("--attribution", "auto"), ("--attribution", "always")):
        profiled, report = _compiles(tmp_path, *options)
        assert profiled == plain, (options, profiled, plain)
        captured = [s for s in report["steps"] if s.get("graph_hashes")]
        assert len(captured) >= 3, report["steps"]  # capture did run (first steps, and after the recompile)
        assert "graph capture failed" not in json.dumps(report)  # (an out-of-date value's data may be donated)
        warned = [f for f in report["findings"] if f["kind"] == "recompilation" and f["severity"] == "warning"]
        assert not warned, (options, warned)
