"""Resumable training state without pickle, shared by `heal` and the Trainer-based commands.

An optimizer's moments and the random generators' states are split into tensors (written with safetensors) and a
JSON-able rest, so a checkpoint never needs `torch.load` (whose pickle format can run code). `sigint_stops` turns the
first Ctrl-C into a request to save and stop after the current step.
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal

import numpy as np
import torch

logger = logging.getLogger(__name__)


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
    Ctrl-C aborts at once. Outside the main thread signals cannot be caught, and Ctrl-C is left alone."""

    def handler(signum, frame):
        if flag.get("stop"):
            raise KeyboardInterrupt
        flag["stop"] = True
        logger.warning("Interrupted: finishing this step, saving a checkpoint, then stopping (Ctrl-C again aborts).")

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        previous = None
    try:
        yield flag
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
