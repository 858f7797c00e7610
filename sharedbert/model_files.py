"""The files of a saved SharedBert folder, below every room that reads or writes one: which files a published model
consists of (`is_hub_file`, `holds_only_model_files`: the Hub publisher stages them, `sharedbert convert` recognises
its own earlier output by them), the optional files beside the model that feed its model card (written by the
training and conversion tools, read by the Hub publisher and by fine-tuning, which keeps a starting model's
provenance), and whether a folder holds a seq2seq model."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .configuration_sharedbert import SharedBertConfig
from .sentence_embeddings import SENTENCE_TRANSFORMERS_FILES

# The files a published SharedBert consists of. Everything else in a model folder stays behind.
CODE_FILES = ("configuration_sharedbert.py", "modeling_sharedbert.py", "tokenization_sharedbert.py")
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "added_tokens.json",
)
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
SHARD_PATTERN = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
CARD_FILE = "README.md"
# A sentence-transformers module folder ("1_Pooling", "2_Normalize", "3_Dense") and the files it may hold.
MODULE_FOLDER_PATTERN = re.compile(r"\d+_[A-Za-z][A-Za-z0-9_]*")
MODULE_FILE_PATTERN = re.compile(r"[A-Za-z0-9_.-]+\.(json|safetensors|txt)")
# ONNX and OpenVINO files under the names sentence-transformers' backends load (sharedbert.export; hub/exported_files.py).
BACKEND_FILE_PATTERN = re.compile(r"onnx/model(_[a-z0-9_]+)?\.onnx|openvino/openvino_model(_[a-z0-9_]+)?\.(xml|bin)")
BACKEND_FOLDERS = ("onnx", "openvino")

# Optional inputs to the model card, beside the model.
EVAL_RESULTS_FILE = "eval_results.json"
TRAINING_ARGS_FILE = "training_args.json"
PROVENANCE_FILE = "sharedbert_provenance.json"


class ModelFileError(ValueError):
    """A file beside the model cannot be read as it must be (the Hub publisher says it as its `ModelFolderError`)."""


def is_hub_file(name: str) -> bool:
    """Whether a file called `name` (a path relative to the folder, with "/") belongs in a published SharedBert
    folder: weights, config, card, code files, tokenizer, the sentence-transformers files (top-level configs and
    the files of module folders such as 1_Pooling/config.json), and exported ONNX / OpenVINO files (onnx/model.onnx,
    onnx/model_qint8_avx512_vnni.onnx, openvino/openvino_model.xml and .bin, ...)."""
    if BACKEND_FILE_PATTERN.fullmatch(name):
        return True
    if "/" in name:
        folder, _, file = name.partition("/")
        return MODULE_FOLDER_PATTERN.fullmatch(folder) is not None and MODULE_FILE_PATTERN.fullmatch(file) is not None
    return (
        name in (WEIGHTS_FILE, WEIGHTS_INDEX, "config.json", CARD_FILE, *CODE_FILES, *TOKENIZER_FILES,
                 *SENTENCE_TRANSFORMERS_FILES)
        or SHARD_PATTERN.fullmatch(name) is not None
    )


def is_module_folder(name: str) -> bool:
    """Whether a folder called `name` may be published: a sentence-transformers module folder (e.g. 2_Normalize), or
    onnx/ or openvino/ with the exported files."""
    return MODULE_FOLDER_PATTERN.fullmatch(name) is not None or name in BACKEND_FOLDERS


def holds_only_model_files(folder: str | os.PathLike, extra: tuple[str, ...] = (), backends: bool = True) -> bool:
    """Whether everything under `folder` is a file of a saved SharedBert folder (`is_hub_file`; exported ONNX /
    OpenVINO files only with `backends`) or named in `extra`, in module folders at most one level down, with no
    links: what a command that writes such a folder recognises as an earlier output of its own."""
    folder = Path(folder)
    for path in folder.rglob("*"):
        relative = path.relative_to(folder).as_posix()
        backend = relative.split("/")[0] in BACKEND_FOLDERS
        if path.is_symlink() or (backend and not backends):
            return False
        if path.is_dir() and ("/" in relative or not is_module_folder(relative)):
            return False
        if path.is_file() and not (is_hub_file(relative) or relative in extra):
            return False
    return True


def is_seq2seq_checkpoint(model) -> bool:
    """Whether the folder `model` holds a seq2seq model (its config.json says `is_encoder_decoder`)."""
    config = Path(str(model)) / "config.json"
    return config.is_file() and bool(json.loads(config.read_text(encoding="utf-8")).get("is_encoder_decoder"))


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFileError(f"{path} is not valid JSON ({error}); fix or remove it.") from None


def read_provenance(model_dir: str | os.PathLike, config: SharedBertConfig | None = None) -> dict:
    """Where the model came from: `sharedbert_provenance.json` (a JSON object; `base_model` is the Hub id of the
    checkpoint it was converted from, and `license`, `language`, `datasets` and any other scalar entries are used by
    the card), completed when it has no `base_model` by config.json's `converted_from` (set by
    `sharedbert.conversion.from_bert`) or `base_model` field."""
    path = Path(model_dir) / PROVENANCE_FILE
    provenance = {}
    if path.is_file():
        provenance = _read_json(path)
        if not isinstance(provenance, dict):
            raise ModelFileError(f"{path} must hold a JSON object (e.g. {{\"base_model\": \"owner/name\"}}).")
    if not provenance.get("base_model") and config is not None:
        base_model = getattr(config, "converted_from", None) or getattr(config, "base_model", None)
        if isinstance(base_model, str) and base_model:
            provenance = {**provenance, "base_model": base_model}
    return provenance


__all__ = ["BACKEND_FOLDERS", "CARD_FILE", "CODE_FILES", "EVAL_RESULTS_FILE", "ModelFileError", "PROVENANCE_FILE",
           "TOKENIZER_FILES", "TRAINING_ARGS_FILE", "WEIGHTS_FILE", "WEIGHTS_INDEX", "holds_only_model_files",
           "is_hub_file", "is_module_folder", "is_seq2seq_checkpoint", "read_provenance"]
