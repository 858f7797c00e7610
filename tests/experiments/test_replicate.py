"""`python experiments/replication/replicate.py --quick`: every cell produces numbers, the report and plots are
written, and a re-run resumes (computes nothing that already finished). Real data, tiny sizes; about 30 s of CPU on two
variants."""

import json
import math
import random
from collections import Counter

import pytest
from conftest import experiment_script
from transformers import AutoTokenizer

from sharedbert import data

replicate = experiment_script("replication/replicate.py")


def _args(tmp_path, data_dir, *extra):
    return replicate.build_parser().parse_args([
        "--quick", "--seeds", "0", "--variants", "standard", "shared-all-layers",
        "--output-dir", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work"), "--data-dir", str(data_dir),
        "--threads", "1", *extra,
    ])


@pytest.mark.slow
def test_quick_end_to_end_then_resume(tmp_path, glue_dir, mlm_text_dir):
    data_dir = glue_dir.parent
    args = _args(tmp_path, data_dir)
    assert replicate.run(args) == 0

    stages = ["pretrain"] + [f"finetune-{t}" for t in replicate.TASKS] + ["robustness"]
    expected = {f"{v}/seed0/{s}" for v in ("standard", "shared-all-layers") for s in stages}
    assert set(args.executed) == expected
    out = tmp_path / "out"
    results = json.loads((out / "replication.json").read_text())
    assert set(results["cells"]) == expected
    for key, cell in results["cells"].items():
        if key.endswith("pretrain"):
            assert cell["tokens_per_second"] > 0 and cell["final_mlm_loss"] > 0 and cell["loss_curve"]
        elif key.endswith("robustness"):
            assert 0 <= cell["clean_accuracy"] <= 1 and 0 <= cell["noisy_accuracy"] <= 1
        else:
            assert all(isinstance(v, float) for v in cell["metrics"].values()) and cell["metrics"]
    from sharedbert.training import resolve_precision

    for variant in ("standard", "shared-all-layers"):  # the levers, as this machine resolves them
        cell = results["cells"][f"{variant}/seed0/pretrain"]
        assert cell["precision"] == resolve_precision("auto") and cell["sparse_prediction"] is True
        assert cell["steady_tokens_per_second"] > 0
    shared_all = results["cells"]["shared-all-layers/seed0/pretrain"]
    assert shared_all["layer_sharing"] == "all"
    assert shared_all["parameters"] < results["cells"]["standard/seed0/pretrain"]["parameters"]
    agg = results["aggregate"]
    assert agg["standard"]["glue_average"]["n"] == 1 and agg["standard"]["glue_average"]["mean"] is not None
    # The no-context reference: the entropy of the corpus's tokens under the study's vocabulary.
    baseline = results["unigram_baseline"]
    tokenizer = AutoTokenizer.from_pretrained(next((tmp_path / "work").glob("tokenizer-*")))
    corpus = mlm_text_dir / replicate.QUICK["corpus"] if replicate.QUICK["corpus"] else mlm_text_dir
    lines = data.corpus_units(data.corpus_files([str(corpus)]))["text"]
    counts = Counter(i for line in lines for i in tokenizer(line, add_special_tokens=False, verbose=False)["input_ids"])
    total = sum(counts.values())
    assert baseline["tokens"] == total and baseline["distinct_tokens"] == len(counts)
    assert baseline["mlm_loss"] == pytest.approx(-sum(c / total * math.log(c / total) for c in counts.values()))
    assert 0 < baseline["mlm_loss"] < math.log(len(counts))
    report = (out / "replication.md").read_text()
    assert f"MLM loss of {baseline['mlm_loss']:.3f} nats" in report
    assert "| standard |" in report and "(n=1)" in report and "78.74" in report
    assert "not judged" in report  # one seed: no verdicts are drawn
    for name in ("replication_mlm_loss.png", "replication_score_vs_params.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Resume: nothing left to compute, finished cells untouched.
    before = {k: v["finished"] for k, v in results["cells"].items()}
    again = _args(tmp_path, data_dir)
    assert replicate.run(again) == 0
    assert again.executed == []
    after = json.loads((out / "replication.json").read_text())["cells"]
    assert {k: v["finished"] for k, v in after.items()} == before

    # Another recipe must not mix with these results.
    other = _args(tmp_path, data_dir, "--pretrain-steps", "4")
    assert replicate.run(other) == 2
    # ...but the report of those results can be rewritten by a command line of any recipe.
    (out / "replication.md").unlink()
    rendering = _args(tmp_path, data_dir, "--pretrain-steps", "4", "--report-only")
    assert replicate.run(rendering) == 0 and rendering.executed == []
    assert "| standard |" in (out / "replication.md").read_text()
    assert json.loads((out / "replication.json").read_text())["cells"].keys() == after.keys()


def test_typos_are_seeded_and_at_the_rate():
    text = "the quick brown fox jumps over the lazy dog " * 200
    a = replicate.add_typos(text, 0.05, random.Random(3))
    assert a == replicate.add_typos(text, 0.05, random.Random(3))
    assert a != replicate.add_typos(text, 0.05, random.Random(4))
    assert replicate.add_typos(text, 0.0, random.Random(3)) == text
    changed = sum(x != y for x, y in zip(a.split(), text.split()))
    words = len(text.split())
    assert 0.05 * words < changed < 0.6 * words  # ~3.6 letters a word at 5%: roughly a fifth of words touched


def test_verdicts_follow_the_numbers():
    def stat(values):
        return replicate._mean_std(values)

    assert replicate.compare(stat([80, 81, 80.5]), stat([70, 71, 70.5]))["verdict"] == "supported"
    assert replicate.compare(stat([70, 71, 70.5]), stat([80, 81, 80.5]))["verdict"] == "contradicted"
    assert replicate.compare(stat([70, 80, 75]), stat([71, 79, 74]))["verdict"].startswith("within noise")
    assert replicate.compare(stat([80]), stat([70, 71]))["verdict"].startswith("not judged")
    # lower is better (typo drop)
    assert replicate.compare(stat([1, 1.1, 0.9]), stat([5, 5.1, 4.9]), higher_is_better=False)["verdict"] == "supported"


def test_report_verdicts_come_from_the_cells():
    """Three seeds where shared clearly beats standard on every task and standard is clearly faster: the report must
    say the first claim is supported and the speed claim contradicted; others are not judged."""
    cells = {}
    for seed in range(3):
        for variant, score, speed in (("shared", 70.0, 100.0), ("standard", 60.0, 200.0)):
            cells[f"{variant}/seed{seed}/pretrain"] = {
                "parameters": 1000, "tokens_per_second": speed + seed, "final_mlm_loss": 5.0, "loss_curve": []}
            for task in replicate.TASKS:
                cells[f"{variant}/seed{seed}/finetune-{task}"] = {"score": score + seed * 0.5}
    results = {"cells": cells, "recipe": replicate.recipe_of(_args_namespace()), "recipe_hash": "x"}
    results["aggregate"] = replicate.aggregate(results)
    assert results["aggregate"]["shared"]["glue_average"]["n"] == 3
    verdicts = {c["claim"]: c["verdict"] for c in replicate.claims(results["aggregate"])}
    assert verdicts["shared beats standard on the GLUE average"] == "supported"
    assert verdicts["shared trains 15-20% faster than standard"] == "contradicted"
    assert verdicts["shared beats pairwise on the GLUE average"].startswith("not judged")
    report = replicate.render_markdown(results)
    assert "this run supports shared beats standard on the GLUE average" in report
    assert "contradicts shared trains 15-20% faster than standard" in report
    assert verdicts["shared pretrains on par with standard"] == "within noise (consistent with on par)"  # equal losses
    assert "is consistent with shared pretrains on par with standard" in report


def test_report_gives_standard_errors_steady_speed_precision_and_the_unigram_gap():
    """The 25M study's table: mean ± standard error (not std), speed from the median step (a paused run's wall-clock
    rate is not a speed), the precision each cell ran in, MLM parity judged, and the distance to the unigram model."""
    cells = {}
    for seed in range(3):
        for variant, loss, precision in (("shared", 5.9 + 0.01 * seed, "bf16"),
                                         ("standard", 5.7 + 0.01 * seed, "fp32")):
            cells[f"{variant}/seed{seed}/pretrain"] = {
                "parameters": 1000, "tokens_per_second": 10.0, "steady_tokens_per_second": 6000.0 + seed,
                "final_mlm_loss": loss, "precision": precision, "loss_curve": []}
    results = {"cells": cells, "recipe": replicate.recipe_of(_args_namespace()), "recipe_hash": "x",
               "unigram_baseline": {"mlm_loss": 6.7, "tokens": 100, "distinct_tokens": 10}}
    results["aggregate"] = replicate.aggregate(results)
    loss = results["aggregate"]["standard"]["final_mlm_loss"]
    assert loss["se"] == pytest.approx(0.01 / 3 ** 0.5) and loss["std"] == pytest.approx(0.01)
    assert results["aggregate"]["shared"]["tokens_per_second"]["mean"] == pytest.approx(6001.0)
    verdicts = {c["claim"]: c["verdict"] for c in replicate.claims(results["aggregate"])}
    assert verdicts["shared pretrains on par with standard"] == "contradicted (shared worse)"
    report = replicate.render_markdown(results)
    assert "5.710 ± 0.006 (n=3)" in report  # standard error 0.0058, where the std would print 0.010
    assert "standard: fp32; shared: bf16 (mixed" in report
    assert "Nats below it (mean over seeds): standard 0.99, shared 0.79." in report
    results["cells"] = {k: dict(v, precision="bf16") for k, v in cells.items()}
    results["aggregate"] = replicate.aggregate(results)
    assert "Pretraining precision: bf16 in every cell." in replicate.render_markdown(results)


def _args_namespace():
    import argparse

    return argparse.Namespace(quick=True, pretrain_steps=None, pretrain_tokens=None, finetune_samples=None)


def test_the_token_budget_sets_whole_steps_and_the_levers_are_in_the_recipe():
    parse = replicate.build_parser().parse_args
    full = replicate.recipe_of(parse(["--pretrain-tokens", "25000000"]))
    assert full["pretrain"]["max_steps"] == 6104  # ceil(25M / (32 x 128)): at least the budget asked for
    assert full["pretrain"]["precision"] == "auto" and full["pretrain"]["dense_prediction"] is False
    assert full["finetune"]["precision"] == "auto"
    assert replicate.recipe_hash(full) != replicate.recipe_hash(replicate.recipe_of(parse([])))
    with pytest.raises(ValueError, match="not both"):
        replicate.recipe_of(parse(["--pretrain-tokens", "1000", "--pretrain-steps", "3"]))


def test_studies_sharing_an_output_folder_keep_each_others_cells(tmp_path):
    """One study process per core writes to the same replication.json: each save merges, under a lock, with what is
    on disk, so neither process's cells are lost (a plain rewrite would keep only the last writer's)."""
    data = tmp_path / "data"
    (data / "glue" / "SST-2").mkdir(parents=True)
    (data / "glue" / "SST-2" / "dev.tsv").write_text("sentence\tlabel\n")
    (data / "mlm-text").mkdir()
    first, second = (replicate.Study(replicate.build_parser().parse_args([
        "--quick", "--variants", variant, "--output-dir", str(tmp_path / "out"),
        "--work-dir", str(tmp_path / "work"), "--data-dir", str(data)])) for variant in ("standard", "shared"))
    first.record("standard/seed0/finetune-sst2", {"score": 60.0})
    second.record("shared/seed0/finetune-sst2", {"score": 61.0})  # loaded before the first record
    first.record("standard/seed1/finetune-sst2", {"score": 62.0})
    cells = json.loads((tmp_path / "out" / "replication.json").read_text())["cells"]
    assert set(cells) == {"standard/seed0/finetune-sst2", "shared/seed0/finetune-sst2", "standard/seed1/finetune-sst2"}


def test_the_plan_is_the_union_of_what_the_study_processes_were_asked_for():
    """Seeds 0 and 1 run as two processes in one sitting and seed 2 in the next: the report's 'planned' count must be
    the whole study, not the last writer's share (which made a finished study read as a partial one, or a partial one
    as finished)."""
    seed0 = replicate.study_plan(["shared", "standard"], [0], replicate.TASKS)
    seed1 = replicate.study_plan(["standard", "shared"], [1], replicate.TASKS)
    assert seed0["cells"] == 2 * 1 * 7 and seed0["variant_names"] == ["standard", "shared"]
    both = replicate.merge_plans(seed0, seed1)
    assert both["cells"] == 2 * 2 * 7 and both["seed_list"] == [0, 1]
    assert replicate.merge_plans(both, replicate.study_plan(["pairwise"], [2], ["sst2"]))["cells"] == 3 * 3 * 7
    old_style = {"variants": 1, "seeds": 3, "stages": 7, "cells": 21}  # written before plans were mergeable
    assert replicate.merge_plans(old_style, seed1) == seed1
    assert replicate.merge_plans(seed1, None) == seed1
