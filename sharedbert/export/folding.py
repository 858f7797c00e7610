"""Folding for inference: `fold_for_inference(model)` returns a copy of a SharedBert model whose attention's
per-channel vectors live in the neighbouring weights, with the same outputs and fewer elementwise passes.

Shared attention computes Q = S⊙(dq⊙dk) against K = V = S and scales its output by dv (`modeling_sharedbert`). In the
copy, dv moves into the columns of the output projection, and √(dq⊙dk) into the rows of the shared projection when
every dq⊙dk is positive, since (S⊙c)Sᵀ = (S⊙√c)(S⊙√c)ᵀ: query, key and value are then S itself and no elementwise pass
is left. A dq⊙dk with a non-positive entry stays one query scaling. `shared_kv` attention's dk moves into its query
projection and dv into the output projection. `shared_head_query`'s dq⊙dk moves into its per-head matrices
(Q = S·(diag(dq⊙dk)·M_h)), dv into the output projection. `shared_lowrank_query` folds as `shared` does, and its
query term's output rows (B's columns) are divided by the √(dq⊙dk) that S took, so that (X·A + a)·B·Sᵀ is unchanged.

The folded modules are subclasses that skip the scalings folded away; the vectors they no longer use are set to ones
and frozen, so the copy is still a valid SharedBert: its `state_dict()` and `save_pretrained` give a checkpoint that
loads as an ordinary model and computes the same function. The model passed in is not touched, and no module of it
holds folding state.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..modeling_sharedbert import (
    SharedBertAttention,
    SharedHeadQueryAttention,
    SharedKeyValueAttention,
    SharedLowRankQueryAttention,
    SharedProjectionAttention,
)


class FoldedSharedProjectionAttention(SharedProjectionAttention):
    """Shared attention after folding: K = V = S, the query S itself (times dq⊙dk, kept in `query_scale`, only where
    it could not be folded), and no output scale."""

    keeps_query_scale = False
    folds_into = ("shared_proj",)

    def scaled_query(self, shared: torch.Tensor) -> torch.Tensor:
        return shared * self.per_head(self.query_scale) if self.keeps_query_scale else shared

    def output_scale(self):
        return None

    @torch.no_grad()
    def fold(self, output: nn.Linear) -> torch.Tensor:
        """Folds in place; returns the per-channel factor S was multiplied by (√(dq⊙dk), or ones)."""
        weight, bias = self.shared_proj.weight, self.shared_proj.bias
        factor = torch.ones_like(self.query_scale, dtype=torch.float64)
        score_scale = self.query_scale.double() * self.key_scale.double()
        value_scale = self.value_scale.double()
        self.keeps_query_scale = not bool((score_scale > 1e-6 * score_scale.abs().max()).all())
        if not self.keeps_query_scale:
            factor = score_scale.sqrt()
            weight.copy_(weight.double() * factor[:, None])
            bias.copy_(bias.double() * factor)
            value_scale = value_scale / factor
            score_scale = torch.ones_like(score_scale)
        output.weight.copy_(output.weight.double() * value_scale)
        self.query_scale.copy_(score_scale)
        for vector in (self.key_scale, self.value_scale):
            vector.fill_(1.0)
        return factor


class FoldedSharedKeyValueAttention(SharedKeyValueAttention):
    """`shared_kv` attention after folding: dk lives in the query projection's rows, dv in the output projection."""

    folds_into = ("query",)

    def project_query(self, hidden_states):
        return self.split_heads(self.query(hidden_states))

    def output_scale(self):
        return None

    @torch.no_grad()
    def fold(self, output: nn.Linear) -> None:
        key_scale = self.key_scale.double()
        self.query.weight.copy_(self.query.weight.double() * key_scale[:, None])
        self.query.bias.copy_(self.query.bias.double() * key_scale)
        output.weight.copy_(output.weight.double() * self.value_scale.double())
        for vector in (self.key_scale, self.value_scale):
            vector.fill_(1.0)


class FoldedSharedHeadQueryAttention(SharedHeadQueryAttention):
    """`shared_head_query` after folding: Q = S·M'_h with M'_h = diag(dq⊙dk)·M_h, K = V = S, dv in the output
    projection; no elementwise pass is left."""

    folds_into = ()

    def scaled_query(self, shared: torch.Tensor) -> torch.Tensor:
        return torch.matmul(shared, self.query_head_matrix)

    def output_scale(self):
        return None

    @torch.no_grad()
    def fold(self, output: nn.Linear) -> None:
        score_scale = (self.query_scale.double() * self.key_scale.double()).view(self.num_heads, self.head_dim, 1)
        self.query_head_matrix.copy_(score_scale * self.query_head_matrix.double())
        output.weight.copy_(output.weight.double() * self.value_scale.double())
        for vector in (self.query_scale, self.key_scale, self.value_scale):
            vector.fill_(1.0)


class FoldedSharedLowRankQueryAttention(SharedLowRankQueryAttention):
    """`shared_lowrank_query` after folding: S and dv as `FoldedSharedProjectionAttention` folds them, and B's
    columns divided by the factor S took."""

    keeps_query_scale = False
    folds_into = ("shared_proj", "query_up")
    scaled_query = FoldedSharedProjectionAttention.scaled_query

    def output_scale(self):
        return None

    @torch.no_grad()
    def fold(self, output: nn.Linear) -> None:
        factor = FoldedSharedProjectionAttention.fold(self, output)
        self.query_up.weight.copy_(self.query_up.weight.double() / factor[:, None])


FOLDED_CLASSES = {
    SharedProjectionAttention: FoldedSharedProjectionAttention,
    SharedKeyValueAttention: FoldedSharedKeyValueAttention,
    SharedHeadQueryAttention: FoldedSharedHeadQueryAttention,
    SharedLowRankQueryAttention: FoldedSharedLowRankQueryAttention,
}


def fold_for_inference(model: nn.Module) -> nn.Module:
    """A folded copy of `model` (any SharedBert model, or a module holding one), in eval mode, with gradients off for
    the vectors folded away. Outputs match `model`'s to float rounding. Attention types with nothing to fold are
    copied as they are. Raises ValueError for a projection wrapped by an adapter (merge it first)."""
    folded = copy.deepcopy(model).eval()
    for module in folded.modules():
        if not isinstance(module, SharedBertAttention) or type(module.self) not in FOLDED_CLASSES:
            continue
        folded_class = FOLDED_CLASSES[type(module.self)]
        folded_layers = [getattr(module.self, name) for name in folded_class.folds_into]
        if any(type(layer) is not nn.Linear for layer in (*folded_layers, module.output.dense)):
            raise ValueError(
                "fold_for_inference needs plain nn.Linear projections, but one is wrapped (e.g. by a LoRA adapter): "
                "merge the adapters first (peft's `merge_and_unload()`).")
        # The same parameters under a class whose forward skips what was folded (a module reused across layers is
        # one object, folded once).
        module.self.__class__ = folded_class
        module.self.fold(module.output.dense)
        for name in ("query_scale", "key_scale", "value_scale"):
            vector = getattr(module.self, name, None)
            if vector is not None:
                vector.requires_grad_(False)
    return folded


def is_folded(model: nn.Module) -> bool:
    """Whether any attention of `model` is in the folded form."""
    return any(isinstance(module, tuple(FOLDED_CLASSES.values())) for module in model.modules())


def has_foldable_attention(model: nn.Module) -> bool:
    """Whether `fold_for_inference` would fold anything in `model` (without copying it to find out)."""
    return any(type(module) in FOLDED_CLASSES for module in model.modules())


__all__ = ["FOLDED_CLASSES", "FoldedSharedHeadQueryAttention", "FoldedSharedKeyValueAttention",
           "FoldedSharedLowRankQueryAttention", "FoldedSharedProjectionAttention", "fold_for_inference",
           "has_foldable_attention", "is_folded"]
