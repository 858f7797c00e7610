"""The `Trainer` set-up shared by `pretrain`, `finetune`, `evaluate` and the demo.

* `training_arguments`: transformers 5 `TrainingArguments` with this project's defaults (no reporting integrations,
  progress bars on, warm-up as a fraction, evaluation a few times per run).
* `StepTimer`: wall-clock seconds between consecutive optimizer steps (steady-state throughput, start-up excluded).
* `KeepBestCallback`: remembers the weights of the best evaluation in memory and restores them at the end, so the
  saved model is the best one without keeping a checkpoint per evaluation.
* `ResumableTrainer`: a Trainer whose own checkpoints are written atomically and resumed exactly after a kill or
  Ctrl-C; `EpochSeededSampler` and `BatchSeededCollator` keep the random streams exact across a restart.
* `atomic_write_json`, `check_output_dir` and `output_folder`: outputs appear complete or not at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import math
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME, TRAINING_ARGS_NAME
from transformers.utils import logging

from ..atomic import atomic_directory, atomic_write_bytes, atomic_write_text, check_output_folder
from .checkpointing import (
    CHECKPOINT_PREFIX,
    OPTIMIZER_FILE,
    RNG_FILE,
    RUN_STATE_FILE,
    optimizer_from_files,
    read_run_state,
    restore_weights,
    world_size,
)

logger = logging.get_logger(__name__)

BEST_MODEL_FILE = "best_model.safetensors"  # in a checkpoint: the weights of the best evaluation so far (KeepBest)
RNG_STATE_FILE = "rng_state.pth"  # Trainer's name for a one-process run's generator states


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


class KeepBestCallback(TrainerCallback):
    """Keep a copy of the weights at the best evaluation of `metric` (in memory) and load it when training ends."""

    def __init__(self, metric: str, greater_is_better: bool = True):
        self.metric = metric if metric.startswith("eval_") else f"eval_{metric}"
        self.greater_is_better = greater_is_better
        self.best_value: float | None = None
        self.best_metrics: dict | None = None
        self.best_step: int | None = None
        self.best_state: dict | None = None
        # The last evaluation's metrics: what a run reports when no evaluation could win (every one NaN, e.g. a
        # correlation of constant predictions), with the final weights.
        self.last_metrics: dict | None = None

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
    """A `Trainer` whose checkpoints appear complete or not at all, and resume exactly after a kill or Ctrl-C.

    A checkpoint is Trainer's own: `checkpoint_dir/checkpoint-STEP` with the weights as safetensors, `optimizer.pt`,
    `scheduler.pt`, `rng_state.pth` (read back with `torch.load(..., weights_only=True)`, which runs no code) and
    `trainer_state.json`, plus the tokenizer, `run_state.json` (the caller's `run_signature`, the precision, the
    `KeepBestCallback` record) and that record's weights in `best_model.safetensors`. It is written into a temporary
    sibling renamed into place, and older checkpoints are then deleted. Checkpoints of earlier sharedbert versions
    (optimizer and RNG state in safetensors and JSON) resume too: `train` first adds Trainer's files to them.

    Losses are averaged per batch: our models' losses are means, not token sums, so Trainer must not rescale them by
    the number of processes as it does for models that accept `num_items_in_batch` (BERT's heads declare that they
    do, then ignore it)."""

    def __init__(self, *args, checkpoint_dir=None, run_signature: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.model_accepts_loss_kwargs = False
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.run_signature = run_signature or {}

    def _keep_best(self) -> KeepBestCallback | None:
        return next((cb for cb in self.callback_handler.callbacks if isinstance(cb, KeepBestCallback)), None)

    def checkpoint_record(self) -> dict:
        """What `run_state.json` records beside Trainer's own state (a subclass may add to it)."""
        keep_best = self._keep_best()
        has_best = keep_best is not None and keep_best.best_state is not None
        return {
            "run_signature": self.run_signature,
            # Not in the signature: fp32 master weights and AdamW state are the same in either precision, so a
            # checkpoint may be resumed in the other one (e.g. on a machine without native bf16).
            "precision": "bf16" if self.args.bf16 else "fp32",
            "keep_best": {"value": keep_best.best_value, "metrics": keep_best.best_metrics,
                          "step": keep_best.best_step} if has_best else None,
        }

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        if resume_from_checkpoint not in (None, False, True) and self.args.should_save:
            add_trainer_files(resume_from_checkpoint)
        self.accelerator.wait_for_everyone()
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _save_checkpoint(self, model, trial) -> None:
        """Trainer writes `output_dir/checkpoint-STEP` file by file where the next run looks for it, so a kill during
        a save leaves a half-written checkpoint that is then resumed. The same files are written here into a temporary
        sibling renamed into place (`atomic.atomic_directory`), with the tokenizer, `run_state.json` and the best
        evaluation's weights; older checkpoints are then deleted. Every process's RNG state is gathered to the one
        that writes. Needed by tests/training/test_resume.py::test_pretrain_killed_at_a_random_moment_resumes_to_the_
        same_result (it kills the run at a random moment after a checkpoint folder appears, then resumes it)."""
        if self.checkpoint_dir is None:
            raise ValueError("ResumableTrainer needs checkpoint_dir to save checkpoints.")
        rng_states = [_rng_state()]
        if self.args.world_size > 1:
            rng_states = [None] * self.args.world_size
            dist.all_gather_object(rng_states, _rng_state())
        if self.args.should_save:
            final = self.checkpoint_dir / f"{CHECKPOINT_PREFIX}{self.state.global_step}"
            keep_best = self._keep_best()
            with atomic_directory(final) as tmp:
                self.save_model(str(tmp), _internal_call=True)  # safetensors weights, config and tokenizer
                (tmp / TRAINING_ARGS_NAME).unlink(missing_ok=True)  # a pickle of the arguments, never read back
                self._save_optimizer_and_scheduler(str(tmp))
                for rank, state in enumerate(rng_states):
                    torch.save(state, tmp / (RNG_STATE_FILE if len(rng_states) == 1 else f"rng_state_{rank}.pth"))
                self.state.save_to_json(str(tmp / "trainer_state.json"))
                (tmp / RUN_STATE_FILE).write_text(json.dumps(self.checkpoint_record(), indent=1), encoding="utf-8")
                if keep_best is not None and keep_best.best_state is not None:
                    save_file({k: v.contiguous() for k, v in keep_best.best_state.items()}, str(tmp / BEST_MODEL_FILE))
            for older in self.checkpoint_dir.glob(f"{CHECKPOINT_PREFIX}*"):
                if older.name != final.name and older.is_dir():
                    shutil.rmtree(older, ignore_errors=True)
        self.accelerator.wait_for_everyone()

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None) -> None:
        """Trainer loads the weights non-strictly (missing or unexpected names only warn), so a checkpoint of another
        architecture would resume half-loaded; here they load strictly or fail naming the fix. The `KeepBestCallback`
        record is restored too. Needed by tests/training/test_heal.py::test_resume_continues_exactly_like_an_
        uninterrupted_run (a checkpoint of another attention type is refused)."""
        folder = Path(resume_from_checkpoint)
        restore_weights(folder, self.accelerator.unwrap_model(model or self.model))
        keep_best = self._keep_best()
        best = read_run_state(folder).get("keep_best")
        if keep_best is not None and best:
            keep_best.best_value, keep_best.best_metrics = best["value"], best["metrics"]
            keep_best.best_step = best["step"]
            keep_best.best_state = load_file(str(folder / BEST_MODEL_FILE))

    def _get_train_sampler(self, train_dataset=None):
        """transformers' shuffling samplers draw from the global generator when the data loader is iterated, which a
        resumed run does before Trainer puts the checkpoint's generator state back, so the order changed; wrapped in
        `EpochSeededSampler` it depends on (seed, epoch) alone. Needed by tests/training/test_resume.py::
        test_finetune_killed_at_a_random_moment_resumes_to_the_same_result."""
        sampler = super()._get_train_sampler(train_dataset)
        if sampler is None or isinstance(sampler, torch.utils.data.SequentialSampler):
            return sampler
        return EpochSeededSampler(sampler, self.args.data_seed if self.args.data_seed is not None else self.args.seed)


def _rng_state() -> dict:
    """This process's generator states as Trainer's `rng_state.pth` holds them."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.random.get_rng_state()
    return state


def add_trainer_files(folder) -> None:
    """Give a checkpoint written by an earlier sharedbert (optimizer and RNG state in safetensors and JSON, see
    `checkpointing`) Trainer's `optimizer.pt`, `scheduler.pt` and `rng_state.pth`, so Trainer resumes it as it
    resumes its own. A checkpoint that has them is left alone."""
    folder = Path(folder)
    if not (folder / OPTIMIZER_FILE).is_file() or (folder / OPTIMIZER_NAME).is_file():
        return
    state = read_run_state(folder)

    def write(name, obj):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        atomic_write_bytes(folder / name, buffer.getvalue())

    rng_tensors, metas = load_file(str(folder / RNG_FILE)), state["rng"]
    for rank, meta in enumerate(metas):
        version, internal, gauss = meta["python"]
        kind, keys, position, has_gauss, cached_gaussian = meta["numpy"]
        write(RNG_STATE_FILE if len(metas) == 1 else f"rng_state_{rank}.pth", {
            "python": (version, tuple(internal), gauss),
            "numpy": (kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached_gaussian),
            "cpu": rng_tensors[f"{rank}.torch"]})
    write(SCHEDULER_NAME, state["scheduler"])
    # The optimizer last: its file is what marks the checkpoint as done.
    write(OPTIMIZER_NAME, optimizer_from_files(load_file(str(folder / OPTIMIZER_FILE)), state["optimizer"]))
    logger.info("Checkpoint %s of an earlier sharedbert version: added Trainer's optimizer, scheduler and RNG files.",
                folder)


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
    "add_trainer_files",
    "atomic_write_json",
    "check_output_dir",
    "input_paths",
    "output_folder",
    "save_model",
    "save_run",
    "training_arguments",
]
