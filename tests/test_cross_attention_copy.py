"""`python benchmarks/cross_attention_copy.py`: the task's construction and a quick run that writes its report."""

import json
import math

import torch
from conftest import benchmark_script

copy = benchmark_script("cross_attention_copy")


def test_the_source_is_the_target_with_one_junk_span_inserted():
    sources, mask, targets = copy.make_batch(torch.Generator().manual_seed(3))
    junk = set(copy.JUNK_TOKENS)
    offsets = set()
    for source, row_mask, target in zip(sources.tolist(), mask.tolist(), targets.tolist()):
        assert row_mask == [int(token != 0) for token in source]
        assert source[0] == target[0] == 2 and target[-1] == 3 and source[sum(row_mask) - 1] == 3
        kept = [token for token in source if token not in junk and token != 0]
        assert kept == target  # removing the junk gives the target back, in order
        positions = [i for i, token in enumerate(source) if token in junk]
        assert 1 <= len(positions) <= copy.MAX_JUNK and positions == list(range(positions[0], positions[-1] + 1))
        offsets.add(positions[0])
    assert len(offsets) > 3  # the insertion point (so the alignment) varies between rows


def test_quick_run_writes_every_type_and_a_report(tmp_path):
    assert copy.main(["--quick", "--output-dir", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "cross_attention_copy_quick.json").read_text())
    assert [run["attention_type"] for run in results["runs"]] == ["standard", "shared"]
    for run in results["runs"]:
        # It trained: below the loss of a uniform guess over the vocabulary (60 steps learn the frame and the
        # content range, ~3.1), though far from copying.
        assert len(run["loss_every_50"]) == 1 and 0 < run["final_loss"] < math.log(40) - 0.3
    report = (tmp_path / "cross_attention_copy_quick.md").read_text()
    assert "| shared | never |" in report and "| standard |" in report
