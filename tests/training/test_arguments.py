"""The jobs' arguments, built on transformers' TrainingArguments: each class's own fields stay few, the command line
keeps every flag it had (under TrainingArguments' names too), and a run's signature is the one the arguments wrote
before they were built so, so an old checkpoint still resumes."""

import dataclasses
import json

import pytest
from transformers import Seq2SeqTrainingArguments, TrainingArguments

from sharedbert.cli import main as cli
from sharedbert.cli.common import JobArgumentParser, arguments_from, flag_names
from sharedbert.training.arguments import JobTrainingArguments, renamed
from sharedbert.training.finetuning import FinetuneArguments
from sharedbert.training.pretraining import PretrainArguments
from sharedbert.training.seq2seq_finetuning import Seq2SeqFinetuneArguments
from sharedbert.training.trainer import DEFAULTS, training_arguments

# Signatures as the arguments wrote them before they were built on TrainingArguments (one FinetuneArguments for
# classifiers and seq2seq; epochs / batch_size / warmup as fields of its own), at the defaults: the keys the committed
# checkpoints of a released version store (tests/fixtures/finetune-checkpoint, pretrain-checkpoint). No seq2seq
# checkpoint of that version is committed, so its former keys are no longer taken.
CLASSIFIER_SIGNATURE = {
    "model": None, "tokenizer": None, "no_convert": False, "attention_type": None, "layer_sharing": None,
    "num_unique_layers": None, "sharing_order": None, "fit_method": None, "task": "sst2", "data_dir": None,
    "dataset": None, "train_file": None, "validation_file": None, "text_columns": None, "label_column": None,
    "regression": False, "source_column": None, "target_column": None, "share_encoder_decoder_layers": False,
    "share_encoder_decoder_embeddings": False, "cross_attention_type": None, "generation_max_length": None,
    "generation_num_beams": 1, "max_length": 128, "cache_dir": None, "max_train_samples": None,
    "max_eval_samples": None, "epochs": 3.0, "max_steps": -1, "batch_size": 32, "learning_rate": 5e-05,
    "warmup": 0.06, "weight_decay": 0.01, "evaluations": 4, "no_group_by_length": False, "seed": 42,
    "layerwise_lr_decay": 1.0, "freeze_attention_fraction": 0.0, "pull_to_start": 0.0, "distill_from": None,
    "distill_weight": 0.5, "distill_temperature": 2.0,
}
PRETRAIN_SIGNATURE = {
    "corpus": ["x"], "dataset": None, "dataset_config": None, "dataset_split": "train", "text_column": "text",
    "block_size": 128, "line_by_line": False, "documents": "file", "mlm_probability": 0.15, "config": "bert-mini",
    "attention_type": None, "layer_sharing": None, "num_unique_layers": None, "sharing_order": None,
    "no_tie_embeddings": False, "dense_prediction": False, "train_vocab": None, "tokenizer": None, "max_steps": 1000,
    "batch_size": 32, "learning_rate": 0.0005, "warmup": 0.1, "weight_decay": 0.01, "eval_fraction": 0.02,
    "evaluations": 0, "seed": 42,
}
SEQ2SEQ_FILES = dict(train_file="t.jsonl", validation_file="v.jsonl", source_column="s", target_column="t")


def differences(saved: dict, now: dict) -> dict:
    """What `checkpointing.resume_point` would refuse: keys whose values differ after a JSON round trip (a key one
    side lacks counts as None)."""
    now = json.loads(json.dumps(now, default=str))
    return {key: (saved.get(key), now.get(key)) for key in set(saved) | set(now) if saved.get(key) != now.get(key)}


def parse(arguments_class, argv):
    """`argv` parsed as its command parses it: transformers' HfArgumentParser of the job's dataclass."""
    return arguments_from(JobArgumentParser([arguments_class]).parse_args(argv), arguments_class)


@pytest.mark.parametrize("saved, build", [
    (CLASSIFIER_SIGNATURE, lambda **o: FinetuneArguments(task="sst2", **o)),
    (PRETRAIN_SIGNATURE, lambda **o: PretrainArguments(corpus=["x"], **o)),
])
def test_a_signature_written_before_the_arguments_were_built_on_training_arguments_still_matches(saved, build):
    assert differences(saved, build().signature()) == {}
    changed = {**saved, "batch_size": 16, "warmup": 0.2, "seed": 7}
    assert differences(changed, build(**renamed(dict(batch_size=16, warmup=0.2, seed=7))).signature()) == {}
    # A setting that changed is still named, under the name the checkpoint stored it by.
    assert differences(saved, build(per_device_train_batch_size=16).signature()) == {"batch_size": (32, 16)}
    # A TrainingArguments field set from Python that shapes the trajectory is part of it once it leaves its default.
    assert differences(saved, build(gradient_accumulation_steps=2, lr_scheduler_type="cosine").signature()) == {
        "gradient_accumulation_steps": (None, 2), "lr_scheduler_type": (None, "cosine")}
    assert differences(saved, build(lr_scheduler_type="linear").signature()) == {}
    # Where a run goes, and how it logs, checkpoints or computes, is no part of it.
    assert differences(saved, build(output_dir="elsewhere", logging_steps=3, checkpoint_steps=5, overwrite=True,
                                    precision="fp32").signature()) == {}


def test_old_flags_and_transformers_names_set_the_same_fields():
    old = parse(FinetuneArguments, ["--epochs", "2", "--batch-size", "8", "--warmup", "0.1", "--batch_size", "8"])
    new = parse(FinetuneArguments, ["--num-train-epochs", "2", "--per-device-train-batch-size", "8",
                                    "--warmup_steps", "0.1"])
    for args in (old, new):
        assert (args.num_train_epochs, args.per_device_train_batch_size, args.warmup_steps) == (2.0, 8, 0.1)
    assert renamed(dict(epochs=2, batch_size=8, warmup=0.1, seed=1)) == dict(
        num_train_epochs=2, per_device_train_batch_size=8, warmup_steps=0.1, seed=1)
    pretrain = parse(PretrainArguments, ["--corpus", "x", "--batch-size", "4", "--max-steps", "5"])
    assert (pretrain.per_device_train_batch_size, pretrain.max_steps, pretrain.learning_rate) == (4, 5, 5e-4)
    with pytest.raises(SystemExit):
        parse(PretrainArguments, ["--corpus", "x", "--epochs", "2"])  # pretraining counts steps, as before


@pytest.mark.parametrize("arguments_class, argv, required", [
    (FinetuneArguments, [], {}),
    (Seq2SeqFinetuneArguments, ["--train-file", "t.jsonl", "--validation-file", "v.jsonl", "--source-column", "s",
                                "--target-column", "t"], SEQ2SEQ_FILES),
    (PretrainArguments, ["--corpus", "x"], {"corpus": ["x"]}),
])
def test_every_flag_has_its_dataclass_default_and_only_named_training_arguments_are_flags(arguments_class, argv,
                                                                                          required):
    built = parse(arguments_class, argv)
    expected = arguments_class(**required)
    flags = flag_names(arguments_class)
    for name in flags:
        assert getattr(built, name) == getattr(expected, name), name
    transformers_fields = {field.name for field in dataclasses.fields(Seq2SeqTrainingArguments)}
    assert flags & transformers_fields == set(arguments_class.training_flags)
    assert "per_device_eval_batch_size" not in flags and "save_strategy" not in flags  # package defaults, no flags
    assert "gradient_accumulation_steps" not in flags and "per_device_train_batch_size" in flags


def test_the_package_defaults_have_one_owner_and_any_training_argument_can_be_set_from_python(tmp_path):
    fields = {field.name: field.default for field in dataclasses.fields(JobTrainingArguments)}
    assert {name: fields[name] for name in DEFAULTS} == DEFAULTS
    plain = training_arguments(tmp_path, num_train_examples=64)
    job = training_arguments(tmp_path, num_train_examples=64, arguments=FinetuneArguments(task="sst2"))
    for name in (*DEFAULTS, "learning_rate", "num_train_epochs", "eval_steps", "logging_steps", "data_seed"):
        assert getattr(plain, name) == getattr(job, name), name
    # A TrainingArguments field the job has no flag for reaches the Trainer, and counts in the run's length.
    accumulated = training_arguments(tmp_path, num_train_examples=64, arguments=FinetuneArguments(
        task="sst2", gradient_accumulation_steps=2, lr_scheduler_type="cosine", num_train_epochs=1, evaluations=1))
    assert accumulated.eval_steps == 1 and accumulated.lr_scheduler_type == "cosine"
    assert isinstance(job, TrainingArguments) and job.output_dir == str(tmp_path)


def test_no_arguments_class_declares_more_than_about_15_fields_of_its_own():
    """Issue 44's goal: each job's arguments are parts of about 15 fields at most (evaluate's 16 the most), on
    transformers' TrainingArguments where the job trains; healing's settings, convert's and export's arguments too."""
    from sharedbert.export import ExportArguments
    from sharedbert.parameter_counts import ParamsArguments
    from sharedbert.recipes.build_minilm import BuildArguments
    from sharedbert.recipes.convert_and_heal import ConvertArguments
    from sharedbert.recipes.demo import DemoArguments
    from sharedbert.training.evaluation import EvaluateArguments
    from sharedbert.generation import GenerateArguments
    from sharedbert.training.healing_arguments import HealConfig

    jobs = (FinetuneArguments, Seq2SeqFinetuneArguments, PretrainArguments, DemoArguments, EvaluateArguments,
            GenerateArguments, BuildArguments, ParamsArguments, HealConfig, ConvertArguments, ExportArguments)
    parts = {base for job in jobs for base in job.__mro__
             if dataclasses.is_dataclass(base) and base.__module__.startswith("sharedbert.")}
    counts = {}
    for part in parts:
        inherited = {f.name for base in part.__mro__[1:] if dataclasses.is_dataclass(base)
                     for f in dataclasses.fields(base)}
        counts[part.__name__] = len([f for f in dataclasses.fields(part) if f.name not in inherited])
    assert max(counts.values()) <= 16, counts
    assert counts["FinetuneArguments"] <= 2 and counts["JobTrainingArguments"] <= 8, counts
    # Healing's 26 settings, convert's 15 and export's 19 options are each composed of parts.
    assert {"HealScheduleConfig", "HealDataConfig", "HealLossConfig", "HealRuntimeConfig", "ConvertModelArguments",
            "ConvertHealingArguments", "ExportModelArguments", "ExportFormatArguments", "ExportCheckArguments"} <= set(
        counts), counts
    assert counts["HealConfig"] == 0 and counts["ConvertArguments"] <= 1 and counts["ExportArguments"] == 0, counts


@pytest.mark.parametrize("argv, flag", [
    (["--target-column", "t", "--source-column", "s", "--layerwise-lr-decay", "0.8"], "--layerwise-lr-decay"),
    (["--task", "sst2", "--share-encoder-decoder-layers"], "--share-encoder-decoder-layers"),
    (["--task", "sst2", "--generation-num-beams", "2"], "--generation-num-beams"),
])
def test_a_flag_of_the_other_job_is_refused_by_name(argv, flag, tmp_path, capsys):
    assert cli(["finetune", *argv, "--output-dir", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert flag in error and "not used when fine-tuning" in error
    assert not (tmp_path / "out").exists()


def test_seq2seq_arguments_need_both_columns_and_default_to_greedy():
    assert Seq2SeqFinetuneArguments(**SEQ2SEQ_FILES).generation_num_beams == 1
    with pytest.raises(ValueError, match="--source-column and --target-column together"):
        Seq2SeqFinetuneArguments(train_file="t.jsonl", validation_file="v.jsonl", target_column="t")
    with pytest.raises(ValueError, match="--generation-num-beams"):
        Seq2SeqFinetuneArguments(**SEQ2SEQ_FILES, generation_num_beams=0)


def test_the_command_line_is_transformers_hf_argument_parser_with_switches_and_positionals():
    """Every command's parser is an HfArgumentParser of the job's dataclasses: parse_args_into_dataclasses gives the
    job's arguments; a bool stays a switch that takes no value (HfArgumentParser's own `--flag [BOOL]` would swallow
    the positional argument after it), and positional fields stay positional."""
    from transformers import HfArgumentParser

    from sharedbert.cli import build_parser
    from sharedbert.recipes.convert_and_heal import ConvertArguments

    subparsers = next(action for action in build_parser()._actions if action.choices)
    assert all(isinstance(parser, HfArgumentParser) for parser in subparsers.choices.values())
    (built,) = JobArgumentParser([FinetuneArguments]).parse_args_into_dataclasses(
        ["--task", "sst2", "--epochs", "2", "--no-resume"], look_for_args_file=False)
    assert isinstance(built, FinetuneArguments) and (built.num_train_epochs, built.no_resume) == (2.0, True)
    convert = JobArgumentParser([ConvertArguments]).parse_args(["--trust-remote-code", "bert", "out"])
    assert (convert.trust_remote_code, convert.src, convert.out) == (True, "bert", "out")
    with pytest.raises(SystemExit):
        JobArgumentParser([ConvertArguments]).parse_args(["--trust-remote-code", "yes", "bert", "out"])


def test_pretraining_builds_grouped_query_attention_with_a_rank_r_query_and_refuses_it_for_other_types():
    from sharedbert.training.pretraining import _model_values

    argv = ["--corpus", "x", "--attention-type", "standard", "--num-key-value-heads", "2", "--query-rank", "16"]
    values = _model_values(parse(PretrainArguments, argv))
    assert values["num_key_value_heads"] == 2 and values["query_rank"] == 16
    assert "num_key_value_heads" not in _model_values(PretrainArguments(corpus=["x"]))  # unset: the config's
    with pytest.raises(Exception, match="query_rank.*attention_type='standard'"):
        _model_values(PretrainArguments(corpus=["x"], attention_type="shared", query_rank=16))


def test_pretraining_normalises_the_rank_r_querys_code_when_asked_and_never_without_a_rank():
    from sharedbert.training.pretraining import _model_values

    argv = ["--corpus", "x", "--attention-type", "standard", "--query-rank", "16", "--query-latent-norm"]
    assert _model_values(parse(PretrainArguments, argv))["query_latent_norm"] is True
    assert "query_latent_norm" not in _model_values(PretrainArguments(corpus=["x"]))  # unset: the config's
    with pytest.raises(Exception, match="query_latent_norm.*set query_rank"):
        _model_values(PretrainArguments(corpus=["x"], attention_type="standard", query_latent_norm=True))
    # A preset describes the whole query: with one, the flag alone decides the norm.
    preset = _model_values(PretrainArguments(corpus=["x"], sharing_preset="mqa"))
    assert preset["query_latent_norm"] is False and preset["query_rank"] is None


def test_a_run_that_leaves_the_newer_query_latent_norm_off_has_the_signature_it_had_before_the_option():
    saved = {**PRETRAIN_SIGNATURE, "num_key_value_heads": None, "query_rank": None, "sharing_preset": None}
    assert differences(saved, PretrainArguments(corpus=["x"]).signature()) == {}
    # Turned on, it shapes the trajectory: a checkpoint of a run without it does not resume under it.
    assert differences(saved, PretrainArguments(corpus=["x"], attention_type="standard", query_rank=8,
                                                query_latent_norm=True).signature()) == {
        "attention_type": (None, "standard"), "query_rank": (None, 8), "query_latent_norm": (None, True)}
