"""The benchmark script benchmarks/bench.py: a tiny `--quick` run writes the JSON, chart and table it promises.
(Timings are not asserted: the figures are whatever the machine gives; only their presence, consistency and the exact
quantities are.)"""

import json

import pytest
from conftest import benchmark_script

bench = benchmark_script("bench")


@pytest.mark.slow
def test_quick_run_writes_every_field(tmp_path, capsys):
    out = tmp_path / "results" / "bench"
    assert bench.main(["--quick", "--variants", "shared", "--repeats", "2", "--out", str(out), "--silent"]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")

    meta = result["meta"]
    for key in ("command", "torch", "transformers", "threads", "dtype", "dims", "infer_batch", "train_batch",
                "repeats", "warmup", "variants", "memory_method"):
        assert key in meta, key
    assert meta["variants"] == ["shared"] and meta["threads"] == 1 and meta["repeats"] == 2

    (group,) = result["groups"]
    assert (group["layers"], group["seq"]) == (2, 32)
    bert, shared = group["rows"]
    assert (bert["model"], shared["model"]) == ("bert", "shared")
    for row in (bert, shared):
        for key in ("infer_tokens_per_s", "latency_ms", "train_tokens_per_s", "peak_train_memory_bytes"):
            assert row[key] > 0, key
        assert len(row["infer_speedup_per_round_quartiles"]) == 3
        assert row["infer_samples"] == 2 and row["train_samples"] == 2 and row["latency_samples"] == 2 * 2
    assert bert["infer_speedup"] == bert["train_speedup"] == bert["latency_speedup"] == 1.0
    assert bert["parameter_ratio"] == bert["checkpoint_ratio"] == bert["peak_train_memory_ratio"] == 1.0
    # Exact quantities: the shared projection drops 2·d² + 2·d weights per layer and adds 3·d scaling vectors.
    d, layers = 64, 2
    assert bert["parameters"] - shared["parameters"] == layers * (2 * d * d + 2 * d - 3 * d)
    assert shared["checkpoint_ratio"] == pytest.approx(shared["parameter_ratio"], rel=0.02)
    assert shared["checkpoint_bytes"] >= 4 * shared["parameters"]
    assert shared["flop_bound"] == pytest.approx(bench.flop_bound(bench.Variant("shared"), bench.Dims(64, 4, 128, 1000), 32))
    # Shared attention is also timed folded; other rows are not.
    assert shared["fold_infer_speedup"] > 0 and shared["fold_latency_ms"] > 0
    assert "fold_infer_speedup" not in bert
    printed = capsys.readouterr().out
    assert "shared" in printed and "Per-round speed-ups" in printed


def test_flop_bound_matches_the_issue_arithmetic():
    # bert-base dims at sequence 128: (12·d² + 2·T·d) / (10·d² + 2·T·d) ≈ 1.19.
    dims = bench.Dims()
    assert bench.flop_bound(bench.Variant("shared"), dims, 128) == pytest.approx(
        (12 * 768**2 + 2 * 128 * 768) / (10 * 768**2 + 2 * 128 * 768)
    )
    assert bench.flop_bound(bench.Variant("standard"), dims, 512) == 1.0
    assert 1.0 < bench.flop_bound(bench.Variant("pairwise"), dims, 128) < bench.flop_bound(
        bench.Variant("symmetric"), dims, 128
    )


def test_bad_options_are_refused_with_the_fix(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--variants", "shared:sideways"])
    assert "TYPE:SHARING" in capsys.readouterr().err
    assert bench.main(["--quick", "--hidden", "30", "--heads", "4"]) == 2
    assert "not divisible" in capsys.readouterr().err
    assert bench.main(["--layers", "12", "--seq", "512", "--train-batch", "64", "--max-resident-gb", "4"]) == 2
    assert "--max-resident-gb" in capsys.readouterr().err


def test_the_script_reads_variants():
    args = bench.build_parser().parse_args(["--quick", "--variants", "shared", "pairwise:all"])
    assert args.quick
    assert [v.name for v in args.variants] == ["shared", "pairwise:all"]


def test_groups_that_do_not_fit_are_split_into_blocks_each_with_its_bert():
    args = bench.build_parser().parse_args(["--full"])
    dims, args = bench.resolve(args)
    plan = bench.plan_groups(args, dims)
    # Every (layers, seq) pair appears, every variant is timed exactly once per pair.
    for layers in (4, 12):
        for seq in (128, 512):
            blocks = [variants for (l, s, variants) in plan if (l, s) == (layers, seq)]
            assert sorted(v.name for block in blocks for v in block) == sorted(v.name for v in args.variants)
            for block in blocks:
                assert bench.estimated_resident_gb(args, dims, layers, seq, len(block)) <= args.max_resident_gb
    assert len(plan) > 4  # the 12-layer groups do not fit in 10 GB at once
