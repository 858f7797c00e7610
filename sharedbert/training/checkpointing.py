"""A Trainer run's checkpoints: where they go, which one a run resumes, when one is saved, and Ctrl-C as "save and
stop". Used by `pretrain`, `finetune` and `seq2seq` fine-tuning (through `trainer.ResumableTrainer`) and by healing.

The checkpoints are Trainer's own, written by Trainer's own save: `checkpoint-STEP/` folders in the run's checkpoint
folder (the Trainer's `output_dir`) with the weights as safetensors, the optimizer, scheduler, scaler and generator
states as Trainer's torch files (`optimizer.pt`, `scheduler.pt`, `rng_state.pth`), which transformers 5 reads back with
`torch.load(weights_only=True)`, torch's restricted unpickler that runs no code, and `trainer_state.json`, which
Trainer writes last. A kill during a save leaves a folder without a readable `trainer_state.json` (or without a file
its state names): `latest_checkpoint` passes over it and `resume_point` deletes it. Trainer keeps the newest
`save_total_limit` folders (2 unless the caller sets it), so a save killed half-way leaves the one before it.

What must survive a resume beside Trainer's own state is kept in it, by `ExportableState` callbacks
(`SavedStateCallback`): `RunRecord` (the run's signature, the settings that must match to resume; its precision;
what the caller records, healing: the corpus and its settings), `trainer.KeepBestCallback` (the best evaluation, its
weights in `best_model.safetensors`) and healing's clock.

`RunCheckpoints` says where a Trainer run's checkpoints go and which one it resumes (`resume_point` refuses one of
other settings), `CheckpointCallback` when it saves, and `sigint_stops` turns the first Ctrl-C into "save and stop".

Checkpoints of earlier sharedbert versions kept that state in `run_state.json` beside Trainer's files, and the
earliest held the optimizer and RNG state as safetensors + JSON (`OPTIMIZER_FILE`, `RNG_FILE`); `upgrade_checkpoint`
rewrites either as today's before it is resumed, and `healing` an old healing `latest/` folder likewise.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import signal
import time
from dataclasses import field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import load_file, load_model
from transformers import TrainerCallback, TrainerControl
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME, TRAINER_STATE_NAME
from transformers.trainer_callback import ExportableState

from ..atomic import atomic_write_bytes, atomic_write_text, recover_directory
from ..weight_checks import check_checkpoint

logger = logging.getLogger(__name__)

MODEL_FILE = "model.safetensors"  # the weights, in Trainer's checkpoints and earlier versions' alike
# Earlier versions' optimizer and RNG files (read when such a checkpoint is resumed, never written now).
OPTIMIZER_FILE = "optimizer.safetensors"  # the optimizer's tensors (AdamW's moments), `{parameter index}.{name}`
RNG_FILE = "rng.safetensors"  # torch's generator state of every process, `{rank}.torch`
CHECKPOINT_PREFIX = "checkpoint-"  # a Trainer run's checkpoint folders: checkpoint-STEP
RUN_STATE_FILE = "run_state.json"  # earlier versions' record beside Trainer's state (read by `upgrade_checkpoint`)
RNG_STATE_FILE = "rng_state.pth"  # Trainer's name for a one-process run's generator states
# How many checkpoints Trainer keeps when the caller does not say (save_total_limit): two, so that a kill while the
# newest is written leaves the one before it whole.
KEEP_CHECKPOINTS = 2


# The checkpoint options of a Trainer job's arguments (pretrain, finetune): (default, help), their one owner.
CHECKPOINT_OPTIONS = {
    "checkpoint_dir": (None, "Where resumable checkpoints go (default: OUTPUT-DIR-checkpoints); deleted once the "
                             "output is saved."),
    "checkpoint_minutes": (10.0, "Save a checkpoint after this many minutes of training."),
    "checkpoint_steps": (None, "Also save one every N optimizer steps."),
    "no_resume": (False, "Discard an existing checkpoint and start afresh (default: the same command resumes)."),
}


def checkpoint_option(name: str):
    """The dataclass field of the checkpoint option `name` (one of `CHECKPOINT_OPTIONS`)."""
    default, help = CHECKPOINT_OPTIONS[name]
    return field(default=default, metadata={"help": help, "group": "checkpoints (resumable after a crash, a kill or "
                                                                    "Ctrl-C)"})


class TrainingInterrupted(Exception):
    """Training stopped on Ctrl-C after saving a resumable checkpoint (`checkpoint` is its folder)."""

    def __init__(self, step: int, checkpoint: Path):
        super().__init__(f"interrupted at step {step}; a checkpoint is in {checkpoint}")
        self.step = step
        self.checkpoint = checkpoint


# ----------------------------------------------------------------------------------------------------------------------
# Reading a checkpoint folder
# ----------------------------------------------------------------------------------------------------------------------


def optimizer_from_files(tensors: dict, meta: dict) -> dict:
    """An optimizer state dict as an earlier sharedbert saved it, ready for `optimizer.load_state_dict`: `tensors`
    from `OPTIMIZER_FILE`, `meta` the state file's `optimizer` entry (its param groups and non-tensor values)."""
    state: dict = {}
    for key, value in list(tensors.items()) + list(meta["scalars"].items()):
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    return {"state": state, "param_groups": meta["param_groups"]}


def read_state(folder, state_file: str) -> dict:
    """The JSON state file of a checkpoint; ValueError when the folder is not a resumable checkpoint."""
    path = Path(folder) / state_file
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{folder} is not a resumable sharedbert checkpoint ({path}: {error}).") from error


def restore_weights(folder, model, what: str = "the model") -> None:
    """Load a checkpoint's weights into `model`, strictly (a tied copy need not be in the file). A checkpoint of
    another architecture is a ValueError whose message starts with the first differences and names the fix."""
    try:
        load_model(model, str(Path(folder) / MODEL_FILE))
    except Exception as error:  # a different architecture, or a damaged file; the error lists every key
        detail = " ".join(str(error).split())
        raise ValueError(
            f"Checkpoint {folder} does not match {what} ({detail[:300]}{' ...' if len(detail) > 300 else ''}); "
            "resume with the same settings or start afresh (--no-resume / a new output folder)."
        ) from error


# ----------------------------------------------------------------------------------------------------------------------
# A Trainer run's checkpoints: where they go, which one to resume, when to save
# ----------------------------------------------------------------------------------------------------------------------


def is_main_process() -> bool:
    """Whether this is the process that writes shared files (rank 0 of a distributed run, or the only one)."""
    return int(os.environ.get("RANK", "0")) == 0


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def read_run_state(folder) -> dict:
    """The `run_state.json` of a checkpoint written by an earlier sharedbert (see `upgrade_checkpoint`)."""
    return read_state(folder, RUN_STATE_FILE)


# ----------------------------------------------------------------------------------------------------------------------
# State kept in Trainer's own state (trainer_state.json's `stateful_callbacks`)
# ----------------------------------------------------------------------------------------------------------------------


class SavedStateCallback(TrainerCallback, ExportableState):
    """A callback whose state Trainer's own save keeps in `trainer_state.json` (`ExportableState`) and that takes it
    back when a resumed run begins: its `attributes()` are saved, `restore_state(attributes, folder)` receives them
    (a fresh run: its own). It restores itself, in `on_train_begin`, from the state Trainer loaded, so the object the job holds
    is the one restored (Trainer's `restore_callback_states_from_checkpoint` would build a new one). Files a state
    needs beside it in the checkpoint are named in its `checkpoint_files` attribute: a checkpoint without them is not
    complete (`is_complete`)."""

    def state_args(self) -> dict:
        return {}

    def attributes(self) -> dict:
        return {}

    def restore_state(self, attributes: dict, folder: Path) -> None:
        for name, value in attributes.items():
            if name != "checkpoint_files":
                setattr(self, name, value)

    def state(self) -> dict:
        return {"args": self.state_args(), "attributes": self.attributes()}

    def on_train_begin(self, args, state, control, **kwargs):
        name = type(self).__name__
        saved = state.stateful_callbacks.get(name)
        if isinstance(saved, dict) and state.global_step > 0:  # resumed: the checkpoint's state
            folder = Path(args.output_dir) / f"{CHECKPOINT_PREFIX}{state.global_step}"
            self.restore_state(saved.get("attributes", {}), folder)
        # Trainer's save updates an entry it expects to find (a checkpoint older than this callback has none).
        state.stateful_callbacks[name] = self.state()


class RunRecord(SavedStateCallback):
    """What a run records in its checkpoints to be resumed: its `signature` (the settings that must match), its
    `precision` and the caller's `record` (healing: the corpus and its settings)."""

    def __init__(self, signature: dict | None = None, precision: str = "fp32", record: dict | None = None):
        self.signature, self.precision, self.record = signature or {}, precision, record or {}

    def state_args(self) -> dict:
        return {"signature": self.signature, "precision": self.precision, "record": self.record}

    def on_train_begin(self, args, state, control, **kwargs):
        # The record is this run's own (a resumed run's matched its checkpoint's, or was refused before training).
        state.stateful_callbacks[type(self).__name__] = self.state()


def read_trainer_state(folder) -> dict:
    """A checkpoint's `trainer_state.json`; ValueError naming the file when it is missing or cut short."""
    return read_state(folder, TRAINER_STATE_NAME)


def saved_callback_state(folder, name: str) -> dict | None:
    """The state (`{"args", "attributes"}`) the callback class `name` saved in a checkpoint, or None."""
    saved = read_trainer_state(folder).get("stateful_callbacks", {}).get(name)
    return saved if isinstance(saved, dict) else None


def read_run_record(folder) -> dict:
    """A checkpoint's `RunRecord`: {"signature", "precision", "record"} (empty ones for a checkpoint without it)."""
    saved = saved_callback_state(folder, RunRecord.__name__) or {}
    return {"signature": {}, "precision": "fp32", "record": {}, **saved.get("args", {})}


def checkpoint_precision(folder) -> str:
    """The precision ("bf16" or "fp32") a checkpoint's run trained in (fp32 for checkpoints older than the field)."""
    return read_run_record(folder)["precision"]


def is_complete(folder) -> bool:
    """Whether Trainer finished writing checkpoint `folder`: its `trainer_state.json`, written last, reads, and every
    file its callbacks' states name is there."""
    try:
        state = read_trainer_state(folder)
    except ValueError:
        return False
    saved = [entry for entries in state.get("stateful_callbacks", {}).values()
             for entry in (entries if isinstance(entries, list) else [entries])]
    needed = [name for entry in saved for name in entry.get("attributes", {}).get("checkpoint_files", [])]
    return all((Path(folder) / name).is_file() for name in needed)


def _checkpoint_folders(checkpoint_dir) -> list[tuple[int, Path]]:
    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        return []
    steps = []
    for child in folder.iterdir():
        suffix = child.name[len(CHECKPOINT_PREFIX):]
        if child.is_dir() and child.name.startswith(CHECKPOINT_PREFIX) and suffix.isdigit():
            steps.append((int(suffix), child))
    return sorted(steps)


def latest_checkpoint(checkpoint_dir) -> Path | None:
    """The newest complete checkpoint in `checkpoint_dir` (`is_complete`: one a kill cut short is passed over, as are
    the temporary folders of earlier versions' saves)."""
    complete = [folder for _, folder in _checkpoint_folders(checkpoint_dir) if is_complete(folder)]
    return complete[-1] if complete else None


def remove_incomplete_checkpoints(checkpoint_dir, keep: Path | None) -> None:
    """Delete the checkpoints newer than `keep` (every one, when None): saves a kill cut short."""
    kept_step = int(keep.name[len(CHECKPOINT_PREFIX):]) if keep is not None else -1
    for step, folder in _checkpoint_folders(checkpoint_dir):
        if step > kept_step:
            logger.warning("Deleting %s, a checkpoint whose save was cut short.", folder)
            shutil.rmtree(folder, ignore_errors=True)


def add_trainer_files(folder) -> None:
    """Give a checkpoint written by the earliest sharedbert versions (optimizer and RNG state in safetensors and JSON)
    Trainer's `optimizer.pt`, `scheduler.pt` and `rng_state.pth`, so Trainer resumes it as it resumes its own. A
    checkpoint that has them is left alone."""
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
    # The optimizer last: its file is what marks the files as added.
    write(OPTIMIZER_NAME, optimizer_from_files(load_file(str(folder / OPTIMIZER_FILE)), state["optimizer"]))


# The keys of an earlier version's run_state.json that are not the caller's record.
_RUN_STATE_KEYS = ("run_signature", "precision", "keep_best", "optimizer", "scheduler", "rng")


def upgrade_checkpoint(folder) -> None:
    """Rewrite a checkpoint of an earlier sharedbert, which kept its record in `run_state.json` (and, the earliest,
    its optimizer and RNG state in safetensors and JSON), as today's: Trainer's files added, and the record moved into
    `trainer_state.json` as the states of `RunRecord` and `KeepBestCallback` (whose weights stay in
    best_model.safetensors). `run_state.json` goes last, so an upgrade cut short is done again. A checkpoint of
    today's format is left alone."""
    folder = Path(folder)
    if not (folder / RUN_STATE_FILE).is_file():
        return
    add_trainer_files(folder)
    old, state = read_run_state(folder), read_trainer_state(folder)
    callbacks = state.setdefault("stateful_callbacks", None) or {}
    state["stateful_callbacks"] = callbacks
    callbacks.setdefault("TrainerControl", TrainerControl().state())  # Trainer's save updates it, expecting it there
    callbacks[RunRecord.__name__] = RunRecord(
        old.get("run_signature", {}), old.get("precision", "fp32"),
        {key: value for key, value in old.items() if key not in _RUN_STATE_KEYS}).state()
    best = old.get("keep_best")
    if best:
        callbacks["KeepBestCallback"] = {"args": {}, "attributes": {
            "best_value": best["value"], "best_metrics": best["metrics"], "best_step": best["step"],
            "last_metrics": best["metrics"], "checkpoint_files": ["best_model.safetensors"]}}
    atomic_write_text(folder / TRAINER_STATE_NAME, json.dumps(state, indent=2, sort_keys=True) + "\n")
    (folder / RUN_STATE_FILE).unlink()
    logger.info("Checkpoint %s of an earlier sharedbert version: rewritten in today's format.", folder)


def resume_point(checkpoint_dir, run_signature: dict, resume: bool) -> Path | None:
    """Where to resume from: the newest complete checkpoint in `checkpoint_dir` made by a run with the same
    `run_signature` (one of an earlier version first upgraded), or None to start afresh; the saves a kill cut short
    are deleted. A checkpoint of different settings is an error (resuming it would silently train something else),
    unless `resume` is False, which discards the old checkpoints."""
    folder = Path(checkpoint_dir)
    if folder.is_dir():
        # An earlier version's save killed half-way left `.checkpoint-N.tmp-*` (or a pending `.new-` / `.old-`).
        names = {child.name.lstrip(".").split(".")[0] for child in folder.iterdir()}
        for name in sorted(n for n in names if n.startswith(CHECKPOINT_PREFIX)):
            recover_directory(folder / name)
    if not resume:
        if _checkpoint_folders(folder):
            shutil.rmtree(folder)
        return None
    latest = latest_checkpoint(folder)
    remove_incomplete_checkpoints(folder, latest)
    if latest is None:
        return None
    upgrade_checkpoint(latest)
    saved = read_run_record(latest)["signature"]
    differences = {key: (saved.get(key), run_signature.get(key))
                   for key in sorted(set(saved) | set(run_signature)) if saved.get(key) != run_signature.get(key)}
    if differences:
        described = "; ".join(f"{key}: checkpoint {old!r}, now {new!r}" for key, (old, new) in differences.items())
        raise ValueError(
            f"{latest} was made by a run with other settings ({described}). Rerun with the same settings to resume, "
            "or pass --no-resume to discard it and start afresh."
        )
    check_checkpoint(latest)  # the package's weights gate: every file readable, undamaged and finite
    return latest


class CheckpointCallback(TrainerCallback):
    """Asks the Trainer for a checkpoint every `every_steps` optimizer steps and/or every `every_minutes` of training,
    and after the current step when Ctrl-C is pressed (then stops training; a second Ctrl-C aborts at once).

    Under DDP every process must save and stop at the same step, so the decision is agreed on each step (one tiny
    all-reduce): a Ctrl-C reaching any one process, or rank 0's clock, decides for all."""

    def __init__(self, every_steps: int | None = None, every_minutes: float | None = None):
        if every_steps is not None and every_steps < 1:
            raise ValueError(f"checkpoint steps must be positive, got {every_steps}.")
        if every_minutes is not None and every_minutes <= 0:
            raise ValueError(f"checkpoint minutes must be positive, got {every_minutes}.")
        self.every_steps = every_steps
        self.every_minutes = every_minutes
        self.flag: dict = {}
        self.interrupted_at: int | None = None
        self._sigint = None
        self._last_save = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._sigint = sigint_stops(self.flag)
        self._sigint.__enter__()
        self._last_save = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        stop = bool(self.flag.get("stop"))
        due = self.every_steps is not None and state.global_step % self.every_steps == 0
        due = due or (self.every_minutes is not None and time.monotonic() - self._last_save >= self.every_minutes * 60)
        if args.world_size > 1:
            votes = torch.tensor([int(stop), int(due)], device=args.device)  # NCCL reduces only GPU tensors
            dist.all_reduce(votes, op=dist.ReduceOp.MAX)
            stop, due = bool(votes[0]), bool(votes[1])
        if stop and state.global_step < state.max_steps:
            self.interrupted_at = state.global_step
            control.should_training_stop = True
        if stop or due:
            control.should_save = True

    def on_save(self, args, state, control, **kwargs):
        self._last_save = time.monotonic()

    def on_train_end(self, args, state, control, **kwargs):
        if self._sigint is not None:
            self._sigint.__exit__(None, None, None)
            self._sigint = None


class RunCheckpoints:
    """The checkpoint side of one Trainer run: where checkpoints go (`folder`), what to resume from
    (`resume_from`), the callback deciding when to save (`callback`), and `signature`, the settings that must match
    for a checkpoint to be resumed. Only the main process cleans up or discards checkpoints."""

    def __init__(self, output_dir, signature: dict, checkpoint_dir=None, every_steps: int | None = None,
                 every_minutes: float | None = CHECKPOINT_OPTIONS["checkpoint_minutes"][0], resume: bool = True):
        output = Path(output_dir)
        self.folder = Path(checkpoint_dir) if checkpoint_dir else output.with_name(f"{output.name}-checkpoints")
        if self.folder.resolve() == output.resolve() or output.resolve() in self.folder.resolve().parents:
            raise ValueError(f"--checkpoint-dir {self.folder} must lie outside --output-dir {output}, which is "
                             "replaced as a whole when the run ends.")
        # JSON round trip: the signature is compared with the one a checkpoint stored as JSON.
        self.signature = json.loads(json.dumps(signature, default=str))
        self.is_main_process = is_main_process()
        if self.is_main_process:
            self.resume_from = resume_point(self.folder, self.signature, resume)
        else:
            self.resume_from = latest_checkpoint(self.folder) if resume else None
        self.callback = CheckpointCallback(every_steps, every_minutes)

    def trainer_kwargs(self) -> dict:
        return dict(checkpoint_dir=self.folder, run_signature=self.signature)

    def raise_if_interrupted(self) -> None:
        if self.callback.interrupted_at is not None:
            raise TrainingInterrupted(self.callback.interrupted_at, latest_checkpoint(self.folder))

    def discard(self) -> None:
        """Delete the checkpoints once the run's output is safely saved."""
        if self.is_main_process:
            shutil.rmtree(self.folder, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------------------
# Ctrl-C
# ----------------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def sigint_stops(flag: dict):
    """While active, Ctrl-C only sets `flag["stop"]` (the training loop then saves a checkpoint and stops); a second
    Ctrl-C aborts at once. On exit the handler found on entry is put back.

    Ctrl-C is left alone where it cannot or should not be caught:
    * outside the main thread (Python only delivers signals there);
    * when SIGINT is ignored on entry, as for a job started in the background by a non-interactive shell
      (`make test &`): whoever started the process chose that Ctrl-C must not reach it, so it stays ignored and
      training runs to its budget (stop such a job with SIGTERM or SIGKILL; checkpoints still allow resuming)."""

    def handler(signum, frame):
        if flag.get("stop"):
            raise KeyboardInterrupt
        flag["stop"] = True
        logger.warning("Interrupted: finishing this step, saving a checkpoint, then stopping (Ctrl-C again aborts).")

    previous = signal.getsignal(signal.SIGINT)
    installed = False
    if previous is not signal.SIG_IGN:
        try:
            signal.signal(signal.SIGINT, handler)
            installed = True
        except ValueError:  # not the main thread
            pass
    try:
        yield flag
    finally:
        if installed:
            # None: the previous handler was not installed from Python; the default action is the closest we can put
            # back.
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


__all__ = [
    "CHECKPOINT_OPTIONS",
    "CHECKPOINT_PREFIX",
    "CheckpointCallback",
    "KEEP_CHECKPOINTS",
    "RUN_STATE_FILE",
    "RunCheckpoints",
    "RunRecord",
    "SavedStateCallback",
    "TrainingInterrupted",
    "add_trainer_files",
    "checkpoint_option",
    "checkpoint_precision",
    "is_complete",
    "is_main_process",
    "latest_checkpoint",
    "optimizer_from_files",
    "read_run_record",
    "read_run_state",
    "read_state",
    "read_trainer_state",
    "remove_incomplete_checkpoints",
    "restore_weights",
    "resume_point",
    "saved_callback_state",
    "sigint_stops",
    "upgrade_checkpoint",
    "world_size",
]
