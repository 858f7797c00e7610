"""Scoring a saved sequence classifier on a task's validation file, or writing its predictions for an unlabelled
test file (`sharedbert evaluate`). The results have the shape of fine-tuning's eval_results.json."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from ..atomic import atomic_write_text, check_output_file
from ..loading import from_pretrained
from ..remote_code import RemoteCodeRefused, trust_remote_code_option
from .. import data as data_module
from .models import load_tokenizer
from .arguments import DataArguments
from .trainer import DEFAULTS, PredictingTrainer, atomic_write_json, output_folder, training_arguments


@dataclass
class EvaluateInputArguments:
    """What `evaluate` scores: the model, the data and how it is read."""

    model: str = field(metadata={"help": "A fine-tuned model folder (SharedBert or BERT) or Hub id."})
    task: str | None = field(default=None, metadata={
        "help": "GLUE task: sst2, cola, mrpc, rte, stsb, wnli (or a name for your own file)."})
    data_dir: str | None = field(default=None, metadata={
        "help": "GLUE root holding SST-2/, CoLA/, ... (default: glue/ in the shared data folder: $SHAREDBERT_DATA, "
        "else shared/data beside the repository or the current folder)."})
    dataset: str | None = field(default=None, metadata={
        "help": "Load the GLUE task from the Hub instead, e.g. nyu-mll/glue (needs network)."})
    file: str | None = field(default=None, metadata={
        "help": "Your own labelled file to evaluate on (.csv, .tsv, .json, .jsonl), instead of a GLUE task."})
    text_columns: str | None = field(default=None, metadata={
        "help": "With your own file: the text column, or two comma-separated columns for sentence pairs."})
    label_column: str | None = field(default=None, metadata={"help": "With your own file: the label column."})
    regression: bool = field(default=False, metadata={"help": "With your own file: the label is a number."})
    split: str = field(default="validation", metadata={
        "help": "Which GLUE file to use (validation = dev = dev.tsv; test writes predictions and computes no "
        "metrics).", "choices": ("validation", "dev", "test", "train")})
    max_length: int = field(default=DataArguments.max_length, metadata={
        "help": "Truncate inputs to this many tokens, as fine-tuning does."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Only the first N examples."})
    batch_size: int = field(default=DEFAULTS["per_device_eval_batch_size"], metadata={"help": "Examples per batch."})
    cache_dir: str | None = field(default=None, metadata={"help": "datasets cache folder (default: the HF cache)."})
    trust_remote_code: bool = trust_remote_code_option()

    def __post_init__(self):
        self.split = "validation" if self.split == "dev" else self.split


@dataclass
class EvaluateArguments(EvaluateInputArguments):
    """Every option of `evaluate` / `sharedbert evaluate`, with its default and help: what it scores
    (`EvaluateInputArguments`) and where the results go."""

    predictions_path: str | None = field(default=None, metadata={
        "help": "Write one prediction per example to this TSV (index, prediction).", "aliases": ["--predictions"]})
    results_path: str | None = field(default=None, metadata={"help": "Also write the results JSON here.",
                                                              "aliases": ["--output"]})
    overwrite: bool = field(default=False, metadata={
        "help": "Replace an existing --predictions / --output file that evaluate did not write."})


def evaluate(arguments: EvaluateArguments | None = None, /, **fields) -> dict:
    """Score `model` (a fine-tuned SharedBert or BERT folder, or Hub id) on `split` of a GLUE task (`task` with
    `data_dir` or `dataset`) or of your own `file`; returns the results (metrics, sizes, sources).

    Takes an `EvaluateArguments`, or its fields as keywords, or both (keywords replace fields). `split="test"`
    computes no metrics; `predictions_path` writes one prediction per example (TSV: index, prediction) and
    `results_path` the returned results as JSON, both atomically. Raises DataError/ValueError on bad input."""
    args = replace(arguments, **fields) if arguments is not None else EvaluateArguments(**fields)
    _check_output_files(args)
    started = time.time()
    try:
        classifier = from_pretrained(AutoModelForSequenceClassification, args.model, args.trust_remote_code)
    except (RemoteCodeRefused, FileNotFoundError):
        raise
    except Exception as error:
        raise ValueError(f"Cannot load a sequence classifier from {args.model}: {error}") from error
    config = classifier.config
    model_labels = tuple(config.id2label[i] for i in range(config.num_labels))
    task_data = _load_data(args, model_labels)
    spec = task_data.spec
    if config.num_labels != spec.num_labels:
        raise ValueError(
            f"{args.model} predicts {config.num_labels} label(s) {list(model_labels)} but task {spec.name} has "
            f"{spec.num_labels}: evaluate a model fine-tuned on this task."
        )
    eval_raw = task_data.datasets[args.split]
    if args.max_eval_samples is not None and args.max_eval_samples < len(eval_raw):
        eval_raw = eval_raw.select(range(args.max_eval_samples))
    tok = load_tokenizer(args.model, trust_remote_code=args.trust_remote_code)
    max_length = min(args.max_length, config.max_position_embeddings)  # a small model cannot read further
    eval_set = data_module.tokenize(eval_raw, tok, max_length)
    labelled = args.split != "test"

    with output_folder() as workdir:  # the Trainer needs a folder; nothing is kept
        training = training_arguments(workdir, per_device_eval_batch_size=args.batch_size, evaluations=0)
        trainer = PredictingTrainer(model=classifier, args=training, processing_class=tok,
                                    data_collator=DataCollatorWithPadding(tok))
        output = trainer.predict(eval_set if labelled else eval_set.remove_columns("label"))
    predictions = data_module.predictions_from_logits(spec, output.predictions)
    metrics = data_module.compute_metrics(spec, predictions, eval_set["label"]) if labelled else {}
    if args.predictions_path:
        lines = [PREDICTIONS_HEADER] + [
            f"{i}\t{float(p):.3f}" if spec.is_regression else f"{i}\t{model_labels[int(p)]}"
            for i, p in enumerate(predictions)
        ]
        atomic_write_text(args.predictions_path, "\n".join(lines) + "\n")
    result = {
        "task": spec.name,
        "dataset": spec.dataset_name,
        "split": args.split,
        "metrics": metrics,
        "model": str(args.model),
        "eval_samples": len(eval_set),
        "data_source": task_data.source,
        "predictions": str(args.predictions_path) if args.predictions_path else None,
        "seconds": time.time() - started,
    }
    if args.results_path:
        atomic_write_json(args.results_path, result)
    return result


PREDICTIONS_HEADER = "index\tprediction"


def _check_output_files(args: EvaluateArguments) -> None:
    """Before any work: the predictions and results files are neither an input nor a file of the user's (an earlier
    evaluate's predictions TSV or results JSON is replaced without asking)."""
    inputs = (args.model, args.file, args.data_dir)
    if args.predictions_path:
        check_output_file(args.predictions_path, args.overwrite, inputs=inputs, label="--predictions",
                          earlier_output=_is_earlier_predictions)
    if args.results_path:
        check_output_file(args.results_path, args.overwrite, inputs=inputs, label="--output",
                          earlier_output=_is_earlier_results)


def _is_earlier_predictions(path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.readline().rstrip("\n") == PREDICTIONS_HEADER


def _is_earlier_results(path) -> bool:
    try:
        result = json.loads(open(path, encoding="utf-8").read())
    except (ValueError, OSError):
        return False
    return isinstance(result, dict) and {"task", "split", "metrics", "model", "eval_samples"} <= result.keys()


def _load_data(args: EvaluateArguments, model_labels: tuple):
    """The split to score, checked: your own file (labels as the model's), or the GLUE task's."""
    if args.file:
        labels = None if args.regression else model_labels
        return data_module.load_task(task=args.task, files={args.split: args.file}, text_columns=args.text_columns,
                                     label_column=args.label_column, regression=args.regression, labels=labels,
                                     cache_dir=args.cache_dir)
    return data_module.load_task(task=args.task, data_dir=args.data_dir, dataset=args.dataset, splits=(args.split,),
                                 cache_dir=args.cache_dir)


__all__ = ["EvaluateArguments", "evaluate"]
