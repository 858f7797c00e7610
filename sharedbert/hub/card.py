"""Model cards: the README.md of a published SharedBert (`build_model_card`, rendered from `template.md`, which
ships in this package). The shorter one `sharedbert convert` writes beside a converted model is conversion's
(`sharedbert.conversion.card`)."""

from __future__ import annotations

import importlib.resources
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..parameter_counts import compare_with_standard_bert
from .errors import HubError
from .folder import LoadedModel
from .metadata import (
    GLUE_HUB_ID,
    GLUE_TASKS,
    hub_base_model,
    looks_like_hub_id,
    looks_like_local_path,
    short_local_name,
)

DEFAULT_LICENSE = "apache-2.0"
DEFAULT_LANGUAGE = ("en",)

# Where the card template lives: package data, so that an installed wheel builds cards too.
TEMPLATE_NAME = "template.md"

# Architecture name -> the pipeline task of the card's metadata and usage example.
PIPELINE_TAG_OF = {
    "SharedBertModel": "feature-extraction",
    "SharedBertForMaskedLM": "fill-mask",
    "SharedBertForSequenceClassification": "text-classification",
    "SharedBertForTokenClassification": "token-classification",
    "SharedBertForQuestionAnswering": "question-answering",
    "SharedBertForMultipleChoice": None,  # no pipeline for multiple choice
    "SharedBertLMHeadModel": "text-generation",
    "SharedBertForPreTraining": "fill-mask",
    "SharedBertForNextSentencePrediction": None,  # no pipeline for next-sentence prediction
    "SharedBertForConditionalGeneration": "text2text-generation",
}

ATTENTION_DESCRIPTIONS = {
    "shared": "one shared projection for queries, keys and values (S = XW + b, then Q, K and V are S scaled per "
    "channel; arXiv 2412.00359)",
    "standard": "BERT's separate query, key and value projections",
    "symmetric": "symmetric attention (the keys reuse the query projection: K = Q)",
    "pairwise": "pairwise attention (K = Q with a learned bilinear form per head)",
    "shared_kv": "its own query projection, and one shared projection for keys and values (K and V are S scaled per "
    "channel)",
    "shared_head_query": "one shared projection S for keys and values, and a query made from S by a learned matrix per "
    "head, so that scores have a direction (Q = (S scaled per channel)·M_h, K = V = S)",
    "shared_lowrank_query": "one shared projection S for keys and values, and a query that adds a low-rank projection "
    "of the input to S, so that scores have a direction (Q = S scaled per channel + X·A·B, K = V = S)",
}
LANGUAGE_NAMES = {"en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
                  "nl": "Dutch", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "ru": "Russian", "ar": "Arabic",
                  "hi": "Hindi", "bn": "Bengali", "multilingual": "multilingual"}
HEAD_DESCRIPTIONS = {
    "SharedBertModel": "encoder (no task head) for sentence and token embeddings",
    "SharedBertForMaskedLM": "masked-language model",
    "SharedBertForSequenceClassification": "sequence classifier",
    "SharedBertForTokenClassification": "token classifier",
    "SharedBertForQuestionAnswering": "extractive question-answering model",
    "SharedBertForMultipleChoice": "multiple-choice model",
    "SharedBertLMHeadModel": "causal language model (decoder)",
    "SharedBertForPreTraining": "pre-training model (masked LM and next-sentence prediction)",
    "SharedBertForNextSentencePrediction": "next-sentence classifier",
    "SharedBertForConditionalGeneration": "sequence-to-sequence model (encoder and decoder)",
}
INTENDED_USES = {
    "SharedBertModel": "Sentence and token embeddings (feature extraction) for {languages} text, and a starting point "
    "for fine-tuning on a downstream task.",
    "SharedBertForMaskedLM": "Filling in masked tokens in {languages} text, and a starting point for fine-tuning on a "
    "downstream task (load it with a task head such as AutoModelForSequenceClassification).",
    "SharedBertForSequenceClassification": "Classifying {languages} sentences or sentence pairs into the labels it "
    "was trained on{labels}.",
    "SharedBertForTokenClassification": "Labelling each token of {languages} text with the labels it was trained "
    "on{labels}.",
    "SharedBertForQuestionAnswering": "Extracting the answer span to a question from a {languages} context passage.",
    "SharedBertForMultipleChoice": "Choosing the best of several candidate continuations or answers for {languages} "
    "text.",
    "SharedBertLMHeadModel": "Generating {languages} text left to right (with `generate`), or as the decoder of an "
    "encoder-decoder model.",
    "SharedBertForPreTraining": "Continued pre-training (masked LM and next-sentence prediction) on {languages} text, "
    "and a starting point for fine-tuning.",
    "SharedBertForNextSentencePrediction": "Judging whether a {languages} sentence follows another.",
    "SharedBertForConditionalGeneration": "Rewriting {languages} text into {languages} text (with `generate`) in the "
    "task it was trained on.",
}
CITATION = """@misc{kowsher2024selfattentionneedseparateweights,
  title         = {Does Self-Attention Need Separate Weights in Transformers?},
  author        = {Md Kowsher and Nusrat Jahan Prottasha and Chun-Nam Yu and Ozlem Ozmen Garibay and Niloofar Yousefi},
  year          = {2024},
  eprint        = {2412.00359},
  archivePrefix = {arXiv},
  primaryClass  = {cs.CL},
  url           = {https://arxiv.org/abs/2412.00359}
}"""
# Training settings worth a line in the card, in this order, when the tool wrote a full TrainingArguments dump.
HYPERPARAMETER_KEYS = (
    "task", "dataset", "train_file", "train_examples", "train_samples", "num_train_examples", "max_seq_length",
    "max_length", "learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size", "train_batch_size",
    "gradient_accumulation_steps", "weight_decay", "warmup_steps", "warmup_ratio", "lr_scheduler_type", "optim",
    "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "label_smoothing_factor", "fp16", "bf16", "seed",
    "train_runtime",
)
# Never copied into a card: credentials, and local paths that say nothing to readers (and leak the author's disk).
PRIVATE_KEY_PATTERN = re.compile(
    r"token|secret|password|passwd|credential|auth|_key$|^key$|^hub_|push_to_hub|_dir$|_path$|^output|^logging|"
    r"report_to|resume|cache|^device$|local_rank|deepspeed|fsdp",
    re.IGNORECASE,
)


def _card_value(value):
    """A scalar for the card (paths reduced to their last component), or None to leave the entry out."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str) and value:
        return _cell(Path(value).name if looks_like_local_path(value) else value)
    return None


def _cell(text: str) -> str:
    """`text` made safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _scalar_items(mapping: dict, keys=None, skip=()) -> list[tuple[str, Any]]:
    items = []
    for key in keys if keys is not None else mapping:
        if key not in mapping or key in skip or PRIVATE_KEY_PATTERN.search(key):
            continue
        value = mapping[key]
        if key == "max_steps" and value == -1:  # TrainingArguments' "not set"
            continue
        value = _card_value(value)
        if value is not None:
            items.append((key, value))
    return items


def _hyperparameters(training_args: dict) -> list[tuple[str, Any]]:
    if "output_dir" in training_args:  # a TrainingArguments dump: only the settings that describe the run
        return _scalar_items(training_args, HYPERPARAMETER_KEYS)
    return _scalar_items(training_args)


def _datasets_from(*values) -> list[str]:
    found = []
    for value in values:
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and item.lower() == "glue":
                item = GLUE_HUB_ID
            if looks_like_hub_id(item) and ("/" in str(item)) and item not in found:
                found.append(item)
    return found


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def read_template(template_path: str | os.PathLike | None = None) -> str:
    """The text of the card template: `template_path`, or by default the `template.md` shipped in this package."""
    if template_path is None:
        return importlib.resources.files(__package__).joinpath(TEMPLATE_NAME).read_text(encoding="utf-8")
    template = Path(template_path)
    if not template.is_file():
        raise HubError(f"Model card template {template} not found; pass an existing file, or none for the default.")
    return template.read_text(encoding="utf-8")


def build_model_card(
    loaded: LoadedModel,
    repo_id: str,
    *,
    license: str | None = None,
    language: list[str] | tuple[str, ...] | None = None,
    base_model: str | None = None,
    datasets: list[str] | None = None,
    template_path: str | os.PathLike | None = None,
    backends: list[dict] | None = None,
):
    """Render the model card (a `huggingface_hub.ModelCard`) for `loaded`, to be published as `repo_id`.

    Arguments left as None come from `sharedbert_provenance.json` when it has them, else from the defaults
    (license apache-2.0, language en). `backends`: the checks of the exported ONNX / OpenVINO files staged with it
    (`sharedbert.hub.exported_files.check_backend_files`), which the card lists with how to load each."""
    facts = _card_facts(loaded, license, language, base_model, datasets)
    context = {
        "repo_id": repo_id,
        "title": repo_id.split("/")[-1],
        **_model_context(loaded, facts),
        **_provenance_context(loaded, facts),
        **_backend_context(backends or []),
        "citation": CITATION,
    }
    card = ModelCard.from_template(_card_metadata(loaded, repo_id, facts), template_str=read_template(template_path),
                                   **context)
    card.text = _tidy_markdown(card.text)
    return card


@dataclass
class _CardFacts:
    """The facts the card is built from: `build_model_card`'s arguments completed from the model's provenance and the
    defaults, and what the model folder says about itself (its sentence-transformers modules, hence its pipeline)."""

    license: str
    language: list[str]
    base_model: str | None  # a Hub id, or a name (a local path shortened: short_local_name)
    base_model_on_hub: str | None
    datasets: list[str]
    sentence: dict | None  # `_sentence_transformers_settings` (None for a plain transformers model)
    pipeline_tag: str | None


def _card_facts(loaded: LoadedModel, license, language, base_model, datasets) -> _CardFacts:
    provenance, training_args = loaded.provenance, loaded.training_args
    license = license or provenance.get("license") or DEFAULT_LICENSE
    language = list(language or _as_list(provenance.get("language")) or DEFAULT_LANGUAGE)
    base_model = base_model or provenance.get("base_model")
    base_model_on_hub = hub_base_model(base_model)
    if base_model_on_hub:
        base_model = base_model_on_hub
    elif base_model:
        base_model = short_local_name(base_model) if looks_like_local_path(base_model) else base_model
    trained_on = [training_args.get(k) for k in ("dataset", "dataset_name", "train_dataset")]
    if re.sub(r"[^a-z0-9]", "", str(training_args.get("task", "")).lower()) in GLUE_TASKS:
        trained_on.append(GLUE_HUB_ID)
    if "datasets" not in provenance:
        # Nothing says what the model was trained on; a fine-tuned model is evaluated on its task's dataset. Where
        # the provenance lists its training data (even none, as a build healed on local text), an evaluation-only
        # dataset such as STS-B stays out of the card's training data.
        trained_on += [result["dataset"] for result in loaded.eval_results]
    datasets = _datasets_from(_as_list(datasets), _as_list(provenance.get("datasets")), trained_on)
    sentence = _sentence_transformers_settings(loaded)
    pipeline_tag = "sentence-similarity" if sentence is not None else PIPELINE_TAG_OF[loaded.architecture]
    return _CardFacts(license, language, base_model, base_model_on_hub, datasets, sentence, pipeline_tag)


def _card_metadata(loaded: LoadedModel, repo_id: str, facts: _CardFacts):
    """The card's YAML metadata: license, language, library, pipeline, tags, datasets, base model, and the
    evaluation results as the Hub's model-index."""
    config = loaded.config
    tags = ["sharedbert", "custom_code", "bert", f"{config.attention_type}-attention"]
    if facts.sentence is not None:
        tags += ["sentence-transformers", "feature-extraction"]
    if config.layer_sharing != "none":
        tags.append("cross-layer-sharing")
    model_index = [
        EvalResult(
            task_type=r["task_type"] or facts.pipeline_tag or "text-classification",
            task_name=r["task"],
            dataset_type=r["dataset"],
            dataset_name=r["dataset_name"] or r["dataset"],
            dataset_config=r["dataset_config"],
            dataset_split=r["split"],
            metric_type=r["metric"],
            metric_value=r["value"],
        )
        for r in loaded.eval_results
        if r["dataset"]  # the Hub's model-index needs a dataset id; others are listed in the card body only
    ]
    return ModelCardData(
        license=facts.license,
        language=facts.language,
        library_name="sentence-transformers" if facts.sentence is not None else "transformers",
        pipeline_tag=facts.pipeline_tag,
        tags=tags,
        datasets=facts.datasets or None,
        base_model=facts.base_model_on_hub,
        model_name=repo_id.split("/")[-1] if model_index else None,
        eval_results=model_index or None,
    )


def _model_context(loaded: LoadedModel, facts: _CardFacts) -> dict:
    """The template's values that describe the model: its class and usage, attention, layers, tokenizer and
    parameter counts against a standard BERT."""
    config, architecture = loaded.config, loaded.architecture
    rows = compare_with_standard_bert(config, architecture)
    pipeline_tag = facts.pipeline_tag
    return {
        "architecture": architecture,
        "auto_class": loaded.auto_class,
        "head_description": HEAD_DESCRIPTIONS[architecture],
        "pipeline_task": pipeline_tag if pipeline_tag not in ("feature-extraction", "sentence-similarity") else None,
        "sentence_transformers": facts.sentence,
        "pooling": (facts.sentence or {}).get("pooling") or "mean",
        "mask_token": getattr(loaded.tokenizer, "mask_token", None),
        "attention_type": config.attention_type,
        "attention_description": attention_description(config, config.attention_type),
        "stack_description": ("a BERT-style encoder and decoder" if config.is_encoder_decoder
                              else "a causal BERT-style decoder" if config.is_decoder else "a BERT encoder"),
        # Only a model with cross-attention (a decoder, a seq2seq model) has a cross-attention row.
        "cross_attention_type": config.effective_cross_attention_type if config.has_cross_attention else None,
        "cross_attention_description": attention_description(config, config.effective_cross_attention_type),
        "sharing_description": _sharing_description(config),
        "tied_embeddings": bool(config.tie_word_embeddings),
        "config": config,
        "vocab_size": f"{config.vocab_size:,}",
        "tokenizer_class": type(loaded.tokenizer).__name__,
        "lowercase": getattr(loaded.tokenizer, "do_lower_case", None),
        "param_rows": [
            {"group": row.group, "model": f"{row.model:,}", "bert": f"{row.bert:,}",
             "change": _change(row.model, row.bert)}
            for row in rows
        ],
        "param_summary": _param_summary(rows[-1].model, rows[-1].bert),
        "max_positions": config.max_position_embeddings,
    }


def _provenance_context(loaded: LoadedModel, facts: _CardFacts) -> dict:
    """The template's values that say where the model comes from and what it is for: base model, conversion, training
    data and settings, evaluation results, labels, languages and intended use."""
    architecture = loaded.architecture
    labels = _labels(loaded.config) if architecture in ("SharedBertForSequenceClassification",
                                                           "SharedBertForTokenClassification") else []
    languages = ", ".join(LANGUAGE_NAMES.get(code, code) for code in facts.language)
    return {
        "base_model": facts.base_model,
        "base_model_on_hub": facts.base_model_on_hub,
        # The provenance's whole numbers are counts (healing steps, sentences), read easier as 9,184.
        "conversion": [(key, f"{value:,}" if isinstance(value, int) else value)
                       for key, value in _scalar_items(loaded.provenance,
                                                       skip=("base_model", "license", "language", "datasets"))],
        "training_datasets": facts.datasets,
        "hyperparameters": _hyperparameters(loaded.training_args),
        "eval_results": loaded.eval_results,
        "labels": labels,
        "intended_use": INTENDED_USES[architecture].format(
            languages=languages, labels=f" ({', '.join(labels)})" if labels else ""
        ),
        "languages": languages,
    }


def _backend_context(backends: list[dict]) -> dict:
    """The template's values for the exported ONNX / OpenVINO files staged with the model."""
    return {
        "backends": _backend_rows(backends),
        # The files the card's loading example uses: an int8 one where there is one (the point of shipping them).
        "onnx_example": _example(backends, "onnxruntime"),
        "openvino_example": _example(backends, "openvino"),
        "has_int8_onnx": any(c["precision"] == "int8" and c["runtime"] == "onnxruntime" for c in backends),
    }


# What each exported file is for, by how sentence-transformers names it (sharedbert.export).
BACKEND_USES = {
    None: "any CPU",
    "avx512_vnni": "x86 CPUs with AVX512-VNNI (Intel Cascade Lake and later, AMD Zen 4 and later)",
    "avx512": "x86 CPUs with AVX512 but no VNNI",
    "avx2": "x86 CPUs with AVX2 only",
    "arm64": "ARM64 CPUs (Apple silicon, Graviton, ...)",
}


def _backend_rows(checks: list[dict]) -> list[dict]:
    rows = []
    for check in checks:
        variant = check.get("variant")
        runtime = "OpenVINO" if check["runtime"] == "openvino" else "onnxruntime"
        if check["precision"] == "int8":
            how = ("int8, dynamic quantization (weights per channel)" if runtime == "onnxruntime"
                   else "int8 weights (NNCF weight compression)" if check["file"].endswith("_weights.xml")
                   else "int8, static quantization by NNCF")
        else:
            how = "fp32"
        cosine = check.get("mean_cosine")
        rows.append({
            "file": check["file"], "runtime": runtime, "precision": how, "use": BACKEND_USES.get(variant, "any CPU"),
            "megabytes": f"{check.get('bytes', 0) / 1e6:.1f}",
            "cosine": f"{cosine:.4f} / {check['min_cosine']:.4f}" if cosine is not None else "",
            "onnx": runtime == "onnxruntime",
        })
    return rows


def _example(checks: list[dict], runtime: str) -> str | None:
    files = [c for c in checks if c["runtime"] == runtime]
    files.sort(key=lambda c: (c["precision"] != "int8", c.get("variant") not in (None, "avx512_vnni")))
    return files[0]["file"] if files else None


def _sentence_transformers_settings(loaded: LoadedModel) -> dict | None:
    """What the card says about a sentence-transformers model (None for a plain transformers model): the module
    chain from modules.json and max_seq_length from sentence_bert_config.json."""
    if not loaded.sentence_transformers_files:
        return None
    folder = Path(loaded.model_dir)
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    settings_file = folder / "sentence_bert_config.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
    chain = [str(m["type"]).split(".")[-1] for m in modules]
    pooling = None
    for module in modules:
        config_file = folder / str(module.get("path", "")) / "config.json"
        if str(module["type"]).endswith("Pooling") and config_file.is_file():
            pooling_config = json.loads(config_file.read_text(encoding="utf-8"))
            pooling = pooling_config.get("pooling_mode") or next(
                (key[len("pooling_mode_"):].replace("_tokens", "").replace("_token", "")
                 for key, value in pooling_config.items() if key.startswith("pooling_mode_") and value is True),
                None)
    return {"chain": chain, "max_seq_length": settings.get("max_seq_length"), "pooling": pooling,
            "normalized": "Normalize" in chain}


def _labels(config) -> list[str]:
    id2label = getattr(config, "id2label", None) or {}
    labels = [_cell(id2label[i]) for i in sorted(id2label, key=int)]
    # transformers' placeholders (LABEL_0, LABEL_1, ...) say nothing: leave them out of the card.
    return [] if all(re.fullmatch(r"LABEL_\d+", label) for label in labels) else labels


def attention_description(config, attention_type: str) -> str:
    """What a sublayer of `attention_type` computes, with the options that change standard attention's projections
    (they apply to every standard sublayer, self- and cross-attention alike)."""
    description = ATTENTION_DESCRIPTIONS[attention_type]
    if attention_type != "standard":
        return description
    if config.num_key_value_heads is not None and config.num_key_value_heads < config.num_attention_heads:
        kind = "multi-query" if config.num_key_value_heads == 1 else "grouped-query"
        description += (f"; {kind} attention: {config.num_key_value_heads} key/value head(s) for "
                        f"{config.num_attention_heads} query heads")
    if config.query_rank is not None:
        description += f"; a rank-{config.query_rank} query, Q = (X·A + a)·B"
        if config.query_latent_norm:
            description += ", its rank-r code RMS-normalised before B (as multi-head latent attention)"
    return description


def _sharing_description(config) -> str:
    if config.layer_sharing == "none":
        return "none (every layer has its own weights)"
    what = {"all": "attention and feed-forward blocks", "attention": "attention blocks", "ffn": "feed-forward blocks"}
    return (
        f"{what[config.layer_sharing]} shared across depth: {config.num_unique_layers} distinct set(s) for "
        f"{config.num_hidden_layers} layers, '{config.sharing_order}' order"
    )


def _param_summary(ours: int, bert: int) -> str:
    if ours == bert:
        return f"{ours:,} parameters, as many as a standard BERT of the same dimensions"
    relation = "fewer" if ours < bert else "more"
    return (
        f"{ours:,} parameters, {abs(bert - ours):,} ({abs(100.0 * (bert - ours) / bert):.1f}%) {relation} than a "
        f"standard BERT of the same dimensions ({bert:,})"
    )


def _change(ours: int, bert: int) -> str:
    """The change from a standard BERT's count to this model's, as the card's table shows it."""
    if ours == bert:
        return "same"
    if bert == 0:
        return "new"
    percent = 100.0 * (ours - bert) / bert
    return f"{percent:+.1f}%".replace("-", "−")


def _tidy_markdown(text: str) -> str:
    """Collapse the blank lines that Jinja's conditionals leave behind."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"
