"""Remote code is the user's to allow: no model folder or Hub repository runs code of its own unless the user passed
`trust_remote_code=True` (`--trust-remote-code` on the command line).

transformers already refuses remote code when `trust_remote_code=False` is passed (and asks at a prompt when it is
left as None), but its message names only its own keyword, and a sentence-transformers folder can ask for code in a
third place. `check_remote_code` reads the folder's JSON files (through `cached_file`, which runs nothing) before any
loader sees it and refuses with a message that names the file, the code it would run and the flag. It reads every
config nested in config.json too: `EncoderDecoderModel` builds its encoder and decoder through `Auto*.from_config`
without a trust setting, so a sub-config asking for code would otherwise reach transformers' prompt. It is one of the
two gates every load passes (the other is `weight_checks.check_weights`); the package's loader,
`sharedbert.loading`, runs both. SharedBert folders need no remote code where this package is installed: its classes
are registered with the Auto classes, which transformers prefers to a folder's own code when `trust_remote_code` is
off.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
from dataclasses import field

from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import dynamic_module_utils
from transformers.models.auto import modeling_auto
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.tokenization_auto import tokenizer_class_from_name
from transformers.utils import cached_file

logger = logging.getLogger(__name__)

FLAG = "trust_remote_code=True (--trust-remote-code on the command line)"


class RemoteCodeRefused(ValueError):
    """A model asks to run code it ships, and the user did not allow it."""


def read_json(source, filename: str, empty, **hub_options):
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


# The files whose `auto_map` can make a loader import code, by the part of a model they describe. config.json's
# sub-configs (an encoder-decoder's `encoder` and `decoder`, any nested config) are read too: EncoderDecoderModel
# builds its parts through Auto*.from_config without a trust setting, which asks at transformers' prompt.
CODE_PARTS = {
    "model": ("config.json",),
    "tokenizer": ("tokenizer_config.json",),
    "processor": ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json"),
    "sentence-transformers": ("modules.json",),
}
# Auto classes that are not model classes, and the mapping that says whether transformers has a class of its own.
_OTHER_AUTO_MAPPINGS = {
    "AutoTokenizer": "transformers.models.auto.tokenization_auto:TOKENIZER_MAPPING",
    "AutoProcessor": "transformers.models.auto.processing_auto:PROCESSOR_MAPPING",
    "AutoImageProcessor": "transformers.models.auto.image_processing_auto:IMAGE_PROCESSOR_MAPPING",
    "AutoFeatureExtractor": "transformers.models.auto.feature_extraction_auto:FEATURE_EXTRACTOR_MAPPING",
    "AutoVideoProcessor": "transformers.models.auto.video_processing_auto:VIDEO_PROCESSOR_MAPPING",
}


def has_local_class(auto_name: str, model_type) -> bool:
    """Whether transformers has a class of its own, or one registered (as SharedBert's are), for the Auto class
    `auto_name` and `model_type`: then, without `trust_remote_code`, it uses that class and asks nothing. Otherwise an
    `auto_map` entry for `auto_name` is code that loading would import (or ask about, at transformers' prompt)."""
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        return False
    if auto_name == "AutoConfig":
        return True
    if auto_name in _OTHER_AUTO_MAPPINGS:
        module, _, name = _OTHER_AUTO_MAPPINGS[auto_name].partition(":")
        mapping = getattr(importlib.import_module(module), name)
    elif isinstance(auto_name, str) and auto_name.startswith("AutoModel") and auto_name.isidentifier():
        mapping = getattr(getattr(modeling_auto, auto_name, None), "_model_mapping", None)
    else:
        return False
    return mapping is not None and CONFIG_MAPPING[model_type] in mapping


def _references(value) -> list[str]:
    """The class references of one `auto_map` entry: a string, or a list of them (a tokenizer's [slow, fast])."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for item in value if isinstance(item, str)]
    return []


def _sub_configs(config: dict, where: str = "config.json", depth: int = 0):
    """(where, dict) for `config` and every config nested in it, at any depth: an encoder-decoder's encoder and
    decoder, a multimodal model's text_config, ..."""
    yield where, config
    if depth >= 8:
        return
    for key, value in config.items():
        if isinstance(value, dict) and key != "auto_map":
            yield from _sub_configs(value, f"{where} {key}", depth + 1)


def _tokenizer_is_local(settings: dict, model_type) -> bool:
    """Whether AutoTokenizer, with `trust_remote_code` off, uses an installed class rather than the folder's: the one
    `tokenizer_class` names when that is installed, else the model type's. A `tokenizer_class` that is not installed
    counts as code of the folder's: without it the tokenizer cannot load at all."""
    class_name = settings.get("tokenizer_class")
    if isinstance(class_name, str):
        return bool(tokenizer_class_from_name(class_name.removesuffix("Fast")))
    return has_local_class("AutoTokenizer", model_type)


def _auto_map_entries(where: str, settings: dict, model_type):
    """(where, Auto class, reference, whether an installed class is used instead) for each `auto_map` entry of one
    JSON object (a config, a sub-config, a tokenizer or processor config)."""
    auto_map = settings.get("auto_map")
    if isinstance(auto_map, (list, tuple)):  # a tokenizer's legacy form: [slow, fast]
        auto_map = {"AutoTokenizer": auto_map}
    if not isinstance(auto_map, dict):
        return
    for auto_name, value in auto_map.items():
        if auto_name == "AutoTokenizer":
            local = _tokenizer_is_local(settings, model_type)
        else:
            local = has_local_class(auto_name, model_type)
        for reference in _references(value):
            yield where, auto_name, reference, local


def code_references(source, parts=tuple(CODE_PARTS), _depth: int = 0, **hub_options) -> list[tuple]:
    """Every class reference a folder or Hub id's JSON files hold (all `auto_map` forms: `module.Class`,
    `repo--module.Class`, `folder--module.Class`; sentence-transformers module types that are not
    sentence-transformers' own), as (where, Auto class or "module", reference, whether an installed class is used
    instead without `trust_remote_code`). Reads JSON only (through `cached_file`): nothing of the folder runs."""
    found = []
    config = read_json(source, "config.json", {}, **hub_options)
    model_type = config.get("model_type")
    if "model" in parts:
        for where, settings in _sub_configs(config):
            found += _auto_map_entries(where, settings, settings.get("model_type"))
    for part in ("tokenizer", "processor"):
        if part in parts:
            for filename in CODE_PARTS[part]:
                found += _auto_map_entries(filename, read_json(source, filename, {}, **hub_options), model_type)
    if "sentence-transformers" in parts:
        found += _module_references(source, parts, _depth, **hub_options)
    return found


def _module_references(source, parts, depth: int, **hub_options) -> list[tuple]:
    """sentence-transformers imports a module class that is not its own from the folder, when trusted; a module kept
    in a folder of its own (0_Transformer/) loads that folder's config and tokenizer with the same setting (read as a
    `subfolder`, so a Hub repository's module folders are read too)."""
    found = []
    for entry in read_json(source, "modules.json", [], **hub_options):
        if not isinstance(entry, dict):
            continue
        kind = str(entry.get("type", ""))
        found.append(("modules.json", "module", kind, kind.startswith("sentence_transformers.")))
        path = entry.get("path")
        inside = isinstance(path, str) and path and not path.startswith(("/", "\\")) and ".." not in path
        if inside and depth < 3:
            subfolder = "/".join(part for part in (hub_options.get("subfolder"), path) if part)
            found += [(f"{path}/{where}", *rest) for where, *rest in code_references(
                source, parts, depth + 1, **{**hub_options, "subfolder": subfolder})]
    return found


def remote_code_of(source, parts=tuple(CODE_PARTS), **hub_options) -> list[str]:
    """What loading `source` (a folder or Hub id) would import from the folder, its sub-configs or another
    repository, as "file: reference" lines; empty when the installed packages provide every class it names. `parts`:
    which of `CODE_PARTS` to read (all by default)."""
    return [f"{where}: {auto_name} -> {reference}" if auto_name != "module" else f"{where}: {reference}"
            for where, auto_name, reference, local in code_references(source, parts, **hub_options) if not local]


def check_remote_code(source, trust_remote_code: bool = False, parts=tuple(CODE_PARTS), **hub_options) -> None:
    """The remote-code gate: refuse `source` before anything of it is imported, and before transformers could ask at
    its prompt, when loading it would run code it ships (in config.json or any sub-config, the tokenizer or processor
    configs, or modules.json; `parts` narrows that to some of `CODE_PARTS`) and `trust_remote_code` is off. With the
    flag on, log what will run."""
    code = remote_code_of(source, parts, **hub_options)
    if not code:
        return
    listed = "; ".join(code)
    if not trust_remote_code:
        raise RemoteCodeRefused(
            f"{source} ships code that loading it would run ({listed}). Nothing of it was imported. Inspect that "
            f"code, and only if you trust it pass {FLAG}; or remove those auto_map entries."
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


@contextlib.contextmanager
def transformers_never_asks():
    """Within this block transformers refuses remote code it was given no trust setting for, where it would ask at its
    interactive prompt ("Do you wish to run the custom code? [y/N]"; EncoderDecoderModel builds its parts so, even when
    the user passed the flag): what it does with its prompt's timeout at 0. A second line behind `check_remote_code`,
    for whatever that gate does not know of."""
    previous = dynamic_module_utils.TIME_OUT_REMOTE_CODE
    dynamic_module_utils.TIME_OUT_REMOTE_CODE = 0
    try:
        yield
    finally:
        dynamic_module_utils.TIME_OUT_REMOTE_CODE = previous


def trust_remote_code_option():
    """The `trust_remote_code` field of a job's arguments: off unless the user turns it on."""
    return field(default=False, metadata={
        "help": "Allow a model folder or Hub repository to run code it ships (its auto_map or modules.json). Off: such "
        "a model is refused before anything of it is imported. SharedBert models need no remote code where this "
        "package is installed."})


__all__ = ["CODE_PARTS", "FLAG", "RemoteCodeRefused", "check_remote_code", "check_source", "code_references",
           "has_local_class", "read_json", "remote_code_of", "transformers_never_asks", "trust_remote_code_option"]
