"""Named ways to share weights: `SharedBertConfig` keyword sets that apply at any model size.

    config = SharedBertConfig(**sharing_preset("albert-attention"), hidden_size=384, num_attention_heads=12)
    sharedbert convert all-MiniLM-L6-v2 out --sharing-preset albert-attention --heal
    sharedbert pretrain --corpus text/ --sharing-preset mqa

A preset sets every sharing field (`SHARING_FIELDS`: the attention type, which sublayers are shared across depth, how
many sets they have and in which order, the key/value heads, the query's rank), so it describes the whole of how a
model shares; the sizes come from elsewhere. Every value is size-free: a count of stored layers (1) fits any depth,
one key/value head fits any number of heads. docs/model.md says which sharing suits which budget, from the frontier
study (experiments/frontier).
"""

from __future__ import annotations

import dataclasses

SHARING_FIELDS = ("attention_type", "layer_sharing", "num_unique_layers", "sharing_order", "num_key_value_heads",
                  "query_rank")

_NO_SHARING = dict(attention_type="standard", layer_sharing="none", num_unique_layers=None, sharing_order="sequence",
                   num_key_value_heads=None, query_rank=None)

SHARING_PRESETS: dict[str, dict] = {
    # BERT's attention, nothing shared: the baseline every other preset is measured against.
    "standard": dict(_NO_SHARING),
    # Kowsher et al. 2024 (arXiv 2412.00359): one shared projection S = X·Ws + b, then Q, K, V as S times
    # per-channel vectors; about a third of standard's self-attention projections.
    "shared-projection": dict(_NO_SHARING, attention_type="shared"),
    # Shazeer 2019: one key/value head for all query heads; the query stays whole, so (1 + 2/heads)/3 of standard's
    # projections (50% at 4 heads, 39% at 12).
    "mqa": dict(_NO_SHARING, num_key_value_heads=1),
    # ALBERT (Lan et al. 2020): every layer runs one stored layer, attention and feed-forward alike.
    "albert": dict(_NO_SHARING, layer_sharing="all", num_unique_layers=1),
    # ALBERT's attention-only sharing: one stored attention sublayer for every depth, each layer its own feed-forward.
    "albert-attention": dict(_NO_SHARING, layer_sharing="attention", num_unique_layers=1),
    # Both: one multi-query attention sublayer for every depth (the frontier study's `mqa-att1`).
    "mqa-albert-attention": dict(_NO_SHARING, num_key_value_heads=1, layer_sharing="attention", num_unique_layers=1),
}


def sharing_preset(name: str) -> dict:
    """The `SharedBertConfig` keyword arguments of preset `name` (a fresh dict); ValueError naming the choices."""
    if name not in SHARING_PRESETS:
        raise ValueError(f"Unknown sharing preset {name!r}; the presets are {', '.join(SHARING_PRESETS)} "
                         "(sharedbert.sharing_presets.SHARING_PRESETS).")
    return dict(SHARING_PRESETS[name])


def apply_sharing_preset(arguments) -> None:
    """Set the sharing fields of a job's argument dataclass (one with `sharing_preset` and the `SHARING_FIELDS`) from
    its preset. A field the user also set, to another value than the preset's, is refused: the preset is the whole
    description, so a second value for one of its fields is a contradiction, not an override."""
    name = arguments.sharing_preset
    if name is None:
        return
    defaults = {field.name: field.default for field in dataclasses.fields(arguments)}
    for key, value in sharing_preset(name).items():
        given = getattr(arguments, key)
        if given != defaults[key] and given != value:
            flag = "--" + key.replace("_", "-")
            raise ValueError(f"The sharing preset {name!r} sets {key}={value!r}, and {flag} {given} was given too: "
                             f"drop {flag}, or drop the preset and give every sharing option yourself.")
        setattr(arguments, key, value)


__all__ = ["SHARING_FIELDS", "SHARING_PRESETS", "apply_sharing_preset", "sharing_preset"]
