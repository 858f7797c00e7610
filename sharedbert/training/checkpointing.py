"""Resumable training state without pickle, shared by `sharedbert.heal` and the Trainer-based runs.

An optimizer's moments and the random generators' states are split into tensors (written with safetensors) and a
JSON-able rest, so a checkpoint never needs `torch.load` (whose pickle format can run code). `sigint_stops` turns the
first Ctrl-C into a request to save and stop after the current step.
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal

from pathlib import Path

import numpy as np
import torch

logger = logging.getLogger(__name__)


class TrainingInterrupted(Exception):
    """Training stopped on Ctrl-C after saving a resumable checkpoint (`checkpoint` is its folder)."""

    def __init__(self, step: int, checkpoint: Path):
        super().__init__(f"interrupted at step {step}; a checkpoint is in {checkpoint}")
        self.step = step
        self.checkpoint = checkpoint


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
