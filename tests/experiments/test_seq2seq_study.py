"""experiments/seq2seq/study.py: the denoising data, the FLOP bound, the variants, and a quick run that trains,
scores, reports and resumes."""

import json
import random

import pytest
from conftest import REPO_ROOT, experiment_script, start_child

study = experiment_script("seq2seq/study.py")


def test_corruption_removes_about_the_ratio_in_spans_each_replaced_by_one_mask():
    rng = random.Random(0)
    sentence = " ".join(f"w{i}" for i in range(40))
    for _ in range(50):
        corrupted = study.corrupt(sentence, rng, mask_ratio=0.3, span_mean=3.0)
        kept = [word for word in corrupted.split() if word != "[MASK]"]
        assert len(kept) == 40 - 12  # exactly round(0.3 * 40) words removed
        assert kept == [w for w in sentence.split() if w in set(kept)]  # order kept, nothing invented
        assert "[MASK] [MASK]" not in corrupted  # a span is one mask


def test_flop_bound_counts_the_projections_shared_attention_saves():
    base = study.decoder_step_flops("standard", hidden=384, ffn=1536, layers=6, vocab=30522, source_len=20,
                                    target_len=20)
    shared = study.decoder_step_flops("shared", hidden=384, ffn=1536, layers=6, vocab=30522, source_len=20,
                                      target_len=20)
    assert base - shared == 6 * 2 * 384 * 384  # two of the four self-attention projections, per layer
    assert 1.0 < base / shared < 1.1  # the vocabulary projection dominates a decoding step at these sizes


def test_each_sharedbert_variant_is_built_as_named(tmp_path):
    """The variants differ only where their definitions say: warm start, what encoder and decoder share, and the
    cross-attention type. The calibrated variants are calibrated on the texts given (as `run_cell` gives them the
    training targets; the resume test below trains a healed variant)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from sharedbert import SharedBertTokenizer
    from sharedbert.conversion.bert import from_bert

    bert_dir, healed_dir = tmp_path / "bert", tmp_path / "healed"
    BertForMaskedLM(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=37)).save_pretrained(bert_dir)
    from_bert(bert_dir, attention_type="shared").save_pretrained(healed_dir)  # stands in for a healed model
    tokenizer = SharedBertTokenizer(vocab={t: i for i, t in enumerate(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(94))])})
    texts = [" ".join(f"w{(7 * i + 3 * j) % 94}" for j in range(6 + i % 7)) for i in range(16)]
    built = {variant: study.build_model(variant, str(bert_dir), tokenizer, texts, healed=str(healed_dir))
             for variant in study.VARIANTS if variant != "bert2bert"}
    cross_classes = {"shared": "SharedProjectionAttention", "standard": "StandardAttention",
                     "shared_kv": "SharedKeyValueAttention"}
    for variant, model in built.items():
        settings, config = study.VARIANTS[variant], model.config
        shares = settings.get("share_encoder_decoder_layers", False)
        assert config.share_encoder_decoder_layers is shares and config.share_encoder_decoder_embeddings is shares
        cross = type(model.decoder.crossattention[0].self).__name__
        assert cross == cross_classes[settings["cross_attention_type"]], variant
        self_attention = "StandardAttention" if variant == "bertshare" else "SharedProjectionAttention"
        assert type(model.sharedbert.encoder.attention[0].self).__name__ == self_attention
        assert model.generation_config.decoder_start_token_id == tokenizer.cls_token_id
    for mixed, shared in (("shared-all-standard-cross", "shared-all"),
                          ("shared-all-healed-standard-cross", "shared-all-healed"),
                          ("shared2shared-healed-standard-cross", "shared2shared-healed")):
        mixed, shared = built[mixed].state_dict(), built[shared].state_dict()
        for key, value in shared.items():  # the same warm start everywhere but cross-attention
            if ".crossattention." not in key:
                assert torch.equal(mixed[key], value), key
    # Calibration moved the calibrated variants' attention off the plain conversion's.
    uncalibrated = study.build_model("shared-all", str(bert_dir), tokenizer, healed=str(healed_dir)).state_dict()
    calibrated = built["shared-all"].state_dict()
    assert uncalibrated.keys() == calibrated.keys()
    moved = {key for key in calibrated  # cross-attention starts untrained: random in both
             if ".crossattention." not in key and not torch.equal(calibrated[key], uncalibrated[key])}
    assert moved and all(".attention." in key for key in moved), sorted(moved)
    # The healed variants start from the healed checkpoint's weights, the BERTShare arm from BERT's exactly.
    from sharedbert import SharedBertModel

    healed = SharedBertModel.from_pretrained(healed_dir).state_dict()
    for variant in ("shared2shared-healed", "shared-all-healed", "shared-all-healed-standard-cross",
                    "shared2shared-healed-standard-cross"):
        weights = built[variant].state_dict()
        for key, value in healed.items():
            if not key.startswith("pooler."):
                assert torch.equal(weights[f"sharedbert.{key}"], value), (variant, key)
    bert = BertForMaskedLM.from_pretrained(bert_dir)
    bertshare = built["bertshare"]
    assert torch.equal(bertshare.sharedbert.encoder.attention[0].self.query.weight,
                       bert.bert.encoder.layer[0].attention.self.query.weight)
    assert bertshare.decoder.attention is None  # the decoder runs the encoder's layers


def test_a_healed_variant_without_its_checkpoint_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="--healed"):
        study.build_model("shared-all-healed", str(tmp_path), tokenizer=None)


@pytest.mark.slow
def test_a_cell_another_process_is_training_is_skipped_and_freed_when_that_process_ends(tmp_path):
    import subprocess
    import sys

    # The holder imports sharedbert.atomic (the standard library alone, where claim's lock lives) without the
    # package's __init__, which imports torch and transformers: seconds, for a process that only holds a lock.
    holder = ("import sys, time, pathlib, types; sys.path.insert(0, sys.argv[1])\n"
              "package = types.ModuleType('sharedbert'); package.__path__ = [sys.argv[3]]\n"
              "sys.modules['sharedbert'] = package\n"
              "import study\n"
              "with study.claim(pathlib.Path(sys.argv[2]), 'shared-all/seed1') as mine:\n"
              "    print(mine, 'torch' in sys.modules, flush=True); time.sleep(60)\n")
    output = tmp_path / "recipe-1800"
    process = subprocess.Popen([sys.executable, "-c", holder, str(study.RESULTS_DIR.parent), str(output),
                                str(REPO_ROOT / "sharedbert")], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().split() == ["True", "False"]  # it holds the cell, without torch
        with study.claim(output, "shared-all/seed1") as mine:
            assert not mine  # held by the other process
        with study.claim(output, "shared-all/seed2") as mine:
            assert mine  # another cell is free
    finally:
        process.kill()
        process.wait()
    with study.claim(output, "shared-all/seed1") as mine:
        assert mine  # a killed process's claim is released


@pytest.fixture(scope="module")
def healed_minilm(tmp_path_factory, minilm_path):
    """all-MiniLM-L6-v2 converted to shared attention, standing in for the healed checkpoint of the "healed"
    variants: their warm start loads it (no closed-form fit, no calibration in every run of the cell), while the model
    trained is all-MiniLM-L6-v2's size, so that a training step takes as long as in the study's own variants."""
    from sharedbert.conversion.bert import from_bert

    folder = tmp_path_factory.mktemp("seq2seq") / "healed"
    from_bert(minilm_path, attention_type="shared").save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_a_cell_stopped_mid_training_resumes_from_its_checkpoint(tmp_path, mlm_text_dir, healed_minilm, capsys):
    """Ctrl-C (as at the end of a sitting) saves a checkpoint and stops; the next run continues the cell from it, and
    ends where an uninterrupted run (the quick study end to end, which a second run then skips) ends.

    The cell is shared-all-healed: its warm start is a load, where the calibrated variants fit and calibrate the
    conversion anew in each of the three runs (a third of a run's time);
    `test_each_sharedbert_variant_is_built_as_named` builds those. Its model is all-MiniLM-L6-v2's size, so the four
    steps left after the first checkpoint take seconds: the Ctrl-C sent when that checkpoint appears lands before the
    end of training."""
    import signal
    import subprocess
    import sys
    import time

    arguments = ["--quick", "--variants", "shared-all-healed", "--seeds", "1", "--healed", str(healed_minilm),
                 "--output-dir", str(tmp_path / "results"), "--work-dir", str(tmp_path / "work"),
                 "--checkpoint-steps", "2"]
    process = start_child([sys.executable, str(study.RESULTS_DIR.parent / "study.py"), *arguments],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoints = tmp_path / "work" / "recipe-quick" / "shared-all-healed-seed1" / "checkpoints"
    deadline = time.monotonic() + 300
    while not any(checkpoints.glob("checkpoint-*")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) != 0  # interrupted: no result
    assert not (tmp_path / "results" / "recipe-quick.json").exists()
    assert any(checkpoints.glob("checkpoint-*"))

    assert study.main(arguments) == 0
    cell = json.loads((tmp_path / "results" / "recipe-quick.json").read_text())["cells"]["shared-all-healed/seed1"]
    assert cell["resumed"] is True and cell["train_tokens_per_second_unshared_machine"] is None
    assert not checkpoints.exists()  # discarded once the cell is scored

    # The resumed cell is the cell that was never stopped: same last training loss, same generations. The
    # uninterrupted run is the quick study as documented (`study.py --quick`): no checkpoint every 2 steps, which
    # changes nothing a cell computes.
    uninterrupted = [*arguments[:arguments.index("--output-dir")],
                     "--output-dir", str(tmp_path / "results-uninterrupted"),
                     "--work-dir", str(tmp_path / "work-uninterrupted")]
    assert study.main(uninterrupted) == 0
    reference = json.loads((tmp_path / "results-uninterrupted" / "recipe-quick.json").read_text())["cells"][
        "shared-all-healed/seed1"]
    assert reference["resumed"] is False
    assert cell["final_train_loss"] == pytest.approx(reference["final_train_loss"], rel=1e-5)
    assert cell["examples"] == reference["examples"] and cell["chrf"] == pytest.approx(reference["chrf"])
    assert cell["healed_warm_start"] == reference["healed_warm_start"]

    # The uninterrupted run is the quick study end to end: trained, scored, reported; a second run skips the cell.
    assert 0.0 <= reference["chrf"] <= 100.0 and 0.0 <= reference["exact_match"] <= 100.0
    assert reference["parameters"] > 0 and reference["examples"] and reference["precision"] in ("bf16", "fp32")
    report = (tmp_path / "results-uninterrupted" / "recipe-quick.md").read_text()
    assert "| shared-all-healed |" in report
    assert any(line.endswith("shared-all-healed/seed1") for line in report.splitlines())  # its warm start is named
    capsys.readouterr()
    assert study.main(uninterrupted) == 0
    assert "shared-all-healed/seed1: done, skipped" in capsys.readouterr().out


def test_results_of_another_recipe_are_refused_before_any_training(tmp_path, monkeypatch):
    (tmp_path / "recipe-1800.json").write_text(json.dumps({"recipe": {"steps": 1}, "cells": {"bert2bert/seed1": {}}}))
    monkeypatch.setattr(study, "run_cell", lambda *a, **k: pytest.fail("trained despite the recipe mismatch"))
    monkeypatch.setattr("sharedbert.training.resolve_source", lambda name: name)
    with pytest.raises(SystemExit, match="another recipe"):
        study.main(["--output-dir", str(tmp_path), "--work-dir", str(tmp_path / "w")])


def test_the_landed_results_are_read_as_the_first_recipe():
    """Results files written before `lr_scheduler` existed hold the same recipe: its cells are reused."""
    stored = json.loads((study.RESULTS_DIR / "recipe-1800.json").read_text())["recipe"]
    stored.pop("lr_scheduler", None)  # as the cells written before the field have it
    assert study.same_recipe(stored, study.RECIPES["1800"])
    assert not study.same_recipe({**stored, "steps": 5400}, study.RECIPES["1800"])


def test_the_report_names_each_healed_warm_start_and_the_cells_that_used_it():
    """A rebuilt warm start is other weights: cells from two builds are listed under two sha256s."""
    def cell(variant, seed, sha, stsb):
        identity = {"sha256": sha, "sharedbert_provenance": {"healing steps": 9184},
                    "eval_results": [{"task": "STS-B", "metrics": {"spearmanr": stsb}}]}
        return {"variant": variant, "seed": seed, "healed_warm_start": identity}

    cells = {"shared-all-healed/seed1": cell("shared-all-healed", 1, "a" * 64, 0.865),
             "shared-all-healed/seed3": cell("shared-all-healed", 3, "b" * 64, 0.8641),
             "shared2shared-healed/seed1": cell("shared2shared-healed", 1, "a" * 64, 0.865),
             "bert2bert/seed1": {"variant": "bert2bert", "seed": 1}}
    lines = study.warm_start_lines(cells)
    first = next(line for line in lines if line.startswith("- `aaaaaaaa…`"))
    second = next(line for line in lines if line.startswith("- `bbbbbbbb…`"))
    assert "STS-B 0.8650" in first and "9,184 healing steps" in first
    assert "shared-all-healed/seed1" in first and "shared2shared-healed/seed1" in first and "seed3" not in first
    assert "STS-B 0.8641" in second and second.endswith("shared-all-healed/seed3")
    assert not any("bert2bert" in line for line in lines)
    assert study.warm_start_lines({"bert2bert/seed1": {"variant": "bert2bert", "seed": 1}}) == []
