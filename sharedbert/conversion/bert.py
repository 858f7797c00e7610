"""Build a SharedBert from a transformers BERT checkpoint.

`from_bert` copies every weight that has a counterpart (embeddings, attention output, feed-forward, pooler, task
heads) and fills the attention projections of the chosen `attention_type` by a least-squares fit to BERT's Wq, Wk, Wv:

* ``standard``: copied; the converted model computes exactly what BERT computes. With `num_key_value_heads` (grouped-
  query attention) each key and value head is the mean of the heads of its group (GQA's uptraining recipe); with
  `query_rank` the query is the best rank-r approximation of [Wq | bq] (SVD).
* ``shared``: per output channel c, the rows [Wq_c | bq_c], [Wk_c | bk_c], [Wv_c | bv_c] form a 3×(d+1) matrix; its best
  rank-1 approximation σ·u·vᵀ (SVD, Eckart–Young) gives the shared row [Ws_c | b_c] ∝ v and the three scales ∝ σ·u.
* ``symmetric``: the single query/key projection closest to both: (Wq + Wk) / 2 (bias likewise); V copied.
* ``pairwise``: Q keeps Wq; the per-head matrix P_h minimises ‖P_h·[Wq_h | bq_h] − [Wk_h | bk_h]‖ (so that
  K ≈ Q·P_hᵀ and scores Q·P_h·Qᵀ ≈ Q·Kᵀ), P_h = [Wk_h | bk_h]·[Wq_h | bq_h]⁺; V copied.

These are the `fit_method="weights"` fits. `fit_method="invariant"` fits what each head computes instead (its score
form QᵀK and value path O·V, which per-head transforms leave unchanged), refitting the output projection. The
default, "auto", picks per attention type the fit that measured better (`fitting.AUTO_FIT_METHOD`). The fits
themselves are `sharedbert.conversion.fitting`'s.

With cross-layer sharing, each distinct parameter set starts from the mean of the BERT layers mapped onto it; with
`fit_method="invariant"`, its attention starts from the layers' averaged per-head score forms and value paths instead
(`fitting.representative_layer`), then is fitted to its type as one layer would be.
A decoder's cross-attention (`BertLMHeadModel` with `add_cross_attention`) is fitted the same way as self-attention.
An `EncoderDecoderModel` of two BERTs becomes an `EncoderDecoderModel` of two SharedBerts (`from_bert` converts
each side).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from huggingface_hub import snapshot_download
from safetensors.torch import load_file
from transformers import BertConfig, EncoderDecoderModel, PreTrainedModel

from ..weight_checks import check_weights
from ..configuration_sharedbert import SharedBertConfig
from .fitting import FIT_METHODS, fit_attention, representative_layer, resolve_fit_method
from ..loading import check_config_fields, from_pretrained
from ..modeling_sharedbert import (
    SharedBertForMaskedLM,
    SharedBertForConditionalGeneration,
    SharedBertForMultipleChoice,
    SharedBertForNextSentencePrediction,
    SharedBertForPreTraining,
    SharedBertLMHeadModel,
    SharedBertForQuestionAnswering,
    SharedBertForSequenceClassification,
    SharedBertForTokenClassification,
    SharedBertModel,
    SharedBertPreTrainedModel,
)
from ..remote_code import check_remote_code
from ..threads import torch_threads

logger = logging.getLogger(__name__)

# BERT architecture name -> the SharedBert class with the same head.
HEAD_CLASSES = {
    "BertModel": SharedBertModel,
    "BertForMaskedLM": SharedBertForMaskedLM,
    "BertForPreTraining": SharedBertForPreTraining,
    "BertForNextSentencePrediction": SharedBertForNextSentencePrediction,
    "BertLMHeadModel": SharedBertLMHeadModel,
    "BertForSequenceClassification": SharedBertForSequenceClassification,
    "BertForTokenClassification": SharedBertForTokenClassification,
    "BertForQuestionAnswering": SharedBertForQuestionAnswering,
    "BertForMultipleChoice": SharedBertForMultipleChoice,
}

# BERT config fields carried over unchanged.
BERT_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
    "initializer_range", "layer_norm_eps", "pad_token_id", "classifier_dropout", "id2label", "label2id",
    "problem_type", "tie_word_embeddings", "is_decoder", "add_cross_attention", "use_cache", "bos_token_id",
    "eos_token_id",
)


@dataclass
class LayerFit:
    """How much of the attention projections' weight energy (squared Frobenius norm, biases included) the fit keeps;
    for a stored layer that serves several, times the share of the layers' energy their merge keeps (their mean
    weights, or `fitting.representative_layer`'s forms with the invariant fit)."""

    layer: int
    retained_energy: float


def from_bert(
    model_or_path,
    model_class: type[PreTrainedModel] | None = None,
    return_report: bool = False,
    fit_method: str = "auto",
    **config_overrides,
):
    """Convert a BERT model (instance, local folder or Hub id) into a SharedBert with the same task head.

    Args:
        model_or_path: a `transformers` BERT model instance, or a folder / Hub id of a BERT checkpoint (keys with or
            without the `bert.` prefix, safetensors only). An `EncoderDecoderModel` of two BERTs (instance or
            folder) converts into an `EncoderDecoderModel` of two SharedBerts with the same settings.
        model_class: the SharedBert class to build; defaults to the one with the same head: the instance's class,
            or the `architectures` entry of the folder's config.json.
            Pass e.g. `SharedBertForSequenceClassification` to start fine-tuning from a bare encoder.
        return_report: also return a list of `LayerFit` (one per distinct attention set).
        fit_method: "invariant" fits what each attention layer computes (score forms and value paths, using the
            invariances described in `fit_attention`; the output projection is refitted to match); "weights" fits
            the Q/K/V weight rows themselves and leaves the output projection as it is; "auto" (default) takes, per
            attention type, the one that gave the better unhealed start on all-MiniLM-L6-v2 (`AUTO_FIT_METHOD`).
        **config_overrides: SharedBertConfig fields to set (`attention_type`, `layer_sharing`, `num_labels`, ...).
    """
    if fit_method not in FIT_METHODS:
        raise ValueError(f"fit_method must be one of {list(FIT_METHODS)}, got {fit_method!r}.")
    check_config_fields(config_overrides)  # a misspelled field (atention_type) is refused, not left at its default
    if config_overrides.get("layer_norm_position", "post") != "post":
        # BERT's weights were trained with each LayerNorm after its residual sum; moved, they compute something else.
        raise ValueError("A BERT converts to post-LayerNorm layers only (BERT's own): drop layer_norm_position, or "
                         "train a pre-LayerNorm SharedBert from scratch (sharedbert pretrain).")
    if config_overrides.get("query_latent_norm"):
        # RMSNorm(X·A + a)·B is not linear in X: no choice of A, B and the scale reproduces BERT's query.
        raise ValueError("query_latent_norm=True has no fit from a BERT's query projection (the normalised rank-r "
                         "code is not linear in the input): convert with query_rank alone, or train the normalised "
                         "form from scratch (sharedbert pretrain --attention-type standard --query-rank R "
                         "--query-latent-norm).")
    encoder_decoder = _load_encoder_decoder(model_or_path)
    if encoder_decoder is not None:
        if model_class is not None or return_report:
            raise ValueError(
                "An EncoderDecoderModel converts side by side: model_class and return_report do not apply."
            )
        return _convert_encoder_decoder(encoder_decoder, fit_method, config_overrides)
    bert_config, state_dict, source_name, architecture = _load_bert(model_or_path)
    values = {field: getattr(bert_config, field) for field in BERT_FIELDS if hasattr(bert_config, field)}
    values.update(config_overrides)
    values.setdefault("converted_from", source_name)
    config = SharedBertConfig(**values)
    if model_class is None:
        if architecture not in HEAD_CLASSES:
            raise ValueError(
                f"Cannot convert architecture {architecture!r}; supported: {sorted(HEAD_CLASSES)}. "
                "Pass model_class= to choose the SharedBert class yourself."
            )
        model_class = HEAD_CLASSES[architecture]
    model = model_class(config)
    prefix = "" if isinstance(model, SharedBertModel) else f"{model.base_model_prefix}."
    # Small dense factorisations: one thread is fastest, and far faster than several on a busy machine (OpenMP
    # threads spin-wait for each other, and a small eigh runs many times slower with 2 threads under load).
    with torch_threads(1):
        target, report = _convert_state_dict(state_dict, config, prefix, fit_method)
    missing, unexpected = model.load_state_dict(target, strict=False)
    tied = {"cls.predictions.decoder.weight"} if config.tie_word_embeddings else set()
    # Cross-attention asked for (add_cross_attention=True) on a BERT without it starts untrained, as in
    # EncoderDecoderModel.from_encoder_decoder_pretrained.
    missing_encoder = [k for k in missing if k not in tied and not _is_task_head(k) and ".crossattention." not in k]
    if missing_encoder:
        raise ValueError(
            f"{source_name} does not look like a BERT checkpoint: no weights for {missing_encoder[:5]} "
            f"({len(missing_encoder)} missing). from_bert expects BertModel/BertFor* weights."
        )
    new_heads = [k for k in missing if k not in tied]
    if new_heads:
        logger.info("New task-head weights (randomly initialised, to be trained): %s", new_heads)
    model.tie_weights()
    model.eval()
    return (model, report) if return_report else model


def _is_task_head(key: str) -> bool:
    return key.startswith(("classifier.", "qa_outputs.", "cls.", "pooler.", "sharedbert.pooler."))


def _load_bert(model_or_path):
    """Return (BertConfig, state dict with keys without the `bert.` prefix, a name for messages, the BERT class name).

    The class name of an instance is its own class (its config's `architectures` still names the checkpoint it was
    loaded from: a BertForSequenceClassification made from a BertModel checkpoint says "BertModel")."""
    if isinstance(model_or_path, PreTrainedModel):
        model = model_or_path
        if model.config.model_type != "bert":
            raise ValueError(f"from_bert needs a BERT model, got model_type={model.config.model_type!r}.")
        name = getattr(model.config, "_name_or_path", "") or "BERT"
        return model.config, _strip_prefix(model.state_dict()), name, type(model).__name__
    folder = _checkpoint_folder(model_or_path)
    model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    if model_type != "bert":
        raise ValueError(
            f"{folder} holds a {model_type!r} model; from_bert converts BERT checkpoints (model_type 'bert')."
        )
    check_weights(folder)  # readable, undamaged and finite, or refused naming the file (the package's weights gate)
    weight_files = sorted(folder.glob("*.safetensors"))
    if not weight_files:
        raise OSError(f"{folder} has no .safetensors weights (pickle .bin files are not read: they can run code).")
    state_dict = {}
    for path in weight_files:
        state_dict.update(load_file(path))
    bert_config = BertConfig.from_pretrained(folder)
    architecture = (bert_config.architectures or ["BertModel"])[0]
    return bert_config, _strip_prefix(state_dict), str(model_or_path), architecture


def _checkpoint_folder(model_or_path) -> Path:
    """The local folder of a checkpoint given as a folder or a Hub id, with its config.json."""
    source = str(model_or_path)
    folder = Path(source)
    if not folder.is_dir():
        try:
            folder = Path(snapshot_download(source, allow_patterns=["config.json", "*.safetensors"]))
        except Exception as error:  # offline, unknown repo, bad id: all mean "cannot get it"
            raise OSError(f"{source} is neither a local folder nor a reachable Hub model id ({error}).") from error
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise OSError(f"{folder} has no config.json: it is not a transformers checkpoint folder.")
    return folder


def _load_encoder_decoder(model_or_path):
    """The `EncoderDecoderModel` given (instance or folder), or None when it is something else."""
    if isinstance(model_or_path, EncoderDecoderModel):
        return model_or_path
    if isinstance(model_or_path, PreTrainedModel):
        return None
    folder = _checkpoint_folder(model_or_path)
    if json.loads((folder / "config.json").read_text()).get("model_type") != "encoder-decoder":
        return None
    # Its parts are built by Auto*.from_config with no trust setting: code in a sub-config would reach transformers'
    # prompt. from_bert runs no code a checkpoint ships (the package's remote-code gate refuses it first).
    check_remote_code(folder, parts=("model",))
    check_weights(folder)
    return EncoderDecoderModel.from_pretrained(folder, use_safetensors=True)


def _convert_encoder_decoder(model, fit_method, config_overrides):
    """Each side through `from_bert` (the decoder keeps is_decoder and cross-attention), reassembled with the same
    generation settings."""
    encoder = from_bert(model.encoder, fit_method=fit_method, **config_overrides)
    decoder = from_bert(model.decoder, fit_method=fit_method, **config_overrides)
    converted = EncoderDecoderModel(encoder=encoder, decoder=decoder)
    for field in ("decoder_start_token_id", "pad_token_id", "eos_token_id", "bos_token_id", "vocab_size"):
        value = getattr(model.config, field, None)
        if value is not None:
            setattr(converted.config, field, value)
    if getattr(model, "enc_to_dec_proj", None) is not None:
        converted.enc_to_dec_proj.load_state_dict(model.enc_to_dec_proj.state_dict())
    converted.generation_config = model.generation_config
    return converted.eval()


def _strip_prefix(state_dict):
    return {key.removeprefix("bert."): value for key, value in state_dict.items()}


def _convert_state_dict(bert: dict, config: SharedBertConfig, prefix: str, fit_method: str = "auto"):
    """SharedBert weights for `config` from BERT's `bert` (keys without `bert.`). `fit_method` is resolved per
    sublayer, by the type of that sublayer: cross-attention may have its own (`cross_attention_type`)."""
    target = {}

    def take(key):
        if key not in bert:
            raise ValueError(f"The BERT checkpoint has no weight {key!r}; is it a complete BERT encoder?")
        return bert[key].float()

    def mean_over(layers, key_template):
        return torch.stack([take(key_template.format(i)) for i in layers]).mean(0)

    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        target[f"{prefix}embeddings.{name}.weight"] = take(f"embeddings.{name}.weight")
    for p in ("weight", "bias"):
        target[f"{prefix}embeddings.LayerNorm.{p}"] = take(f"embeddings.LayerNorm.{p}")

    report = []
    sublayers = [("attention", "attention", config.attention_type)]
    if config.add_cross_attention and "encoder.layer.0.crossattention.self.query.weight" in bert:
        sublayers.append(("crossattention", "crossattention", config.effective_cross_attention_type))
    for (ours, theirs, attention_type), (unique, layers) in (
        (names, group) for names in sublayers for group in _groups(config.attention_layer_map).items()
    ):
        att = f"{prefix}encoder.{ours}.{unique}"
        src = "encoder.layer.{}." + theirs + "."
        for p in ("weight", "bias"):
            target[f"{att}.output.dense.{p}"] = mean_over(layers, src + f"output.dense.{p}")
            target[f"{att}.output.LayerNorm.{p}"] = mean_over(layers, src + f"output.LayerNorm.{p}")
        invariant = resolve_fit_method(fit_method, attention_type) == "invariant"
        rows = {n: [torch.cat([take(src.format(i) + f"self.{n}.weight"), take(src.format(i) + f"self.{n}.bias")[
            :, None]], 1) for i in layers] for n in ("query", "key", "value")}
        outputs = [take(src.format(i) + "output.dense.weight") for i in layers]
        q, k, v, merged_output, merged = _merge_layers(rows, outputs, invariant, config.num_attention_heads)
        if merged_output is not None:
            target[f"{att}.output.dense.weight"] = merged_output
        o = target[f"{att}.output.dense.weight"] if invariant else None
        fitted, retained = fit_attention(attention_type, q, k, v, config.num_attention_heads, o=o,
                                         rank=config.effective_attention_rank,
                                         num_key_value_heads=config.num_key_value_heads,
                                         query_rank=config.query_rank)
        if "output.dense.weight" in fitted:  # the value channels changed basis: the output projection follows
            target[f"{att}.output.dense.weight"] = fitted.pop("output.dense.weight")
        target.update({f"{att}.self.{name}": tensor for name, tensor in fitted.items()})
        if ours == "attention":  # the report covers the self-attention sets, one entry each
            # With several layers merged: the share the merge keeps of their forms times the share the fit keeps.
            report.append(LayerFit(layer=unique, retained_energy=merged * retained))

    for unique, layers in _groups(config.ffn_layer_map).items():
        ffn = f"{prefix}encoder.feed_forward.{unique}"
        src = "encoder.layer.{}."
        for p in ("weight", "bias"):
            target[f"{ffn}.intermediate.{p}"] = mean_over(layers, src + f"intermediate.dense.{p}")
            target[f"{ffn}.output.{p}"] = mean_over(layers, src + f"output.dense.{p}")
            target[f"{ffn}.LayerNorm.{p}"] = mean_over(layers, src + f"output.LayerNorm.{p}")

    renames = {
        "pooler.dense.": f"{prefix}pooler.dense.",
        "cls.predictions.transform.dense.": "cls.predictions.dense.",
        "cls.predictions.transform.LayerNorm.": "cls.predictions.LayerNorm.",
        "cls.predictions.decoder.weight": "cls.predictions.decoder.weight",
        "cls.predictions.bias": "cls.predictions.decoder.bias",
        "cls.seq_relationship.": "cls.seq_relationship.",
        "classifier.": "classifier.",
        "qa_outputs.": "qa_outputs.",
    }
    for key, value in bert.items():
        for old, new in renames.items():
            if key.startswith(old):
                target[new + key[len(old):]] = value.float()
    return target, report


def _merge_layers(rows: dict, outputs: list, invariant: bool, num_heads: int):
    """One stored attention layer for the BERT layers it serves: ([Wq | bq], [Wk | bk], [Wv | bv], the output
    projection or None to keep the layers' mean, the share of the layers' energy the merge keeps). `rows` holds each
    projection's [W | b] per layer, `outputs` each layer's output projection."""
    if invariant and len(outputs) > 1:  # fitted to what the layers compute, not their mean
        (q, k, v, o), kept = representative_layer(rows["query"], rows["key"], rows["value"], outputs, num_heads)
        return q, k, v, o, kept
    stacked = [torch.stack(rows[n]) for n in ("query", "key", "value")]
    # Σ‖Wᵢ‖² = n‖W̄‖² + Σ‖Wᵢ − W̄‖²: the mean keeps n‖W̄‖² of the layers' energy (all of it for one layer).
    kept = 1.0 if len(outputs) == 1 else float(sum(len(outputs) * each.mean(0).pow(2).sum() for each in stacked)
                                               / sum(each.pow(2).sum() for each in stacked))
    return (*(each.mean(0) for each in stacked), None, kept)


def _groups(layer_map):
    groups = {}
    for layer, unique in enumerate(layer_map):
        groups.setdefault(unique, []).append(layer)
    return groups


# --- sequence to sequence --------------------------------------------------------------------------------------------

# Fields that describe the seq2seq model rather than its stacks: they go to the seq2seq config, not to `from_bert`.
SEQ2SEQ_FIELDS = (
    "cross_attention_type",
    "share_encoder_decoder_layers",
    "share_encoder_decoder_embeddings",
    "scale_embedding",
    "decoder_start_token_id",
    "eos_token_id",
    "bos_token_id",
    "pad_token_id",
    "tie_word_embeddings",
)


def warm_start_seq2seq(model_or_path, tokenizer=None, fit_method: str = "auto", **config_overrides):
    """A `SharedBertForConditionalGeneration` whose encoder AND decoder start from one checkpoint (Rothe et al.
    2020: BERT2BERT, or BERTShare with `share_encoder_decoder_layers=True`).

    Args:
        model_or_path: a BERT (converted first with `from_bert`, which takes `attention_type`, `layer_sharing`, ...
            from `config_overrides`) or a SharedBert checkpoint: an instance, a folder or a Hub id.
        tokenizer: optional; its [CLS] id becomes `decoder_start_token_id`, [SEP] the end-of-sequence id and its pad
            id the padding id (Rothe et al.'s choice), unless given in `config_overrides`.
        **config_overrides: seq2seq fields (`SEQ2SEQ_FIELDS`) and, for a BERT source, conversion fields.

    Embeddings, self-attention and feed-forward of both stacks copy the checkpoint's encoder (stored once when
    shared); the LM head's transform copies the checkpoint's masked-LM head when it has one; cross-attention starts
    untrained, as in BERT2BERT.
    """
    check_config_fields(config_overrides)
    seq2seq = {key: config_overrides.pop(key) for key in SEQ2SEQ_FIELDS if key in config_overrides}
    if tokenizer is not None:
        for field, token_id in (
            ("decoder_start_token_id", tokenizer.cls_token_id),
            ("eos_token_id", tokenizer.sep_token_id),
            ("pad_token_id", tokenizer.pad_token_id),
        ):
            if token_id is not None:
                seq2seq.setdefault(field, token_id)
    if isinstance(model_or_path, SharedBertPreTrainedModel):
        source_config, state_dict = model_or_path.config, model_or_path.state_dict()
    elif not isinstance(model_or_path, PreTrainedModel) and _model_type(model_or_path) == "sharedbert":
        folder = _checkpoint_folder(model_or_path)
        check_weights(folder)
        source_config = from_pretrained(SharedBertConfig, folder)  # the package's loader: fields checked
        state_dict = {}
        for path in sorted(folder.glob("*.safetensors")):
            state_dict.update(load_file(path))
    else:
        converted = from_bert(model_or_path, fit_method=fit_method, **config_overrides)
        source_config, state_dict = converted.config, converted.state_dict()
        config_overrides = {}
    values = {**source_config.to_dict(), **config_overrides, **seq2seq}
    for stale in ("architectures", "auto_map", "_name_or_path", "transformers_version", "model_type"):
        values.pop(stale, None)
    values.update(is_encoder_decoder=True, is_decoder=False, add_cross_attention=False, decoder_vocab_size=None)
    model = SharedBertForConditionalGeneration(SharedBertConfig(**values))
    config = model.config
    base = {key.removeprefix("sharedbert."): value for key, value in state_dict.items()}
    target = {}
    for key, value in base.items():
        if ".crossattention." in key or key.startswith("pooler."):
            continue
        if key.startswith(("embeddings.", "encoder.")):
            target[f"sharedbert.{key}"] = value
            if key.startswith("embeddings.") and not config.share_encoder_decoder_embeddings:
                target[f"decoder_{key}"] = value
            if key.startswith("encoder.") and not config.share_encoder_decoder_layers:
                target[f"decoder.{key.removeprefix('encoder.')}"] = value
        elif key.startswith("cls.predictions.") and not (config.tie_word_embeddings and key.endswith("decoder.weight")):
            target[key] = value
    missing, unexpected = model.load_state_dict(target, strict=False)
    untrained = [key for key in missing if ".crossattention." not in key and not key.startswith("cls.")]
    if untrained or unexpected:
        raise ValueError(
            f"The checkpoint does not fit a seq2seq model of its own config: missing {untrained[:5]}, unexpected "
            f"{unexpected[:5]}. Pass only seq2seq fields ({', '.join(SEQ2SEQ_FIELDS)}) when warm-starting from a "
            "SharedBert checkpoint; convert a BERT with its attention_type / layer_sharing instead."
        )
    model.tie_weights()
    _set_generation_ids(model, config)
    return model.eval()


def _model_type(model_or_path) -> str | None:
    return json.loads((_checkpoint_folder(model_or_path) / "config.json").read_text()).get("model_type")


def _set_generation_ids(model, config) -> None:
    for field in ("decoder_start_token_id", "eos_token_id", "pad_token_id", "bos_token_id"):
        value = getattr(config, field, None)
        if value is not None:
            setattr(model.generation_config, field, value)


def encoder_decoder_to_seq2seq(model, fit_method: str = "auto", **config_overrides):
    """transformers' `EncoderDecoderModel` of two BERTs or two SharedBerts (same sizes and attention settings on both
    sides) as one `SharedBertForConditionalGeneration` sharing nothing: the same function, weight for weight (BERTs
    are converted with `from_bert` first, which takes `config_overrides`)."""
    if not isinstance(model, EncoderDecoderModel):
        raise ValueError(f"encoder_decoder_to_seq2seq needs an EncoderDecoderModel, got {type(model).__name__}.")
    if model.encoder.config.model_type == "bert":
        model = from_bert(model, fit_method=fit_method, **config_overrides)
    encoder, decoder = model.encoder, model.decoder
    if not isinstance(encoder, SharedBertModel) or not isinstance(decoder, SharedBertLMHeadModel):
        raise ValueError(
            f"Both sides must be SharedBert (or BERT) models; got {type(encoder).__name__} and "
            f"{type(decoder).__name__}."
        )
    if getattr(model, "enc_to_dec_proj", None) is not None:
        raise ValueError("The encoder and decoder have different widths; SharedBert's seq2seq model needs one width.")
    encoder_values = {
        k: v for k, v in encoder.config.to_dict().items() if k not in ("is_decoder", "add_cross_attention")
    }
    decoder_values = decoder.config.to_dict()
    architecture = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "attention_type",
                    "layer_sharing", "num_unique_layers", "sharing_order", "max_position_embeddings", "hidden_act")
    differing = [name for name in architecture if encoder_values.get(name) != decoder_values.get(name)]
    if differing:
        raise ValueError(f"Encoder and decoder differ in {differing}: SharedBert's seq2seq model has one of each.")
    values = {k: v for k, v in encoder_values.items() if k not in ("architectures", "auto_map", "model_type",
                                                                     "transformers_version", "_name_or_path")}
    values.update(
        is_encoder_decoder=True,
        decoder_vocab_size=(
            None if decoder.config.vocab_size == encoder.config.vocab_size else decoder.config.vocab_size
        ),
        tie_word_embeddings=decoder.config.tie_word_embeddings,
        cross_attention_type=decoder.config.cross_attention_type,
    )
    for field in ("decoder_start_token_id", "pad_token_id", "eos_token_id", "bos_token_id"):
        value = getattr(model.generation_config, field, None)
        if value is None:
            value = getattr(model.config, field, None)
        values[field] = value
    seq2seq = SharedBertForConditionalGeneration(SharedBertConfig(**values))
    target = {}
    for key, value in encoder.state_dict().items():
        if not key.startswith("pooler."):
            target[f"sharedbert.{key}"] = value
    for key, value in decoder.state_dict().items():
        if key.startswith("sharedbert.embeddings."):
            target[f"decoder_embeddings.{key.removeprefix('sharedbert.embeddings.')}"] = value
        elif key.startswith("sharedbert.encoder."):
            target[f"decoder.{key.removeprefix('sharedbert.encoder.')}"] = value
        else:
            target[key] = value
    missing, unexpected = seq2seq.load_state_dict(target, strict=False)
    tied = {"cls.predictions.decoder.weight"} if seq2seq.config.tie_word_embeddings else set()
    missing = [key for key in missing if key not in tied]
    if missing or unexpected:
        raise ValueError(
            f"Cannot map the EncoderDecoderModel's weights: missing {missing[:5]}, unexpected {unexpected[:5]}."
        )
    seq2seq.tie_weights()
    _set_generation_ids(seq2seq, seq2seq.config)
    return seq2seq.eval()
