"""SharedBert configuration: BERT's fields plus the weight-sharing choices this model family compares (how
attention projects, cross-layer sharing, tied embeddings) and the decoder and sequence-to-sequence fields, each
described in `SharedBertConfig`'s docstring.

This file is shipped to the Hub with the model: it imports only transformers and runs nothing at import time beyond
defining classes and constants.
"""

# `Literal` is typing's, as transformers' own configs use it (this file imports only transformers and torch).
from transformers.configuration_utils import Literal, PreTrainedConfig, strict
from transformers.utils import auto_docstring
from transformers.utils.type_validators import activation_fn_key, as_validated_field, interval


@as_validated_field
def positive_int_field(value: int | None = None):
    """A field that holds None or an int > 0: transformers' own `positive_int_field` (5.17+), defined here so that
    older 5.x releases load this file."""
    if value is not None and (not isinstance(value, int) or not value > 0):
        raise ValueError(f"Value must be a positive integer, got {value}")


ATTENTION_TYPES = (
    "shared", "standard", "symmetric", "pairwise", "shared_kv", "shared_head_query", "shared_lowrank_query",
)
# "shared" scores token pairs with a symmetric form, S·diag(dq⊙dk)·Sᵀ: i's score for j equals j's for i. The last
# three types give the scores a direction. "shared_kv" (Q its own projection, K = V = S; 2·d² projection weights)
# frees the whole query; "shared_head_query" (a head_dim × head_dim matrix per head on the paper's query) and
# "shared_lowrank_query" (a rank-r term X·A·B added to it) keep the paper's one d² projection and cost at most 40% of
# standard attention's projection parameters at bert-base and all-MiniLM-L6-v2 dims.
CROSS_ATTENTION_TYPES = ATTENTION_TYPES
# Types that read `attention_rank`.
RANKED_ATTENTION_TYPES = ("shared_lowrank_query",)
# The cross-attention of a decoder whose config does not name one, whatever its self-attention: "standard", as in T5
# and BERTShare, which never share cross-attention's projections. Configs record the type they resolved to, and a
# config.json saved before they did loads with the cross-attention it had (`SharedBertConfig.from_dict`), so a change
# of this default cannot change a saved model.
DEFAULT_CROSS_ATTENTION_TYPE = "standard"
# The rank of "shared_lowrank_query" when `attention_rank` is None: hidden_size // 12. Its projections then cost
# (d² + 4d + 2dr + r) / (3d² + 3d) ≈ 1/3 + 2r/(3d) ≈ 38.9% of standard attention's at any width (bert-base: 39.0%,
# all-MiniLM-L6-v2: 39.1%); 40% allows r ≤ 0.1·d − 1.4.
DEFAULT_RANK_DIVISOR = 12
# The attention a SharedBert has when nothing says otherwise: the paper's form. Every default of the package (the config,
# conversion, pretraining, fine-tuning's on-the-fly conversion, the demo) reads this one.
DEFAULT_ATTENTION_TYPE = "shared"
LAYER_SHARING_MODES = ("none", "all", "attention", "ffn")
# Where each sublayer's LayerNorm sits: "post" after the residual sum, as in BERT (and every converted checkpoint);
# "pre" on the sublayer's input, with a final LayerNorm after the stack, as in GPT-2 and most encoders since.
LAYER_NORM_POSITIONS = ("post", "pre")
SHARING_ORDERS = ("sequence", "cycle", "cycle_rev")

# Every Auto class a SharedBert checkpoint can be loaded with, written into each saved config.json so that any head
# loads from any repository with `trust_remote_code=True`.
AUTO_MAP = {
    "AutoConfig": "configuration_sharedbert.SharedBertConfig",
    "AutoModel": "modeling_sharedbert.SharedBertModel",
    "AutoModelForMaskedLM": "modeling_sharedbert.SharedBertForMaskedLM",
    "AutoModelForSequenceClassification": "modeling_sharedbert.SharedBertForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_sharedbert.SharedBertForTokenClassification",
    "AutoModelForQuestionAnswering": "modeling_sharedbert.SharedBertForQuestionAnswering",
    "AutoModelForMultipleChoice": "modeling_sharedbert.SharedBertForMultipleChoice",
    "AutoModelForCausalLM": "modeling_sharedbert.SharedBertLMHeadModel",
    "AutoModelForPreTraining": "modeling_sharedbert.SharedBertForPreTraining",
    "AutoModelForNextSentencePrediction": "modeling_sharedbert.SharedBertForNextSentencePrediction",
    "AutoModelForSeq2SeqLM": "modeling_sharedbert.SharedBertForConditionalGeneration",
    "AutoTokenizer": [None, "tokenization_sharedbert.SharedBertTokenizer"],
}


@auto_docstring(
    custom_intro="""
    Configuration of a [`SharedBertModel`] and its heads: BERT's fields, with BERT's meaning and defaults
    (bert-base-uncased dims), plus how attention projects, what is shared across depth and the decoder and
    sequence-to-sequence settings. A value of the wrong type or outside its choices is refused when it is set, and a
    broken rule between fields when the config is made and again before a model is built from it.
    """
)
@strict(accept_kwargs=True)
class SharedBertConfig(PreTrainedConfig):
    r"""
    Args:
        attention_type (`str`, defaults to `"shared"`):
            How self-attention projects queries, keys and values. `"shared"`: one projection S = X·Ws + b and
            per-channel vectors (arXiv 2412.00359); `"standard"`: BERT's Wq, Wk, Wv; `"symmetric"`: K = Q;
            `"pairwise"`: K = Q with a per-head bilinear matrix (Courtois et al. 2024); `"shared_kv"`: its own Wq, one
            shared projection for K and V (Kayyam et al.); `"shared_head_query"` and `"shared_lowrank_query"`: the
            paper's one projection with a per-head matrix or a rank-`attention_rank` term on the query, so that
            scores have a direction.
        attention_rank (`int`, *optional*):
            The rank r of `"shared_lowrank_query"`'s query term (X·A + a)·B. None (the default): hidden_size // 12,
            which keeps its projections at about 39% of standard attention's. Recorded in config.json when the type
            uses it. Ignored by the other types.
        num_key_value_heads (`int`, *optional*):
            Grouped-query attention for `"standard"` attention (Llama's field): the key and value projections have
            this many heads, each shared by `num_attention_heads / num_key_value_heads` query heads; 1 is multi-query
            attention. A decoder's cache holds keys and values at this many heads. None (the default): one per query
            head. Applies to every standard attention sublayer of the model (self-attention, and cross-attention when
            its type is standard); refused for the other types, whose keys and values are not separate projections.
        query_rank (`int`, *optional*):
            A rank-r query for `"standard"` attention: Q = (X·A + a)·B with A hidden × r (`query_down`, with a bias)
            and B r × hidden (`query_up`), in place of the hidden × hidden Wq, as DeepSeek-V2's multi-head latent
            attention compresses its queries (without its normalisation of the rank-r code unless
            `query_latent_norm`). Below hidden_size / 2 it stores fewer query parameters than Wq. None (the
            default): the full Wq. Applies to every standard attention sublayer, like `num_key_value_heads`; refused
            for the other types.
        query_latent_norm (`bool`, defaults to `False`):
            With `query_rank`: Q = RMSNorm(X·A + a)·B, the rank-r code normalised (with a learned scale, `query_norm`)
            before B, as multi-head latent attention does (DeepSeek-V2's `q_a_layernorm`). At BERT's initialiser the
            product of two small random factors starts the query several times smaller than a full Wq's; the
            normalisation gives the code unit scale whatever A's. Refused without `query_rank`.
        layer_sharing (`str`, defaults to `"none"`):
            Which sublayers are shared across depth: `"none"`, `"all"` (attention and feed-forward), `"attention"`
            (attention blocks only) or `"ffn"` (feed-forward blocks only).
        num_unique_layers (`int`, *optional*):
            How many distinct parameter sets the shared sublayers have. Defaults to `num_hidden_layers` without
            sharing and to 1 (ALBERT) with sharing.
        sharing_order (`str`, defaults to `"sequence"`):
            How `num_hidden_layers` applications map onto `num_unique_layers` sets (Takase & Kiyono 2021), e.g. for
            6 layers and 3 sets: `"sequence"` 0,0,1,1,2,2; `"cycle"` 0,1,2,0,1,2; `"cycle_rev"` 0,1,2,2,1,0.
        tie_word_embeddings (`bool`, defaults to `True`):
            Whether the masked-LM decoder weight is the word-embedding matrix.
        is_decoder (`bool`, defaults to `False`):
            Causal self-attention: position i attends to positions ≤ i only (`SharedBertLMHeadModel`).
        add_cross_attention (`bool`, defaults to `False`):
            A cross-attention sublayer after self-attention in every layer, attending to `encoder_hidden_states`.
            Requires `is_decoder=True`. It projects queries, keys and values as `cross_attention_type` says (see the
            modeling module's docstring) and is shared across depth like the self-attention.
        cross_attention_type (`str`, *optional*):
            How cross-attention projects: one of the `attention_type` values. None (the default) takes
            `DEFAULT_CROSS_ATTENTION_TYPE`, `"standard"`, whatever `attention_type` is. A saved config records the
            type it resolved to; a config.json with cross-attention and no type (or null) was saved when
            cross-attention followed `attention_type`, and loads that way.
        use_cache (`bool`, defaults to `True`):
            Whether a decoder returns its keys and values (`past_key_values`) for fast generation. Encoders ignore it.
        is_encoder_decoder (`bool`, defaults to `False`):
            Set by `SharedBertForConditionalGeneration`: the config describes both stacks of a seq2seq model (same
            sizes; the decoder has causal self-attention and cross-attention). Excludes `is_decoder`.
        share_encoder_decoder_layers (`bool`, defaults to `False`):
            Seq2seq only. The decoder's self-attention and feed-forward sublayers ARE the encoder's (T5 / Rothe et
            al.'s BERTShare); only cross-attention is the decoder's own.
        share_encoder_decoder_embeddings (`bool`, defaults to `False`):
            Seq2seq only. The decoder reads the encoder's embedding module (word, position and token-type tables and
            their LayerNorm). With `tie_word_embeddings` this ties three ways (Vaswani et al. §3.4). Needs one
            vocabulary: `decoder_vocab_size` must be None or equal `vocab_size`.
        decoder_vocab_size (`int`, *optional*):
            Seq2seq only: the target vocabulary size (None: `vocab_size`).
        scale_embedding (`bool`, defaults to `False`):
            Multiply looked-up word embeddings by √hidden_size (Vaswani et al. §3.4). Off keeps BERT's behaviour.
        decoder_start_token_id (`int`, *optional*):
            Seq2seq only: the first decoder input (BERT2BERT uses [CLS]); labels are shifted right behind it.
        converted_from (`str`, *optional*):
            The BERT checkpoint this model was converted from (set by `sharedbert.conversion.from_bert`; model cards
            report it as the base model).
        layer_norm_position (`str`, defaults to `"post"`):
            `"post"`: each sublayer's LayerNorm follows its residual sum, as in BERT (what a converted BERT needs).
            `"pre"`: the LayerNorm reads the sublayer's input (x + f(LN(x))) and one more LayerNorm follows the last
            layer, as in GPT-2 and most encoders since; the same parameter names, plus the stack's
            `final_layer_norm`.
        sparse_prediction (`bool`, defaults to `False`):
            When training with masked-LM labels, run the vocabulary projection only at the labelled positions
            (ModernBERT's sparse prediction): the same loss, a fraction of the head's cost. `logits` then holds one
            row per labelled token. Inference (no labels, or eval mode) always returns logits at every position.
    """

    model_type = "sharedbert"
    _auto_class = "AutoConfig"

    # transformers' strict dataclass checks each field as it is set (on construction, on assignment and for keyword
    # overrides): its type (a choice is a `Literal`, whose error lists the allowed values) and its range (the field
    # validators). The `validate_*` methods check the rules between fields: on construction, when a model is built
    # from the config and when it is saved.
    vocab_size: int = positive_int_field(default=30522)
    hidden_size: int = positive_int_field(default=768)
    num_hidden_layers: int = positive_int_field(default=12)
    num_attention_heads: int = positive_int_field(default=12)
    intermediate_size: int = positive_int_field(default=3072)
    hidden_act: str = activation_fn_key(default="gelu")
    hidden_dropout_prob: float | int = interval(min=0.0, max=1.0, exclude_max=True)(default=0.1)
    attention_probs_dropout_prob: float | int = interval(min=0.0, max=1.0, exclude_max=True)(default=0.1)
    max_position_embeddings: int = positive_int_field(default=512)
    type_vocab_size: int = positive_int_field(default=2)
    initializer_range: float = interval(min=0.0, max=1.0, exclude_min=True)(default=0.02)
    layer_norm_eps: float = interval(min=0.0, max=1.0, exclude_min=True)(default=1e-12)
    layer_norm_position: Literal[LAYER_NORM_POSITIONS] = "post"
    pad_token_id: int | None = 0
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    classifier_dropout: float | int | None = None
    is_decoder: bool = False
    add_cross_attention: bool = False
    cross_attention_type: Literal[CROSS_ATTENTION_TYPES] | None = None
    use_cache: bool = True
    is_encoder_decoder: bool = False
    share_encoder_decoder_layers: bool = False
    share_encoder_decoder_embeddings: bool = False
    decoder_vocab_size: int | None = positive_int_field(default=None)
    scale_embedding: bool = False
    decoder_start_token_id: int | None = None
    attention_type: Literal[ATTENTION_TYPES] = DEFAULT_ATTENTION_TYPE
    attention_rank: int | None = positive_int_field(default=None)
    num_key_value_heads: int | None = positive_int_field(default=None)
    query_rank: int | None = positive_int_field(default=None)
    query_latent_norm: bool = False
    layer_sharing: Literal[LAYER_SHARING_MODES] = "none"
    num_unique_layers: int | None = positive_int_field(default=None)
    sharing_order: Literal[SHARING_ORDERS] = "sequence"
    tie_word_embeddings: bool = True
    converted_from: str | None = None
    sparse_prediction: bool = False

    def __post_init__(self, **kwargs):
        if self.num_unique_layers is None:
            self.num_unique_layers = self.num_hidden_layers if self.layer_sharing == "none" else 1
        if self.attention_rank is None and self.uses_attention_rank:
            self.attention_rank = self.effective_attention_rank
        kwargs.setdefault("auto_map", dict(AUTO_MAP))
        super().__post_init__(**kwargs)

    @property
    def has_cross_attention(self) -> bool:
        return bool(self.add_cross_attention or self.is_encoder_decoder)

    def to_dict(self):
        # A saved config records the cross-attention type and the rank it resolved to, even when set to None after
        # construction: the defaults may change, a saved model must not.
        output = super().to_dict()
        if self.has_cross_attention:
            output["cross_attention_type"] = self.effective_cross_attention_type
        if self.uses_attention_rank:
            output["attention_rank"] = self.effective_attention_rank
        return output

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """`PreTrainedConfig.from_dict`, plus what it cannot know. A config.json with cross-attention and no
        `cross_attention_type` was saved when cross-attention followed `attention_type` (before the configs recorded
        it), and loads that way; a BERT's config.json (a BERT checkpoint loads into standard attention) takes the
        default."""
        if (config_dict.get("add_cross_attention") or config_dict.get("is_encoder_decoder")) and config_dict.get(
            "cross_attention_type"
        ) is None and config_dict.get("model_type", cls.model_type) == cls.model_type:
            config_dict = {**config_dict, "cross_attention_type": config_dict.get("attention_type", "shared")}
        # Another model's model_type (a BERT's), kept, would shadow this class's on the instance, and
        # AutoModel.from_config would build that model from the config.
        config_dict = {key: value for key, value in config_dict.items() if key != "model_type"}
        return super().from_dict(config_dict, **kwargs)

    def validate_attention_rank(self):
        if self.attention_rank is not None and self.attention_rank > self.hidden_size:
            raise ValueError(
                f"`attention_rank` ({self.attention_rank}) cannot exceed `hidden_size` ({self.hidden_size}); leave it "
                f"None for hidden_size // {DEFAULT_RANK_DIVISOR} ({max(1, self.hidden_size // DEFAULT_RANK_DIVISOR)})."
            )

    def validate_classifier_dropout(self):
        # Not an `interval` field like the other probabilities: None (use hidden_dropout_prob) must pass too.
        if self.classifier_dropout is not None and not 0 <= self.classifier_dropout < 1:
            raise ValueError(f"`classifier_dropout` must be in [0, 1) or None, got {self.classifier_dropout!r}.")

    def validate_heads(self):
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"`hidden_size` ({self.hidden_size}) must be divisible by `num_attention_heads` "
                f"({self.num_attention_heads}), e.g. {[h for h in (1, 2, 4, 8, 12, 16) if self.hidden_size % h == 0]}."
            )

    def validate_num_key_value_heads(self):
        if self.num_key_value_heads is None:
            return
        if self.attention_type != "standard":
            raise ValueError(
                f"`num_key_value_heads` ({self.num_key_value_heads}) groups the key and value projections of "
                f"standard attention, but `attention_type` is {self.attention_type!r}, whose keys and values are not "
                "separate projections: set attention_type='standard' or leave num_key_value_heads None."
            )
        if self.num_attention_heads % self.num_key_value_heads:
            divisors = [h for h in range(1, self.num_attention_heads + 1) if self.num_attention_heads % h == 0]
            raise ValueError(
                f"`num_key_value_heads` ({self.num_key_value_heads}) must divide `num_attention_heads` "
                f"({self.num_attention_heads}) so that each key/value head serves a whole group: one of {divisors}."
            )

    def validate_query_rank(self):
        if self.query_rank is None:
            return
        if self.attention_type != "standard":
            raise ValueError(
                f"`query_rank` ({self.query_rank}) factors the query projection of standard attention, but "
                f"`attention_type` is {self.attention_type!r}: set attention_type='standard' or leave query_rank None "
                "(`attention_rank` sets the rank of shared_lowrank_query's query term)."
            )
        if self.query_rank > self.hidden_size:
            raise ValueError(
                f"`query_rank` ({self.query_rank}) cannot exceed `hidden_size` ({self.hidden_size}): a rank above "
                "it adds parameters and no expressiveness; leave it None for the full query projection."
            )

    def validate_query_latent_norm(self):
        if self.query_latent_norm and self.query_rank is None:
            raise ValueError(
                "`query_latent_norm` normalises the rank-r code of a rank-r query, but `query_rank` is None (the full "
                "query projection has no code to normalise): set query_rank, or leave query_latent_norm False."
            )

    def validate_layer_sharing(self):
        if self.num_unique_layers > self.num_hidden_layers:
            raise ValueError(
                f"`num_unique_layers` ({self.num_unique_layers}) cannot exceed `num_hidden_layers` "
                f"({self.num_hidden_layers}): there are not enough layers to use every distinct set."
            )
        if self.layer_sharing == "none" and self.num_unique_layers != self.num_hidden_layers:
            raise ValueError(
                f"`num_unique_layers` ({self.num_unique_layers}) must equal `num_hidden_layers` "
                f"({self.num_hidden_layers}) when `layer_sharing='none'`; set `layer_sharing` to one of "
                f"{LAYER_SHARING_MODES[1:]} to share layers."
            )

    def validate_decoder_fields(self):
        if self.add_cross_attention and not self.is_decoder:
            raise ValueError(
                "`add_cross_attention` is True but `is_decoder` is False: cross-attention belongs to a decoder "
                "layer; set both True (as EncoderDecoderModel does for its decoder)."
            )
        if self.is_encoder_decoder and (self.is_decoder or self.add_cross_attention):
            raise ValueError(
                "`is_encoder_decoder=True` describes a whole seq2seq model; `is_decoder` and `add_cross_attention` "
                "describe a stand-alone decoder: set only one of them (the seq2seq decoder is causal with "
                "cross-attention already)."
            )
        for name in ("share_encoder_decoder_layers", "share_encoder_decoder_embeddings"):
            if getattr(self, name) and not self.is_encoder_decoder:
                raise ValueError(
                    f"`{name}=True` applies to the seq2seq model only: set `is_encoder_decoder` True (use "
                    "SharedBertForConditionalGeneration)."
                )
        if self.share_encoder_decoder_embeddings and self.target_vocab_size != self.vocab_size:
            raise ValueError(
                f"`share_encoder_decoder_embeddings=True` needs one vocabulary for source and target, but "
                f"`decoder_vocab_size` ({self.decoder_vocab_size}) differs from `vocab_size` ({self.vocab_size}): "
                "use one tokenizer on both sides, or set share_encoder_decoder_embeddings=False."
            )

    def validate_token_ids(self):
        # Stricter than transformers' (a warning): the embedding tables are indexed with these ids.
        for name, value, size in (("pad_token_id", self.pad_token_id, self.vocab_size),
                                  ("decoder_start_token_id", self.decoder_start_token_id, self.target_vocab_size)):
            if value is not None and not 0 <= value < size:
                raise ValueError(f"`{name}` ({value}) must be a token id in [0, {size}) or None.")

    def get_text_config(self, decoder=None, encoder=None):
        """One side of a seq2seq config. Both sides have the same sizes and the decoder's vocabulary is
        `target_vocab_size`: transformers' generic renaming of `decoder_*` fields would set `vocab_size` to
        `decoder_vocab_size`, which is None for "the source vocabulary"."""
        if not (self.is_encoder_decoder and decoder and not encoder):
            return super().get_text_config(decoder=decoder, encoder=encoder)
        return type(self).from_dict({**self.to_dict(), "vocab_size": self.target_vocab_size})

    @property
    def effective_cross_attention_type(self) -> str:
        """The attention type of the cross-attention sublayers: `cross_attention_type`, else
        `DEFAULT_CROSS_ATTENTION_TYPE`."""
        if self.cross_attention_type is not None:
            return self.cross_attention_type
        return DEFAULT_CROSS_ATTENTION_TYPE

    @property
    def uses_attention_rank(self) -> bool:
        """Whether self- or cross-attention is of a type that reads `attention_rank`."""
        cross = self.effective_cross_attention_type if self.has_cross_attention else None
        return self.attention_type in RANKED_ATTENTION_TYPES or cross in RANKED_ATTENTION_TYPES

    @property
    def effective_attention_rank(self) -> int:
        """`attention_rank`, else hidden_size // 12 (at least 1): see `DEFAULT_RANK_DIVISOR`."""
        if self.attention_rank is not None:
            return self.attention_rank
        return max(1, self.hidden_size // DEFAULT_RANK_DIVISOR)

    @property
    def target_vocab_size(self) -> int:
        """The decoder's vocabulary: `decoder_vocab_size` in a seq2seq model when set, else `vocab_size`."""
        return self.decoder_vocab_size if self.decoder_vocab_size is not None else self.vocab_size

    def _layer_map(self, sublayer: str) -> list[int]:
        """Which distinct parameter set each of the `num_hidden_layers` applications of `sublayer` uses."""
        num_layers = self.num_hidden_layers
        shared = self.layer_sharing == "all" or self.layer_sharing == sublayer
        if not shared:
            return list(range(num_layers))
        num_sets = self.num_unique_layers
        if self.sharing_order == "sequence":
            return [i * num_sets // num_layers for i in range(num_layers)]
        if self.sharing_order == "cycle":
            return [i % num_sets for i in range(num_layers)]
        # cycle_rev: cycle through the sets, then run the last `num_sets` layers in reverse order.
        return [i % num_sets if i < num_layers - num_sets else num_layers - 1 - i for i in range(num_layers)]

    @property
    def attention_layer_map(self) -> list[int]:
        return self._layer_map("attention")

    @property
    def ffn_layer_map(self) -> list[int]:
        return self._layer_map("ffn")


__all__ = ["SharedBertConfig"]
