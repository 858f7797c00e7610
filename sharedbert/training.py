"""The `Trainer` set-up shared by `sharedbert pretrain`, `finetune`, `evaluate` and `demo`.

* `training_arguments`: transformers 5 `TrainingArguments` with this project's defaults (no reporting integrations,
  progress bars on, warm-up as a fraction, evaluation a few times per run).
* `KeepBestCallback`: remembers the weights of the best evaluation in memory and restores them at the end, so the
  saved model is the best one without writing Trainer checkpoints (which would pickle optimizer state and arguments).
* `load_classifier`: a sequence classifier from a SharedBert folder, or from a BERT checkpoint converted on the fly
  with `sharedbert.convert.from_bert` (or kept as BERT, for baselines).
* `atomic_write_json` (and `sharedbert.atomic`'s `atomic_directory` / `atomic_write_text`, re-exported): outputs
  appear complete or not at all.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch
from transformers import TrainerCallback, TrainingArguments

from .atomic import atomic_directory, atomic_write_text


# ----------------------------------------------------------------------------------------------------------------------
# Atomic outputs
# ----------------------------------------------------------------------------------------------------------------------


def atomic_write_json(path, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def check_output_dir(output_dir, overwrite: bool) -> Path:
    """Refuse to replace a non-empty folder unless asked (a finished run is valuable)."""
    path = Path(output_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--output-dir {path} exists and is not a folder.")
    if path.is_dir() and any(path.iterdir()) and not overwrite:
        raise ValueError(f"--output-dir {path} exists and is not empty; pass --overwrite to replace it.")
    return path


# ----------------------------------------------------------------------------------------------------------------------
# Trainer set-up
# ----------------------------------------------------------------------------------------------------------------------


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def training_arguments(
    output_dir,
    *,
    batch_size: int = 32,
    eval_batch_size: int = 64,
    learning_rate: float = 5e-5,
    epochs: float = 3.0,
    max_steps: int = -1,
    warmup: float = 0.06,
    weight_decay: float = 0.01,
    num_train_examples: int | None = None,
    evaluations: int = 4,
    group_by_length: bool = True,
    seed: int = 42,
    logging_steps: int | None = None,
    **extra,
) -> TrainingArguments:
    """TrainingArguments for a run of `epochs` (or `max_steps`) that evaluates `evaluations` times (0: only at the
    end, done by the caller). `warmup` is a fraction of the steps (transformers 5 has no `warmup_ratio`)."""
    total_steps = max_steps
    if total_steps <= 0 and num_train_examples is not None:
        per_step = batch_size * world_size() * extra.get("gradient_accumulation_steps", 1)
        total_steps = max(1, math.ceil(math.ceil(num_train_examples / per_step) * epochs))
    eval_steps = max(1, total_steps // evaluations) if evaluations > 0 and total_steps > 0 else None
    return TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=eval_batch_size,
        learning_rate=learning_rate,
        num_train_epochs=epochs,
        max_steps=max_steps,
        warmup_steps=warmup,  # a float in [0, 1) is a fraction of the total steps
        weight_decay=weight_decay,
        eval_strategy="steps" if eval_steps else "no",
        eval_steps=eval_steps,
        save_strategy="no",  # KeepBestCallback keeps the best weights; the caller saves them
        logging_strategy="steps",
        logging_steps=logging_steps or max(1, min(50, (total_steps or 200) // 10)),
        train_sampling_strategy="group_by_length" if group_by_length else "random",
        report_to="none",
        disable_tqdm=False,
        seed=seed,
        data_seed=seed,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        # Every parameter takes part in every forward pass (shared layers included), so DDP need not search for
        # unused ones.
        ddp_find_unused_parameters=False,
        **extra,
    )


class KeepBestCallback(TrainerCallback):
    """Keep a copy of the weights at the best evaluation of `metric` (in memory) and load it when training ends."""

    def __init__(self, metric: str, greater_is_better: bool = True):
        self.metric = metric if metric.startswith("eval_") else f"eval_{metric}"
        self.greater_is_better = greater_is_better
        self.best_value: float | None = None
        self.best_metrics: dict | None = None
        self.best_step: int | None = None
        self.best_state: dict | None = None

    def is_better(self, value: float) -> bool:
        if value != value:  # NaN never wins
            return False
        if self.best_value is None:
            return True
        return value > self.best_value if self.greater_is_better else value < self.best_value

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        if not metrics or self.metric not in metrics or model is None:
            return
        if self.is_better(metrics[self.metric]):
            self.best_value = metrics[self.metric]
            self.best_metrics = dict(metrics)
            self.best_step = state.global_step
            self.best_state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}

    def restore(self, model) -> bool:
        """Load the best weights into `model`; False if there was no evaluation."""
        if self.best_state is None:
            return False
        model.load_state_dict(self.best_state)
        return True


def count_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (a tensor shared across layers or tied between embedding and decoder counts once)."""
    seen, total = set(), 0
    for parameter in model.parameters():  # `parameters()` already yields each shared tensor once
        if id(parameter) not in seen:
            seen.add(id(parameter))
            total += parameter.numel()
    return total


# ----------------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------------

SHARING_OPTIONS = ("attention_type", "layer_sharing", "num_unique_layers", "sharing_order")


def model_type_of(model_name_or_path) -> str:
    """`model_type` of a local folder (from config.json) or a Hub id (through AutoConfig)."""
    path = Path(str(model_name_or_path))
    if path.is_dir():
        config_file = path / "config.json"
        if not config_file.is_file():
            raise ValueError(f"{path} has no config.json: it is not a transformers model folder.")
        return json.loads(config_file.read_text(encoding="utf-8")).get("model_type", "")
    if path.exists():
        raise ValueError(f"{path} is a file; give the model folder.")
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(model_name_or_path), trust_remote_code=True).model_type
    except Exception as error:
        raise ValueError(
            f"{model_name_or_path}: not a local folder, and not reachable as a Hub model id ({error})."
        ) from error


def load_tokenizer(model_name_or_path, tokenizer=None):
    from transformers import AutoTokenizer

    source = tokenizer or model_name_or_path
    try:
        return AutoTokenizer.from_pretrained(str(source), trust_remote_code=True)
    except Exception as error:
        raise ValueError(
            f"No usable tokenizer in {source} ({error}); pass --tokenizer with a tokenizer folder."
        ) from error


def load_classifier(model_name_or_path, spec, keep_bert: bool = False, fit_method: str | None = None, **sharing):
    """A sequence classifier for `spec` (a `data.TaskSpec`).

    * A BERT checkpoint is converted with `from_bert` (attention type "shared" unless `sharing` says otherwise;
      `fit_method` as from_bert's, default its "auto"), or loaded as `BertForSequenceClassification` when
      `keep_bert` (the unconverted baseline).
    * A SharedBert folder is loaded as it is; the sharing options must then be left unset (they are fixed by the
      weights).
    Returns (model, description) where description says what was done."""
    from transformers import AutoModelForSequenceClassification, BertForSequenceClassification

    from . import SharedBertForSequenceClassification
    from .convert import from_bert, resolve_fit_method

    sharing = {key: value for key, value in sharing.items() if value is not None}
    unknown = set(sharing) - set(SHARING_OPTIONS)
    if unknown:
        raise TypeError(f"Unknown options {sorted(unknown)}; expected some of {SHARING_OPTIONS}.")
    head = dict(
        num_labels=spec.num_labels,
        id2label=spec.id2label,
        label2id={name: i for i, name in spec.id2label.items()},
        problem_type="regression" if spec.is_regression else "single_label_classification",
    )
    model_type = model_type_of(model_name_or_path)
    if model_type == "bert":
        if keep_bert:
            if sharing or fit_method is not None:
                raise ValueError("Conversion options (attention type, sharing, fit method) cannot be used with the "
                                 "unconverted BERT baseline.")
            model = BertForSequenceClassification.from_pretrained(str(model_name_or_path), **head)
            return model, f"BERT checkpoint {model_name_or_path} (unconverted)"
        sharing.setdefault("attention_type", "shared")
        fit = {"fit_method": fit_method} if fit_method is not None else {}
        model = from_bert(str(model_name_or_path), model_class=SharedBertForSequenceClassification, **fit, **sharing,
                          **head)
        model.train()
        used = resolve_fit_method(fit_method or "auto", sharing["attention_type"])
        described = ", ".join(f"{key}={value}" for key, value in {**sharing, "fit_method": used}.items())
        return model, f"BERT checkpoint {model_name_or_path} converted with from_bert ({described})"
    if model_type == "sharedbert":
        if fit_method is not None:
            raise ValueError(f"{model_name_or_path} is already a SharedBert: fit_method applies to converting BERT.")
        config_file = Path(str(model_name_or_path)) / "config.json"
        saved = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
        # A classifier trained for another label set gets a new head of the right size (the encoder must still fit).
        new_head = len(saved.get("id2label") or {}) not in (0, spec.num_labels)
        model = AutoModelForSequenceClassification.from_pretrained(
            str(model_name_or_path), trust_remote_code=True, ignore_mismatched_sizes=new_head, **head
        )
        conflicts = {k: v for k, v in sharing.items() if getattr(model.config, k) != v}
        if conflicts:
            fixed = {k: getattr(model.config, k) for k in conflicts}
            raise ValueError(
                f"{model_name_or_path} is already a SharedBert with {fixed}; options {conflicts} only apply when "
                "converting a BERT checkpoint. Drop them, or start from the BERT checkpoint."
            )
        return model, f"SharedBert model {model_name_or_path}"
    raise ValueError(
        f"{model_name_or_path} is a {model_type!r} model; give a SharedBert folder or a BERT checkpoint "
        "(model_type 'bert'), which is converted with from_bert."
    )


def save_model(model, tokenizer, folder) -> None:
    """save_pretrained (safetensors) for the model and its tokenizer, weights contiguous."""
    model.save_pretrained(str(folder))
    if tokenizer is not None:
        tokenizer.save_pretrained(str(folder))


__all__ = [
    "KeepBestCallback",
    "atomic_directory",
    "atomic_write_json",
    "atomic_write_text",
    "check_output_dir",
    "count_parameters",
    "is_main_process",
    "load_classifier",
    "load_tokenizer",
    "model_type_of",
    "save_model",
    "training_arguments",
]
