"""PyTorch SharedBert: a BERT encoder with shared-projection self-attention and optional cross-layer sharing.

The attention variants differ only in how the per-head queries, keys and values are made from the layer input;
everything after that (the attention backend, output projection, residual, LayerNorm, feed-forward) is BERT's. Three
of them give the paper's symmetric scores a direction: `shared_kv` (own Wq, K = V = S),
`shared_head_query` (Q = (S⊙dq⊙dk)·M_h) and `shared_lowrank_query` (Q = S⊙dq⊙dk + (X·A + a)·B).
Cross-layer sharing stores each distinct sublayer once and runs it through an index map, as ALBERT does.

Decoding (`is_decoder`, `add_cross_attention`, `SharedBertLMHeadModel`, `SharedBertForConditionalGeneration`):

* Self-attention becomes causal; keys and values of earlier tokens come from a transformers `Cache`. Shared
  attention's key and value are one projection S scaled per channel, so its cache holds S alone (`cache_update`):
  half the bytes of standard attention's.
* Cross-attention (after self-attention in every decoder layer) reads queries from the decoder states X and keys and
  values from the encoder states H, projected as `config.effective_cross_attention_type` says: standard (the default):
  separate Wq (on X), Wk and Wv (on H); shared_kv: Q = X·Wq + bq, S_H = H·Ws + b, K = S_H⊙dk, V = S_H⊙dv; shared:
  one Ws on both sides, Q = (X·Ws + b)⊙dq (every score is then a symmetric form of the two sides); symmetric:
  K = H·Wq + bq, Wq applied to the encoder states; pairwise: the same plus the per-head bilinear matrix.
* Cross-layer sharing covers the decoder too: the cross-attention sublayers follow the attention index map (with
  `layer_sharing="attention"` or `"all"` they are shared across depth exactly as self-attention is).
* A cache slot belongs to each depth (`layer_idx` = depth), never to a stored module: a module shared by several
  depths writes a different slot at each. The encoder's keys and values of cross-attention are computed once per
  generation and kept in the cross-attention half of an `EncoderDecoderCache`.
* Each stack (`SharedBertStack`, as T5's `T5Stack`) records its own hidden states and attentions, so a seq2seq
  decoder that runs the encoder's sublayers reports its own.

This file is shipped to the Hub with the model: it imports only torch, transformers and its sibling config, and runs
nothing at import time beyond defining classes.
"""

import torch
from torch import nn
from torch.nn import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss

from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    BaseModelOutputWithPoolingAndCrossAttentions,
    CausalLMOutputWithCrossAttentions,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    NextSentencePredictorOutput,
    QuestionAnsweringModelOutput,
    Seq2SeqLMOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.models.bert.modeling_bert import BertForPreTrainingOutput
from transformers.models.encoder_decoder.modeling_encoder_decoder import shift_tokens_right
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, auto_docstring
from transformers.utils.generic import can_return_tuple, merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .configuration_sharedbert import SharedBertConfig


def slice_logits_to_keep(hidden_states: torch.Tensor, logits_to_keep: int | torch.Tensor) -> torch.Tensor:
    """The positions of `hidden_states` whose logits are wanted, as transformers' `slice_logits_to_keep` (5.21+,
    defined here so that older 5.x releases load this file): an int keeps the last `logits_to_keep` positions (0:
    all), a 1D tensor these positions, a 2D integer tensor these positions per sample, a 2D bool mask the True ones
    (flattened to `(num_true, hidden_size)`)."""
    if isinstance(logits_to_keep, torch.Tensor) and logits_to_keep.ndim == 2:
        if logits_to_keep.dtype == torch.bool:
            return hidden_states[logits_to_keep]
        return torch.take_along_dim(hidden_states, logits_to_keep[..., None], dim=1)
    if isinstance(logits_to_keep, int):
        logits_to_keep = slice(-logits_to_keep, None)
    return hidden_states[:, logits_to_keep, :]


class SharedBertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, LayerNorm and dropout, as in BERT."""

    def __init__(self, config: SharedBertConfig, vocab_size: int | None = None):
        super().__init__()
        # `vocab_size`: a seq2seq decoder's own target vocabulary (`config.target_vocab_size`).
        vocab_size = config.vocab_size if vocab_size is None else vocab_size
        padding_idx = config.pad_token_id
        if padding_idx is not None and padding_idx >= vocab_size:  # a target vocabulary without the source's pad id
            padding_idx = None
        self.word_embeddings = nn.Embedding(vocab_size, config.hidden_size, padding_idx=padding_idx)
        # √d_model (Vaswani et al. §3.4) when `scale_embedding`; 1.0 keeps BERT's embeddings.
        self.word_scale = config.hidden_size**0.5 if config.scale_embedding else 1.0
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.position_ids = nn.Buffer(torch.arange(config.max_position_embeddings).expand((1, -1)), persistent=False)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        past_key_values_length: int = 0,
    ) -> torch.Tensor:
        """`past_key_values_length`: the positions a decoder's cache holds; new tokens are numbered after them."""
        if (input_ids is None) == (inputs_embeds is None):
            # Both given, input_ids would silently win.
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds.")
        if input_ids is not None:
            inputs_embeds = self.word_embeddings(input_ids)
            if self.word_scale != 1.0:
                inputs_embeds = inputs_embeds * self.word_scale
        if position_ids is None:
            end = past_key_values_length + inputs_embeds.shape[1]
            if end > self.position_ids.shape[1]:
                # The commonest mistake with a BERT-family model; torch would only report mismatched tensor sizes.
                raise ValueError(
                    f"{past_key_values_length} cached and {inputs_embeds.shape[1]} new positions exceed "
                    f"max_position_embeddings={self.position_ids.shape[1]}: truncate the input (tokenizer(..., "
                    f"truncation=True, max_length={self.position_ids.shape[1]})) or generate fewer tokens."
                )
            position_ids = self.position_ids[:, past_key_values_length:end]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(position_ids)
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids) + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(batch, kv_heads, seq, head_dim) -> (batch, kv_heads * n_rep, seq, head_dim): each key/value head serves
    `n_rep` consecutive query heads (grouped-query attention), as in transformers' Llama."""
    if n_rep == 1:
        return hidden_states
    batch, num_key_value_heads, length, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, length, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, length, head_dim)


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Unpack[TransformersKwargs],
):
    key = repeat_kv(key, module.num_key_value_groups)
    value = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value).transpose(1, 2).contiguous()
    return attn_output, attn_weights


class SharedBertAttentionBase(nn.Module):
    """Multi-head scaled dot-product attention; subclasses decide how queries, keys and values are projected.

    One class serves self- and cross-attention. Each subclass defines `project_query(states)`, the per-head queries
    (batch, heads, seq, head_dim) of the states that attend (the decoder's in cross-attention), and
    `project_key_value(states)`, the per-head (key, value) of the states attended to (the encoder's), with the weights
    the type ties; `project` does both from one input. Types whose value is their key scaled per channel (K = S,
    V = S⊙dv: "shared", "shared_kv", "shared_head_query", "shared_lowrank_query") return the value None and
    `output_scale()` dv: attention runs with V = K, and since P·(S⊙dv) = (P·S)⊙dv, dv scales the attention's output
    channels. No value tensor is made, and a cache holds S alone (`cache_update`)."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        # Query heads per key/value head: more than 1 only in grouped-query `StandardAttention`. The attention
        # backends (ours and transformers' SDPA) read it to share each key/value head among its group.
        self.num_key_value_groups = 1
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        # Causality is passed per call (`is_causal`): one stored module may serve an encoder and a decoder depth.
        self.is_causal = False

    def project(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Self-attention's per-head (query, key, value), all from `hidden_states`."""
        return (self.project_query(hidden_states), *self.project_key_value(hidden_states))

    def output_scale(self) -> torch.Tensor | None:
        """The per-channel factor of the attention output (dv when the value is the key), or None."""
        return None

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, heads·head_dim) -> (batch, heads, seq, head_dim); grouped keys and values have fewer heads."""
        return x.view(*x.shape[:-1], -1, self.head_dim).transpose(1, 2)

    def per_head(self, vector: torch.Tensor) -> torch.Tensor:
        """A (hidden,) vector shaped to scale per-head (batch, heads, seq, head_dim) tensors channel by channel."""
        return vector.view(self.num_heads, 1, self.head_dim)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        layer_idx: int | None = None,
        is_causal: bool = False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`key_value_states`: the encoder states of cross-attention (None: self-attention). `past_key_values`: the
        cache; `layer_idx`: this depth's slot in it."""
        if key_value_states is None:
            query, key, value = self.project(hidden_states)
            if past_key_values is not None:
                cache = past_key_values
                if isinstance(cache, EncoderDecoderCache):
                    cache = cache.self_attention_cache
                key, value = cache_update(cache, key, value, layer_idx)
        else:
            query = self.project_query(hidden_states)
            if past_key_values is not None and past_key_values.is_updated.get(layer_idx):
                # The encoder states do not change during generation: their keys and values were cached at step one.
                layer = past_key_values.cross_attention_cache.layers[layer_idx]
                key, value = layer.keys, (None if layer.values.shape[-1] == 0 else layer.values)
            else:
                key, value = self.project_key_value(key_value_states)
                if past_key_values is not None:
                    key, value = cache_update(past_key_values.cross_attention_cache, key, value, layer_idx)
                    past_key_values.is_updated[layer_idx] = True
        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        attn_output, attn_weights = attention_interface(
            self,
            query,
            key,
            key if value is None else value,
            attention_mask,
            dropout=self.dropout.p if self.training else 0.0,
            scaling=self.scaling,
            is_causal=is_causal,
            **kwargs,
        )
        attn_output = attn_output.reshape(*hidden_states.shape[:-1], self.num_heads * self.head_dim)
        # dv, where the value is the key: P·(S⊙dv) = (P·S)⊙dv. Applied here, in this module's own forward, where
        # offloading hooks (accelerate's device_map with "cpu" or "disk") have brought its weights onto the device.
        scale = self.output_scale()
        return (attn_output if scale is None else attn_output * scale), attn_weights


def cache_update(cache: Cache, key: torch.Tensor, value: torch.Tensor | None, layer_idx: int):
    """`cache.update` for every attention type. A value of None (V = K, shared attention) stores the key alone: the
    layer's values are zero-width, so its cache holds half the bytes of standard attention's, in any transformers
    cache (beam search reorders and cropping cuts keys and values alike)."""
    if value is None:
        key, _ = cache.update(key, key[..., :0], layer_idx)
        return key, None
    return cache.update(key, value, layer_idx)


class SharedProjectionAttention(SharedBertAttentionBase):
    """One projection S = X·Ws + b; Q = S⊙dq, K = S⊙dk, V = S⊙dv (arXiv 2412.00359). In cross-attention the one Ws
    serves both sides: Q from the decoder's S_X, K and V from the encoder's S_H.

    Computed as Q = S⊙(dq⊙dk), K = V = S and the output times dv: (S⊙dq)(S⊙dk)ᵀ = (S⊙dq⊙dk)Sᵀ gives the same scores
    with one elementwise pass, and the key and value are S itself. `sharedbert.export.folding.fold_for_inference`
    moves the vectors into the neighbouring weights for inference."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.shared_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.query_scale = nn.Parameter(torch.ones(config.hidden_size))
        self.key_scale = nn.Parameter(torch.ones(config.hidden_size))
        self.value_scale = nn.Parameter(torch.ones(config.hidden_size))

    def shared_states(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.split_heads(self.shared_proj(hidden_states))

    def scaled_query(self, shared: torch.Tensor) -> torch.Tensor:
        return shared * self.per_head(self.query_scale * self.key_scale)

    def project_query(self, hidden_states):
        return self.scaled_query(self.shared_states(hidden_states))

    def project_key_value(self, hidden_states):
        return self.shared_states(hidden_states), None

    def project(self, hidden_states):
        shared = self.shared_states(hidden_states)
        return self.scaled_query(shared), shared, None

    def output_scale(self):
        return self.value_scale


class SharedBertRMSNorm(nn.Module):
    """Root-mean-square normalisation with a learned scale and no bias (T5's LayerNorm, Llama's RMSNorm), computed in
    float32: multi-head latent attention's normalisation of its rank-r query code."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return (self.weight * hidden_states * torch.rsqrt(variance + self.variance_epsilon)).to(input_dtype)


class StandardAttention(SharedBertAttentionBase):
    """BERT's separate query, key and value projections (the baseline). With `config.num_key_value_heads` below the
    number of heads it is grouped-query attention (Ainslie et al. 2023; multi-query with 1, Shazeer 2019): the key
    and value projections have `num_key_value_heads` heads, each serving a group of query heads, and a decoder's cache
    holds keys and values at that many heads. With `config.query_rank` = r the query is rank r: Q = (X·A + a)·B,
    A and its bias a in `query_down` (hidden → r), B in `query_up` (r → hidden), as multi-head latent attention
    compresses queries (DeepSeek-V2, 2024); with `config.query_latent_norm` the code X·A + a is RMS-normalised
    before B (`query_norm`), as there."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        num_key_value_heads = config.num_key_value_heads or self.num_heads
        self.num_key_value_groups = self.num_heads // num_key_value_heads
        self.query_rank = config.query_rank  # as built: a config changed later must not change what forward reads
        if config.query_rank is None:
            self.query = nn.Linear(config.hidden_size, config.hidden_size)
        else:
            # The bias sits on the layer that reads the input, as in "shared_lowrank_query": the fits treat a linear
            # layer with a bias as one that reads the hidden states.
            self.query_down = nn.Linear(config.hidden_size, config.query_rank)
            self.query_up = nn.Linear(config.query_rank, config.hidden_size, bias=False)
            # Without it the query starts as the product of two small random factors, several times smaller than
            # a full Wq's at BERT's initialiser; normalised, the code has unit scale whatever A's.
            self.query_norm = (SharedBertRMSNorm(config.query_rank, eps=config.layer_norm_eps)
                               if config.query_latent_norm else None)
        self.key = nn.Linear(config.hidden_size, num_key_value_heads * self.head_dim)
        self.value = nn.Linear(config.hidden_size, num_key_value_heads * self.head_dim)

    def project_query(self, hidden_states):
        if self.query_rank is None:
            return self.split_heads(self.query(hidden_states))
        code = self.query_down(hidden_states)
        if self.query_norm is not None:
            code = self.query_norm(code)
        return self.split_heads(self.query_up(code))

    def project_key_value(self, hidden_states):
        return self.split_heads(self.key(hidden_states)), self.split_heads(self.value(hidden_states))


class SymmetricAttention(SharedBertAttentionBase):
    """K = Q: the key reuses the query projection (bias included), so each head's score matrix is symmetric. In
    cross-attention the key is the query projection applied to the encoder states."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)

    def project_query(self, hidden_states):
        return self.split_heads(self.query(hidden_states))

    def project_key_value(self, hidden_states):
        return self.split_heads(self.query(hidden_states)), self.split_heads(self.value(hidden_states))

    def project(self, hidden_states):
        query = self.split_heads(self.query(hidden_states))
        return query, query, self.split_heads(self.value(hidden_states))


class PairwiseAttention(SharedBertAttentionBase):
    """K = Q with a learnable bilinear form per head: scores Q·P_h·Qᵀ/√d (Courtois et al. 2024). In cross-attention
    the scores are Q_X·P_h·Q_Hᵀ, the query projection applied to both sides."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.head_bilinear = nn.Parameter(torch.eye(self.head_dim).repeat(self.num_heads, 1, 1))

    def project_query(self, hidden_states):
        # (Q·P_h)·Kᵀ: the attention backend sees an ordinary query/key pair.
        return torch.matmul(self.split_heads(self.query(hidden_states)), self.head_bilinear)

    def project_key_value(self, hidden_states):
        return self.split_heads(self.query(hidden_states)), self.split_heads(self.value(hidden_states))

    def project(self, hidden_states):
        query = self.split_heads(self.query(hidden_states))
        return torch.matmul(query, self.head_bilinear), query, self.split_heads(self.value(hidden_states))


class SharedKeyValueAttention(SharedBertAttentionBase):
    """`"shared_kv"`: the query has its own projection, Q = X·Wq + bq; keys and values share one projection,
    S = X·Ws + b, K = S⊙dk, V = S⊙dv (Kayyam et al.'s K = V). In cross-attention Q reads the decoder states and S the
    encoder states, S_H = H·Ws + b. The score Q·diag(dk)·Sᵀ is any bilinear form (not a symmetric one, as with one
    Ws read twice), at 2·d² projection weights instead of standard attention's 3·d². Computed as Q⊙dk against
    K = V = S, the output times dv."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.shared_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.key_scale = nn.Parameter(torch.ones(config.hidden_size))
        self.value_scale = nn.Parameter(torch.ones(config.hidden_size))

    def project_query(self, hidden_states):
        return self.split_heads(self.query(hidden_states)) * self.per_head(self.key_scale)

    def project_key_value(self, hidden_states):
        return self.split_heads(self.shared_proj(hidden_states)), None

    def output_scale(self):
        return self.value_scale


class SharedHeadQueryAttention(SharedProjectionAttention):
    """`"shared_head_query"`: the paper's one projection S = X·Ws + b, with a head_dim × head_dim matrix M_h per head
    on the query: Q = (S⊙dq⊙dk)·M_h, K = V = S, the output times dv. Scores S·diag(dq⊙dk)·M_h·Sᵀ are symmetric only
    when diag(dq⊙dk)·M_h is: M_h gives them a direction (i's score for j differs from j's for i) at heads·head_dim²
    parameters (+2.8% of standard attention's projections at bert-base). M_h = I at initialisation: the paper's form.
    The cache keeps S alone, as for "shared"."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.query_head_matrix = nn.Parameter(torch.eye(self.head_dim).repeat(self.num_heads, 1, 1))

    def scaled_query(self, shared: torch.Tensor) -> torch.Tensor:
        return torch.matmul(super().scaled_query(shared), self.query_head_matrix)


class SharedLowRankQueryAttention(SharedProjectionAttention):
    """`"shared_lowrank_query"`: the paper's one projection S = X·Ws + b, with a rank-r term on the query:
    Q = S⊙dq⊙dk + (X·A + a)·B, K = V = S, the output times dv (A: hidden × r with bias a, `query_down`; B: r × hidden,
    `query_up`; r = `config.effective_attention_rank`). The term reads X, not S, so the query may leave S's
    subspace and its scores are not a symmetric form. B = 0 at initialisation: the paper's form. The cache keeps S
    alone, as for "shared"."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        rank = config.effective_attention_rank
        self.query_down = nn.Linear(config.hidden_size, rank)
        self.query_up = nn.Linear(rank, config.hidden_size, bias=False)

    def query_correction(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.split_heads(self.query_up(self.query_down(hidden_states)))

    def project_query(self, hidden_states):
        return super().project_query(hidden_states) + self.query_correction(hidden_states)

    def project(self, hidden_states):
        shared = self.shared_states(hidden_states)
        return self.scaled_query(shared) + self.query_correction(hidden_states), shared, None


ATTENTION_CLASSES = {
    "shared": SharedProjectionAttention,
    "standard": StandardAttention,
    "symmetric": SymmetricAttention,
    "pairwise": PairwiseAttention,
    "shared_kv": SharedKeyValueAttention,
    "shared_head_query": SharedHeadQueryAttention,
    "shared_lowrank_query": SharedLowRankQueryAttention,
}


class SharedBertSelfOutput(nn.Module):
    """Attention output projection, dropout, residual and LayerNorm, as in BERT. With `layer_norm_position="pre"` the
    LayerNorm is applied to the attention's input instead (`SharedBertAttention`), and this block adds the residual."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_norm = config.layer_norm_position == "pre"

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        output = self.dense(hidden_states)
        if self.pre_norm:
            return input_tensor + self.dropout(output)
        return self.LayerNorm(self.dropout(output) + input_tensor)


class SharedBertAttention(nn.Module):
    """The attention sublayer: attention of the configured type, then the output projection block. With
    `is_cross_attention` the keys and values come from the encoder states passed as `encoder_hidden_states`."""

    def __init__(self, config: SharedBertConfig, is_cross_attention: bool = False):
        super().__init__()
        self.is_cross_attention = is_cross_attention
        attention_type = config.effective_cross_attention_type if is_cross_attention else config.attention_type
        self.self = ATTENTION_CLASSES[attention_type](config)
        self.output = SharedBertSelfOutput(config)

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        encoder_hidden_states=None,
        past_key_values=None,
        layer_idx=None,
        is_causal=False,
        **kwargs: Unpack[TransformersKwargs],
    ):
        attention_output, attention_weights = self.self(
            self.output.LayerNorm(hidden_states) if self.output.pre_norm else hidden_states,
            attention_mask,
            key_value_states=encoder_hidden_states if self.is_cross_attention else None,
            past_key_values=past_key_values,
            layer_idx=layer_idx,
            is_causal=is_causal,
            **kwargs,
        )
        return self.output(attention_output, hidden_states), attention_weights


class SharedBertFeedForward(nn.Module):
    """The feed-forward sublayer: dense, activation, dense, dropout, residual and LayerNorm, as in BERT."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = ACT2FN[config.hidden_act]
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_norm = config.layer_norm_position == "pre"

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            ffn_output = self.output(self.activation(self.intermediate(self.LayerNorm(hidden_states))))
            return hidden_states + self.dropout(ffn_output)
        ffn_output = self.output(self.activation(self.intermediate(hidden_states)))
        return self.LayerNorm(self.dropout(ffn_output) + hidden_states)


class SharedBertLayer(GradientCheckpointingLayer):
    """One depth of a stack. It owns no weights: the stack hands it that depth's attention, (cross-attention) and
    feed-forward sublayers, so one stored sublayer can serve several depths. One instance per depth is where gradient
    checkpointing and the recording of outputs hook in, as BERT's layers are: it returns (hidden states, self-attention
    weights, cross-attention weights), and the stack's `_can_record_outputs` reads each. `layer_idx` (the depth)
    names this depth's slot in the cache."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor | None = None,
        *,
        attention: SharedBertAttention,
        feed_forward: SharedBertFeedForward,
        crossattention: SharedBertAttention | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        layer_idx: int | None = None,
        is_causal: bool = False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        hidden_states, self_weights = attention(
            hidden_states,
            attention_mask,
            past_key_values=past_key_values,
            layer_idx=layer_idx,
            is_causal=is_causal,
            **kwargs,
        )
        cross_weights = None
        if crossattention is not None:
            hidden_states, cross_weights = crossattention(
                hidden_states,
                encoder_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
                past_key_values=past_key_values,
                layer_idx=layer_idx,
                **kwargs,
            )
        return feed_forward(hidden_states), self_weights, cross_weights


class SharedBertPooler(nn.Module):
    """Dense + tanh over the first ([CLS]) token, as in BERT."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(hidden_states[:, 0]))


class SharedBertLMPredictionHead(nn.Module):
    """Transform (dense, activation, LayerNorm) then the vocabulary decoder, tied to the word embeddings by default.
    `vocab_size`: a seq2seq model's target vocabulary (default: the config's `vocab_size`)."""

    def __init__(self, config: SharedBertConfig, vocab_size: int | None = None):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size if vocab_size is None else vocab_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(self.activation(self.dense(hidden_states))))


class SharedBertOnlyMLMHead(nn.Module):
    def __init__(self, config: SharedBertConfig, vocab_size: int | None = None):
        super().__init__()
        self.predictions = SharedBertLMPredictionHead(config, vocab_size)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        return self.predictions(sequence_output)


class SharedBertOnlyNSPHead(nn.Module):
    """Next-sentence prediction: is sentence B the continuation of sentence A (label 0) or random (label 1)?"""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled_output: torch.Tensor) -> torch.Tensor:
        return self.seq_relationship(pooled_output)


class SharedBertPreTrainingHeads(nn.Module):
    """BERT's two pre-training heads: masked-LM predictions over tokens, NSP over the pooled [CLS]."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.predictions = SharedBertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, sequence_output: torch.Tensor, pooled_output: torch.Tensor):
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


# BERT's weight names (any transformers BERT class, with or without the `bert.` prefix) and the SharedBert names of
# the same weights: transformers renames them as a checkpoint loads (the `key_mapping` of `from_pretrained`), so a
# BERT checkpoint loads as it is into `standard` attention without layer sharing. No SharedBert name matches a source.
BERT_WEIGHT_NAMES = {
    r"^bert\.": "sharedbert.",
    r"encoder\.layer\.(\d+)\.attention\.": r"encoder.attention.\1.",
    r"encoder\.layer\.(\d+)\.crossattention\.": r"encoder.crossattention.\1.",
    r"encoder\.layer\.(\d+)\.intermediate\.dense\.": r"encoder.feed_forward.\1.intermediate.",
    r"encoder\.layer\.(\d+)\.output\.dense\.": r"encoder.feed_forward.\1.output.",
    r"encoder\.layer\.(\d+)\.output\.LayerNorm\.": r"encoder.feed_forward.\1.LayerNorm.",
    r"cls\.predictions\.transform\.": "cls.predictions.",
    r"cls\.predictions\.bias": "cls.predictions.decoder.bias",
}


class IncompatibleCheckpointError(ValueError, RuntimeError):
    """The weights on disk do not fit the model's config. A ValueError (a bad argument or file), and a RuntimeError as
    transformers raises for mismatched shapes, so code written for either keeps working."""


@auto_docstring
class SharedBertPreTrainedModel(PreTrainedModel):
    config_class = SharedBertConfig
    config: SharedBertConfig
    base_model_prefix = "sharedbert"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = False
    # flex_attention has no backward on CPU; advertise only what works everywhere.
    _supports_flex_attn = False
    _supports_attention_backend = True
    _no_split_modules = ["SharedBertEmbeddings", "SharedBertAttention", "SharedBertFeedForward"]

    # The heads' losses are plain per-batch means that ignore `num_items_in_batch`: without this, Trainer would treat
    # them as token sums and multiply them by the number of DDP processes.
    accepts_loss_kwargs = False

    @property
    def _can_record_outputs(self):
        # Every depth's layer returns its hidden states and both attentions' weights. (A property, not a class
        # attribute: the Hub code computes nothing on import.)
        return {
            "hidden_states": OutputRecorder(SharedBertLayer, index=0),
            "attentions": OutputRecorder(SharedBertLayer, index=1),
            "cross_attentions": OutputRecorder(SharedBertLayer, index=2),
        }

    def __init__(self, config: SharedBertConfig, *inputs, **kwargs):
        # A config can be changed after its own checks ran (attribute assignment, AutoConfig keyword overrides):
        # check it again before building modules from it, rather than failing later with a shape or key error.
        config.validate()
        super().__init__(config, *inputs, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, SharedProjectionAttention):
            # Q = K = V = S at initialisation, as in the paper (and so are the two types that extend it).
            init.ones_(module.query_scale)
            init.ones_(module.key_scale)
            init.ones_(module.value_scale)
            if isinstance(module, SharedHeadQueryAttention):
                init.copy_(module.query_head_matrix, torch.eye(module.head_dim).repeat(module.num_heads, 1, 1))
            if isinstance(module, SharedLowRankQueryAttention):
                # B = 0: the query term starts at zero while A (normal, as every Linear) gives B a gradient.
                init.zeros_(module.query_up.weight)
        elif isinstance(module, SharedBertRMSNorm):
            init.ones_(module.weight)
        elif isinstance(module, SharedKeyValueAttention):
            init.ones_(module.key_scale)
            init.ones_(module.value_scale)
        elif isinstance(module, PairwiseAttention):
            # P_h = I starts pairwise attention as symmetric attention.
            init.copy_(module.head_bilinear, torch.eye(module.head_dim).repeat(module.num_heads, 1, 1))
        elif isinstance(module, SharedBertEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """`PreTrainedModel.from_pretrained` from safetensors only, reading BERT's weight names (`BERT_WEIGHT_NAMES`),
        and refusing a checkpoint whose weights do not fit the config (`check_checkpoint_fits`), which transformers
        would random-initialise and only log. With `output_loading_info=True` the caller judges the keys itself."""
        # Without a model.safetensors transformers would fall back to a folder's pytorch_model.bin and unpickle it.
        if kwargs.setdefault("use_safetensors", True) is not True:
            raise ValueError(f"use_safetensors={kwargs['use_safetensors']!r}: SharedBert loads safetensors weights "
                             "only (unpickling .bin/.pt files can run code); drop the argument.")
        kwargs.setdefault("key_mapping", BERT_WEIGHT_NAMES)
        return_loading_info = kwargs.pop("output_loading_info", False)
        model, info = super().from_pretrained(pretrained_model_name_or_path, *model_args, output_loading_info=True,
                                              **kwargs)
        if read_bert_weight_names(model):
            check_config_runs_bert(pretrained_model_name_or_path, model.config)
        if return_loading_info:
            return model, info
        check_checkpoint_fits(pretrained_model_name_or_path, model, info)
        return model


def check_checkpoint_fits(path, model: PreTrainedModel, info: dict) -> None:
    """Refuses a load whose embedding or stack weights were missing from or unexpected in the checkpoint at `path`:
    they would be random-initialised with only a logged report, so a checkpoint of another attention type or sharing
    would load as noise. A task head absent from a base checkpoint, and cross-attention absent from an encoder's, are
    the normal start of fine-tuning."""
    own = tuple(f"{name}." for name, module in model.named_modules()
                if isinstance(module, (SharedBertEmbeddings, SharedBertStack)))
    missing = sorted(key for key in info["missing_keys"] if key.startswith(own) and ".crossattention." not in key)
    unexpected = sorted(key for key in info["unexpected_keys"] if key.startswith(own))
    if missing or unexpected:
        checkpoint_keys = (set(model.state_dict()) - set(info["missing_keys"])) | set(info["unexpected_keys"])
        lines = checkpoint_mismatch_lines(path, model.config, checkpoint_keys, missing, unexpected)
        raise IncompatibleCheckpointError("\n".join(lines + [
            "Check that the config (attention_type, layer_sharing, num_unique_layers, sizes) matches the weights."]))


def read_bert_weight_names(model: PreTrainedModel) -> bool:
    """Whether loading renamed BERT weight names into `model` (`BERT_WEIGHT_NAMES`). transformers keeps the renamings
    it applied in order to save a model in its checkpoint's names; a SharedBert saves in its own, so they are dropped."""
    applied = getattr(model, "_weight_conversions", None) or []
    if not any(all(pattern in BERT_WEIGHT_NAMES for pattern in renaming.source_patterns) for renaming in applied):
        return False
    model._weight_conversions = []
    return True


def check_config_runs_bert(path, config: SharedBertConfig) -> None:
    """Refuses a config that would not compute what BERT computes with a BERT checkpoint's weights: its other
    parameters would start random, or its weights run where BERT's never ran."""
    cross = config.effective_cross_attention_type if config.has_cross_attention else "standard"
    differences = [f"{field}={value!r}" for field, value, bert in (
        ("attention_type", config.attention_type, "standard"),
        ("cross_attention_type", cross, "standard"),
        ("layer_sharing", config.layer_sharing, "none"),
        ("num_key_value_heads", config.num_key_value_heads, None),
        ("query_rank", config.query_rank, None),
        ("layer_norm_position", config.layer_norm_position, "post"),
    ) if value != bert]
    if differences:
        raise IncompatibleCheckpointError(
            f"The checkpoint at {path} is a BERT (its weights have BERT's names), which loads as it is only with "
            f"attention_type='standard' and no layer sharing, but the config asks for {', '.join(differences)}. "
            f"Convert it instead: sharedbert.conversion.from_bert({str(path)!r}, attention_type=...) fits the other "
            "attention types and shared layers to BERT's weights (`sharedbert convert` from the shell)."
        )


def attention_type_of(keys) -> str | None:
    """The attention type whose weights `keys` (checkpoint keys of one kind of attention) hold, or None."""
    if any(".shared_proj." in key for key in keys) and any(".self.query." in key for key in keys):
        return "shared_kv"
    # Each type's distinctive weight, most specific first; symmetric has only query and value: what remains. A key
    # projection is standard attention's alone (its rank-r query has `query_down`, as shared_lowrank_query does).
    for attention_type, marker in (
        ("standard", ".self.key."),
        ("shared_head_query", ".query_head_matrix"),
        ("shared_lowrank_query", ".query_down."),
        ("shared", ".shared_proj."),
        ("pairwise", ".head_bilinear"),
        ("symmetric", ".self.query."),
    ):
        if any(marker in key for key in keys):
            return attention_type
    return None


def checkpoint_mismatch_lines(path, config, checkpoint_keys, missing, unexpected) -> list[str]:
    """What does not fit between the checkpoint at `path` and `config`, line by line: the attention type its weights
    hold, when another than the config asks, and the `missing` and `unexpected` keys."""
    lines = [f"The checkpoint at {path} does not fit this SharedBert config."]
    # Self- and cross-attention are judged apart: `cross_attention_type` may give them different types.
    for field, is_cross, wanted in (
        ("attention_type", False, config.attention_type),
        ("cross_attention_type", True, config.effective_cross_attention_type),
    ):
        found = attention_type_of([key for key in checkpoint_keys if (".crossattention." in key) == is_cross])
        if found and found != wanted:
            lines.append(
                f"It holds {field}={found!r} weights but the config asks for {wanted!r}: load it with "
                f"{field}={found!r} (or convert it with sharedbert.conversion.from_bert)."
            )
    if missing:
        lines.append(f"Weights missing from the checkpoint ({len(missing)}): {missing[:5]}")
    if unexpected:
        lines.append(f"Weights in the checkpoint that the model does not have ({len(unexpected)}): {unexpected[:5]}")
    return lines


class SharedBertStack(SharedBertPreTrainedModel):
    """The layers of an encoder or a decoder (as T5's `T5Stack`): each distinct sublayer stored once, run at every
    depth its index map names. Its hidden states and attention weights are recorded here (`capture_outputs`), so a
    seq2seq model's decoder reports its own even when its sublayers are the encoder's.

    `is_decoder` / `add_cross_attention` default to the config's (a seq2seq model builds its decoder stack with
    both True from one config). `own_self_sublayers=False` builds a decoder stack without self-attention and
    feed-forward of its own: the caller lends the encoder's at every call (encoder–decoder layer sharing, T5 /
    BERTShare), so each of them is stored once."""

    def __init__(
        self,
        config: SharedBertConfig,
        is_decoder: bool | None = None,
        add_cross_attention: bool | None = None,
        own_self_sublayers: bool = True,
    ):
        super().__init__(config)
        self.is_decoder = config.is_decoder if is_decoder is None else is_decoder
        add_cross_attention = config.add_cross_attention if add_cross_attention is None else add_cross_attention
        self.attention_layer_map = config.attention_layer_map
        self.ffn_layer_map = config.ffn_layer_map
        num_attention_sets, num_ffn_sets = max(self.attention_layer_map) + 1, max(self.ffn_layer_map) + 1
        if own_self_sublayers:
            self.attention = nn.ModuleList(SharedBertAttention(config) for _ in range(num_attention_sets))
            self.feed_forward = nn.ModuleList(SharedBertFeedForward(config) for _ in range(num_ffn_sets))
        else:
            self.attention = self.feed_forward = None
        # Cross-attention is shared across depth as self-attention is: it follows the attention index map.
        self.crossattention = (
            nn.ModuleList(SharedBertAttention(config, is_cross_attention=True) for _ in range(num_attention_sets))
            if add_cross_attention
            else None
        )
        self.layer = nn.ModuleList(SharedBertLayer() for _ in range(config.num_hidden_layers))
        # Pre-LayerNorm layers leave the residual stream unnormalised: one LayerNorm after the last layer.
        self.final_layer_norm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
                                 if config.layer_norm_position == "pre" else None)
        self.post_init()

    @capture_outputs
    def forward(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = None,
        attention: nn.ModuleList | None = None,
        feed_forward: nn.ModuleList | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """`inputs_embeds`: the embedded inputs (the model that holds this stack holds its embeddings, as a seq2seq
        model's decoder may read the encoder's). `attention_mask` / `encoder_attention_mask`: padding masks of the
        inputs and of the encoder states. `attention` / `feed_forward`: the sublayers lent by the encoder when this
        stack has none of its own."""
        if self.crossattention is not None and encoder_hidden_states is None:
            # Cross-attention without encoder states would silently attend to the decoder's own states.
            raise ValueError(
                "This decoder has cross-attention (add_cross_attention=True) but got no `encoder_hidden_states`: pass "
                "the encoder's last_hidden_state (and its padding mask as `encoder_attention_mask`) at every call."
            )
        if self.crossattention is None and encoder_hidden_states is not None:
            # They would be silently ignored: the output would not depend on the source.
            kind = "decoder" if self.is_decoder else "bidirectional encoder"
            raise ValueError(
                f"Got `encoder_hidden_states` but this {kind} has no cross-attention: build a decoder with "
                "is_decoder=True and add_cross_attention=True (e.g. SharedBertLMHeadModel)."
            )
        use_cache = bool(self.is_decoder and (self.config.use_cache if use_cache is None else use_cache))
        if not self.is_decoder:
            past_key_values = None  # an encoder attends to the whole input at once: it keeps no cache
        past_length = 0 if past_key_values is None else past_key_values.get_seq_length()
        batch_size, length = inputs_embeds.shape[0], past_length + inputs_embeds.shape[1]
        source_length = None if encoder_hidden_states is None else encoder_hidden_states.shape[1]
        for name, mask, positions in (
            ("attention_mask", attention_mask, length),
            ("encoder_attention_mask", encoder_attention_mask, source_length),
        ):
            # The mask functions read a padding mask of another shape without complaint (a 1-D mask, one for another
            # batch, one that leaves out the cached positions): the output would be silently wrong.
            if mask is not None and mask.dim() != 4 and tuple(mask.shape) != (batch_size, positions):
                raise ValueError(
                    f"`{name}` has shape {tuple(mask.shape)} but must be (batch, positions) = "
                    f"{(batch_size, positions)}, cached positions included: pass the padding mask of these inputs."
                )
        if self.is_decoder and (use_cache or past_key_values is not None):
            if past_key_values is None:
                past_key_values = DynamicCache(config=self.config)
            if self.crossattention is not None and not isinstance(past_key_values, EncoderDecoderCache):
                # `generate` builds a DynamicCache for a decoder-only model; cross-attention needs the encoder half.
                past_key_values = EncoderDecoderCache(past_key_values, DynamicCache(config=self.config))
        attention_mask, encoder_attention_mask = self._create_attention_masks(
            inputs_embeds, attention_mask, encoder_hidden_states, encoder_attention_mask, past_key_values
        )
        attention = self.attention if attention is None else attention
        feed_forward = self.feed_forward if feed_forward is None else feed_forward
        hidden_states = inputs_embeds
        for depth, (layer, attention_index, ffn_index) in enumerate(
            zip(self.layer, self.attention_layer_map, self.ffn_layer_map)
        ):
            hidden_states, _, _ = layer(
                hidden_states,
                attention_mask,
                encoder_hidden_states,  # positional, so that gradient checkpointing passes its gradient on
                attention=attention[attention_index],
                feed_forward=feed_forward[ffn_index],
                crossattention=None if self.crossattention is None else self.crossattention[attention_index],
                encoder_attention_mask=encoder_attention_mask,
                past_key_values=past_key_values,
                layer_idx=depth,
                is_causal=self.is_decoder,
                **kwargs,
            )
        if self.final_layer_norm is not None:
            hidden_states = self.final_layer_norm(hidden_states)
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states, past_key_values=past_key_values if use_cache else None
        )

    def _create_attention_masks(
        self, inputs_embeds, attention_mask, encoder_hidden_states, encoder_attention_mask, past_key_values
    ):
        """The masks the attention backend takes (as `BertModel._create_attention_masks`): causal in a decoder,
        bidirectional in an encoder and over the encoder states."""
        if self.is_decoder:
            attention_mask = create_causal_mask(
                config=self.config,
                inputs_embeds=inputs_embeds,
                attention_mask=attention_mask,
                past_key_values=past_key_values,
            )
        else:
            attention_mask = create_bidirectional_mask(
                config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask
            )
        if encoder_attention_mask is not None:
            encoder_attention_mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=inputs_embeds,
                attention_mask=encoder_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
            )
        return attention_mask, encoder_attention_mask


@auto_docstring(
    custom_intro="""
    The bare SharedBert stack: a bidirectional encoder, or with `is_decoder` a causal decoder (with
    `add_cross_attention`, one that attends to `encoder_hidden_states`).
    """
)
class SharedBertModel(SharedBertPreTrainedModel):
    _auto_class = "AutoModel"

    def __init__(self, config: SharedBertConfig, add_pooling_layer: bool = True):
        r"""
        add_pooling_layer (`bool`, *optional*, defaults to `True`):
            Whether to add BERT's pooler (dense + tanh over the first token), whose output the classification heads
            read.
        """
        super().__init__(config)
        self.embeddings = SharedBertEmbeddings(config)
        self.encoder = SharedBertStack(config)
        self.pooler = SharedBertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    @merge_with_config_defaults
    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPoolingAndCrossAttentions:
        r"""
        Returns:
            [`~modeling_outputs.BaseModelOutputWithPoolingAndCrossAttentions`], or a tuple of its fields when `return_dict=False`.
        """
        embedding_output = self.embeddings(
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            # An encoder keeps no cache (its stack ignores one): its positions start at 0.
            past_key_values_length=past_key_values.get_seq_length() if self.encoder.is_decoder and past_key_values else 0,
        )
        outputs = self.encoder(
            embedding_output,
            attention_mask=attention_mask,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            past_key_values=past_key_values,
            use_cache=use_cache,
            return_dict=True,
            **kwargs,
        )
        sequence_output = outputs.last_hidden_state
        pooled_output = self.pooler(sequence_output) if self.pooler is not None else None
        return BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=sequence_output,
            pooler_output=pooled_output,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            cross_attentions=outputs.cross_attentions,
        )


def sparse_mlm_positions(model: nn.Module, sequence_output: torch.Tensor, labels: torch.Tensor | None):
    """(hidden states, labels) to score. With `config.sparse_prediction`, in training with labels, only the labelled
    positions (~15%): the vocabulary projection, which at small sizes costs more than the encoder, then runs on those
    alone, as ModernBERT's sparse prediction does; the loss is the same. Otherwise every position, unchanged."""
    if labels is None or not model.training or not model.config.sparse_prediction:
        return sequence_output, labels
    labelled = labels != -100
    return sequence_output[labelled], labels[labelled]


@auto_docstring(
    custom_intro="""
    SharedBert with BERT's masked-language-modelling head on top, its decoder tied to the word embeddings by
    default (`tie_word_embeddings`).
    """
)
class SharedBertForMaskedLM(SharedBertPreTrainedModel):
    _tied_weights_keys = {"cls.predictions.decoder.weight": "sharedbert.embeddings.word_embeddings.weight"}

    _auto_class = "AutoModelForMaskedLM"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.sharedbert = SharedBertModel(config, add_pooling_layer=False)
        self.cls = SharedBertOnlyMLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MaskedLMOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Labels for the masked-language-modelling loss: token ids in `[0, ..., config.vocab_size - 1]`, or -100 for
            positions that are not scored. With `config.sparse_prediction`, in training, `logits` then holds one row per
            scored position.

        Returns:
            [`~modeling_outputs.MaskedLMOutput`], or a tuple of its fields when `return_dict=False`.
        """
        outputs = self.sharedbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        sequence_output, labels = sparse_mlm_positions(self, outputs.last_hidden_state, labels)
        logits = self.cls(sequence_output)
        loss = None
        if labels is not None:
            loss = CrossEntropyLoss()(logits.view(-1, self.config.vocab_size), labels.view(-1))
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


@auto_docstring(
    custom_intro="""
    A left-to-right language model (`is_decoder=True`), optionally attending to encoder states
    (`add_cross_attention=True`): the decoder of transformers' `EncoderDecoderModel`, as `BertLMHeadModel` is.
    `generate` works with or without `encoder_hidden_states`; the right cache is built here, so callers never pass an
    `EncoderDecoderCache` themselves.
    """
)
class SharedBertLMHeadModel(SharedBertPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"cls.predictions.decoder.weight": "sharedbert.embeddings.word_embeddings.weight"}
    _auto_class = "AutoModelForCausalLM"

    def __init__(self, config: SharedBertConfig):
        if not config.is_decoder:
            raise ValueError(
                "SharedBertLMHeadModel is a left-to-right decoder but the config has is_decoder=False: pass "
                "is_decoder=True (and add_cross_attention=True to attend to an encoder)."
            )
        super().__init__(config)
        self.sharedbert = SharedBertModel(config, add_pooling_layer=False)
        self.cls = SharedBertOnlyMLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CausalLMOutputWithCrossAttentions:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Next-token targets aligned with `input_ids` (shifted inside the loss); -100 is not scored.

        Returns:
            [`~modeling_outputs.CausalLMOutputWithCrossAttentions`], or a tuple of its fields when `return_dict=False`.
        """
        if labels is not None:
            use_cache = False
        outputs = self.sharedbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            past_key_values=past_key_values,
            use_cache=use_cache,
            return_dict=True,
            **kwargs,
        )
        logits = self.cls(slice_logits_to_keep(outputs.last_hidden_state, logits_to_keep))
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithCrossAttentions(
            loss=loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            cross_attentions=outputs.cross_attentions,
        )


@auto_docstring(
    custom_intro="""
    BERT's pre-training model: masked-LM and next-sentence-prediction heads, loss their sum.
    """
)
class SharedBertForPreTraining(SharedBertPreTrainedModel):
    _tied_weights_keys = {"cls.predictions.decoder.weight": "sharedbert.embeddings.word_embeddings.weight"}
    _auto_class = "AutoModelForPreTraining"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.sharedbert = SharedBertModel(config)
        self.cls = SharedBertPreTrainingHeads(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BertForPreTrainingOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Labels for the masked-language-modelling loss: token ids in `[0, ..., config.vocab_size - 1]`, or -100 for
            positions that are not scored. With `config.sparse_prediction`, in training, `logits` then holds one row per
            scored position.
        next_sentence_label (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            Labels for the next-sentence-prediction loss: 0 when sentence B follows sentence A, 1 when it is random. The
            loss is the sum of both losses, returned when both labels are given.

        Returns:
            [`~models.bert.modeling_bert.BertForPreTrainingOutput`], or a tuple of its fields when `return_dict=False`.
        """
        outputs = self.sharedbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        sequence_output, labels = sparse_mlm_positions(self, outputs.last_hidden_state, labels)
        prediction_scores, seq_relationship_score = self.cls(sequence_output, outputs.pooler_output)
        total_loss = None
        if labels is not None and next_sentence_label is not None:
            loss_fct = CrossEntropyLoss()
            masked_lm_loss = loss_fct(prediction_scores.view(-1, self.config.vocab_size), labels.view(-1))
            next_sentence_loss = loss_fct(seq_relationship_score.view(-1, 2), next_sentence_label.view(-1))
            total_loss = masked_lm_loss + next_sentence_loss
        return BertForPreTrainingOutput(
            loss=total_loss,
            prediction_logits=prediction_scores,
            seq_relationship_logits=seq_relationship_score,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


@auto_docstring(
    custom_intro="""
    Pooled [CLS] → `cls.seq_relationship`: 0 = sentence B follows A, 1 = random.
    """
)
class SharedBertForNextSentencePrediction(SharedBertPreTrainedModel):
    _auto_class = "AutoModelForNextSentencePrediction"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.sharedbert = SharedBertModel(config)
        self.cls = SharedBertOnlyNSPHead(config)
        self.post_init()

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> NextSentencePredictorOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            Labels for the next-sentence-prediction loss: 0 when sentence B follows sentence A, 1 when it is random.

        Returns:
            [`~modeling_outputs.NextSentencePredictorOutput`], or a tuple of its fields when `return_dict=False`.
        """
        outputs = self.sharedbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.cls(outputs.pooler_output)
        loss = CrossEntropyLoss()(logits.view(-1, 2), labels.view(-1)) if labels is not None else None
        return NextSentencePredictorOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


@auto_docstring(
    custom_intro="""
    A sequence-to-sequence model of two SharedBert stacks of one size (`is_encoder_decoder=True`).

    * Encoder: `sharedbert` (a `SharedBertModel` without pooler; its keys are those of any SharedBert checkpoint, so
      one loads into it as is). Decoder: `decoder`, a stack with causal self-attention and cross-attention in every
      layer, read through `decoder_embeddings`, then the LM head `cls` over the target vocabulary.
    * `share_encoder_decoder_layers` (T5, Rothe et al.'s BERTShare): the decoder stores no self-attention or
      feed-forward of its own; at every call it runs the encoder's stored sublayers by the same index maps. Only
      cross-attention is the decoder's own. Every tensor is stored once (no module sits in two places).
    * `share_encoder_decoder_embeddings`: the decoder reads the encoder's embedding module (`decoder_embeddings` is
      None); with `tie_word_embeddings` the LM head's weight is that matrix too: three-way tying (Vaswani et al.
      §3.4). `scale_embedding` multiplies looked-up word embeddings by √hidden_size.
    * Warm start from one BERT or SharedBert checkpoint on both sides (Rothe et al. 2020): `sharedbert.conversion.
      warm_start_seq2seq`; cross-attention starts untrained, as in their BERT2BERT.
    """
)
class SharedBertForConditionalGeneration(SharedBertPreTrainedModel, GenerationMixin):
    _auto_class = "AutoModelForSeq2SeqLM"
    main_input_name = "input_ids"

    def __init__(self, config: SharedBertConfig):
        if not config.is_encoder_decoder:
            raise ValueError(
                "SharedBertForConditionalGeneration needs a seq2seq config: pass is_encoder_decoder=True (with "
                "share_encoder_decoder_layers / share_encoder_decoder_embeddings as wanted)."
            )
        super().__init__(config)
        self.sharedbert = SharedBertModel(config, add_pooling_layer=False)
        self.decoder_embeddings = (
            None
            if config.share_encoder_decoder_embeddings
            else SharedBertEmbeddings(config, vocab_size=config.target_vocab_size)
        )
        self.decoder = SharedBertStack(
            config,
            is_decoder=True,
            add_cross_attention=True,
            own_self_sublayers=not config.share_encoder_decoder_layers,
        )
        self.cls = SharedBertOnlyMLMHead(config, vocab_size=config.target_vocab_size)
        # Which matrix the LM head ties to depends on the config: an instance attribute, set before post_init ties.
        source = "sharedbert.embeddings" if config.share_encoder_decoder_embeddings else "decoder_embeddings"
        self._tied_weights_keys = {"cls.predictions.decoder.weight": f"{source}.word_embeddings.weight"}
        self.post_init()

    def get_encoder(self, modality=None):
        return self.sharedbert

    def get_decoder_input_embeddings(self) -> SharedBertEmbeddings:
        return self.sharedbert.embeddings if self.decoder_embeddings is None else self.decoder_embeddings

    def get_input_embeddings(self):
        return self.sharedbert.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.sharedbert.embeddings.word_embeddings = value

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings

    def resize_token_embeddings(self, *args, **kwargs):
        """Resize the one vocabulary of a model with `share_encoder_decoder_embeddings` (encoder input, decoder input
        and, tied, the output projection). With two embedding tables, resize is refused: it would change the source
        table only."""
        if not self.config.share_encoder_decoder_embeddings:
            raise NotImplementedError(
                "This seq2seq model has separate source and target embeddings: resize model.sharedbert (the source "
                "side) and the target side (decoder_embeddings and cls.predictions.decoder) separately, then set "
                "config.vocab_size and config.decoder_vocab_size."
            )
        embeddings = super().resize_token_embeddings(*args, **kwargs)
        if self.config.decoder_vocab_size is not None:
            self.config.decoder_vocab_size = self.config.vocab_size
        return embeddings

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """Labels shifted right behind `decoder_start_token_id` (-100 becomes the pad id): the teacher-forced
        decoder inputs (transformers' `shift_tokens_right` refuses a config without `decoder_start_token_id`).
        Seq2SeqTrainer's data collator calls this."""
        pad = self.config.pad_token_id if self.config.pad_token_id is not None else 0
        return shift_tokens_right(labels, pad, self.config.decoder_start_token_id)

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = None,
        labels: torch.Tensor | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, target_length)`, *optional*):
            Target token ids (-100 is not scored); without `decoder_input_ids` they are shifted right behind
            `config.decoder_start_token_id` to make them.

        Returns:
            [`~modeling_outputs.Seq2SeqLMOutput`], or a tuple of its fields when `return_dict=False`.
        """
        if encoder_outputs is None:
            encoder_outputs = self.sharedbert(
                input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                inputs_embeds=inputs_embeds,
                return_dict=True,
                **kwargs,
            )
        elif isinstance(encoder_outputs, tuple):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        # The decoder stack records its own hidden states and attentions, also where it runs the encoder's sublayers.
        decoder_embeds = self.get_decoder_input_embeddings()(
            input_ids=decoder_input_ids,
            inputs_embeds=decoder_inputs_embeds,
            past_key_values_length=0 if past_key_values is None else past_key_values.get_seq_length(),
        )
        lent = self.sharedbert.encoder if self.config.share_encoder_decoder_layers else None
        decoder_outputs = self.decoder(
            decoder_embeds,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            past_key_values=past_key_values,
            use_cache=use_cache,
            attention=None if lent is None else lent.attention,
            feed_forward=None if lent is None else lent.feed_forward,
            return_dict=True,
            **kwargs,
        )
        logits = self.cls(slice_logits_to_keep(decoder_outputs.last_hidden_state, logits_to_keep))
        loss = None
        if labels is not None:
            loss = CrossEntropyLoss()(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            past_key_values=decoder_outputs.past_key_values,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


def _classifier_dropout(config: SharedBertConfig) -> nn.Dropout:
    return nn.Dropout(config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob)


@auto_docstring(
    custom_intro="""
    Pooled [CLS] → dropout → `classifier`; regression, single-label or multi-label loss as in BERT.
    """
)
class SharedBertForSequenceClassification(SharedBertPreTrainedModel):
    _auto_class = "AutoModelForSequenceClassification"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.sharedbert = SharedBertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> SequenceClassifierOutput:
        r"""
        labels (`torch.LongTensor` or `torch.FloatTensor` of shape `(batch_size,)` or `(batch_size, num_labels)`, *optional*):
            Regression targets when `config.num_labels == 1` (mean-square loss), class indices in
            `[0, ..., config.num_labels - 1]` (cross-entropy), or float multi-hot rows (multi-label, binary cross-entropy),
            as in BERT.

        Returns:
            [`~modeling_outputs.SequenceClassifierOutput`], or a tuple of its fields when `return_dict=False`.
        """
        outputs = self.sharedbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = None
        if labels is not None:
            if self.config.problem_type is None:
                if self.num_labels == 1:
                    self.config.problem_type = "regression"
                elif labels.dtype in (torch.long, torch.int):
                    self.config.problem_type = "single_label_classification"
                else:
                    self.config.problem_type = "multi_label_classification"
            if self.config.problem_type == "regression":
                if self.num_labels == 1:
                    loss = MSELoss()(logits.squeeze(), labels.squeeze())
                else:
                    loss = MSELoss()(logits, labels)
            elif self.config.problem_type == "single_label_classification":
                loss = CrossEntropyLoss()(logits.view(-1, self.num_labels), labels.view(-1))
            else:
                loss = BCEWithLogitsLoss()(logits, labels)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


@auto_docstring(
    custom_intro="""
    Scores each (batch, choice) sequence with the pooled [CLS] and a one-output `classifier`.
    """
)
class SharedBertForMultipleChoice(SharedBertPreTrainedModel):
    _auto_class = "AutoModelForMultipleChoice"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.sharedbert = SharedBertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MultipleChoiceModelOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            The index of the right choice, in `[0, ..., num_choices - 1]` (the second dimension of the inputs).

        Returns:
            [`~modeling_outputs.MultipleChoiceModelOutput`], or a tuple of its fields when `return_dict=False`.
        """
        num_choices = input_ids.shape[1] if input_ids is not None else inputs_embeds.shape[1]

        def flatten(x):
            return None if x is None else x.view(-1, *x.shape[2:])

        outputs = self.sharedbert(
            flatten(input_ids),
            attention_mask=flatten(attention_mask),
            token_type_ids=flatten(token_type_ids),
            position_ids=flatten(position_ids),
            inputs_embeds=flatten(inputs_embeds),
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)
        loss = CrossEntropyLoss()(logits, labels) if labels is not None else None
        return MultipleChoiceModelOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


@auto_docstring(
    custom_intro="""
    SharedBert with a token classification head on top (a linear `classifier` over each token's hidden
    state), e.g. for named-entity recognition.
    """
)
class SharedBertForTokenClassification(SharedBertPreTrainedModel):
    _auto_class = "AutoModelForTokenClassification"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.sharedbert = SharedBertModel(config, add_pooling_layer=False)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> TokenClassifierOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            A class index in `[0, ..., config.num_labels - 1]` per token, or -100 for tokens that are not scored.

        Returns:
            [`~modeling_outputs.TokenClassifierOutput`], or a tuple of its fields when `return_dict=False`.
        """
        outputs = self.sharedbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None
        if labels is not None:
            loss = CrossEntropyLoss()(logits.view(-1, self.num_labels), labels.view(-1))
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


@auto_docstring(
    custom_intro="""
    Extractive QA: start and end logits per token from `qa_outputs`.
    """
)
class SharedBertForQuestionAnswering(SharedBertPreTrainedModel):
    _auto_class = "AutoModelForQuestionAnswering"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.sharedbert = SharedBertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    @auto_docstring
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> QuestionAnsweringModelOutput:
        r"""
        Returns:
            [`~modeling_outputs.QuestionAnsweringModelOutput`], or a tuple of its fields when `return_dict=False`; start and end positions outside the sequence are not scored, as in BERT.
        """
        outputs = self.sharedbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.qa_outputs(outputs.last_hidden_state)
        start_logits, end_logits = (t.squeeze(-1).contiguous() for t in logits.split(1, dim=-1))
        total_loss = None
        if start_positions is not None and end_positions is not None:
            # Positions outside the sequence are ignored, as in BERT.
            ignored_index = start_logits.size(1)
            start_positions = start_positions.view(-1).clamp(0, ignored_index)
            end_positions = end_positions.view(-1).clamp(0, ignored_index)
            loss_fct = CrossEntropyLoss(ignore_index=ignored_index)
            total_loss = (loss_fct(start_logits, start_positions) + loss_fct(end_logits, end_positions)) / 2
        return QuestionAnsweringModelOutput(
            loss=total_loss,
            start_logits=start_logits,
            end_logits=end_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


__all__ = [
    "IncompatibleCheckpointError",
    "SharedBertForConditionalGeneration",
    "SharedBertForMaskedLM",
    "SharedBertForMultipleChoice",
    "SharedBertForNextSentencePrediction",
    "SharedBertForPreTraining",
    "SharedBertLMHeadModel",
    "SharedBertForQuestionAnswering",
    "SharedBertForSequenceClassification",
    "SharedBertForTokenClassification",
    "SharedBertModel",
    "SharedBertPreTrainedModel",
]
