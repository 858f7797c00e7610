"""The package's one loader: every command and library route that loads a model, tokenizer, config or
sentence-transformers folder a user names goes through `from_pretrained` or `load_sentence_transformer` here.

Named for what it does (loading, as transformers' `from_pretrained` does it): `weight_checks` holds the checks of
weights files and `training/checkpointing` the run checkpoints; neither loads anything. In order, a load:

1. refuses a name that is neither a folder nor a possible Hub id (`remote_code.check_source`);
2. refuses code the folder ships unless the user passed `trust_remote_code` (`remote_code.check_remote_code`, the
   remote-code gate), and runs transformers with its prompt off (`remote_code.transformers_never_asks`), so code
   given no trust setting is refused rather than asked about; `trust_remote_code` is only ever the user's;
3. for a SharedBert config: refuses a misspelled field, in config.json or as a keyword (`check_config_fields`), and
   an invalid one, naming the field and the folder (`check_config`);
4. for a model: reads safetensors only (any class, a BERT's too; an opt-out is refused) and runs the weights gate
   (`weight_checks.check_weights`) before transformers reads a weight, and `check_finite` after;
5. for a tokenizer: refuses one without a vocabulary (`weight_checks.check_tokenizer_files`, `check_tokenizer`).

The Hub model file keeps what a user without this package needs too: safetensors by default, BERT's weight names, and
the refusal of a checkpoint of another attention type or sharing (`SharedBertPreTrainedModel.from_pretrained`, guarded
by tests/model/test_loading_errors.py and tests/model/test_bert_weight_names.py). The config file keeps no loading
policy: a misspelled field is refused here, for every route of the package.
"""

from __future__ import annotations

import inspect
import json
import logging
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer, PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from .weight_checks import check_finite, check_tokenizer, check_tokenizer_files, check_weights
from .configuration_sharedbert import SharedBertConfig
from .modeling_sharedbert import SharedBertPreTrainedModel
from .remote_code import CODE_PARTS, check_remote_code, check_source, read_json, transformers_never_asks

logger = logging.getLogger(__name__)

SAFETENSORS_ONLY = ("SharedBert loads safetensors weights only (unpickling .bin/.pt files can run code); drop the "
                    "argument.")
# Keywords of `from_pretrained` that choose where and how to load, not a config field: never taken for a typo.
LOADING_OPTIONS = frozenset(inspect.signature(PreTrainedModel.from_pretrained).parameters) | {
    "_commit_hash", "_from_auto", "_from_pipeline", "adapter_kwargs", "adapter_name", "allow_all_kernels",
    "attn_implementation", "device_map", "device_mesh", "distributed_config", "dtype", "experts_implementation",
    "generation_config", "gguf_file", "kernel_config", "key_mapping", "max_memory", "offload_buffers",
    "offload_folder", "output_loading_info", "proxies", "quantization_config", "return_unused_kwargs", "state_dict",
    "subfolder", "torch_dtype", "tp_plan", "tp_size", "tqdm_class", "trust_remote_code", "use_kernels", "variant",
}
# The keywords that say where a folder's files are (passed on when the loader reads a file itself).
HUB_OPTIONS = ("subfolder", "revision", "cache_dir", "token", "local_files_only", "force_download", "proxies")
# Model keywords that are not the config's: left out when the config is checked on its own.
MODEL_OPTIONS = frozenset(LOADING_OPTIONS - set(HUB_OPTIONS) - {"_from_auto", "_from_pipeline", "gguf_file"})


# -- config fields ---------------------------------------------------------------------------------------------------


def check_config_fields(fields, where=None) -> None:
    """Refuse a key of `fields` (a config.json's keys, keyword overrides, a user's config JSON) that is no
    SharedBertConfig field but within two edits of one: a typo that would silently fall back to the default. Other
    unknown keys are kept, as transformers keeps them (Hub configs carry many). `where` names the file in the message."""
    known = SharedBertConfig.__dataclass_fields__
    for key in fields:
        if not isinstance(key, str) or key in known:
            continue
        for field in known:
            if _edit_distance(key.lower(), field) <= min(2, len(field) // 4):
                place = f" in {where}" if where is not None else ""
                raise ValueError(f"Unknown config field `{key}`{place}: did you mean `{field}`?")


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance."""
    row = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, other in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (char != other))
    return row[-1]


def _hub_options(kwargs: dict) -> dict:
    return {key: kwargs[key] for key in HUB_OPTIONS if kwargs.get(key) is not None}


def loads_sharedbert_config(loader, source, **hub_options) -> bool:
    """Whether `loader.from_pretrained(source)` builds a SharedBertConfig: a SharedBert class or config (a BERT
    folder's config is read as a SharedBert one then), or an Auto class given a folder whose model_type is
    sharedbert."""
    if isinstance(loader, type) and issubclass(loader, (SharedBertPreTrainedModel, SharedBertConfig)):
        return True
    return read_json(source, "config.json", {}, **hub_options).get("model_type") == SharedBertConfig.model_type


def check_config(loader, source, kwargs: dict) -> None:
    """For a load that builds a SharedBertConfig: a misspelled field in config.json or among the keywords is refused
    with a suggestion, and an invalid one with a ValueError naming the field and `source` (transformers' own refusal
    names the field only, not which of several folders holds it). A missing or unreadable config.json is left to
    transformers' own error."""
    hub_options = _hub_options(kwargs)
    if not loads_sharedbert_config(loader, source, **hub_options):
        return
    if isinstance(kwargs.get("config"), PreTrainedConfig):  # the caller's config object: checked as it was built
        check_config_fields([key for key in kwargs if key not in LOADING_OPTIONS])
        return
    where = Path(str(source)) / hub_options.get("subfolder", "") / "config.json"
    check_config_fields(read_json(source, "config.json", {}, **hub_options), where)
    overrides = {key: value for key, value in kwargs.items() if key not in MODEL_OPTIONS}
    try:
        _, unused = SharedBertConfig.from_pretrained(str(source), return_unused_kwargs=True, **overrides)
    except Exception as error:
        # The config's refusals are ValueErrors; strict validation's carry the ValueError or TypeError as their cause.
        # A missing or unreadable file stays the OSError it is.
        if isinstance(error, OSError) or not isinstance(error, ValueError) and not isinstance(
                error.__cause__, (ValueError, TypeError)):
            raise
        raise ValueError(f"Cannot load the SharedBert config of {source}: {error}") from error
    check_config_fields([key for key in unused if key not in LOADING_OPTIONS])


# -- models, tokenizers, configs -----------------------------------------------------------------------------------


def check_before_loading(source, trust_remote_code: bool = False, parts=tuple(CODE_PARTS),
                         weights: bool = True) -> None:
    """Both gates, in the order every load of a folder or Hub id the user names runs them, before transformers sees
    it: the name is a folder or could be a Hub id (`check_source`), it ships no code the user did not allow
    (`check_remote_code`, over `parts`), and, with `weights`, its weights files are readable, undamaged and finite
    (`weight_checks.check_weights`)."""
    check_source(source)
    check_remote_code(source, trust_remote_code, parts)
    if weights:
        check_weights(source)


def is_model_loader(loader) -> bool:
    """Whether `loader` loads weights: an AutoModel* class (every one lives in that module) or a model class."""
    return loader.__module__ == "transformers.models.auto.modeling_auto" or (
        isinstance(loader, type) and issubclass(loader, PreTrainedModel))


def is_tokenizer_loader(loader) -> bool:
    return loader is AutoTokenizer or isinstance(loader, type) and issubclass(loader, PreTrainedTokenizerBase)


def from_pretrained(loader, source, trust_remote_code: bool = False, **kwargs):
    """`loader.from_pretrained(source, trust_remote_code=..., **kwargs)` (an Auto class, a model, tokenizer or config
    class) the way the package loads what a user names: after `check_source` and the remote-code gate, with
    transformers' prompt off; a SharedBert config checked (`check_config`); a model from safetensors only, its files
    checked before loading (the weights gate) and its weights after; a tokenizer with a vocabulary."""
    check_before_loading(source, trust_remote_code, weights=False)
    if is_model_loader(loader):
        return _load_model(loader, source, trust_remote_code, kwargs)
    tokenizer = is_tokenizer_loader(loader)
    if tokenizer:
        check_tokenizer_files(Path(str(source)) / kwargs.get("subfolder", ""))
    else:
        check_config(loader, source, kwargs)
    with transformers_never_asks():
        loaded = loader.from_pretrained(str(source), trust_remote_code=trust_remote_code, **kwargs)
    if tokenizer:
        check_tokenizer(loaded, source)
    return loaded


def _load_model(loader, source, trust_remote_code: bool, kwargs: dict):
    """A model: safetensors only (transformers would otherwise read a BERT folder's pytorch_model.bin), the config
    checked, the files checked before loading and the weights after."""
    if kwargs.setdefault("use_safetensors", True) is not True:
        raise ValueError(f"use_safetensors={kwargs['use_safetensors']!r}: {SAFETENSORS_ONLY}")
    check_config(loader, source, kwargs)
    check_weights(source, kwargs.get("subfolder", ""))
    with transformers_never_asks():
        loaded = loader.from_pretrained(str(source), trust_remote_code=trust_remote_code, **kwargs)
    check_finite(loaded[0] if isinstance(loaded, tuple) else loaded, source)
    return loaded


# -- sentence-transformers folders -----------------------------------------------------------------------------------

# A sentence-transformers model's list of modules (Transformer, Pooling, Normalize, ...) and their folders.
MODULES_FILE = "modules.json"


def is_sentence_transformer(folder) -> bool:
    """Whether `folder` is a sentence-transformers model (it has modules.json)."""
    return (Path(folder) / MODULES_FILE).is_file()


def read_modules(folder) -> list[dict]:
    """The modules a sentence-transformers folder's modules.json lists, or a refusal naming the file: not JSON, not a
    list of modules with a type, or a module folder outside the model folder."""
    path = Path(folder) / MODULES_FILE
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON ({error}); re-save the sentence-transformers model.") from None
    if not isinstance(modules, list) or not all(isinstance(m, dict) and "type" in m for m in modules):
        raise ValueError(f"{path} must list modules as objects with a 'type'; re-save the sentence-transformers model.")
    for module in modules:
        path_in = str(module.get("path", ""))
        if path_in.startswith(("/", "\\")) or ".." in Path(path_in).parts:
            raise ValueError(f"{path} names module folder {path_in!r}, outside the model folder.")
    return modules


def transformer_folders(folder) -> list[Path]:
    """The local folders a sentence-transformers model's Transformer modules load their model and tokenizer from (the
    folder itself without modules.json); none for a Hub id."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    if not is_sentence_transformer(folder):
        return [folder]
    return [folder / module.get("path", "") for module in read_modules(folder)
            if str(module["type"]).endswith(".Transformer")]


def load_sentence_transformer(folder, trust_remote_code: bool = False, **kwargs):
    """`SentenceTransformer(folder)` on the CPU (kwargs go to SentenceTransformer), after both gates: a folder's own
    code (an auto_map, a module class of its own) runs only with `trust_remote_code`, and without it is refused before
    anything of it is imported; the weights of the model and of every module folder (a Dense layer's) are checked;
    each Transformer module's config is checked as `from_pretrained` checks one and must have a tokenizer
    vocabulary."""
    from sentence_transformers import SentenceTransformer

    check_before_loading(folder, trust_remote_code)
    folders = transformer_folders(folder)
    for path in folders:
        check_config(AutoConfig, path, {})
        check_tokenizer_files(path)
    kwargs.setdefault("device", "cpu")
    with transformers_never_asks():
        model = SentenceTransformer(str(folder), trust_remote_code=trust_remote_code, **kwargs)
    if folders and getattr(model, "tokenizer", None) is not None:
        check_tokenizer(model.tokenizer, folders[0])
    return model


__all__ = [
    "LOADING_OPTIONS",
    "MODULES_FILE",
    "check_before_loading",
    "check_config",
    "check_config_fields",
    "from_pretrained",
    "is_model_loader",
    "is_sentence_transformer",
    "is_tokenizer_loader",
    "load_sentence_transformer",
    "loads_sharedbert_config",
    "read_modules",
    "transformer_folders",
]
