"""benchmarks/arm_speed.py: a quick run writes the rows and metadata it promises, standard is its own reference, and a
study's describe file gives the arms and sizes (timings are whatever the machine gives: never asserted)."""

import json

import pytest
from conftest import benchmark_script

arm_speed = benchmark_script("arm_speed")


def test_quick_run_times_every_type_side_by_side(tmp_path):
    out = tmp_path / "speed"
    assert arm_speed.main(["--quick", "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert set(result["rows"]) == set(arm_speed.TYPES)
    for arm, row in result["rows"].items():
        for kind in ("train_wall", "train_cpu", "infer_wall", "infer_cpu"):
            assert row[f"{kind}_tokens_per_s"] > 0 and len(result["times"][arm][kind]) == result["meta"]["rounds"]
            assert len(row[f"{kind}_speedup_quartiles"]) == 3
    assert all(result["rows"]["standard"][f"{kind}_speedup"] == 1.0
               for kind in ("train_wall", "train_cpu", "infer_wall", "infer_cpu"))
    meta = result["meta"]
    assert meta["threads"] == 1 and meta["precision"] in ("bf16", "fp32") and meta["cpu"]
    assert len(meta["load_average_before"]) == 3


def test_a_studys_describe_file_gives_its_arms_and_sizes(tmp_path):
    described = {"clm-cpu-w256-h8": {
        "standard": {"model": {"width": 256}, "config": {"attention_type": "standard"}},
        "mqa-att1": {"model": {"width": 256}, "config": {"attention_type": "standard", "num_key_value_heads": 1,
                                                         "layer_sharing": "attention", "num_unique_layers": 1}}}}
    path = tmp_path / "arms.json"
    path.write_text(json.dumps(described))
    arms, sizes, (sequence, batch) = arm_speed.arms_from_json(path, "clm-cpu-w256-h8")
    assert arms["mqa-att1"]["num_key_value_heads"] == 1
    assert (sizes["hidden_size"], sizes["num_attention_heads"], sequence, batch) == (256, 8, 64, 12)
    model, _ = arm_speed.build(arms["mqa-att1"], sizes, sequence)
    assert model.config.num_unique_layers == 1 and model.config.num_key_value_heads == 1
    with pytest.raises(SystemExit, match="no setting 'mlm-cpu'"):
        arm_speed.arms_from_json(path, "mlm-cpu")
