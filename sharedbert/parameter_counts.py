"""Parameter accounting from built modules (on the meta device: no memory, no time), never from a formula.

How it counts:
* "QKV per layer": the parameters of one self-attention projection block, i.e. what the attention type replaces:
  Wq, Wk, Wv and their biases for standard attention; Ws, b, dq, dk, dv for shared (plus M_h for shared_head_query,
  A, a, B for shared_lowrank_query); Wq, bq, Ws, b, dk, dv for shared_kv; Wq, Wv (+ P_h) otherwise.
  The output projection, LayerNorms and feed-forward are the same in every type and are not included.
* "model": `SharedBertModel` with its pooler and no task head (what `BertModel` counts), each stored tensor once,
  so a cross-layer-shared sublayer counts once however many depths run it.
* by group (`count_parameter_groups`): any head class, split into embeddings, attention projections, attention
  output, feed-forward, pooler and task head; `compare_with_standard_bert` sets each group beside the standard BERT
  of the same dimensions (what the model card's parameter table shows).
"""

from __future__ import annotations

import copy
import dataclasses

import torch

from . import modeling_sharedbert
from .configuration_sharedbert import ATTENTION_TYPES, SharedBertConfig
from .modeling_sharedbert import SharedBertModel
from .model_sizes import PRESETS, config_values
from .sharing_presets import SHARING_FIELDS, SHARING_PRESETS, sharing_preset


@dataclasses.dataclass
class ParameterCount:
    attention_type: str
    layer_sharing: str
    num_unique_layers: int
    qkv_per_layer: int
    qkv_total: int
    model: int
    sharing_preset: str | None = None


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
    """Counts for every attention type and sharing mode at the dims in `base_values` (one distinct layer when
    shared)."""
    rows = []
    for layer_sharing in sharing_modes:
        for attention_type in ATTENTION_TYPES:
            values = dict(base_values, attention_type=attention_type, layer_sharing=layer_sharing)
            values["num_unique_layers"] = None if layer_sharing == "none" else base_values.get("num_unique_layers", 1)
            if layer_sharing == "none":
                values.pop("num_unique_layers")
            rows.append(count_parameters(SharedBertConfig(**values)))
    return rows


def sharing_preset_table(base_values: dict) -> list[ParameterCount]:
    """Counts for every sharing preset (`sharedbert.sharing_presets`) at the dims in `base_values`."""
    sizes = {key: value for key, value in base_values.items() if key not in SHARING_FIELDS}
    return [dataclasses.replace(count_parameters(SharedBertConfig(**sizes, **sharing_preset(name))),
                                sharing_preset=name) for name in SHARING_PRESETS]


def reduction(new: int, reference: int) -> float:
    return 100.0 * (reference - new) / reference


# --------------------------------------------------------------------------------------------------------------------
# By group, against a standard BERT of the same dimensions
# --------------------------------------------------------------------------------------------------------------------

PARAMETER_GROUPS = (
    "Embeddings",
    "Self-attention projections",
    "Attention output (dense + LayerNorm)",
    "Feed-forward",
    "Pooler",
    "Task head",
)


def parameter_group(name: str) -> str:
    """The group (one of PARAMETER_GROUPS) of the parameter called `name` in any SharedBert class."""
    name = name.removeprefix("sharedbert.")
    if name.startswith("embeddings."):
        return "Embeddings"
    if name.startswith("encoder.attention."):
        return "Self-attention projections" if ".self." in name else "Attention output (dense + LayerNorm)"
    if name.startswith("encoder.feed_forward."):
        return "Feed-forward"
    if name.startswith("pooler."):
        return "Pooler"
    return "Task head"


def count_parameter_groups(config: SharedBertConfig, architecture: str = "SharedBertModel") -> dict[str, int]:
    """Parameters per group of the class `architecture` (e.g. "SharedBertForSequenceClassification") built from
    `config` on the meta device, shared and tied tensors counted once, plus `"Total"`."""
    model_class = getattr(modeling_sharedbert, architecture)
    with torch.device("meta"):
        model = model_class(config)
    counts = dict.fromkeys(PARAMETER_GROUPS, 0)
    for name, parameter in model.named_parameters():  # named_parameters() yields a tied/shared tensor once
        counts[parameter_group(name)] += parameter.numel()
    counts["Total"] = sum(counts.values())
    return counts


def standard_bert_config(config: SharedBertConfig) -> SharedBertConfig:
    """The same dimensions as `config` with BERT's choices: standard attention, no cross-layer sharing, tied MLM
    decoder (as bert-base)."""
    baseline = copy.deepcopy(config)
    baseline.attention_type = "standard"
    baseline.num_key_value_heads = None
    baseline.query_rank = None
    baseline.query_latent_norm = False
    baseline.layer_sharing = "none"
    baseline.num_unique_layers = baseline.num_hidden_layers
    baseline.tie_word_embeddings = True
    baseline.validate()
    return baseline


@dataclasses.dataclass
class GroupComparison:
    group: str  # one of PARAMETER_GROUPS, or "Total"
    model: int
    bert: int


def compare_with_standard_bert(
    config: SharedBertConfig, architecture: str = "SharedBertModel"
) -> list[GroupComparison]:
    """Per group (groups empty in both left out) and in total, the parameters of `architecture` built from `config`
    beside those of the same class built from `standard_bert_config(config)`. The last row is the total."""
    ours = count_parameter_groups(config, architecture)
    bert = count_parameter_groups(standard_bert_config(config), architecture)
    return [
        GroupComparison(group, ours[group], bert[group])
        for group in (*PARAMETER_GROUPS, "Total")
        if ours[group] or bert[group]
    ]


@dataclasses.dataclass
class ParamsArguments:
    """The options of `parameter_counts` / `sharedbert params`."""

    config: str = dataclasses.field(default="bert-base", metadata={
        "positional": True, "help": f"A preset ({', '.join(PRESETS)}) or a config JSON file; its attention and "
        "sharing settings are ignored (every combination is counted)."})
    num_unique_layers: int = dataclasses.field(default=1, metadata={"help": "Distinct layer sets when sharing."})
    sharing_presets: bool = dataclasses.field(default=False, metadata={
        "help": "Count each sharing preset (sharedbert.sharing_presets) instead: its stored self-attention "
        "projections, summed over the stored layers, as a share of standard attention's."})


def parameter_counts(arguments: ParamsArguments | None = None, /, **fields) -> list[ParameterCount]:
    """`parameter_table` at the dimensions of a preset or config JSON, for every attention type and sharing mode
    (shared sublayers in `num_unique_layers` sets). Takes a `ParamsArguments`, or its fields as keywords, or both."""
    args = dataclasses.replace(arguments, **fields) if arguments is not None else ParamsArguments(**fields)
    values = config_values(args.config)
    if args.sharing_presets:
        return sharing_preset_table(values)
    for key in ("attention_type", "layer_sharing", "num_unique_layers", "sharing_order"):
        values.pop(key, None)
    values["num_unique_layers"] = args.num_unique_layers
    return parameter_table(values)
