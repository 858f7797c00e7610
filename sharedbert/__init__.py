"""SharedBert: BERT with shared-projection self-attention, cross-layer sharing and tied embeddings.

Importing the package registers every class with transformers' Auto classes under `model_type="sharedbert"`.
"""

import transformers

from . import modeling_sharedbert
from .configuration_sharedbert import (
    ATTENTION_TYPES,
    AUTO_MAP,
    LAYER_SHARING_MODES,
    SHARING_ORDERS,
    SharedBertConfig,
)
from .modeling_sharedbert import (
    SharedBertForConditionalGeneration,
    SharedBertForMaskedLM,
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
from .sharing_presets import SHARING_PRESETS, sharing_preset
from .tokenization_sharedbert import SharedBertTokenizer


__version__ = "0.1.0"


def _register_auto_classes() -> None:
    """Every Auto class of AUTO_MAP (the map each saved config carries for remote loading) learns its SharedBert."""
    transformers.AutoConfig.register(SharedBertConfig.model_type, SharedBertConfig, exist_ok=True)
    for auto, target in AUTO_MAP.items():
        if auto.startswith("AutoModel"):
            model = getattr(modeling_sharedbert, target.rpartition(".")[2])
            getattr(transformers, auto).register(SharedBertConfig, model, exist_ok=True)
    transformers.AutoTokenizer.register(SharedBertConfig, fast_tokenizer_class=SharedBertTokenizer, exist_ok=True)


_register_auto_classes()

__all__ = [
    "ATTENTION_TYPES",
    "LAYER_SHARING_MODES",
    "SHARING_ORDERS",
    "SHARING_PRESETS",
    "SharedBertConfig",
    "SharedBertForConditionalGeneration",
    "SharedBertForMaskedLM",
    "SharedBertForMultipleChoice",
    "SharedBertForNextSentencePrediction",
    "SharedBertForPreTraining",
    "SharedBertForQuestionAnswering",
    "SharedBertForSequenceClassification",
    "SharedBertForTokenClassification",
    "SharedBertLMHeadModel",
    "SharedBertModel",
    "SharedBertPreTrainedModel",
    "SharedBertTokenizer",
    "sharing_preset",
]
