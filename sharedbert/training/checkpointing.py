"""The one checkpoint module: saving and restoring a run's weights, optimizer, scheduler, random generators and
progress, for `pretrain` and `finetune` (through `trainer.ResumableTrainer`) and for healing (its own loop).

Safetensors and JSON only, never pickle. Trainer's own checkpoints `torch.save` the optimizer, the scheduler, the RNG
states and the arguments, and `torch.load` of such a file can run code; so `ResumableTrainer` overrides the Trainer
methods that write and read them and calls the functions below instead. A checkpoint is a folder, written into a
temporary sibling and renamed into place (`atomic.atomic_directory`), so it is complete or absent:

* `model.safetensors` + `config.json`: the weights being trained;
* `optimizer.safetensors`: the optimizer's tensors (AdamW's moments), `{parameter index}.{name}`;
* `rng.safetensors`: torch's generator state of every process, `{rank}.torch`;
* a JSON state file: the caller's progress (step, data position, ...) and `optimizer` (param groups and scalars),
  `scheduler`, and `rng` (Python and NumPy generator states, one entry per process).

Trainer runs keep `checkpoint-STEP/` folders whose state file is `run_state.json` (Trainer's own `trainer_state.json`
beside it); healing keeps one `latest/` folder whose state file is `trainer_state.json`. `RunCheckpoints` says where
a Trainer run's checkpoints go and which one it resumes, `CheckpointCallback` when it saves, and `sigint_stops` turns
the first Ctrl-C into "save and stop".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import signal
import time
from dataclasses import field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from transformers import TrainerCallback

from ..atomic import atomic_directory, recover_directory

logger = logging.getLogger(__name__)

MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
RNG_FILE = "rng.safetensors"
CHECKPOINT_PREFIX = "checkpoint-"  # a Trainer run's checkpoint folders: checkpoint-STEP
RUN_STATE_FILE = "run_state.json"  # a Trainer run's state file


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
# State as tensors + JSON
# ----------------------------------------------------------------------------------------------------------------------


def optimizer_to_files(optimizer) -> tuple[dict, dict]:
    """Split an optimizer's state dict into tensors (for safetensors) and the JSON-able rest."""
    state = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, values in state["state"].items():
        for name, value in values.items():
            if torch.is_tensor(value):
                tensors[f"{index}.{name}"] = value.detach().contiguous()
            else:
                scalars[f"{index}.{name}"] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def optimizer_from_files(tensors: dict, meta: dict) -> dict:
    """The state dict `optimizer_to_files` split up, ready for `optimizer.load_state_dict`."""
    state: dict = {}
    for key, value in list(tensors.items()) + list(meta["scalars"].items()):
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    return {"state": state, "param_groups": meta["param_groups"]}


def rng_to_files() -> tuple[dict, dict]:
    """This process's torch, Python and NumPy generator states as (tensors, JSON-able dict)."""
    version, internal, gauss = random.getstate()
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    meta = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(position), int(has_gauss), float(cached_gaussian)],
    }
    return {"torch": torch.get_rng_state()}, meta


def rng_from_files(tensors: dict, meta: dict) -> None:
    """Restore what `rng_to_files` captured."""
    torch.set_rng_state(tensors["torch"])
    version, internal, gauss = meta["python"]
    random.setstate((version, tuple(internal), gauss))
    if "numpy" in meta:
        kind, keys, position, has_gauss, cached_gaussian = meta["numpy"]
        np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached_gaussian))


# ----------------------------------------------------------------------------------------------------------------------
# Writing and reading a checkpoint folder
# ----------------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def writing_checkpoint(folder, model, optimizer, scheduler, state: dict, state_file: str, rng_states=None):
    """Write a checkpoint of `model`, `optimizer` and `scheduler` with the caller's progress `state` (JSON-able) into
    a temporary sibling of `folder`, yield that folder for any files of the caller's own, and rename it into place when
    the block ends (on an error, `folder` is left as it was). `rng_states` holds `rng_to_files()` of every process,
    in rank order (default: this process's)."""
    rng_states = rng_states or [rng_to_files()]
    with atomic_directory(folder) as tmp:
        save_model(model, str(tmp / MODEL_FILE))  # drops tied duplicates; `load_model` accepts their absence
        model.config.to_json_file(str(tmp / "config.json"))
        tensors, optimizer_meta = optimizer_to_files(optimizer)
        save_file(tensors, str(tmp / OPTIMIZER_FILE))
        save_file({f"{rank}.{name}": tensor for rank, (tensors, _) in enumerate(rng_states)
                   for name, tensor in tensors.items()}, str(tmp / RNG_FILE))
        full = dict(state, optimizer=optimizer_meta, scheduler=scheduler.state_dict(),
                    rng=[meta for _, meta in rng_states])
        (tmp / state_file).write_text(json.dumps(full, indent=1), encoding="utf-8")
        yield tmp


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


def restore_optimizer(folder, state: dict, optimizer, scheduler) -> None:
    """Load a checkpoint's optimizer and scheduler state (`state` is its JSON state file)."""
    tensors = load_file(str(Path(folder) / OPTIMIZER_FILE))
    optimizer.load_state_dict(optimizer_from_files(tensors, state["optimizer"]))
    scheduler.load_state_dict(state["scheduler"])


def restore_rng(folder, state: dict, rank: int = 0) -> bool:
    """Put process `rank`'s random generators back as they were saved; False when the checkpoint has no state for it
    (saved by fewer processes)."""
    tensors, metas = load_file(str(Path(folder) / RNG_FILE)), state["rng"]
    if isinstance(metas, dict):  # a one-process checkpoint of a healing run written before every run kept a list
        tensors, metas = {"0.torch": tensors["torch"]}, [metas]
    if rank >= len(metas):
        return False
    rng_from_files({"torch": tensors[f"{rank}.torch"]}, metas[rank])
    return True


# ----------------------------------------------------------------------------------------------------------------------
# A Trainer run's checkpoints: where they go, which one to resume, when to save
# ----------------------------------------------------------------------------------------------------------------------


def is_main_process() -> bool:
    """Whether this is the process that writes shared files (rank 0 of a distributed run, or the only one)."""
    return int(os.environ.get("RANK", "0")) == 0


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def read_run_state(folder) -> dict:
    return read_state(folder, RUN_STATE_FILE)


def checkpoint_precision(folder) -> str:
    """The precision ("bf16" or "fp32") a checkpoint's run trained in (fp32 for checkpoints older than the field)."""
    return read_run_state(folder).get("precision", "fp32")


def latest_checkpoint(checkpoint_dir) -> Path | None:
    """The newest complete checkpoint in `checkpoint_dir` (temporary folders of a killed save are ignored)."""
    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        return None
    steps = []
    for child in folder.iterdir():
        suffix = child.name[len(CHECKPOINT_PREFIX):]
        if child.is_dir() and child.name.startswith(CHECKPOINT_PREFIX) and suffix.isdigit():
            steps.append((int(suffix), child))
    return max(steps)[1] if steps else None


def resume_point(checkpoint_dir, run_signature: dict, resume: bool) -> Path | None:
    """Where to resume from: the newest checkpoint in `checkpoint_dir` made by a run with the same `run_signature`,
    or None to start afresh. A checkpoint of different settings is an error (resuming it would silently train
    something else), unless `resume` is False, which discards the old checkpoints."""
    folder = Path(checkpoint_dir)
    if folder.is_dir():
        # A save killed half-way leaves `.checkpoint-N.tmp-*` (or a pending `.new-` / `.old-`) beside the folders.
        names = {child.name.lstrip(".").split(".")[0] for child in folder.iterdir()}
        for name in sorted(n for n in names if n.startswith(CHECKPOINT_PREFIX)):
            recover_directory(folder / name)
    latest = latest_checkpoint(folder)
    if latest is None:
        return None
    if not resume:
        shutil.rmtree(folder)
        return None
    saved = read_run_state(latest).get("run_signature", {})
    differences = {key: (saved.get(key), run_signature.get(key))
                   for key in sorted(set(saved) | set(run_signature)) if saved.get(key) != run_signature.get(key)}
    if differences:
        described = "; ".join(f"{key}: checkpoint {old!r}, now {new!r}" for key, (old, new) in differences.items())
        raise ValueError(
            f"{latest} was made by a run with other settings ({described}). Rerun with the same settings to resume, "
            "or pass --no-resume to discard it and start afresh."
        )
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
            import torch.distributed as dist

            votes = torch.tensor([int(stop), int(due)])
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
    "RUN_STATE_FILE",
    "RunCheckpoints",
    "TrainingInterrupted",
    "checkpoint_option",
    "checkpoint_precision",
    "is_main_process",
    "latest_checkpoint",
    "optimizer_from_files",
    "optimizer_to_files",
    "read_run_state",
    "read_state",
    "restore_optimizer",
    "restore_rng",
    "restore_weights",
    "resume_point",
    "rng_from_files",
    "rng_to_files",
    "sigint_stops",
    "world_size",
    "writing_checkpoint",
]
