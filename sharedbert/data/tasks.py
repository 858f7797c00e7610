"""Labelled tasks: what a task looks like on disk and how it is scored (`TaskSpec`, the six GLUE tasks, your own
files' `custom_task`), tokenisation, and the metrics as GLUE reports them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class DataError(ValueError):
    """A problem with an input file, found before training. The message names the file, the line and the fix."""


@dataclass(frozen=True)
class TaskSpec:
    """What a labelled task looks like on disk and how it is scored.

    `text_columns` / `label_column` name the columns in the files; `labels` are the label values as they appear in
    the files (their order defines the class ids) or None for a regression task; `label_names` are the readable names
    written to the model's `id2label`. `headerless_columns` names the columns of files that have no header row
    (GLUE's CoLA train/dev)."""

    name: str
    text_columns: tuple[str, ...]
    label_column: str
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    main_metric: str
    label_names: tuple[str, ...] | None = None
    folder: str | None = None
    headerless_columns: tuple[str, ...] | None = None
    hub_dataset: str | None = None
    hub_config: str | None = None
    hub_text_columns: tuple[str, ...] = ()
    dataset_name: str | None = None  # how results name the data set, e.g. "glue/sst2"

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def id2label(self) -> dict[int, str]:
        if self.labels is None:
            return {0: "score"}
        return dict(enumerate(self.label_names or self.labels))

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2


def _glue(name, folder, text_columns, label_column, labels, label_names, metrics, hub_text_columns, **extra):
    return TaskSpec(
        name=name,
        folder=folder,
        text_columns=text_columns,
        label_column=label_column,
        labels=labels,
        label_names=label_names,
        metrics=metrics,
        main_metric=metrics[0],
        hub_dataset="nyu-mll/glue",
        hub_config=name,
        hub_text_columns=hub_text_columns,
        dataset_name=f"glue/{name}",
        **extra,
    )


GLUE_TASKS: dict[str, TaskSpec] = {
    "sst2": _glue("sst2", "SST-2", ("sentence",), "label", ("0", "1"), ("negative", "positive"), ("accuracy",),
                  ("sentence",)),
    "cola": _glue("cola", "CoLA", ("sentence",), "label", ("0", "1"), ("unacceptable", "acceptable"),
                  ("matthews_correlation",), ("sentence",),
                  headerless_columns=("source", "label", "original_label", "sentence")),
    "mrpc": _glue("mrpc", "MRPC", ("#1 String", "#2 String"), "Quality", ("0", "1"), ("not_equivalent", "equivalent"),
                  ("f1", "accuracy"), ("sentence1", "sentence2")),
    "rte": _glue("rte", "RTE", ("sentence1", "sentence2"), "label", ("entailment", "not_entailment"), None,
                 ("accuracy",), ("sentence1", "sentence2")),
    "stsb": _glue("stsb", "STS-B", ("sentence1", "sentence2"), "score", None, None, ("spearman", "pearson"),
                  ("sentence1", "sentence2")),
    "wnli": _glue("wnli", "WNLI", ("sentence1", "sentence2"), "label", ("0", "1"), ("not_entailment", "entailment"),
                  ("accuracy",), ("sentence1", "sentence2")),
}

_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "sts": "stsb"}

# GLUE's file name for each split.
GLUE_SPLIT_FILES = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}


def get_task(name: str) -> TaskSpec:
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in GLUE_TASKS:
        raise ValueError(
            f"Unknown task {name!r}: choose one of {sorted(GLUE_TASKS)}, or give your own files with --train-file / "
            "--validation-file, --text-columns and --label-column."
        )
    return GLUE_TASKS[key]


def custom_task(
    name: str,
    text_columns: tuple[str, ...] | list[str],
    label_column: str,
    labels: tuple[str, ...] | None,
    regression: bool = False,
) -> TaskSpec:
    """A TaskSpec for user files. Binary tasks report accuracy and F1, others accuracy; regression Pearson/Spearman."""
    text_columns = tuple(text_columns)
    if not 1 <= len(text_columns) <= 2:
        raise ValueError(f"Give one or two text columns (a sentence or a sentence pair), got {list(text_columns)}.")
    if regression:
        metrics, labels = ("spearman", "pearson"), None
    else:
        metrics = ("accuracy", "f1") if labels is not None and len(labels) == 2 else ("accuracy",)
    return TaskSpec(
        name=name, text_columns=text_columns, label_column=label_column, labels=labels, metrics=metrics,
        main_metric=metrics[0], dataset_name=name,
    )


# Tokens an input is truncated to unless the user says otherwise: fine-tuning's, evaluation's and generation's.
MAX_LENGTH = 128


def tokenize(dataset, tokenizer, max_length: int = MAX_LENGTH, desc: str = "Tokenising"):
    """Batched tokenisation (truncation only; padding is per batch, by the collator). Adds `length` for
    length-grouped sampling."""
    pair = "text_pair" in dataset.column_names

    def encode(batch):
        encoded = tokenizer(batch["text"], batch["text_pair"] if pair else None, truncation=True, max_length=max_length)
        encoded["length"] = [len(ids) for ids in encoded["input_ids"]]
        return encoded

    texts = [column for column in ("text", "text_pair") if column in dataset.column_names]
    return dataset.map(encode, batched=True, remove_columns=texts, desc=desc)


def compute_metrics(spec: TaskSpec, predictions, labels) -> dict[str, float]:
    """The task's metrics. `predictions` are class ids (classification) or scores (regression)."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    results = {}
    for name in spec.metrics:
        if name == "accuracy":
            results[name] = float((predictions == labels).mean())
        elif name == "f1":
            from sklearn.metrics import f1_score

            results[name] = float(f1_score(labels, predictions, average="binary" if spec.num_labels == 2 else "macro"))
        elif name == "matthews_correlation":
            from sklearn.metrics import matthews_corrcoef

            results[name] = float(matthews_corrcoef(labels, predictions))
        elif name == "pearson":
            from scipy.stats import pearsonr

            results[name] = float(pearsonr(predictions, labels)[0])
        elif name == "spearman":
            from scipy.stats import spearmanr

            results[name] = float(spearmanr(predictions, labels)[0])
        else:
            raise ValueError(f"Unknown metric {name!r}.")
    return results


def predictions_from_logits(spec: TaskSpec, logits):
    logits = np.asarray(logits)
    return logits.reshape(-1) if spec.is_regression else logits.argmax(-1)


__all__ = ["DataError", "GLUE_SPLIT_FILES", "GLUE_TASKS", "MAX_LENGTH", "TaskSpec", "compute_metrics", "custom_task", "get_task",
           "predictions_from_logits", "tokenize"]
