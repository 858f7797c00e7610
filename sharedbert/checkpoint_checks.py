"""The package's own checks of a checkpoint, beyond the model file's: the way this package's jobs load a model a user
names (`remote_code.from_pretrained`) runs them, and the Hub publisher reads `describe_incompatible_checkpoint`.

The model file shipped to the Hub refuses only what would otherwise fail silently (pickle weights, encoder weights
the checkpoint lacks or holds for another attention type); transformers itself refuses mismatched shapes and broken
files. Here the package adds what a long job should hear before it starts, in words that name the file and the fix:

* a folder that holds only pickle weights (.bin/.pt) is refused without opening them, naming the conversion;
* a damaged safetensors file (truncated, garbage in its header) is refused naming the file;
* NaN or Inf weights (safetensors has no checksum: overwritten tensor bytes still parse, and a checkpoint saved from a
  diverged run looks the same) are refused naming the file and tensors.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from .modeling_sharedbert import checkpoint_mismatch_lines

WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")


def check_weights_files(source, subfolder: str = "") -> None:
    """Refuse a local model folder whose weights would be unpickled, or whose safetensors files are damaged, naming
    the file. A Hub id is left to transformers (the model classes read safetensors only)."""
    folder = Path(str(source)) / subfolder
    if not folder.is_dir():
        return
    if (folder / WEIGHTS_INDEX).is_file():
        shards = sorted(set(json.loads((folder / WEIGHTS_INDEX).read_text(encoding="utf-8"))["weight_map"].values()))
        files = [folder / shard for shard in shards]
    elif (folder / WEIGHTS_FILE).is_file():
        files = [folder / WEIGHTS_FILE]
    else:
        pickles = sorted(path.name for path in folder.iterdir() if path.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise OSError(
                f"{folder} holds only pickle weights ({', '.join(pickles)}), which SharedBert's loaders refuse "
                "(unpickling can run code) and did not open. Convert them once in a session you trust "
                "(torch.load, then model.save_pretrained(folder), which writes model.safetensors)."
            )
        return  # no weights at all: transformers' own error names the folder
    for path in files:
        try:
            with safe_open(str(path), framework="pt"):  # reads and checks the header against the file's length
                pass
        except (SafetensorError, OSError) as error:
            raise OSError(
                f"The weights file {path} is corrupt or truncated ({error}); re-download or re-save the model."
            ) from error


def check_finite(model, source) -> None:
    """Refuse a loaded model whose floating-point weights hold NaN or Inf (tensors on the meta device are not read)."""
    non_finite = [
        name
        for name, tensor in model.state_dict().items()
        if tensor.is_floating_point() and tensor.device.type != "meta" and not torch.isfinite(tensor).all()
    ]
    if non_finite:
        raise ValueError(
            f"The weights file {weights_file(source)} holds NaN or Inf values in {len(non_finite)} tensors "
            f"({non_finite[:5]}): the file is corrupt or was saved from a diverged run; re-download it or load an "
            "earlier checkpoint."
        )


def weights_file(source) -> str:
    """The safetensors file (or shard index) of a checkpoint, for messages."""
    folder = Path(str(source))
    if (folder / WEIGHTS_INDEX).is_file():
        return f"(one of the shards listed in {folder / WEIGHTS_INDEX})"
    return str(folder / WEIGHTS_FILE)


def load_model(loader, source, **kwargs):
    """`loader.from_pretrained(source, **kwargs)` for a model class or an AutoModel class, with the checks above:
    safetensors only by default (transformers would otherwise read a BERT folder's pytorch_model.bin), the files
    checked before loading and the weights after."""
    kwargs.setdefault("use_safetensors", True)
    if kwargs["use_safetensors"]:
        check_weights_files(source, kwargs.get("subfolder", ""))
    loaded = loader.from_pretrained(str(source), **kwargs)
    check_finite(loaded[0] if isinstance(loaded, tuple) else loaded, source)
    return loaded


def describe_incompatible_checkpoint(
    path, config, checkpoint_keys, missing, unexpected, mismatched, advice: str | None = None
) -> str:
    """The model file's diagnosis (the attention type the weights hold, the `missing` and `unexpected` keys) with the
    `mismatched` `(key, checkpoint shape, model shape)` entries. `advice`, when given, replaces the closing advice
    (for callers, such as the Hub publisher, that judge head weights too)."""
    lines = checkpoint_mismatch_lines(path, config, checkpoint_keys, missing, unexpected)
    if mismatched:
        shapes = [f"{key}: checkpoint {tuple(saved)} vs model {tuple(wanted)}" for key, saved, wanted in mismatched]
        lines.append(f"Weights whose shapes differ ({len(mismatched)}): {shapes[:5]}")
    lines.append(advice or "Check that the config (attention_type, layer_sharing, num_unique_layers, sizes) matches "
                           "the weights.")
    return "\n".join(lines)


__all__ = ["check_finite", "check_weights_files", "describe_incompatible_checkpoint", "load_model", "weights_file"]
