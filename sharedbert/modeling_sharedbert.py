"""PyTorch SharedBert: a BERT encoder with shared-projection self-attention and optional cross-layer sharing.

The attention variants differ only in how the per-head queries, keys and values are made from the layer input;
everything after that (the attention backend, output projection, residual, LayerNorm, feed-forward) is BERT's.
Cross-layer sharing stores each distinct sublayer once and runs it through an index map, as ALBERT does.

This file is shipped to the Hub with the model: it imports only torch, transformers and its sibling config, and runs
nothing at import time beyond defining classes.
"""

import torch
from torch import nn
from torch.nn import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss

from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.processing_utils import Unpack
from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, TransformersKwargs, cached_file, logging
from transformers.utils.generic import can_return_tuple, merge_with_config_defaults
from transformers.utils.output_capturing import capture_outputs

from .configuration_sharedbert import SharedBertConfig, _reject_misspelled_fields


logger = logging.get_logger(__name__)

class SharedBertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, LayerNorm and dropout, as in BERT, with input checks."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
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
    ) -> torch.Tensor:
        if input_ids is not None:
            _check_ids("input_ids", input_ids, self.word_embeddings.num_embeddings, "vocab_size")
            inputs_embeds = self.word_embeddings(input_ids)
        else:
            _check_embeds(inputs_embeds, self.word_embeddings.weight)
        seq_length = inputs_embeds.shape[1]
        if position_ids is None:
            if seq_length > self.position_ids.shape[1]:
                raise ValueError(
                    f"Sequence length {seq_length} exceeds max_position_embeddings={self.position_ids.shape[1]}: "
                    "truncate the input (e.g. tokenizer(..., truncation=True, "
                    f"max_length={self.position_ids.shape[1]}))."
                )
            position_ids = self.position_ids[:, :seq_length]
        else:
            _check_ids("position_ids", position_ids, self.position_embeddings.num_embeddings, "max_position_embeddings")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(position_ids)
        else:
            _check_ids("token_type_ids", token_type_ids, self.token_type_embeddings.num_embeddings, "type_vocab_size")
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids) + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


def _check_embeds(inputs_embeds: torch.Tensor, word_embeddings: torch.Tensor) -> None:
    if inputs_embeds.shape[-1] != word_embeddings.shape[1]:
        raise ValueError(
            f"`inputs_embeds` has width {inputs_embeds.shape[-1]} but the model's hidden_size is "
            f"{word_embeddings.shape[1]}."
        )
    # Narrower floats (fp16 inputs to an fp32 model) promote harmlessly; a wider or non-float dtype would fail
    # inside LayerNorm with a mixed-dtype error.
    if not inputs_embeds.is_floating_point() or (
        torch.promote_types(inputs_embeds.dtype, word_embeddings.dtype) != word_embeddings.dtype
    ):
        raise TypeError(
            f"`inputs_embeds` has dtype {inputs_embeds.dtype} but the model's weights are {word_embeddings.dtype}: "
            "cast it with inputs_embeds.to(model.dtype)."
        )


def _check_input_shapes(input_shape, attention_mask, token_type_ids, position_ids, num_heads) -> None:
    """Shape mismatches would otherwise broadcast silently (a 1-D mask applied to every row) or fail deep in torch."""
    batch_size, seq_length = input_shape
    if attention_mask is not None:
        shape = tuple(attention_mask.shape)
        # A 2-D padding mask, or an already prepared 4-D (batch, 1 or heads, query, key) mask.
        fits = shape == (batch_size, seq_length) or (
            len(shape) == 4
            and shape[0] in (1, batch_size)
            and shape[1] in (1, num_heads)
            and shape[2:] == (seq_length, seq_length)
        )
        if not fits:
            raise ValueError(
                f"`attention_mask` has shape {shape} but the inputs have shape {(batch_size, seq_length)}: pass the "
                "mask the tokenizer returned with these inputs (or a 4-D (batch, 1, seq, seq) mask)."
            )
    for name, ids in (("token_type_ids", token_type_ids), ("position_ids", position_ids)):
        if ids is not None and (ids.dim() != 2 or ids.shape[0] not in (1, batch_size) or ids.shape[1] != seq_length):
            raise ValueError(
                f"`{name}` has shape {tuple(ids.shape)} but the inputs have shape {(batch_size, seq_length)}: pass "
                f"`{name}` of the same (batch, sequence) shape (or (1, sequence) to share it across the batch)."
            )


def _check_ids(name: str, ids: torch.Tensor, table_size: int, field: str) -> None:
    """Out-of-range ids would fail deep inside `nn.Embedding` (or read garbage on some devices): say what is wrong."""
    if ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(f"`{name}` must be an integer tensor, got dtype {ids.dtype}.")
    if ids.numel() == 0 or torch.compiler.is_compiling():
        return
    fix = f"the model's {field} is {table_size}. Use the tokenizer that matches the model, or resize the embeddings."
    if ids.device.type != "cpu":
        # Reading min/max back to the host would stall an accelerator at every forward (BERT has no such sync).
        # A device-side assertion carries the same message and surfaces at the next synchronisation instead.
        in_range = (ids >= 0).all() & (ids < table_size).all()
        torch._assert_async(in_range, f"`{name}` holds ids outside [0, {table_size}); {fix}")
        return
    low, high = int(ids.min()), int(ids.max())  # host memory: no device synchronisation
    if low < 0 or high >= table_size:
        raise ValueError(f"`{name}` holds ids outside [0, {table_size}) (min {low}, max {high}); {fix}")


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
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value).transpose(1, 2).contiguous()
    return attn_output, attn_weights


class SharedBertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention; subclasses decide how queries, keys and values are projected."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.is_causal = False

    def project(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return per-head (query, key, value), each (batch, heads, seq, head_dim), whose products give the scores."""
        raise NotImplementedError

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        query, key, value = self.project(hidden_states)
        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        attn_output, attn_weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.dropout.p if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )
        return attn_output.reshape(*hidden_states.shape[:-1], self.num_heads * self.head_dim), attn_weights


class SharedProjectionSelfAttention(SharedBertSelfAttention):
    """One projection S = X·Ws + b; Q = S⊙dq, K = S⊙dk, V = S⊙dv (arXiv 2412.00359)."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.shared_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.query_scale = nn.Parameter(torch.ones(config.hidden_size))
        self.key_scale = nn.Parameter(torch.ones(config.hidden_size))
        self.value_scale = nn.Parameter(torch.ones(config.hidden_size))
        # Inference-only copies written by `SharedBertAttention.fold_for_inference`; never saved, never trained.
        self.register_buffer("folded_proj_weight", None, persistent=False)
        self.register_buffer("folded_proj_bias", None, persistent=False)
        self.register_buffer("folded_query_scale", None, persistent=False)

    def project(self, hidden_states):
        if self.folded_proj_weight is not None and _use_folded(self):
            # Folded: dv lives in the output projection, so the value is S itself; √(dq⊙dk) lives in the projection
            # when it can (query = key = value: no elementwise pass at all), else dq⊙dk scales the query.
            shared = self.split_heads(
                nn.functional.linear(hidden_states, self.folded_proj_weight, self.folded_proj_bias)
            )
            query = shared if self.folded_query_scale is None else shared * self.folded_query_scale.view(
                self.num_heads, 1, self.head_dim
            )
            return query, shared, shared
        shared = self.shared_proj(hidden_states)
        # Scores are (S⊙dq)(S⊙dk)ᵀ = (S⊙dq⊙dk)Sᵀ: scaling only the query side gives the same scores and weights with
        # one elementwise pass less, and the key is S itself (no extra activation to keep for backward).
        query = shared * (self.query_scale * self.key_scale)
        value = shared * self.value_scale
        return self.split_heads(query), self.split_heads(shared), self.split_heads(value)


class StandardSelfAttention(SharedBertSelfAttention):
    """BERT's separate query, key and value projections (the baseline)."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)

    def project(self, hidden_states):
        return (
            self.split_heads(self.query(hidden_states)),
            self.split_heads(self.key(hidden_states)),
            self.split_heads(self.value(hidden_states)),
        )


class SymmetricSelfAttention(SharedBertSelfAttention):
    """K = Q: the key reuses the query projection (bias included), so each head's score matrix is symmetric."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)

    def project(self, hidden_states):
        query = self.split_heads(self.query(hidden_states))
        return query, query, self.split_heads(self.value(hidden_states))


class PairwiseSelfAttention(SharedBertSelfAttention):
    """K = Q with a learnable bilinear form per head: scores Q·P_h·Qᵀ/√d (Courtois et al. 2024)."""

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.head_bilinear = nn.Parameter(torch.eye(self.head_dim).repeat(self.num_heads, 1, 1))

    def project(self, hidden_states):
        query = self.split_heads(self.query(hidden_states))
        # (Q·P_h)·Qᵀ: the attention backend sees an ordinary query/key pair.
        return torch.matmul(query, self.head_bilinear), query, self.split_heads(self.value(hidden_states))


SELF_ATTENTION_CLASSES = {
    "shared": SharedProjectionSelfAttention,
    "standard": StandardSelfAttention,
    "symmetric": SymmetricSelfAttention,
    "pairwise": PairwiseSelfAttention,
}


class SharedBertSelfOutput(nn.Module):
    """Attention output projection, dropout, residual and LayerNorm, as in BERT."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # `dense.weight` with the shared attention's value scaling folded into its columns (inference only, unsaved).
        self.register_buffer("folded_weight", None, persistent=False)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        if self.folded_weight is not None and _use_folded(self):
            output = nn.functional.linear(hidden_states, self.folded_weight, self.dense.bias)
        else:
            output = self.dense(hidden_states)
        return self.LayerNorm(self.dropout(output) + input_tensor)


def _use_folded(module: nn.Module) -> bool:
    """Folded copies serve inference only: in training or with gradients on, the parameters themselves are used."""
    return not module.training and not torch.is_grad_enabled()


class SharedBertAttention(nn.Module):
    """The attention sublayer: self-attention of the configured type, then the output projection block."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.self = SELF_ATTENTION_CLASSES[config.attention_type](config)
        self.output = SharedBertSelfOutput(config)
        self.folded_versions = None  # parameter versions at the last `fold_for_inference`, to catch stale folds

    def forward(self, hidden_states, attention_mask=None, **kwargs: Unpack[TransformersKwargs]):
        if self.folded_versions is not None and _use_folded(self) and not torch.compiler.is_compiling():
            if self.folded_versions != self._fold_source_versions():
                raise RuntimeError(
                    "The attention weights changed after `fold_for_inference()`, so the folded copies are stale: "
                    "call `model.fold_for_inference()` again (or `model.unfold()`)."
                )
        attention_output, _ = self.self(hidden_states, attention_mask, **kwargs)
        return self.output(attention_output, hidden_states)

    def _fold_sources(self):
        attention = self.self
        return (
            attention.shared_proj.weight,
            attention.shared_proj.bias,
            attention.query_scale,
            attention.key_scale,
            attention.value_scale,
            self.output.dense.weight,
        )

    def _fold_source_versions(self):
        return tuple(parameter._version for parameter in self._fold_sources())

    @torch.no_grad()
    def fold_for_inference(self) -> bool:
        """Fold shared attention's per-channel scalings into neighbouring weights; see
        `SharedBertPreTrainedModel.fold_for_inference`. Returns whether there was anything to fold."""
        attention = self.self
        if not isinstance(attention, SharedProjectionSelfAttention):
            return False
        if type(attention.shared_proj) is not nn.Linear or type(self.output.dense) is not nn.Linear:
            raise ValueError(
                "fold_for_inference() needs plain nn.Linear projections, but `shared_proj` or `output.dense` is "
                "wrapped (e.g. by a LoRA adapter): merge the adapters first (peft's `merge_and_unload()`)."
            )
        dtype = attention.shared_proj.weight.dtype
        weight, bias = attention.shared_proj.weight.float(), attention.shared_proj.bias.float()
        score_scale = attention.query_scale.float() * attention.key_scale.float()
        value_scale = attention.value_scale.float()
        query_scale = score_scale
        if bool((score_scale > 1e-6 * score_scale.abs().max()).all()):
            # (S⊙c)Sᵀ = (S⊙√c)(S⊙√c)ᵀ for c > 0: put √c into the projection's rows, and dv/√c into the output
            # projection's columns. (A negative or negligible c keeps the query scaling instead.)
            root = score_scale.sqrt()
            weight, bias, value_scale, query_scale = weight * root[:, None], bias * root, value_scale / root, None
        # copy=True: without √c the projection is unchanged, and the copies must not alias the parameters.
        attention.folded_proj_weight = weight.to(dtype, copy=True)
        attention.folded_proj_bias = bias.to(dtype, copy=True)
        attention.folded_query_scale = None if query_scale is None else query_scale.to(dtype)
        self.output.folded_weight = (self.output.dense.weight.float() * value_scale).to(dtype)
        self.folded_versions = self._fold_source_versions()
        return True

    def unfold(self) -> None:
        if isinstance(self.self, SharedProjectionSelfAttention):
            self.self.folded_proj_weight = self.self.folded_proj_bias = self.self.folded_query_scale = None
        self.output.folded_weight = None
        self.folded_versions = None

    def train(self, mode: bool = True):
        # Folded copies would go stale as soon as the weights train: drop them on entering training.
        if mode:
            self.unfold()
        return super().train(mode)


class SharedBertFeedForward(nn.Module):
    """The feed-forward sublayer: dense, activation, dense, dropout, residual and LayerNorm, as in BERT."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = ACT2FN[config.hidden_act]
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        ffn_output = self.output(self.activation(self.intermediate(hidden_states)))
        return self.LayerNorm(self.dropout(ffn_output) + hidden_states)


class SharedBertLayer(GradientCheckpointingLayer):
    """One depth of the encoder. It owns no weights: the encoder hands it that depth's attention and feed-forward
    sublayers, so one stored sublayer can serve several depths. One instance per depth is where gradient
    checkpointing and `output_hidden_states` hook in, exactly as BERT's layers are."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attention: SharedBertAttention,
        feed_forward: SharedBertFeedForward,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        return feed_forward(attention(hidden_states, attention_mask, **kwargs))


class SharedBertEncoder(nn.Module):
    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.attention_layer_map = config.attention_layer_map
        self.ffn_layer_map = config.ffn_layer_map
        self.attention = nn.ModuleList(
            SharedBertAttention(config) for _ in range(max(self.attention_layer_map) + 1)
        )
        self.feed_forward = nn.ModuleList(SharedBertFeedForward(config) for _ in range(max(self.ffn_layer_map) + 1))
        self.layer = nn.ModuleList(SharedBertLayer() for _ in range(config.num_hidden_layers))

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        for layer, attention_index, ffn_index in zip(self.layer, self.attention_layer_map, self.ffn_layer_map):
            hidden_states = layer(
                hidden_states,
                attention_mask,
                attention=self.attention[attention_index],
                feed_forward=self.feed_forward[ffn_index],
                **kwargs,
            )
        return BaseModelOutput(last_hidden_state=hidden_states)


class SharedBertPooler(nn.Module):
    """Dense + tanh over the first ([CLS]) token, as in BERT."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(hidden_states[:, 0]))


class SharedBertLMPredictionHead(nn.Module):
    """Transform (dense, activation, LayerNorm) then the vocabulary decoder, tied to the word embeddings by default."""

    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(self.activation(self.dense(hidden_states))))


class SharedBertOnlyMLMHead(nn.Module):
    def __init__(self, config: SharedBertConfig):
        super().__init__()
        self.predictions = SharedBertLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        return self.predictions(sequence_output)


class IncompatibleCheckpointError(ValueError, RuntimeError):
    """The weights on disk do not fit the model's config. A ValueError (a bad argument or file), and a RuntimeError as
    transformers raises for mismatched shapes, so code written for either keeps working."""


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
    _can_record_outputs = {"hidden_states": SharedBertLayer, "attentions": SharedBertSelfAttention}
    # The heads' losses are plain per-batch means that ignore `num_items_in_batch`: without this, Trainer would treat
    # them as token sums and multiply them by the number of DDP processes.
    accepts_loss_kwargs = False

    def __init__(self, config: SharedBertConfig, *inputs, **kwargs):
        # A config can be changed after its own checks ran (attribute assignment, AutoConfig keyword overrides):
        # check it again before building modules from it, rather than failing later with a shape or key error.
        config.validate_sharedbert()
        super().__init__(config, *inputs, **kwargs)

    def fold_for_inference(self):
        """Fold shared attention's per-channel vectors into neighbouring weights for faster inference; returns self.

        The value scaling dv moves into the columns of the output projection, and √(dq⊙dk) into the rows of the shared
        projection when every dq⊙dk is positive (query = key = value = S: no elementwise pass), else dq⊙dk stays one
        query scaling. Outputs match the unfolded model to float rounding. The folded copies are separate buffers:
        parameters, `state_dict()` and `save_pretrained` are untouched. They are used only in eval mode with
        gradients off (`torch.inference_mode()` / `torch.no_grad()`); `train()` and `unfold()` drop them, and a
        forward after the weights changed raises until you fold again. The model is switched to eval mode. Other
        attention types have nothing to fold and are left as they are.
        """
        self.eval()
        for module in self.modules():
            if isinstance(module, SharedBertAttention):
                module.fold_for_inference()
        return self

    def unfold(self):
        """Drop the copies made by `fold_for_inference`; returns self."""
        for module in self.modules():
            if isinstance(module, SharedBertAttention):
                module.unfold()
        return self

    @property
    def is_folded(self) -> bool:
        return any(
            isinstance(module, SharedBertAttention) and module.folded_versions is not None for module in self.modules()
        )

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, SharedProjectionSelfAttention):
            # Q = K = V = S at initialisation, as in the paper.
            init.ones_(module.query_scale)
            init.ones_(module.key_scale)
            init.ones_(module.value_scale)
        elif isinstance(module, PairwiseSelfAttention):
            # P_h = I starts pairwise attention as symmetric attention.
            init.copy_(module.head_bilinear, torch.eye(module.head_dim).repeat(module.num_heads, 1, 1))
        elif isinstance(module, SharedBertEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """`PreTrainedModel.from_pretrained`, made strict. Only safetensors are read (unpickling can run code).
        Encoder weights missing from, or unexpected in, the checkpoint are an error: they would otherwise be silently
        random-initialised. A task head absent from a base checkpoint is the normal start of fine-tuning and stays
        allowed, with transformers' usual notice. With `output_loading_info=True` the caller receives the missing,
        unexpected and mismatched keys to judge for themselves, and nothing is refused."""
        _reject_misspelled_fields(kwargs)
        if kwargs.setdefault("use_safetensors", True) is not True:
            # transformers reads pytorch_model.bin with False, and falls back to it with None.
            raise ValueError(
                f"use_safetensors={kwargs['use_safetensors']!r}: SharedBert loads safetensors weights only "
                "(unpickling .bin/.pt files can run arbitrary code); drop the argument."
            )
        want_info = kwargs.pop("output_loading_info", False)
        # transformers' own refusal of a shape mismatch names neither weight nor file: load, then refuse here. The
        # caller's `ignore_mismatched_sizes=True` lets a task head or an embedding table (a new num_labels or
        # vocabulary) start afresh, never a transformer layer: a layer of another shape is another architecture.
        sizes_may_differ = kwargs.pop("ignore_mismatched_sizes", False)
        try:
            model, info = super().from_pretrained(
                pretrained_model_name_or_path,
                *model_args,
                output_loading_info=True,
                ignore_mismatched_sizes=True,
                **kwargs,
            )
        except OSError as error:
            if ".safetensors" in str(error) and "no file named" in str(error).lower():
                raise OSError(
                    f"No safetensors weights in {pretrained_model_name_or_path}. SharedBert refuses pickle weights "
                    "(.bin/.pt: unpickling can run arbitrary code); convert them once with a trusted script "
                    "(torch.load, then save_pretrained) or point to a folder with model.safetensors."
                ) from error
            raise
        except Exception as error:
            if "safetensor" in type(error).__name__.lower() or "header" in str(error).lower():
                raise OSError(
                    f"The weights file {_weights_file(pretrained_model_name_or_path, kwargs)} is corrupt or "
                    f"truncated ({error}); re-download or re-save the model."
                ) from error
            raise
        missing = sorted(key for key in info["missing_keys"] if key.startswith(ENCODER_KEY_PREFIXES))
        unexpected = sorted(key for key in info["unexpected_keys"] if key.startswith(ENCODER_KEY_PREFIXES))
        mismatched = sorted(
            entry
            for entry in info.get("mismatched_keys") or []
            if not sizes_may_differ or entry[0].startswith(LAYER_KEY_PREFIXES)
        )
        # A caller who asks for the loading info inspects it: then nothing is silent and nothing is refused.
        if (missing or unexpected or mismatched) and not want_info:
            checkpoint_keys = (set(model.state_dict()) - set(info["missing_keys"])) | set(info["unexpected_keys"])
            raise IncompatibleCheckpointError(
                describe_incompatible_checkpoint(
                    pretrained_model_name_or_path, model.config, checkpoint_keys, missing, unexpected, mismatched
                )
            )
        # safetensors has no checksum: damaged tensor bytes still parse. NaN/Inf is how such damage (or a checkpoint
        # saved from a diverged run) usually shows; refuse it rather than return a model that outputs NaN.
        non_finite = [
            name
            for name, tensor in model.state_dict().items()
            if tensor.is_floating_point() and tensor.device.type != "meta" and not torch.isfinite(tensor).all()
        ]
        if non_finite:
            raise ValueError(
                f"The weights file {_weights_file(pretrained_model_name_or_path, kwargs)} holds NaN or Inf values in "
                f"{len(non_finite)} tensors ({non_finite[:5]}): the file is corrupt or was saved from a diverged run; "
                "re-download it or load an earlier checkpoint."
            )
        return (model, info) if want_info else model


def _weights_file(path, kwargs) -> str:
    """The safetensors file (or shard index) of checkpoint `path`, for error messages."""
    lookup = {key: kwargs[key] for key in ("cache_dir", "revision", "subfolder", "token", "local_files_only") if key in kwargs}
    for name in (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME):
        try:
            resolved = cached_file(
                path,
                name,
                _raise_exceptions_for_missing_entries=False,
                _raise_exceptions_for_connection_errors=False,
                **lookup,
            )
        except OSError:
            resolved = None
        if resolved:
            return resolved if name == SAFE_WEIGHTS_NAME else f"(one of the shards listed in {resolved})"
    return f"{path}/{SAFE_WEIGHTS_NAME}"


# Weights that must come from a SharedBert checkpoint (in a base model, or under a head's `sharedbert.` prefix).
ENCODER_KEY_PREFIXES = ("embeddings.", "encoder.", "sharedbert.embeddings.", "sharedbert.encoder.")
LAYER_KEY_PREFIXES = ("encoder.", "sharedbert.encoder.")


def describe_incompatible_checkpoint(
    path, config, checkpoint_keys, missing, unexpected, mismatched, advice: str | None = None
) -> str:
    """What does not fit between the checkpoint at `path` and `config`: the attention type its weights imply, the
    `missing` and `unexpected` keys, the `mismatched` `(key, checkpoint shape, model shape)` entries. `advice`, when
    given, replaces the closing advice (for callers, such as the Hub publisher, that judge head weights too)."""

    def attention_type_of(keys):
        # Each type's distinctive weight; symmetric has only query and value, so it is what remains.
        for attention_type, marker in (
            ("shared", ".shared_proj."),
            ("pairwise", ".head_bilinear"),
            ("standard", ".self.key."),
            ("symmetric", ".self.query."),
        ):
            if any(marker in key for key in keys):
                return attention_type
        return None

    found = attention_type_of(checkpoint_keys)
    lines = [f"The checkpoint at {path} does not fit this SharedBert config."]
    if found and found != config.attention_type:
        lines.append(
            f"It holds attention_type={found!r} weights but the config asks for {config.attention_type!r}: "
            f"load it with attention_type={found!r} (or convert it with sharedbert.convert)."
        )
    if missing:
        lines.append(f"Weights missing from the checkpoint ({len(missing)}): {missing[:5]}")
    if unexpected:
        lines.append(f"Weights in the checkpoint that the model does not have ({len(unexpected)}): {unexpected[:5]}")
    if mismatched:
        shapes = [f"{key}: checkpoint {tuple(saved)} vs model {tuple(wanted)}" for key, saved, wanted in mismatched]
        lines.append(f"Weights whose shapes differ ({len(mismatched)}): {shapes[:5]}")
    if advice is not None:
        lines.append(advice)
        return "\n".join(lines)
    if mismatched and not all(key.startswith(ENCODER_KEY_PREFIXES) for key, _, _ in mismatched):
        lines.append("To start a task head of a different size (e.g. num_labels), pass ignore_mismatched_sizes=True.")
    lines.append("Check that the config (attention_type, layer_sharing, num_unique_layers, sizes) matches the weights.")
    return "\n".join(lines)


class SharedBertModel(SharedBertPreTrainedModel):
    _auto_class = "AutoModel"

    def __init__(self, config: SharedBertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = SharedBertEmbeddings(config)
        self.encoder = SharedBertEncoder(config)
        self.pooler = SharedBertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPooling:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of `input_ids` or `inputs_embeds`.")
        input_shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:-1]
        if len(input_shape) != 2:
            raise ValueError(
                f"Expected inputs of shape (batch, sequence), got {tuple(input_shape)}; add a batch dimension "
                "(e.g. input_ids.unsqueeze(0)) for a single sequence."
            )
        if 0 in input_shape:
            # Refused rather than answered with empty tensors: attention backends cannot reshape a zero-size batch,
            # and a loss averaged over nothing is NaN.
            raise ValueError(
                f"Got empty inputs of shape {tuple(input_shape)} (batch, sequence): every batch needs at least one "
                "sequence of at least one token; skip empty batches before calling the model."
            )
        _check_input_shapes(input_shape, attention_mask, token_type_ids, position_ids, self.config.num_attention_heads)
        embedding_output = self.embeddings(
            input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids, inputs_embeds=inputs_embeds
        )
        attention_mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=embedding_output, attention_mask=attention_mask
        )
        sequence_output = self.encoder(embedding_output, attention_mask, **kwargs).last_hidden_state
        pooled_output = self.pooler(sequence_output) if self.pooler is not None else None
        return BaseModelOutputWithPooling(last_hidden_state=sequence_output, pooler_output=pooled_output)


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
        outputs = self.sharedbert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        sequence_output = outputs.last_hidden_state
        if labels is not None and self.training and self.config.sparse_prediction:
            # Only the labelled positions (~15%) are scored, so the vocabulary projection, which at small sizes
            # costs more than the encoder, runs on those alone (as ModernBERT's sparse prediction). Same loss.
            labelled = labels != -100
            sequence_output, labels = sequence_output[labelled], labels[labelled]
        logits = self.cls(sequence_output)
        loss = None
        if labels is not None:
            loss = CrossEntropyLoss()(logits.view(-1, self.config.vocab_size), labels.view(-1))
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


def _classifier_dropout(config: SharedBertConfig) -> nn.Dropout:
    return nn.Dropout(config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob)


class SharedBertForSequenceClassification(SharedBertPreTrainedModel):
    """Pooled [CLS] → dropout → `classifier`; regression, single-label or multi-label loss as in BERT."""

    _auto_class = "AutoModelForSequenceClassification"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.sharedbert = SharedBertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
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


class SharedBertForMultipleChoice(SharedBertPreTrainedModel):
    """Scores each (batch, choice) sequence with the pooled [CLS] and a one-output `classifier`."""

    _auto_class = "AutoModelForMultipleChoice"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.sharedbert = SharedBertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
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


class SharedBertForQuestionAnswering(SharedBertPreTrainedModel):
    """Extractive QA: start and end logits per token from `qa_outputs`."""

    _auto_class = "AutoModelForQuestionAnswering"

    def __init__(self, config: SharedBertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.sharedbert = SharedBertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
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
    "SharedBertForMaskedLM",
    "SharedBertForMultipleChoice",
    "SharedBertForQuestionAnswering",
    "SharedBertForSequenceClassification",
    "SharedBertForTokenClassification",
    "SharedBertModel",
    "SharedBertPreTrainedModel",
]
