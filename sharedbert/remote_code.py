"""Remote code is the user's to allow: no model folder or Hub repository runs code of its own unless the user passed
`trust_remote_code=True` (`--trust-remote-code` on the command line).

transformers already refuses remote code when `trust_remote_code=False` is passed (and asks at a prompt when it is
left as None), but its message names only its own keyword, and a sentence-transformers folder can ask for code in a
third place. `check_remote_code` reads the folder's JSON files (through `cached_file`, which runs nothing) before any
loader sees it and refuses with a message that names the file, the code it would run and the flag. SharedBert folders
need no remote code where this package is installed: its classes are registered with the Auto classes, which
transformers prefers to a folder's own code when `trust_remote_code` is off.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import field

from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import PreTrainedModel
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.tokenization_auto import tokenizer_class_from_name
from transformers.utils import cached_file

from .checkpoint_checks import load_model

logger = logging.getLogger(__name__)

FLAG = "trust_remote_code=True (--trust-remote-code on the command line)"


class RemoteCodeRefused(ValueError):
    """A model asks to run code it ships, and the user did not allow it."""


def _read_json(source, filename: str, empty, **hub_options):
    """`filename` of a local folder or Hub repository, parsed; `empty` when it is absent, broken or not of `empty`'s
    type (the loader reports a broken file in its own words)."""
    try:
        path = cached_file(str(source), filename, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False, **hub_options)
    except OSError:  # not a folder and not a reachable repository: the loader's own error says so
        return empty
    if path is None:
        return empty
    try:
        with open(path, encoding="utf-8") as handle:
            loaded = json.load(handle)
    except (OSError, ValueError):
        return empty
    return loaded if isinstance(loaded, type(empty)) else empty


def remote_code_of(source, **hub_options) -> list[str]:
    """What loading `source` (a folder or Hub id) would import from the folder or repository itself, as
    "file: reference" lines; empty when the installed packages provide every class it names."""
    found = []
    config = _read_json(source, "config.json", {}, **hub_options)
    known_model = config.get("model_type") in CONFIG_MAPPING
    if isinstance(config.get("auto_map"), dict) and not known_model:
        found += [f"config.json: {name} -> {ref}" for name, ref in config["auto_map"].items()]
    tokenizer = _read_json(source, "tokenizer_config.json", {}, **hub_options)
    tokenizer_map = tokenizer.get("auto_map")
    if isinstance(tokenizer_map, dict) and "AutoTokenizer" in tokenizer_map:
        tokenizer_map = tokenizer_map["AutoTokenizer"]
    # Whatever the model type, AutoTokenizer imports the folder's tokenizer when allowed to, unless the class it names
    # is installed; without that class, and not allowed, it cannot load the tokenizer at all.
    class_name = tokenizer.get("tokenizer_class")
    installed = isinstance(class_name, str) and tokenizer_class_from_name(class_name.removesuffix("Fast"))
    if tokenizer_map and not installed:
        found.append(f"tokenizer_config.json: AutoTokenizer -> {tokenizer_map}")
    # sentence-transformers imports a module class that is not its own from the folder, when trusted.
    modules = _read_json(source, "modules.json", [], **hub_options)
    found += [f"modules.json: {entry.get('type')}" for entry in modules
              if isinstance(entry, dict) and not str(entry.get("type", "")).startswith("sentence_transformers.")]
    return found


def check_remote_code(source, trust_remote_code: bool = False, **hub_options) -> None:
    """Refuse `source` before anything of it is imported when loading it would run code it ships and
    `trust_remote_code` is off. With the flag on, log what will run."""
    code = remote_code_of(source, **hub_options)
    if not code:
        return
    listed = "; ".join(code)
    if not trust_remote_code:
        raise RemoteCodeRefused(
            f"{source} ships code that loading it would run ({listed}). Nothing of it was imported. Inspect that "
            f"code, and only if you trust it pass {FLAG}."
        )
    logger.warning("Running code shipped with %s, as trust_remote_code=True allows: %s", source, listed)


def check_source(source) -> None:
    """Refuse a model path that names no folder, in the package's words: transformers would take it for a Hub id and
    answer that repository ids must be of the form 'owner/name'. A name that could be a Hub id is left to the Hub."""
    if os.path.exists(source):
        return
    try:
        validate_repo_id(str(source))
    except HFValidationError:
        raise FileNotFoundError(
            f"{source}: no such model folder. Give the folder a model was saved to (it holds config.json), or a Hub "
            "id such as owner/name.") from None


def from_pretrained(loader, source, trust_remote_code: bool = False, **kwargs):
    """`loader.from_pretrained(source, trust_remote_code=..., **kwargs)` (an Auto class, a model class or a tokenizer
    class) after `check_source` and `check_remote_code`: the way the package's jobs load what a user names. A model
    is loaded through `checkpoint_checks.load_model`: safetensors only, its files and weights checked."""
    check_source(source)
    check_remote_code(source, trust_remote_code)
    # Every AutoModel* class lives in that module; tokenizers and configs take no weights options.
    if loader.__module__ == "transformers.models.auto.modeling_auto" or issubclass(loader, PreTrainedModel):
        return load_model(loader, source, trust_remote_code=trust_remote_code, **kwargs)
    return loader.from_pretrained(str(source), trust_remote_code=trust_remote_code, **kwargs)


def trust_remote_code_option():
    """The `trust_remote_code` field of a job's arguments: off unless the user turns it on."""
    return field(default=False, metadata={
        "help": "Allow a model folder or Hub repository to run code it ships (its auto_map or modules.json). Off: such "
        "a model is refused before anything of it is imported. SharedBert models need no remote code where this "
        "package is installed."})


__all__ = ["FLAG", "RemoteCodeRefused", "check_remote_code", "check_source", "from_pretrained", "remote_code_of",
           "trust_remote_code_option"]
