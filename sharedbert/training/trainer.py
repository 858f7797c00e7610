"""The `Trainer` set-up shared by `pretrain`, `finetune`, `evaluate` and the demo.

* `training_arguments`: transformers 5 `TrainingArguments` with this project's defaults (no reporting integrations,
  progress bars on, warm-up as a fraction, evaluation a few times per run).
* `StepTimer`: wall-clock seconds between consecutive optimizer steps (steady-state throughput, start-up excluded).
* `KeepBestCallback`: remembers the weights of the best evaluation in memory and restores them at the end, so the
  saved model is the best one without keeping a checkpoint per evaluation; its record is kept in Trainer's
  checkpoints.
* `ResumableTrainer`: a Trainer whose own checkpoints resume exactly after a kill or Ctrl-C; `EpochSeededSampler` and
  `BatchSeededCollator` keep the random streams exact across a restart.
* `atomic_write_json`, `check_output_dir` and `output_folder`: outputs appear complete or not at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.utils import logging

from ..atomic import atomic_directory, atomic_write_bytes, atomic_write_text, check_output_folder
from .checkpointing import (
    CHECKPOINT_PREFIX,
    KEEP_CHECKPOINTS,
    RunRecord,
    SavedStateCallback,
    restore_weights,
    world_size,
)

logger = logging.get_logger(__name__)

BEST_MODEL_FILE = "best_model.safetensors"  # in a checkpoint: the weights of the best evaluation so far (KeepBest)


# ----------------------------------------------------------------------------------------------------------------------
# Atomic outputs
# ----------------------------------------------------------------------------------------------------------------------


def atomic_write_json(path, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


# The fields of a job's arguments that name what it reads: its output folder may be none of them, nor lie inside or
# hold one (`atomic.check_output_folder`).
INPUT_FIELDS = ("src", "model", "tokenizer", "config", "corpus", "data_dir", "train_file", "validation_file",
                "distill_from")


def input_paths(args) -> list:
    """The paths among `args`' `INPUT_FIELDS` (a list field, such as `corpus`, gives each of its entries)."""
    found = []
    for name in INPUT_FIELDS:
        value = getattr(args, name, None)
        found += [str(v) for v in value] if isinstance(value, (list, tuple)) else [] if value is None else [str(value)]
    return found


def check_output_dir(output_dir, overwrite: bool, args=None) -> Path:
    """Refuse to replace a non-empty folder unless asked (a finished run is valuable), and an output that is, lies in
    or holds one of the job's inputs (`input_paths(args)`): the package's one rule, `atomic.check_output_folder`,
    which first cleans up after a run that was killed while writing the folder (its temporary siblings)."""
    inputs = input_paths(args) if args is not None else ()
    return check_output_folder(output_dir, overwrite, inputs=inputs, label="--output-dir")


# ----------------------------------------------------------------------------------------------------------------------
# Trainer set-up
# ----------------------------------------------------------------------------------------------------------------------


# This project's choices where they differ from TrainingArguments' defaults (their one owner): the jobs' arguments
# (training.arguments.JobTrainingArguments) take them as their fields' defaults, and `training_arguments` for a caller
# without a job's arguments; a caller's fields override them.
DEFAULTS = dict(
    per_device_train_batch_size=32,
    per_device_eval_batch_size=64,
    warmup_steps=0.06,  # a float in [0, 1) is a fraction of the total steps (transformers 5 has no warmup_ratio)
    weight_decay=0.01,
    save_strategy="no",  # KeepBestCallback keeps the best weights; the caller saves them
    disable_tqdm=False,
    # Every parameter takes part in every forward pass (shared layers included), so DDP need not search for unused
    # ones.
    ddp_find_unused_parameters=False,
)


def training_arguments(output_dir, *, num_train_examples: int | None = None, evaluations: int | None = None,
                       group_by_length: bool = True, precision: str = "fp32", arguments_class=TrainingArguments,
                       arguments: TrainingArguments | None = None, **fields) -> TrainingArguments:
    """The TrainingArguments a run's Trainer takes: a job's `arguments` (a TrainingArguments subclass instance, such
    as `finetuning.FinetuneArguments`), or else `arguments_class` (TrainingArguments, or a subclass such as
    Seq2SeqTrainingArguments) with this project's `DEFAULTS`; either with any of `fields` (TrainingArguments' own
    names) on top. Finished for a run of `num_train_epochs` over `num_train_examples` (or `max_steps`) that
    evaluates at most `evaluations` times (default: the arguments' `evaluations`, else 4): every
    ceil(steps / evaluations) steps and at the last step (0: only at the end, done by the caller); it logs the loss
    about 10 times unless `logging_steps` says otherwise, and draws data with the training seed. `precision` is a
    resolved choice of `precision.resolve_precision`: "bf16" trains under bf16 autocast with fp32 master weights
    (Trainer's `bf16`, CPU autocast through accelerate), "fp32" without."""
    if precision not in ("bf16", "fp32"):
        raise ValueError(f"precision must be resolved to 'bf16' or 'fp32' first (resolve_precision), got "
                         f"{precision!r}.")
    if arguments is None:
        fields = {**DEFAULTS, **fields}
        logging_steps = fields.pop("logging_steps", None)
        arguments = arguments_class(output_dir=str(output_dir), **fields)
    else:
        logging_steps = fields.pop("logging_steps", arguments.logging_steps)
        arguments = dataclasses.replace(arguments, **fields) if fields else arguments
    if evaluations is None:
        evaluations = getattr(arguments, "evaluations", 4)
    total_steps = arguments.max_steps
    if total_steps <= 0 and num_train_examples is not None:
        per_step = arguments.per_device_train_batch_size * world_size() * arguments.gradient_accumulation_steps
        total_steps = max(1, math.ceil(math.ceil(num_train_examples / per_step) * arguments.num_train_epochs))
    # Rounded up so the last of the `evaluations` lands on the final step (the Trainer evaluates there when the step
    # count is not a multiple of eval_steps); rounding down gave one evaluation too many.
    eval_steps = max(1, math.ceil(total_steps / evaluations)) if evaluations > 0 and total_steps > 0 else None
    return dataclasses.replace(
        arguments,
        output_dir=str(output_dir),
        eval_strategy="steps" if eval_steps else "no",
        eval_steps=eval_steps,
        logging_steps=logging_steps or max(1, min(50, (total_steps or 200) // 10)),
        data_seed=arguments.data_seed if arguments.data_seed is not None else arguments.seed,
        train_sampling_strategy="group_by_length" if group_by_length else "random",
        use_cpu=not torch.cuda.is_available(),
        bf16=precision == "bf16",
    )


class StepTimer(TrainerCallback):
    """Wall-clock seconds between consecutive optimizer steps (`intervals`): each holds the step's data loading and
    collation, forward, backward and optimizer update, and any logging or checkpoint it triggered. The start-up
    before the first step (data loader, optimizer creation, a resumed run's skipping) is not in it, so the median
    interval is the steady-state step time."""

    def __init__(self):
        self.intervals: list[float] = []
        self._last: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._last = None

    def on_step_end(self, args, state, control, **kwargs):
        now = time.perf_counter()
        if self._last is not None:
            self.intervals.append(now - self._last)
        self._last = now

    def summary(self) -> dict:
        """{"median", "mean", "n"} of the intervals in seconds (None without two steps)."""
        if not self.intervals:
            return {"median": None, "mean": None, "n": 0}
        return {"median": statistics.median(self.intervals), "mean": statistics.fmean(self.intervals),
                "n": len(self.intervals)}


class KeepBestCallback(SavedStateCallback):
    """Keep a copy of the weights at the best evaluation of `metric` (in memory) and load it when training ends. Its
    record is kept in Trainer's checkpoints (`SavedStateCallback`), the weights beside it in best_model.safetensors,
    so a resumed run keeps the best evaluation made before the restart."""

    def __init__(self, metric: str = "loss", greater_is_better: bool = True):
        self.metric = metric if metric.startswith("eval_") else f"eval_{metric}"
        self.greater_is_better = greater_is_better
        self.best_value: float | None = None
        self.best_metrics: dict | None = None
        self.best_step: int | None = None
        self.best_state: dict | None = None
        # The last evaluation's metrics: what a run reports when no evaluation could win (every one NaN, e.g. a
        # correlation of constant predictions), with the final weights.
        self.last_metrics: dict | None = None

    def state_args(self) -> dict:
        return {"metric": self.metric, "greater_is_better": self.greater_is_better}

    def attributes(self) -> dict:
        return {"best_value": self.best_value, "best_metrics": self.best_metrics, "best_step": self.best_step,
                "last_metrics": self.last_metrics,
                "checkpoint_files": [BEST_MODEL_FILE] if self.best_state is not None else []}

    def restore_state(self, attributes: dict, folder: Path) -> None:
        super().restore_state(attributes, folder)
        self.best_state = None
        if self.best_step is not None:
            if not (folder / BEST_MODEL_FILE).is_file():
                raise ValueError(f"{folder} records a best evaluation at step {self.best_step} but has no "
                                 f"{BEST_MODEL_FILE}; resume from the checkpoint folder the run wrote, or start "
                                 "afresh (--no-resume).")
            self.best_state = load_file(str(folder / BEST_MODEL_FILE))

    def on_save(self, args, state, control, **kwargs):
        """Trainer has just written checkpoint-STEP: the best weights go beside its state (renamed into place, so a
        kill leaves the file whole or absent, and the checkpoint counts as incomplete without it)."""
        folder = Path(args.output_dir) / f"{CHECKPOINT_PREFIX}{state.global_step}"
        if args.should_save and self.best_state is not None and folder.is_dir():
            atomic_write_bytes(folder / BEST_MODEL_FILE, save({k: v.contiguous() for k, v in self.best_state.items()}))

    @property
    def reported_metrics(self) -> dict | None:
        """The best evaluation's metrics, else the last evaluation's."""
        return self.best_metrics if self.best_metrics is not None else self.last_metrics

    def is_better(self, value: float) -> bool:
        if value != value:  # NaN never wins
            return False
        if self.best_value is None:
            return True
        return value > self.best_value if self.greater_is_better else value < self.best_value

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        if not metrics or self.metric not in metrics or model is None:
            return
        self.last_metrics = dict(metrics)
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


class InOrderPredictions:
    """A Trainer mixin whose `predict`/`evaluate` read the dataset in its own order.

    transformers 5 also applies `train_sampling_strategy="group_by_length"` (which `training_arguments` sets) to
    evaluation: `_get_eval_sampler` returns a shuffled `LengthGroupedSampler`, so `predict(...).predictions` come out
    in another order than the dataset's. Metrics the Trainer computes from its own `label_ids` are unaffected, but any
    caller that pairs the predictions with the dataset (a predictions file, references for BLEU/chrF) pairs them
    with the wrong rows. Needed by tests/training/test_training.py::test_evaluate_writes_predictions_in_the_datasets_order."""

    def _get_eval_sampler(self, eval_dataset):
        if eval_dataset is None or not hasattr(eval_dataset, "__len__"):
            return None
        return torch.utils.data.SequentialSampler(eval_dataset)


class PredictingTrainer(InOrderPredictions, Trainer):
    """A `Trainer` whose predictions follow the dataset's order (`InOrderPredictions`)."""


class ResumableTrainer(InOrderPredictions, Trainer):
    """A `Trainer` whose checkpoints resume exactly after a kill or Ctrl-C.

    A checkpoint is Trainer's own, written by Trainer's own save into `checkpoint_dir/checkpoint-STEP` (the
    Trainer's `output_dir`; a job saves its model elsewhere): the weights as safetensors, `optimizer.pt`,
    `scheduler.pt`, `rng_state.pth` (read back with `torch.load(..., weights_only=True)`, which runs no code), the
    tokenizer and `trainer_state.json`, written last, which holds the `RunRecord` (the caller's `run_signature`, the
    precision, its `record`) and the other `SavedStateCallback`s' state (the `KeepBestCallback` record, whose weights
    go in `best_model.safetensors`). Trainer keeps `save_total_limit` checkpoints (`KEEP_CHECKPOINTS` unless set), so
    a kill during a save leaves the one before it; `checkpointing.resume_point` picks the newest complete one.

    Losses are averaged per batch: our models' losses are means, not token sums, so Trainer must not rescale them by
    the number of processes as it does for models that accept `num_items_in_batch` (BERT's heads declare that they
    do, then ignore it)."""

    def __init__(self, *args, checkpoint_dir=None, run_signature: dict | None = None, record: dict | None = None,
                 **kwargs):
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        if self.checkpoint_dir is not None:
            arguments = kwargs["args"] if "args" in kwargs else args[1]
            arguments = dataclasses.replace(arguments, output_dir=str(self.checkpoint_dir),
                                            save_total_limit=arguments.save_total_limit or KEEP_CHECKPOINTS)
            if "args" in kwargs:
                kwargs["args"] = arguments
            else:
                args = (args[0], arguments, *args[2:])
        super().__init__(*args, **kwargs)
        self.model_accepts_loss_kwargs = False
        self.run_signature = run_signature or {}
        self.add_callback(RunRecord(self.run_signature, "bf16" if self.args.bf16 else "fp32", record))

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None) -> None:
        """Trainer loads the weights non-strictly (missing or unexpected names only warn), so a checkpoint of another
        architecture would resume half-loaded; here they load strictly or fail naming the fix. Needed by
        tests/training/test_heal.py::test_resume_continues_exactly_like_an_uninterrupted_run (a checkpoint of another
        attention type is refused)."""
        restore_weights(Path(resume_from_checkpoint), self.accelerator.unwrap_model(model or self.model))

    def _get_train_sampler(self, train_dataset=None):
        """transformers' shuffling samplers draw from the global generator when the data loader is iterated, which a
        resumed run does before Trainer puts the checkpoint's generator state back, so the order changed; wrapped in
        `EpochSeededSampler` it depends on (seed, epoch) alone. Needed by tests/training/test_resume.py::
        test_finetune_killed_at_a_random_moment_resumes_to_the_same_result."""
        sampler = super()._get_train_sampler(train_dataset)
        if sampler is None or isinstance(sampler, torch.utils.data.SequentialSampler):
            return sampler
        return EpochSeededSampler(sampler, self.args.data_seed if self.args.data_seed is not None else self.args.seed)


class EpochSeededSampler(torch.utils.data.Sampler):
    """Wraps a shuffling sampler so that its order depends on (seed, epoch) alone and leaves torch's global generator
    untouched: a run resumed mid-epoch draws the same order, and the random streams of masking and dropout continue
    exactly where the checkpoint left them. (transformers' samplers shuffle with the global generator.)"""

    def __init__(self, sampler, seed: int):
        self.sampler, self.seed, self.epoch = sampler, seed, 0

    def set_epoch(self, epoch: int) -> None:  # called by Trainer / accelerate at each epoch start
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed + self.epoch)
            order = list(self.sampler)
        return iter(order)


class BatchSeededCollator:
    """Runs a collator that draws random numbers (MLM masking) with torch's generator seeded from `seed` and the
    batch's own token ids, leaving the global stream untouched. The masks are then a function of the batch alone, the
    same whenever it is collated. (Trainer puts a checkpoint's generator states back only once the skipped batches are
    behind and the next one fetched, and accelerate collates one batch ahead, so masks drawn from the global stream
    would come out in another order after a restart.)"""

    def __init__(self, collate, seed: int):
        self.collate, self.seed = collate, seed

    def __call__(self, features):
        digest = hashlib.blake2b(str(self.seed).encode(), digest_size=8)
        for feature in features:
            digest.update(np.asarray(feature["input_ids"], dtype=np.int64).tobytes())
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int.from_bytes(digest.digest(), "little") & (2**63 - 1))
            return self.collate(features)


@contextlib.contextmanager
def output_folder(output_dir=None):
    """The Trainer's output folder: the atomic `output_dir` (renamed into place when the block ends without an error)
    when given, else a throw-away folder (for a process that does not save, or a run that keeps nothing)."""
    if output_dir is not None:
        with atomic_directory(output_dir) as folder:
            yield folder
    else:
        with tempfile.TemporaryDirectory(prefix="sharedbert-") as scratch:
            yield Path(scratch)


def save_model(model, tokenizer, folder) -> None:
    """save_pretrained (safetensors) for the model and its tokenizer, weights contiguous."""
    model.save_pretrained(str(folder))
    if tokenizer is not None:
        tokenizer.save_pretrained(str(folder))


def save_run(trainer: Trainer, tokenizer, folder: Path, results_name: str, results: dict) -> None:
    """What a finished run keeps in its output folder: the trained model and tokenizer, its results as JSON
    (`results_name`) and the Trainer's log (trainer_log.json)."""
    save_model(trainer.model, tokenizer, folder)
    atomic_write_json(folder / results_name, results)
    atomic_write_json(folder / "trainer_log.json", trainer.state.log_history)


__all__ = [
    "BatchSeededCollator",
    "EpochSeededSampler",
    "InOrderPredictions",
    "KeepBestCallback",
    "PredictingTrainer",
    "ResumableTrainer",
    "StepTimer",
    "atomic_write_json",
    "check_output_dir",
    "input_paths",
    "output_folder",
    "save_model",
    "save_run",
    "training_arguments",
]
