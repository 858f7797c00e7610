"""The package's weights gate and its other checks of a checkpoint, beyond the model file's: every way this package
loads weights a user names runs `check_weights` first (the package's loader, `sharedbert.loading`, for every model
and sentence-transformers folder, and `convert.from_bert`, which reads a BERT's tensors itself), a resumed training
checkpoint `check_checkpoint`, and the Hub publisher reads `describe_incompatible_checkpoint`. Nothing here loads a
model: these are plain checks that the loader calls.

The model file shipped to the Hub refuses only what would otherwise fail silently (pickle weights, encoder weights
the checkpoint lacks or holds for another attention type); transformers itself refuses mismatched shapes and broken
files. Here the package adds what a long job should hear before it starts, in words that name the file and the fix:

* a folder that holds only pickle weights (.bin/.pt) is refused without opening them, naming the conversion;
* a shard index without a `weight_map`, or one naming missing shards, is refused naming the index;
* a weights file this user may not read is refused as such (transformers would call it missing);
* a damaged safetensors file (truncated, garbage in its header) is refused naming the file;
* NaN or Inf weights (safetensors has no checksum: overwritten tensor bytes still parse, and a checkpoint saved from a
  diverged run looks the same) are refused naming the file and tensors, in a sentence-transformers model's module
  folders too;
* a training checkpoint's torch files (optimizer.pt, ...) are read as Trainer reads them (`weights_only=True`) and
  refused when damaged or non-finite, with --no-resume as the fix;
* a tokenizer without a vocabulary (which would read every word as [UNK]) is refused.
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


def check_readable(path) -> None:
    """Refuse a file this process may not read, naming it and the fix (transformers would call it missing)."""
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except PermissionError as error:
        raise PermissionError(
            f"{path} cannot be read (permission denied): give this user read access (chmod a+r {path}) or run as "
            "the user that owns it."
        ) from error


def _read_index(index: Path) -> list[str]:
    """The shard file names a safetensors index lists, or a refusal naming the index and the fix."""
    check_readable(index)
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (UnicodeDecodeError, ValueError, AttributeError) as error:
        raise OSError(f"The shard index {index} is not a JSON object ({error}); re-save the model with "
                      "save_pretrained, which writes it with its shards.") from error
    if not isinstance(weight_map, dict) or not weight_map or not all(
            isinstance(shard, str) for shard in weight_map.values()):
        raise OSError(
            f"The shard index {index} has no weight_map (the table of which shard holds each tensor): re-save the "
            "model with save_pretrained, or delete the index if model.safetensors beside it holds every weight."
        )
    shards = sorted(set(weight_map.values()))
    outside = [shard for shard in shards if Path(shard).name != shard]
    if outside:
        raise OSError(f"The shard index {index} names files outside its folder ({outside[:3]}); re-save the model.")
    return shards


def weights_files(source, subfolder: str = "") -> list[Path]:
    """The safetensors files a local model folder's weights load from: model.safetensors, or the shards its index
    lists (each must exist), with those of its sentence-transformers modules (2_Dense/model.safetensors). Refuses a
    folder of pickle weights only, without opening them. Empty for a Hub id or a folder without weights."""
    folder = Path(str(source)) / subfolder
    if not folder.is_dir():
        return []
    if (folder / WEIGHTS_FILE).is_file():  # transformers reads it, not the shards, when both are there
        files = [folder / WEIGHTS_FILE]
    elif (folder / WEIGHTS_INDEX).is_file():
        files = [folder / shard for shard in _read_index(folder / WEIGHTS_INDEX)]
        missing = [path.name for path in files if not path.is_file()]
        if missing:
            raise OSError(f"The shard index {folder / WEIGHTS_INDEX} lists {missing[:3]}, missing from {folder}: "
                          "download the model again, or re-save it with save_pretrained.")
    else:
        pickles = sorted(path.name for path in folder.iterdir() if path.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise OSError(
                f"{folder} holds only pickle weights ({', '.join(pickles)}), which SharedBert's loaders refuse "
                "(unpickling can run code) and did not open. Convert them once in a session you trust "
                "(torch.load, then model.save_pretrained(folder), which writes model.safetensors)."
            )
        files = []  # no weights at all: transformers' own error names the folder
    return files + _module_weights(folder)


def _module_weights(folder: Path) -> list[Path]:
    """The safetensors files of the module folders a sentence-transformers model's modules.json names."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # absent or broken: sentence-transformers' loader (or sentence_embeddings) says so
    paths = [entry.get("path") for entry in modules if isinstance(entry, dict)] if isinstance(modules, list) else []
    inside = [folder / path for path in paths
              if isinstance(path, str) and path and not path.startswith(("/", "\\")) and ".." not in Path(path).parts]
    return sorted(file for sub in inside if sub.is_dir() for file in sub.glob("*.safetensors") if file.is_file())


def check_weights_file(path) -> None:
    """Refuse a safetensors file that cannot be read, is damaged (truncated, garbage in its header) or holds NaN or
    Inf in a floating-point tensor, naming the file and the fix. safetensors has no checksum: overwritten tensor
    bytes still parse, and a checkpoint saved from a diverged run looks the same, so every tensor is read."""
    check_readable(path)
    non_finite = []
    try:
        with safe_open(str(path), framework="pt") as weights:  # checks the header against the file's length
            for name in weights.keys():
                tensor = weights.get_tensor(name)
                if tensor.is_floating_point() and not torch.isfinite(tensor.float()).all():
                    non_finite.append(name)
    except (SafetensorError, OSError, RuntimeError) as error:
        raise OSError(
            f"The weights file {path} is corrupt or truncated ({error}); re-download or re-save the model."
        ) from error
    if non_finite:
        raise ValueError(
            f"The weights file {path} holds NaN or Inf values in {len(non_finite)} tensors ({non_finite[:5]}): the "
            "file is corrupt or was saved from a diverged run; re-download it or load an earlier checkpoint."
        )


def check_weights(source, subfolder: str = "") -> None:
    """The weights gate, run before any loader reads a local folder's weights (a model, a BERT to convert, a
    checkpoint to resume, a sentence-transformers model, a sharded one): every weights file is listed, readable,
    undamaged and finite, or the load is refused naming the file and the fix (`weights_files`,
    `check_weights_file`). A Hub id is left to transformers and `check_finite`."""
    for path in weights_files(source, subfolder):
        check_weights_file(path)


def _tensors(value, where: str = ""):
    """(name, tensor) for every tensor in a state object of dicts, lists and tuples."""
    if isinstance(value, torch.Tensor):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _tensors(item, f"{where}.{index}" if where else str(index))


def check_torch_file(path) -> None:
    """Refuse a torch state file of a Trainer checkpoint (optimizer.pt, scheduler.pt, rng_state.pth) that cannot be
    read, is damaged or holds NaN or Inf tensors. Read as Trainer reads it, with `torch.load(weights_only=True)`:
    torch's restricted unpickler, which builds tensors and plain containers and runs no code."""
    from transformers.trainer_pt_utils import safe_globals  # numpy's arrays and dtypes, as Trainer allows them

    check_readable(path)
    try:
        with safe_globals():
            try:
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as error:
                if "mmap" not in str(error):
                    raise
                state = torch.load(path, map_location="cpu", weights_only=True)  # an old, non-zip file
    except Exception as error:  # noqa: BLE001 - whatever the unpickler or the zip reader says, the file is unusable
        detail = " ".join(str(error).split())[:200]
        raise OSError(f"The checkpoint file {path} is corrupt or truncated ({type(error).__name__}: {detail})."
                      ) from error
    non_finite = [name for name, tensor in _tensors(state)
                  if tensor.is_floating_point() and not torch.isfinite(tensor).all()]
    if non_finite:
        raise ValueError(f"The checkpoint file {path} holds NaN or Inf values in {len(non_finite)} tensors "
                         f"({non_finite[:5]}): it was saved from a diverged run.")


def check_checkpoint(folder) -> None:
    """The weights gate for a training checkpoint about to be resumed: its model weights, every other safetensors file
    in it (the best evaluation's weights, earlier versions' optimizer and RNG files) and Trainer's torch files must be
    readable, undamaged and finite, or the resume is refused naming the file and the fix (--no-resume). Trainer would
    otherwise stop half-way through loading it with an error of the zip reader's or the OS's own."""
    folder = Path(folder)
    try:
        files = weights_files(folder)
        files += sorted(path for path in folder.glob("*.safetensors") if path not in files)
        for path in files:
            check_weights_file(path)
        for path in sorted(folder.glob("*.pt")) + sorted(folder.glob("*.pth")):
            check_torch_file(path)
    except (OSError, ValueError) as error:
        raise type(error)(f"{error} The checkpoint {folder} cannot be resumed: pass --no-resume to discard it and "
                          "start afresh (build-minilm: a new --work-dir), or restore the file.") from error


# The name this gate had when it checked the files' headers only.
check_weights_files = check_weights


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer.model",
                   "sentencepiece.bpe.model")


def check_tokenizer_files(source) -> None:
    """Refuse a local folder that holds no tokenizer vocabulary: AutoTokenizer would build the model type's tokenizer
    with no vocabulary (SharedBert's and BERT's: five special tokens, every word [UNK]) and say nothing."""
    folder = Path(str(source))
    if folder.is_dir() and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise OSError(_no_tokenizer(folder))


def check_tokenizer(tokenizer, source) -> None:
    """Refuse a loaded tokenizer whose vocabulary holds its special tokens only (the same silent failure, reached
    through a tokenizer_config.json without a vocabulary)."""
    if len(tokenizer) <= len(set(tokenizer.all_special_ids)):
        raise OSError(_no_tokenizer(source))


def _no_tokenizer(source) -> str:
    return (f"{source} holds no tokenizer vocabulary (none of {', '.join(TOKENIZER_FILES)}): its tokenizer would "
            "know only its special tokens and read every word as [UNK]. Save the tokenizer the model was trained "
            "with beside it (tokenizer.save_pretrained(folder)), or give a tokenizer folder where the command takes "
            "one (finetune --tokenizer FOLDER).")


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
    if (folder / WEIGHTS_INDEX).is_file() and not (folder / WEIGHTS_FILE).is_file():
        return f"(one of the shards listed in {folder / WEIGHTS_INDEX})"
    return str(folder / WEIGHTS_FILE)


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


__all__ = [
    "check_checkpoint",
    "check_finite",
    "check_readable",
    "check_tokenizer",
    "check_tokenizer_files",
    "check_torch_file",
    "check_weights",
    "check_weights_file",
    "check_weights_files",
    "describe_incompatible_checkpoint",
    "weights_file",
    "weights_files",
]
