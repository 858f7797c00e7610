"""The pretraining throughput benchmark benchmarks/pretrain_bench.py: a tiny `--quick` run measures every run and
writes the JSON it promises; the lever arithmetic (ratios of medians, shares of the gain on a log scale) is checked on
numbers made up here. (Timings are not asserted: the figures are whatever the machine gives.)"""

import json
import math

import pytest
from conftest import benchmark_script

bench = benchmark_script("pretrain_bench")


def _samples(speeds: dict[str, list[float]]) -> dict:
    return {name: [{"tokens_per_second": s, "step_seconds": {"median": 1.0 / s}} for s in values]
            for name, values in speeds.items()}


def test_levers_are_ratios_of_medians_and_their_shares_add_up_where_bf16_is_native():
    speeds = {"baseline": [100, 90, 110], "standard-dense-fp32": [95, 95, 95], "standard-sparse-fp32": [190, 200, 210],
              "standard-sparse-bf16": [400, 380, 420], "standard-sparse-lines": [50, 50, 50],
              "shared-sparse-fp32": [220, 220, 220]}
    native = bench.summarise(_samples(speeds), native=True)
    assert native["package_default"] == "standard-sparse-bf16"
    assert native["package_default_vs_baseline"] == pytest.approx(4.0)  # medians 400 / 100
    levers = native["levers"]
    assert levers["sparse prediction"]["ratio"] == pytest.approx(200 / 95)
    assert levers["packing (vs line by line, real tokens)"]["ratio"] == pytest.approx(4.0)
    counted = [entry["share_of_gain"] for entry in levers.values() if entry["in_default"]]
    assert len(counted) == 3 and sum(counted) == pytest.approx(1.0)  # overhead, sparse, bf16 multiply to the total

    emulated = bench.summarise(_samples(speeds), native=False)
    assert emulated["package_default"] == "standard-sparse-fp32"
    assert emulated["package_default_vs_baseline"] == pytest.approx(2.0)
    assert not emulated["levers"]["bf16 autocast"]["in_default"]
    assert emulated["levers"]["bf16 autocast"]["share_of_gain"] is None
    assert emulated["levers"]["sparse prediction"]["share_of_gain"] == pytest.approx(math.log(200 / 95) / math.log(2))


@pytest.mark.slow
def test_quick_run_measures_every_run_and_writes_the_json(tmp_path, mlm_text_dir, capsys):
    out = tmp_path / "pretrain_bench"
    assert bench.main(["--quick", "--threads", "1", "--data-dir", str(mlm_text_dir.parent), "--out", str(out),
                       "--silent"]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert set(result["rows"]) == set(bench.RUNS)
    meta = result["meta"]
    assert meta["threads"] == 1 and meta["recipe"]["rounds"] == 2 and isinstance(meta["native_bf16"], bool)
    for name, row in result["rows"].items():
        assert row["tokens_per_second"] > 0 and row["median_step_seconds"] > 0, name
        emulated = name.endswith("bf16") and not meta["native_bf16"]
        assert row["rounds"] == (1 if emulated else 2), name  # emulated bf16 is measured briefly
    assert result["rows"]["baseline"]["vs_baseline"] == 1.0
    # The package's runs really are what their names say.
    samples = result["samples"]
    assert all(s["precision"] == "bf16" for s in samples["standard-sparse-bf16"])
    assert all(not s["sparse_prediction"] for s in samples["standard-dense-fp32"])
    assert all(s["sparse_prediction"] and s["precision"] == "fp32" for s in samples["standard-sparse-fp32"])
    # Packed blocks are all real tokens; lines are shorter than the 32-token blocks.
    block = meta["recipe"]["block_size"] * meta["recipe"]["batch_size"]
    assert result["rows"]["standard-sparse-fp32"]["tokens_per_step"] == block
    assert 0 < result["rows"]["standard-sparse-lines"]["tokens_per_step"] < block
    assert result["samples"]["shared-sparse-fp32"][0]["parameters"] < result["samples"]["standard-sparse-fp32"][0][
        "parameters"]
    printed = capsys.readouterr().out
    assert "vs the plain transformers loop" in printed and "sparse prediction" in printed


def test_bad_options_are_refused_with_the_fix(tmp_path, capsys):
    assert bench.main(["--quick", "--steps", "2", "--out", str(tmp_path / "x")]) == 2
    assert "--steps must be at least 3" in capsys.readouterr().err
    assert bench.main(["--quick", "--data-dir", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "pass --data-dir" in capsys.readouterr().err
