"""Training workflows: the shared Trainer set-up, `sharedbert finetune` / `evaluate` / `pretrain` end to end on small
real data with tiny models, the CLI's error handling, and atomic outputs."""

import json
import math
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertModel

import sharedbert
from sharedbert import cli, data
from sharedbert.parameter_counts import count_model_parameters
from sharedbert.training import (
    KeepBestCallback,
    evaluate,
    finetune,
    pretrain,
    training_arguments,
)
from sharedbert.model_sizes import PRESETS, config_values

from conftest import INVALID_CONFIG, tiny_config

# The demo's closing text once restated the published build's healing budget ("for 45 minutes") after it had changed.
RESTATED_BUDGET = re.compile(r"`make checkpoint` heals[^.]* \d[\d,]* (minutes|steps)")
SMALL = dict(max_train_samples=96, max_eval_samples=64, max_length=32, epochs=1, batch_size=16)


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory, minilm_path):
    """A tiny BERT checkpoint (random weights, bert-base-uncased vocabulary from all-MiniLM-L6-v2's tokenizer)."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_path).save_pretrained(folder)
    return folder


# ---------------------------------------------------------------------------------------------------------------------
# Building blocks


def test_training_arguments_use_transformers5_names(tmp_path):
    args = training_arguments(tmp_path, per_device_train_batch_size=16, num_train_epochs=2, num_train_examples=320,
                              evaluations=4, warmup_steps=0.1)
    assert args.warmup_steps == 0.1  # a fraction of the steps, transformers 5 style
    assert args.eval_strategy == "steps" and args.eval_steps == 10  # 40 steps, 4 evaluations
    assert args.save_strategy == "no" and args.report_to in ("none", [], ["none"])
    assert args.disable_tqdm is False and args.train_sampling_strategy == "group_by_length"
    assert training_arguments(tmp_path, evaluations=0, num_train_examples=10).eval_strategy == "no"


def test_keep_best_callback_restores_the_best_weights():
    model = sharedbert.SharedBertForSequenceClassification(tiny_config(num_labels=2))
    callback = KeepBestCallback("accuracy")

    class State:
        global_step = 0

    snapshots = {}
    for step, accuracy in enumerate([0.5, 0.8, 0.6], start=1):
        with torch.no_grad():
            model.classifier.weight.add_(1.0)  # the weights move between evaluations
        State.global_step = step
        snapshots[step] = model.classifier.weight.clone()
        callback.on_evaluate(None, State, None, metrics={"eval_accuracy": accuracy}, model=model)
    assert callback.best_step == 2 and callback.best_metrics == {"eval_accuracy": 0.8}
    assert callback.restore(model)
    assert torch.equal(model.classifier.weight, snapshots[2])
    assert KeepBestCallback("loss", greater_is_better=False).is_better(float("nan")) is False


def test_keep_best_reports_the_last_evaluation_when_none_could_win():
    """Every evaluation NaN (a correlation of constant predictions): no best, and the run reports the last metrics
    with its final weights instead of failing with a TypeError after training."""
    model = sharedbert.SharedBertForSequenceClassification(tiny_config(num_labels=1))
    callback = KeepBestCallback("pearson")

    class State:
        global_step = 0

    for step in (1, 2):
        State.global_step = step
        callback.on_evaluate(None, State, None, metrics={"eval_pearson": float("nan"), "step": step}, model=model)
    assert callback.best_metrics is None and callback.best_step is None and not callback.restore(model)
    assert callback.reported_metrics["step"] == 2


def test_finetune_whose_every_evaluation_is_nan_still_finishes(tiny_bert_dir, glue_dir, tmp_path, monkeypatch):
    from sharedbert import data as data_module

    monkeypatch.setattr(data_module, "compute_metrics", lambda spec, predictions, labels: {
        name: float("nan") for name in spec.metrics})
    result = finetune(task="sst2", model=str(tiny_bert_dir), data_dir=glue_dir, output_dir=tmp_path / "out",
                      evaluations=2, **SMALL)
    assert result["metrics"]["accuracy"] != result["metrics"]["accuracy"]  # NaN, reported as measured
    assert result["best_step"] is None and (tmp_path / "out" / "model.safetensors").is_file()


def test_presets_build_valid_configs(tmp_path):
    for name, values in PRESETS.items():
        config = sharedbert.SharedBertConfig(**config_values(name))
        assert config.hidden_size % config.num_attention_heads == 0, name
    assert PRESETS["minilm-l6"] == dict(num_hidden_layers=6, hidden_size=384, num_attention_heads=12,
                                        intermediate_size=1536)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 2, "model_type": "sharedbert"}))
    assert config_values(str(path)) == {"hidden_size": 64, "num_attention_heads": 2}
    with pytest.raises(ValueError, match="Unknown config 'bert-huge'.*bert-tiny"):
        config_values("bert-huge")


def test_count_model_parameters_counts_shared_tensors_once():
    unshared = sharedbert.SharedBertModel(tiny_config())
    shared = sharedbert.SharedBertModel(tiny_config(layer_sharing="all"))
    per_layer = sum(p.numel() for p in unshared.encoder.attention[0].parameters()) + sum(
        p.numel() for p in unshared.encoder.feed_forward[0].parameters())
    assert count_model_parameters(unshared) - count_model_parameters(shared) == 3 * per_layer


# ---------------------------------------------------------------------------------------------------------------------
# finetune / evaluate


@pytest.mark.slow
def test_finetune_converts_bert_on_the_fly_keeps_the_best_and_saves_atomically(tiny_bert_dir, glue_dir, tmp_path):
    out = tmp_path / "run"
    result = finetune(task="sst2", model=str(tiny_bert_dir), data_dir=glue_dir, output_dir=out, evaluations=4,
                      layer_sharing="all", **SMALL)
    saved = json.loads((out / "eval_results.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert {"task": "sst2", "dataset": "glue/sst2", "split": "validation", "train_samples": 96}.items() <= saved.items()
    assert set(saved["metrics"]) == {"accuracy"} and 0.0 <= saved["metrics"]["accuracy"] <= 1.0
    assert saved["model"] == str(tiny_bert_dir) and saved["seconds"] > 0
    # --evaluations 4 over 6 steps: evenly spaced (every 2 steps), at most 4, the last at the final step, none repeated.
    log = json.loads((out / "trainer_log.json").read_text())
    evaluated = [entry["step"] for entry in log if "eval_accuracy" in entry]
    assert evaluated == [2, 4, 6] and saved["total_steps"] == 6, evaluated

    # The folder is a complete SharedBert classifier: shared attention, the requested sharing, readable labels.
    model = AutoModelForSequenceClassification.from_pretrained(out, trust_remote_code=True)
    assert model.config.attention_type == "shared" and model.config.layer_sharing == "all"
    assert model.config.id2label == {0: "negative", 1: "positive"}
    assert model.config.converted_from == str(tiny_bert_dir)
    assert sorted(p.name for p in out.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".pkl")) == []
    assert not list(tmp_path.glob(".run*")), "temporary folders left behind"

    # The saved weights are the best evaluation's: `evaluate` reproduces its score on the same examples.
    again = evaluate(model=str(out), task="sst2", data_dir=glue_dir, max_eval_samples=64, max_length=32)
    assert again["metrics"] == pytest.approx(saved["metrics"])
    assert again["split"] == "validation" and again["eval_samples"] == 64

    # A SharedBert folder is loaded as it is; a regression task gets a new one-output head.
    stsb = finetune(task="stsb", model=str(out), data_dir=glue_dir, output_dir=tmp_path / "stsb", evaluations=0,
                    **SMALL)
    assert set(stsb["metrics"]) == {"pearson", "spearman"} and stsb["layer_sharing"] == "all"
    regression = AutoModelForSequenceClassification.from_pretrained(tmp_path / "stsb")
    assert regression.config.num_labels == 1 and regression.config.problem_type == "regression"

    with pytest.raises(ValueError, match="already a SharedBert with .*'attention_type': 'shared'"):
        finetune(task="sst2", model=str(out), data_dir=glue_dir, attention_type="standard",
                 output_dir=tmp_path / "x", **SMALL)
    with pytest.raises(ValueError, match="exists and is not empty; pass --overwrite"):
        finetune(task="sst2", model=str(tiny_bert_dir), data_dir=glue_dir, output_dir=out, **SMALL)


def test_finetune_baseline_keeps_bert_and_can_skip_saving(tiny_bert_dir, glue_dir, tmp_path):
    result = finetune(task="sst2", model=str(tiny_bert_dir), data_dir=glue_dir, no_convert=True, save=False,
                      output_dir=tmp_path / "unused", evaluations=0, **SMALL)
    assert result["model_type"] == "bert" and result["attention_type"] is None
    assert not (tmp_path / "unused").exists()


@pytest.mark.slow
def test_finetune_precision_is_resolved_recorded_and_bf16_autocasts(tiny_bert_dir, glue_dir, tmp_path, caplog):
    import logging

    from sharedbert.training import resolve_precision

    caplog.set_level(logging.INFO, logger="sharedbert")
    runs = {precision: finetune(task="sst2", model=str(tiny_bert_dir), data_dir=glue_dir, save=False,
                                output_dir=tmp_path / "unused", evaluations=0, max_steps=2, precision=precision,
                                **SMALL)
            for precision in ("auto", "fp32", "bf16")}
    assert runs["auto"]["precision"] == resolve_precision("auto")  # this machine's choice, made at run time
    assert runs["fp32"]["precision"] == "fp32" and runs["bf16"]["precision"] == "bf16"
    assert runs["bf16"]["eval_loss"] != pytest.approx(runs["fp32"]["eval_loss"], rel=1e-6)  # bf16 arithmetic ran
    printed = caplog.text  # the library logs; the command line shows it
    assert "precision: bf16 (asked for)" in printed and "precision: fp32 (asked for)" in printed
    assert "precision: " + resolve_precision("auto") + " (auto: " in printed
    with pytest.raises(ValueError, match="precision must be one of"):
        finetune(task="sst2", model=str(tiny_bert_dir), data_dir=glue_dir, save=False, precision="fp16", **SMALL)


def test_training_arguments_take_a_resolved_precision(tmp_path):
    assert training_arguments(tmp_path, precision="bf16").bf16 is True
    assert training_arguments(tmp_path).bf16 is False
    with pytest.raises(ValueError, match="resolve_precision"):
        training_arguments(tmp_path, precision="auto")


@pytest.mark.slow
def test_finetune_names_the_packaged_minilm_as_convert_does(minilm_path, glue_dir, tmp_path):
    result = finetune(task="sst2", model="all-MiniLM-L6-v2", data_dir=glue_dir, no_convert=True, save=False,
                      output_dir=tmp_path / "unused", evaluations=0, max_steps=1, **SMALL)
    assert Path(result["model"]) == minilm_path and result["model_type"] == "bert"


def test_bad_data_fails_before_any_model_is_loaded(tmp_path):
    glue = tmp_path / "glue"
    (glue / "SST-2").mkdir(parents=True)
    (glue / "SST-2" / "train.tsv").write_text("sentence\tlabel\ngood\t1\nbad\tnegative\n")
    (glue / "SST-2" / "dev.tsv").write_text("sentence\tlabel\nok\t1\n")
    # The model path does not exist: a DataError (not a model error) proves the data was checked first.
    with pytest.raises(data.DataError, match=r"train\.tsv, line 3, column 'label': label 'negative'"):
        finetune(task="sst2", model=str(tmp_path / "no-model"), data_dir=glue, output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_reports_errors_with_exit_code_2(tmp_path, capsys):
    code = cli.main(["finetune", "--task", "sst2", "--data-dir", str(tmp_path / "missing"), "--output-dir",
                     str(tmp_path / "o")])
    assert code == 2
    assert "sharedbert finetune: error: --data-dir" in capsys.readouterr().err
    code = cli.main(["pretrain", "--corpus", str(tmp_path / "none.txt"), "--output-dir", str(tmp_path / "p")])
    assert code == 2 and "no such file or folder" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["pretrain", "finetune", "evaluate", "demo"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: sharedbert {command}" in capsys.readouterr().out


def test_evaluate_writes_predictions_in_the_datasets_order(tiny_bert_dir, glue_dir, tmp_path):
    """transformers 5 shuffles evaluation batches by length when training groups by length; the predictions file
    must still follow the test set's rows. A regression head makes every row's value distinct."""
    from sharedbert.training.evaluation import evaluate

    out = tmp_path / "stsb"
    finetune(task="stsb", model=str(tiny_bert_dir), data_dir=glue_dir, output_dir=out, evaluations=0, **SMALL)
    model = AutoModelForSequenceClassification.from_pretrained(out, trust_remote_code=True)
    with torch.no_grad():  # spread the barely-trained outputs, so rows differ in the file's 3 decimals
        model.classifier.weight.mul_(1e4)
    model.save_pretrained(out)
    predictions = tmp_path / "stsb.tsv"
    evaluate(model=str(out), task="stsb", data_dir=glue_dir, split="test", max_eval_samples=200, max_length=32,
             predictions_path=str(predictions))
    written = [float(line.split("\t")[1]) for line in predictions.read_text().splitlines()[1:]]
    rows = data.load_task("stsb", data_dir=glue_dir, splits=("test",)).datasets["test"].select(range(200))
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    with torch.no_grad():
        direct = [float(model(**tokenizer(row["text"], row["text_pair"], truncation=True, max_length=32,
                                          return_tensors="pt")).logits) for row in rows]
    assert len(written) == 200 and len(set(written)) > 50
    assert written == pytest.approx(direct, rel=1e-3, abs=0.05)


def test_evaluate_writes_test_predictions(tiny_bert_dir, glue_dir, tmp_path):
    out = tmp_path / "run"
    finetune(task="wnli", model=str(tiny_bert_dir), data_dir=glue_dir, output_dir=out, evaluations=0, **SMALL)
    predictions = tmp_path / "wnli.tsv"
    result = evaluate(model=str(out), task="wnli", data_dir=glue_dir, split="test", predictions_path=str(predictions))
    lines = predictions.read_text().splitlines()
    assert result["metrics"] == {} and len(lines) == 147 and lines[0] == "index\tprediction"
    assert {line.split("\t")[1] for line in lines[1:]} <= {"entailment", "not_entailment"}
    with pytest.raises(ValueError, match="predicts 2 label.*task stsb has 1"):
        evaluate(model=str(out), task="stsb", data_dir=glue_dir, max_eval_samples=8)


# ---------------------------------------------------------------------------------------------------------------------
# pretrain


def _tiny_config_file(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64)))
    return str(path)


def test_pretrain_trains_a_vocabulary_and_saves_a_loadable_masked_lm(mlm_text_dir, tmp_path):
    from transformers import pipeline

    out = tmp_path / "mlm"
    corpus = [str(mlm_text_dir / "gutenberg-nltk" / name) for name in ("blake-poems.txt", "shakespeare-caesar.txt")]
    result = pretrain(corpus=corpus, config=_tiny_config_file(tmp_path), train_vocab=600, layer_sharing="all",
                      block_size=32, max_steps=60, batch_size=16, learning_rate=2e-3, output_dir=out,
                      encoding="cp1252")  # Caesar is Latin-1 (its Cæsar) without a byte-order mark
    # Better than guessing uniformly over the vocabulary: the model learned something from the text.
    assert result["eval_loss"] < math.log(result["vocab_size"]) - 0.5
    assert result["vocab_size"] <= 600 and result["trained_vocab"] and result["steps"] == 60
    saved = json.loads((out / "pretrain_results.json").read_text())
    assert saved["layer_sharing"] == "all" and saved["num_unique_layers"] == 1

    model = AutoModelForMaskedLM.from_pretrained(out, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    # (with trust_remote_code the class comes from the folder's own tokenization_sharedbert.py)
    assert type(tokenizer).__name__ == "SharedBertTokenizer" and len(tokenizer) == result["vocab_size"]
    embeddings = model.sharedbert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.weight.data_ptr() == embeddings.data_ptr()  # tied
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer)
    assert len(fill("the [MASK] of rome")) == 5

    # Trained with sparse prediction (the default), the saved model still predicts densely at inference: logits at
    # every position, and a loss equal to the one computed from them.
    assert result["sparse_prediction"] and model.config.sparse_prediction
    inputs = tokenizer("the [MASK] of rome", return_tensors="pt")
    labels = torch.full_like(inputs["input_ids"], -100)
    labels[0, 2] = tokenizer.convert_tokens_to_ids("the")
    model.eval()
    with torch.no_grad():
        output = model(**inputs, labels=labels)
    assert output.logits.shape == (1, inputs["input_ids"].shape[1], result["vocab_size"])
    expected = torch.nn.functional.cross_entropy(output.logits[0, 2:3], labels[0, 2:3])
    torch.testing.assert_close(output.loss, expected)


def test_pretrain_line_by_line_with_an_existing_tokenizer_and_untied_embeddings(mlm_text_dir, minilm_path, tmp_path):
    out = tmp_path / "mlm"
    result = pretrain(corpus=[str(mlm_text_dir / "gutenberg-nltk" / "blake-poems.txt")],
                      config=_tiny_config_file(tmp_path), tokenizer=str(minilm_path), attention_type="pairwise",
                      no_tie_embeddings=True, line_by_line=True, block_size=24, max_steps=3, batch_size=8,
                      dense_prediction=True, output_dir=out)
    assert result["vocab_size"] == 30522 and not result["tie_word_embeddings"] and result["line_by_line"]
    assert not result["sparse_prediction"]
    # Lines are shorter than blocks: the real tokens per step are counted, not the padded positions.
    assert 2 * 8 < result["tokens_per_step"] < 24 * 8 and result["tokens_per_second"] > 0
    model = AutoModelForMaskedLM.from_pretrained(out)
    assert model.config.attention_type == "pairwise" and model.config.sparse_prediction is False
    assert not torch.equal(model.cls.predictions.decoder.weight, model.sharedbert.embeddings.word_embeddings.weight)


def test_pretrain_rejects_bad_settings_before_reading_text(tmp_path):
    with pytest.raises(ValueError, match="Unknown config"):
        pretrain(corpus=[str(tmp_path / "missing.txt")], config="bert-enormous", output_dir=tmp_path / "o")
    with pytest.raises(ValueError, match="exactly one corpus"):
        pretrain(output_dir=tmp_path / "o")
    with pytest.raises(INVALID_CONFIG, match="attention_type"):
        pretrain(corpus=[str(tmp_path / "missing.txt")], config="bert-tiny", attention_type="sparse",
                 output_dir=tmp_path / "o")


# ---------------------------------------------------------------------------------------------------------------------
# demo


def test_demo_says_why_it_cannot_run_without_data(monkeypatch, tmp_path, capsys):
    from sharedbert.recipes import demo

    monkeypatch.setattr(data, "find_glue_dir", lambda explicit=None: None if explicit is None else tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = cli.main(["demo", "--output-dir", str(tmp_path / "demo")])
    err = capsys.readouterr().err
    assert code == 2
    assert "no GLUE SST-2 data" in err and "HF_HUB_OFFLINE is set" in err and "--data-dir" in err
    with pytest.raises(data.DataError, match="has no SST-2/train.tsv"):
        demo.find_data(tmp_path)
    with pytest.raises(data.DataError, match="HF_HUB_OFFLINE is set"):
        data.load_task("sst2", dataset="nyu-mll/glue")


def test_the_demo_summary_points_to_the_published_build_without_restating_its_budget(capsys):
    """The closing text once said `make checkpoint` heals "for 45 minutes" after the build had moved to a step budget:
    it names the command and the recipe, and leaves the figures to the one place that holds them."""
    from sharedbert.cli.demo import print_summary

    model = dict(attention_type="shared", accuracy=0.8, parameters=90, train_seconds=10.0)
    print_summary(dict(sharedbert=model, bert=dict(model, parameters=100), speed_ratio=1.2, train_samples=64,
                       epochs=1.0, healing="healed here", healed_here=True, heal_budget="2 steps", max_length=32,
                       wall_seconds=61.0, model_dir="runs/demo/sharedbert-sst2", staged="runs/demo/hub",
                       repo_id="someone/demo", results="runs/demo/demo_results.json"))
    printed = capsys.readouterr().out
    assert "healed toward it here for only 2 steps" in printed and "SharedBert − BERT: +0.0 points" in printed
    assert "`make checkpoint` heals" in printed and not RESTATED_BUDGET.search(printed)


def test_demo_fine_tunes_a_built_model_only_when_asked(monkeypatch, tmp_path):
    """A finished `sharedbert build-minilm` work folder in the current directory does not change what the demo does
    (it heals here unless --healed names a model); --healed that is not a model folder says so."""
    from sharedbert.recipes.demo import find_healed

    built = tmp_path / "runs" / "build-minilm" / "healed"
    built.mkdir(parents=True)
    (built / "config.json").write_text("{}")
    (built / "conversion_report.json").write_text(json.dumps({"heal": {"steps": 9184, "interrupted": False}}))
    monkeypatch.chdir(tmp_path)
    assert find_healed(None) is None
    assert find_healed("runs/build-minilm/healed") == Path("runs/build-minilm/healed")
    with pytest.raises(ValueError, match="is not a model folder"):
        find_healed("runs/build-minilm")


@pytest.mark.slow
def test_demo_runs_end_to_end_on_a_tiny_budget(tiny_bert_dir, glue_dir, tmp_path, capsys):
    """The README's main command with a tiny BERT and 64 sentences: conversion, both fine-tunes, staging through
    sharedbert.hub (verified in a clean process), reload with trust_remote_code, pipeline, parameter savings."""
    out = tmp_path / "demo"
    code = cli.main(["demo", "--model", str(tiny_bert_dir), "--data-dir", str(glue_dir), "--train-samples", "64",
                     "--max-length", "32", "--output-dir", str(out), "--repo-id", "someone/tiny-demo",
                     "--heal-steps", "2"])
    captured = capsys.readouterr()
    printed = captured.err + captured.out  # the library's log (stderr), then the command's summary (stdout)
    assert code == 0, printed[-3000:]
    summary = json.loads((out / "demo_results.json").read_text())
    assert summary["train_samples"] == 64 and summary["eval_samples"] == 872  # the full dev set
    assert 0 <= summary["sharedbert"]["accuracy"] <= 1 and 0 <= summary["bert"]["accuracy"] <= 1
    assert summary["sharedbert"]["parameters"] < summary["bert"]["parameters"]
    assert summary["staged_with"] == "sharedbert.hub.stage_for_hub" and (out / "hub" / "README.md").is_file()
    assert {"config.json", "model.safetensors", "modeling_sharedbert.py"} <= {p.name for p in (out / "hub").iterdir()}
    assert [p["label"] in ("negative", "positive") for p in summary["pipeline"]] == [True] * 4
    assert "GLUE SST-2 TSVs from --data-dir" in printed and "demo wall time:" in printed
    # No healed model: BERT is fine-tuned first, and that fine-tuned BERT is converted, calibrated and healed toward
    # on the task's own training sentences (no corpus given), then fine-tuned; speed measured, limits stated.
    train_rows = len((glue_dir / "SST-2" / "train.tsv").read_text().splitlines()) - 1
    assert summary["healing"] == ("converted from the fine-tuned BERT, calibrated and healed toward it here for 2 "
                                  f"steps on SST-2 training sentences ({train_rows:,}, labels unused)")
    report = json.loads((out / "healed" / "conversion_report.json").read_text())
    assert report["source"] == str(out / "bert-sst2")
    assert report["heal"]["steps"] == 2 and report["calibration"]["sentences"] > 0
    assert "SST-2 training sentences" in (out / "healed" / "README.md").read_text()
    bert_results = json.loads((out / "bert-sst2" / "eval_results.json").read_text())
    assert bert_results["metrics"]["accuracy"] == summary["bert"]["accuracy"]  # the baseline is the converted model
    assert printed.count("BERT SST-2 dev accuracy") == 1  # fine-tuned once, not again as a separate baseline
    # The healed SharedBert starts from the fine-tuned classifier: before healing, conversion keeps BERT's head.
    from safetensors.torch import load_file

    bert_weights = load_file(out / "bert-sst2" / "model.safetensors")
    healed_weights = load_file(out / "healed" / "model.safetensors")
    assert torch.equal(bert_weights["classifier.weight"], healed_weights["classifier.weight"])
    assert summary["speed_ratio"] > 0 and summary["speed"]["rounds"] == 3
    assert "Limits:" in printed and "SharedBert − BERT:" in printed
    # The closing text points to the published build without restating its budget, which lives in one place.
    assert "`make checkpoint` heals" in printed and not RESTATED_BUDGET.search(printed)
