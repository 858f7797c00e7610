"""The model folder as the publisher reads it: `load_for_hub` loads a folder's model and tokenizer and refuses, with
a message naming the problem and the fix, a folder that is not a SharedBert, has no tokenizer, or holds weights that
do not match its config. A sentence-transformers model (modules.json) also publishes its module files
(`sharedbert.sentence_embeddings.module_files`): modules.json, sentence_bert_config.json,
config_sentence_transformers.json and module folders such as 1_Pooling/. Which files a published SharedBert consists
of is `sharedbert.model_files`'."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from .. import modeling_sharedbert
from ..sentence_embeddings import module_files
from ..configuration_sharedbert import AUTO_MAP, SharedBertConfig
from ..weight_checks import describe_incompatible_checkpoint
from ..loading import from_pretrained
from ..model_files import WEIGHTS_FILE, WEIGHTS_INDEX, is_hub_file
from ..remote_code import remote_code_of
from .contents import check_publishable
from .errors import ModelFolderError
from .metadata import read_eval_results, read_provenance, read_training_args

# Said when the weights do not fit the config: a published model must load whole, so no ignore_mismatched_sizes.
MISMATCH_ADVICE = (
    "Publish the folder the trained model was saved to, with the config.json it was saved with (check "
    "attention_type, layer_sharing, num_unique_layers, the sizes and num_labels), or re-save the model."
)

# Architecture name -> the Auto class that loads it, read off the auto_map every SharedBert config carries.
AUTO_CLASS_OF = {
    target.split(".")[-1]: auto for auto, target in AUTO_MAP.items() if auto.startswith("AutoModel")
}


@dataclass
class LoadedModel:
    """A SharedBert model folder, loaded and checked, with the optional metadata found beside it."""

    model_dir: Path
    model: Any
    tokenizer: Any
    architecture: str
    eval_results: list[dict] = field(default_factory=list)
    training_args: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    # The sentence-transformers files beside the model (relative POSIX paths), empty for a plain transformers model.
    sentence_transformers_files: list[str] = field(default_factory=list)

    @property
    def config(self) -> SharedBertConfig:
        return self.model.config

    @property
    def auto_class(self) -> str:
        return AUTO_CLASS_OF[self.architecture]


def load_for_hub(model_dir: str | os.PathLike) -> LoadedModel:
    """Load the model, tokenizer and card metadata from `model_dir`, refusing anything that should not be published."""
    model_dir = Path(model_dir)
    raw_config = _read_raw_config(model_dir)
    architecture = _check_is_sharedbert(model_dir, raw_config)
    _check_no_code_of_its_own(model_dir)
    check_publishable(model_dir, is_hub_file)  # links out, credentials, secrets, foreign auto_maps: before loading
    _check_weights_present(model_dir)
    try:  # the package's loader: a misspelled or invalid field refused naming the folder
        config = from_pretrained(SharedBertConfig, model_dir)
    except ValueError as error:
        raise ModelFolderError(f"{model_dir / 'config.json'} is not a valid SharedBert config: {error}") from None
    model = _load_model(model_dir, config, architecture)
    tokenizer = _load_tokenizer(model_dir, config)
    return LoadedModel(
        model_dir=model_dir,
        model=model,
        tokenizer=tokenizer,
        architecture=architecture,
        eval_results=read_eval_results(model_dir),
        training_args=read_training_args(model_dir),
        provenance=read_provenance(model_dir, config),
        sentence_transformers_files=_sentence_transformers_files(model_dir),
    )


def _sentence_transformers_files(model_dir: Path) -> list[str]:
    try:
        files = module_files(model_dir)
    except ValueError as error:
        raise ModelFolderError(str(error)) from None
    odd = [name for name in files if not is_hub_file(name)]
    if odd:
        raise ModelFolderError(
            f"{model_dir} holds sentence-transformers module files that are not published ({', '.join(odd[:5])}): "
            "module folders are named like 1_Pooling and hold .json, .safetensors or .txt files. Re-save the model "
            "with SentenceTransformer.save."
        )
    return files


def _read_raw_config(model_dir: Path) -> dict:
    if not model_dir.exists():
        raise ModelFolderError(
            f"Model folder {model_dir} does not exist. Pass the folder the model was saved to "
            "(model.save_pretrained(...), or the output folder of `sharedbert finetune` / `sharedbert convert`)."
        )
    if not model_dir.is_dir():
        raise ModelFolderError(f"{model_dir} is a file; pass the folder that holds config.json and model.safetensors.")
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        checkpoints = sorted(
            (p for p in model_dir.glob("checkpoint-*") if (p / "config.json").is_file()),
            key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else -1,
        )
        hint = (
            f" It holds training checkpoints: pass the one to publish, e.g. {checkpoints[-1]}."
            if checkpoints
            else " Save the model into it first: model.save_pretrained(folder) and tokenizer.save_pretrained(folder)."
        )
        raise ModelFolderError(f"No config.json in {model_dir}: it is not a saved model folder.{hint}")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFolderError(f"{config_path} is not valid JSON ({error}); re-save the model.") from None
    if not isinstance(raw, dict):
        raise ModelFolderError(f"{config_path} must hold a JSON object; re-save the model.")
    return raw


def _check_is_sharedbert(model_dir: Path, raw_config: dict) -> str:
    model_type = raw_config.get("model_type")
    architectures = raw_config.get("architectures") or ["SharedBertModel"]
    if model_type != "sharedbert":
        if model_type == "bert" or any(str(a).startswith("Bert") for a in architectures):
            hint = (
                f"convert it first (`sharedbert convert {model_dir} OUT_DIR`, or sharedbert.conversion.bert.from_bert) and "
                "publish OUT_DIR"
            )
        else:
            hint = "upload.py publishes SharedBert models only; use huggingface_hub's `hf upload` for other models"
        raise ModelFolderError(
            f"{model_dir} is not a SharedBert: its config.json has model_type={model_type!r} (expected "
            f"'sharedbert'). To publish it, {hint}."
        )
    if len(architectures) != 1 or architectures[0] not in AUTO_CLASS_OF:
        raise ModelFolderError(
            f"{model_dir / 'config.json'} lists architectures {architectures}; expected exactly one of "
            f"{sorted(AUTO_CLASS_OF)}. Re-save the model with save_pretrained."
        )
    return architectures[0]


def _check_no_code_of_its_own(model_dir: Path) -> None:
    """A published SharedBert carries this package's code files and nothing else, so a folder asking for code of its
    own cannot be published as it is (and its code is not run to find out what it does)."""
    code = remote_code_of(model_dir)
    if code:
        raise ModelFolderError(
            f"{model_dir} asks to run code of its own ({'; '.join(code)}). A published SharedBert carries only this "
            "package's code files, so that code would not be published: remove those entries (a tokenizer saved by "
            "SharedBertTokenizer or BertTokenizer needs none), or publish the folder some other way.")


def _check_weights_present(model_dir: Path) -> None:
    if (model_dir / WEIGHTS_FILE).is_file() or (model_dir / WEIGHTS_INDEX).is_file():
        return
    pickles = sorted(p.name for p in model_dir.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
    if pickles:
        raise ModelFolderError(
            f"{model_dir} holds only pickle weights ({', '.join(pickles)}); SharedBert publishes safetensors only "
            "(unpickling can run arbitrary code). Load them once in a trusted session and call "
            "model.save_pretrained(folder), which writes model.safetensors."
        )
    raise ModelFolderError(
        f"No weights in {model_dir} (no {WEIGHTS_FILE}). Save the trained model there with model.save_pretrained(...)."
    )


def _load_model(model_dir: Path, config: SharedBertConfig, architecture: str):
    # The package's loader runs the weights gate (readable, undamaged, finite, module folders too) first. With the
    # loading info (and mismatched shapes reported, not raised) the model's loader reports instead of refusing; the
    # judgement is made below, stricter than for training: a published model must come entirely from its
    # checkpoint, head included.
    try:
        model, info = from_pretrained(getattr(modeling_sharedbert, architecture), model_dir, config=config,
                                      output_loading_info=True, ignore_mismatched_sizes=True)
    except (ValueError, OSError, RuntimeError) as error:
        # The weights gate's refusals name the file and the fix already.
        named = str(model_dir) in str(error)
        raise ModelFolderError(str(error) if named else f"Cannot load the weights in {model_dir}: {error}") from None
    missing, unexpected = sorted(info["missing_keys"]), sorted(info["unexpected_keys"])
    mismatched = sorted(info.get("mismatched_keys") or [], key=lambda entry: entry[0])
    if missing or unexpected or mismatched:
        checkpoint_keys = (set(model.state_dict()) - set(missing)) | set(unexpected)
        raise ModelFolderError(
            describe_incompatible_checkpoint(
                model_dir, config, checkpoint_keys, missing, unexpected, mismatched, advice=MISMATCH_ADVICE
            )
        )
    return model.eval()


def _load_tokenizer(model_dir: Path, config: SharedBertConfig):
    if not any((model_dir / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")):
        raise ModelFolderError(
            f"No tokenizer in {model_dir} (no tokenizer.json, tokenizer_config.json or vocab.txt). A published model "
            f"needs the tokenizer it was trained with: save it beside the model with tokenizer.save_pretrained("
            f"'{model_dir}')."
        )
    try:
        tokenizer = from_pretrained(AutoTokenizer, model_dir)
    except Exception as error:  # noqa: BLE001 - any failure here means the tokenizer files are unusable
        raise ModelFolderError(f"The tokenizer in {model_dir} does not load: {error}") from None
    if len(tokenizer) > config.vocab_size:
        raise ModelFolderError(
            f"The tokenizer in {model_dir} has {len(tokenizer)} tokens but the model's vocab_size is "
            f"{config.vocab_size}: ids from {config.vocab_size} up would fail. Save the tokenizer the model was "
            "trained with, or resize the embeddings (model.resize_token_embeddings) and fine-tune."
        )
    return tokenizer


def hub_files(folder: str | os.PathLike) -> list[str]:
    """Every file under `folder` as a relative POSIX path (what a staged folder uploads), sorted."""
    folder = Path(folder)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
