"""experiments/cross-attention-copy/run.py: the task's construction and a quick run that writes its results."""

import json
import math

import pytest
import torch
from conftest import experiment_script

copy = experiment_script("cross-attention-copy/run.py")


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


def test_every_arm_builds_the_cross_attention_it_names():
    for arm in copy.ARMS:
        self_type, cross_type = arm.split("/")
        model = copy.build_model(arm)
        assert model.config.attention_type == self_type
        assert model.config.effective_cross_attention_type == cross_type


@pytest.mark.slow
def test_quick_run_writes_its_arms_and_resumes(tmp_path):
    output = tmp_path / "results.json"
    assert copy.main(["--quick", "--output", str(output)]) == 0
    results = json.loads(output.read_text())
    assert [run["arm"] for run in results["runs"]] == ["standard/standard", "shared/shared_kv"]
    standard, shared_kv = results["runs"]
    for run in results["runs"]:
        # It trained: below the loss of a uniform guess over the vocabulary (60 steps learn the frame and the
        # content range, ~3.1), though far from copying.
        assert len(run["loss_every_50"]) == 1 and 0 < run["final_loss"] < math.log(40) - 0.3
    # shared_kv: Wq and one Ws instead of three projections (plus the output projection either way).
    assert shared_kv["cross_attention_parameters"] < standard["cross_attention_parameters"]
    # A second call finds every run done and trains nothing.
    before = output.read_text()
    assert copy.main(["--quick", "--output", str(output)]) == 0
    assert json.loads(output.read_text())["runs"] == json.loads(before)["runs"]
