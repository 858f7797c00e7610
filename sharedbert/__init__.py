"""SharedBert: BERT with shared-projection self-attention, cross-layer sharing and tied embeddings.

Importing the package registers every class with transformers' Auto classes under `model_type="sharedbert"`.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from .configuration_sharedbert import ATTENTION_TYPES, LAYER_SHARING_MODES, SHARING_ORDERS, SharedBertConfig
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
from .tokenization_sharedbert import SharedBertTokenizer


__version__ = "0.1.0"

AutoConfig.register(SharedBertConfig.model_type, SharedBertConfig, exist_ok=True)
for _auto, _model in (
    (AutoModel, SharedBertModel),
    (AutoModelForMaskedLM, SharedBertForMaskedLM),
    (AutoModelForSequenceClassification, SharedBertForSequenceClassification),
    (AutoModelForTokenClassification, SharedBertForTokenClassification),
    (AutoModelForQuestionAnswering, SharedBertForQuestionAnswering),
    (AutoModelForMultipleChoice, SharedBertForMultipleChoice),
    (AutoModelForCausalLM, SharedBertLMHeadModel),
    (AutoModelForPreTraining, SharedBertForPreTraining),
    (AutoModelForNextSentencePrediction, SharedBertForNextSentencePrediction),
    (AutoModelForSeq2SeqLM, SharedBertForConditionalGeneration),
):
    _auto.register(SharedBertConfig, _model, exist_ok=True)
AutoTokenizer.register(SharedBertConfig, fast_tokenizer_class=SharedBertTokenizer, exist_ok=True)

__all__ = [
    "ATTENTION_TYPES",
    "LAYER_SHARING_MODES",
    "SHARING_ORDERS",
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
]
