"""Build a SharedBert from a transformers BERT checkpoint.

`from_bert` copies every weight that has a counterpart (embeddings, attention output, feed-forward, pooler, task
heads) and fills the attention projections of the chosen `attention_type` by a least-squares fit to BERT's Wq, Wk, Wv:

* ``standard``: copied; the converted model computes exactly what BERT computes.
* ``shared``: per output channel c, the rows [Wq_c | bq_c], [Wk_c | bk_c], [Wv_c | bv_c] form a 3×(d+1) matrix; its best
  rank-1 approximation σ·u·vᵀ (SVD, Eckart–Young) gives the shared row [Ws_c | b_c] ∝ v and the three scales ∝ σ·u.
* ``symmetric``: the single query/key projection closest to both: (Wq + Wk) / 2 (bias likewise); V copied.
* ``pairwise``: Q keeps Wq; the per-head matrix P_h minimises ‖P_h·[Wq_h | bq_h] − [Wk_h | bk_h]‖ (so that
  K ≈ Q·P_hᵀ and scores Q·P_h·Qᵀ ≈ Q·Kᵀ), P_h = [Wk_h | bk_h]·[Wq_h | bq_h]⁺; V copied.

With cross-layer sharing, each distinct parameter set starts from the mean of the BERT layers mapped onto it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import BertConfig, PreTrainedModel

from .configuration_sharedbert import SharedBertConfig
from .modeling_sharedbert import (
    SharedBertForMaskedLM,
    SharedBertForMultipleChoice,
    SharedBertForQuestionAnswering,
    SharedBertForSequenceClassification,
    SharedBertForTokenClassification,
    SharedBertModel,
)

logger = logging.getLogger(__name__)

# BERT architecture name -> the SharedBert class with the same head.
HEAD_CLASSES = {
    "BertModel": SharedBertModel,
    "BertForMaskedLM": SharedBertForMaskedLM,
    "BertForPreTraining": SharedBertForMaskedLM,
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
    "problem_type", "tie_word_embeddings",
)


@dataclass
class LayerFit:
    """How much of the attention projections' weight energy (squared Frobenius norm, biases included) the fit keeps."""

    layer: int
    retained_energy: float


def from_bert(
    model_or_path,
    model_class: type[PreTrainedModel] | None = None,
    return_report: bool = False,
    **config_overrides,
):
    """Convert a BERT model (instance, local folder or Hub id) into a SharedBert with the same task head.

    Args:
        model_or_path: a `transformers` BERT model instance, or a folder / Hub id of a BERT checkpoint (keys with or
            without the `bert.` prefix, safetensors only).
        model_class: the SharedBert class to build; defaults to the one matching the checkpoint's architecture.
            Pass e.g. `SharedBertForSequenceClassification` to start fine-tuning from a bare encoder.
        return_report: also return a list of `LayerFit` (one per distinct attention set).
        **config_overrides: SharedBertConfig fields to set (`attention_type`, `layer_sharing`, `num_labels`, ...).
    """
    bert_config, state_dict, source_name = _load_bert(model_or_path)
    values = {field: getattr(bert_config, field) for field in BERT_FIELDS if hasattr(bert_config, field)}
    values.update(config_overrides)
    values.setdefault("converted_from", source_name)
    config = SharedBertConfig(**values)
    if model_class is None:
        architecture = (bert_config.architectures or ["BertModel"])[0]
        if architecture not in HEAD_CLASSES:
            raise ValueError(
                f"Cannot convert architecture {architecture!r}; supported: {sorted(HEAD_CLASSES)}. "
                "Pass model_class= to choose the SharedBert class yourself."
            )
        model_class = HEAD_CLASSES[architecture]
    model = model_class(config)
    prefix = "" if isinstance(model, SharedBertModel) else f"{model.base_model_prefix}."
    target, report = _convert_state_dict(state_dict, config, prefix)
    missing, unexpected = model.load_state_dict(target, strict=False)
    tied = {"cls.predictions.decoder.weight"} if config.tie_word_embeddings else set()
    missing_encoder = [k for k in missing if k not in tied and not _is_task_head(k)]
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
    """Return (BertConfig, state dict with keys without the `bert.` prefix, a name for messages)."""
    if isinstance(model_or_path, PreTrainedModel):
        model = model_or_path
        if model.config.model_type != "bert":
            raise ValueError(f"from_bert needs a BERT model, got model_type={model.config.model_type!r}.")
        return model.config, _strip_prefix(model.state_dict()), getattr(model.config, "_name_or_path", "") or "BERT"
    source = str(model_or_path)
    folder = Path(source)
    if not folder.is_dir():
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(source, allow_patterns=["config.json", "*.safetensors"]))
        except Exception as error:  # offline, unknown repo, bad id: all mean "cannot get it"
            raise OSError(f"{source} is neither a local folder nor a reachable Hub model id ({error}).") from error
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise OSError(f"{folder} has no config.json: it is not a transformers checkpoint folder.")
    model_type = json.loads(config_path.read_text()).get("model_type")
    if model_type != "bert":
        raise ValueError(f"{folder} holds a {model_type!r} model; from_bert converts BERT checkpoints (model_type 'bert').")
    weight_files = sorted(folder.glob("*.safetensors"))
    if not weight_files:
        raise OSError(f"{folder} has no .safetensors weights (pickle .bin files are not read: they can run code).")
    state_dict = {}
    for path in weight_files:
        state_dict.update(load_file(path))
    return BertConfig.from_pretrained(folder), _strip_prefix(state_dict), source


def _strip_prefix(state_dict):
    return {key.removeprefix("bert."): value for key, value in state_dict.items()}


def _convert_state_dict(bert: dict, config: SharedBertConfig, prefix: str):
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
    for unique, layers in _groups(config.attention_layer_map).items():
        att = f"{prefix}encoder.attention.{unique}"
        src = "encoder.layer.{}.attention."
        for p in ("weight", "bias"):
            target[f"{att}.output.dense.{p}"] = mean_over(layers, src + f"output.dense.{p}")
            target[f"{att}.output.LayerNorm.{p}"] = mean_over(layers, src + f"output.LayerNorm.{p}")
        q, k, v = (
            torch.cat([mean_over(layers, src + f"self.{n}.weight"), mean_over(layers, src + f"self.{n}.bias")[:, None]], 1)
            for n in ("query", "key", "value")
        )
        fitted, retained = fit_attention(config.attention_type, q, k, v, config.num_attention_heads)
        target.update({f"{att}.self.{name}": tensor for name, tensor in fitted.items()})
        report.append(LayerFit(layer=unique, retained_energy=retained))

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
        "classifier.": "classifier.",
        "qa_outputs.": "qa_outputs.",
    }
    for key, value in bert.items():
        for old, new in renames.items():
            if key.startswith(old):
                target[new + key[len(old):]] = value.float()
    return target, report


def _groups(layer_map):
    groups = {}
    for layer, unique in enumerate(layer_map):
        groups.setdefault(unique, []).append(layer)
    return groups


def fit_attention(attention_type: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int):
    """Fit the attention parameters of `attention_type` to BERT's projections.

    `q`, `k`, `v` are (hidden, hidden + 1): weight rows with the bias appended as the last column. Returns the
    SharedBert self-attention tensors (names relative to `...attention.{i}.self.`) and the fraction of the
    projections' energy that the fitted projections reproduce (1.0 = exact).
    """
    hidden = q.shape[0]
    total = sum(float(m.double().pow(2).sum()) for m in (q, k, v))

    def linear(name, rows):
        return {f"{name}.weight": rows[:, :-1].contiguous(), f"{name}.bias": rows[:, -1].contiguous()}

    if attention_type == "standard":
        return {**linear("query", q), **linear("key", k), **linear("value", v)}, 1.0
    if attention_type == "shared":
        per_channel = torch.stack([q, k, v], dim=1).double()  # (hidden, 3, hidden + 1)
        u, s, vh = torch.linalg.svd(per_channel, full_matrices=False)
        row, scales = vh[:, 0, :], u[:, :, 0] * s[:, :1]  # (hidden, hidden+1), (hidden, 3)
        # Make each scale triple have unit RMS (the ones-initialisation's scale) and keep the row's sign such that the
        # query scale is positive; the product scales·row is unchanged.
        norm = scales.pow(2).mean(1, keepdim=True).sqrt().clamp_min(1e-12) * torch.sign(scales[:, :1] + 1e-30)
        scales, row = scales / norm, row * norm
        approx = scales.T[:, :, None] * row[None]
        retained = 1 - float((torch.stack([q, k, v]).double() - approx).pow(2).sum()) / total
        fitted = {**linear("shared_proj", row.float())}
        fitted.update(query_scale=scales[:, 0].float(), key_scale=scales[:, 1].float(), value_scale=scales[:, 2].float())
        return fitted, retained
    if attention_type == "symmetric":
        qk = (q + k) / 2
        retained = 1 - float((q - qk).double().pow(2).sum() + (k - qk).double().pow(2).sum()) / total
        return {**linear("query", qk), **linear("value", v)}, retained
    if attention_type == "pairwise":
        head_dim = hidden // num_heads
        q_heads = q.double().view(num_heads, head_dim, -1)
        k_heads = k.double().view(num_heads, head_dim, -1)
        bilinear = k_heads @ torch.linalg.pinv(q_heads)  # (heads, head_dim, head_dim)
        k_fit = (bilinear @ q_heads).reshape_as(k)
        retained = 1 - float((k.double() - k_fit).pow(2).sum()) / total
        return {**linear("query", q), **linear("value", v), "head_bilinear": bilinear.float()}, retained
    raise ValueError(f"Unknown attention_type {attention_type!r}.")
