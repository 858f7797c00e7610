"""Parameter accounting from built modules (on the meta device: no memory, no time), never from a formula.

How it counts:
* "QKV per layer": the parameters of one self-attention projection block, i.e. what the attention type replaces:
  Wq, Wk, Wv and their biases for standard attention; Ws, b, dq, dk, dv for shared; Wq, Wv (+ P_h) otherwise.
  The output projection, LayerNorms and feed-forward are the same in every type and are not included.
* "model": `SharedBertModel` with its pooler and no task head (what `BertModel` counts), each stored tensor once,
  so a cross-layer-shared sublayer counts once however many depths run it.
"""

from __future__ import annotations

import dataclasses

import torch

from .configuration_sharedbert import ATTENTION_TYPES, SharedBertConfig
from .modeling_sharedbert import SharedBertModel


@dataclasses.dataclass
class ParameterCount:
    attention_type: str
    layer_sharing: str
    num_unique_layers: int
    qkv_per_layer: int
    qkv_total: int
    model: int


def count_model_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters of a built model: a tensor shared across layers or tied between embedding and decoder
    counts once (`parameters()` yields each stored tensor once)."""
    return sum(parameter.numel() for parameter in model.parameters())


def count_parameters(config: SharedBertConfig) -> ParameterCount:
    with torch.device("meta"):
        model = SharedBertModel(config)
    unique = {id(p): p.numel() for p in model.parameters()}
    qkv_blocks = [block.self for block in model.encoder.attention]
    return ParameterCount(
        attention_type=config.attention_type,
        layer_sharing=config.layer_sharing,
        num_unique_layers=config.num_unique_layers,
        qkv_per_layer=sum(p.numel() for p in qkv_blocks[0].parameters()),
        qkv_total=sum(p.numel() for block in qkv_blocks for p in block.parameters()),
        model=sum(unique.values()),
    )


def parameter_table(base_values: dict, sharing_modes=("none", "all", "attention", "ffn")) -> list[ParameterCount]:
    """Counts for every attention type and sharing mode at the dims in `base_values` (one distinct layer when shared)."""
    rows = []
    for layer_sharing in sharing_modes:
        for attention_type in ATTENTION_TYPES:
            values = dict(base_values, attention_type=attention_type, layer_sharing=layer_sharing)
            values["num_unique_layers"] = None if layer_sharing == "none" else base_values.get("num_unique_layers", 1)
            if layer_sharing == "none":
                values.pop("num_unique_layers")
            rows.append(count_parameters(SharedBertConfig(**values)))
    return rows


def reduction(new: int, reference: int) -> float:
    return 100.0 * (reference - new) / reference
