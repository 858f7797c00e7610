"""A BERT checkpoint loads as it is into SharedBert with standard attention and no layer sharing: its weight names are
renamed as they load (`BERT_WEIGHT_NAMES`, transformers' `key_mapping`), and the model computes what BERT computes.
Every other config given a BERT's weights is refused, naming the conversion; a model loaded so saves in SharedBert's
own names."""

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertLMHeadModel,
    BertModel,
)

from sharedbert import (
    SharedBertConfig,
    SharedBertForMaskedLM,
    SharedBertForPreTraining,
    SharedBertForSequenceClassification,
    SharedBertLMHeadModel,
    SharedBertModel,
)
from sharedbert.configuration_sharedbert import ATTENTION_TYPES
from sharedbert.modeling_sharedbert import IncompatibleCheckpointError

BERT_SIZES = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
                  max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def saved_bert(folder, bert_class=BertModel, **overrides):
    """A tiny BERT saved to `folder`, every parameter drawn at random (BERT initialises biases and LayerNorms to 0 and
    1: a weight that did not load would go unseen)."""
    torch.manual_seed(0)
    bert = bert_class(BertConfig(**{**BERT_SIZES, **overrides})).eval()
    with torch.no_grad():
        for parameter in bert.parameters():
            parameter.normal_(0, 0.2)
    bert.save_pretrained(folder)
    return bert


def inputs(batch=3, length=9, vocab=99):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(1, vocab, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    token_types = torch.zeros_like(ids)
    token_types[:, 5:] = 1
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=token_types)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_a_bert_folder_loads_as_standard_attention_with_berts_outputs(tmp_path, attn_implementation):
    bert = saved_bert(tmp_path)
    model = SharedBertModel.from_pretrained(tmp_path, attention_type="standard",
                                            attn_implementation=attn_implementation).eval()
    with torch.no_grad():
        expected, got = bert(**inputs()), model(**inputs())
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=0, atol=1e-5)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, rtol=0, atol=1e-5)


@pytest.mark.parametrize("bert_class, model_class, outputs", [
    (BertForMaskedLM, SharedBertForMaskedLM, ("logits",)),
    (BertForPreTraining, SharedBertForPreTraining, ("prediction_logits", "seq_relationship_logits")),
    (BertForSequenceClassification, SharedBertForSequenceClassification, ("logits",)),
])
def test_a_bert_head_loads_into_the_same_head(tmp_path, bert_class, model_class, outputs):
    """The `bert.` prefix, the masked-LM head's transform and its output bias (BERT's `cls.predictions.bias`) map too."""
    bert = saved_bert(tmp_path, bert_class, num_labels=3)
    model = model_class.from_pretrained(tmp_path, attention_type="standard").eval()
    with torch.no_grad():
        expected, got = bert(**inputs()), model(**inputs())
    for name in outputs:
        torch.testing.assert_close(getattr(got, name), getattr(expected, name), rtol=0, atol=1e-5)


def test_a_bert_decoder_with_cross_attention_loads(tmp_path):
    bert = saved_bert(tmp_path, BertLMHeadModel, is_decoder=True, add_cross_attention=True)
    model = SharedBertLMHeadModel.from_pretrained(tmp_path, attention_type="standard").eval()
    assert model.config.effective_cross_attention_type == "standard"
    ids = inputs()["input_ids"]
    states = torch.randn(3, 5, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = bert(input_ids=ids, encoder_hidden_states=states, use_cache=False).logits
        got = model(input_ids=ids, encoder_hidden_states=states, use_cache=False).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_a_model_loaded_from_a_bert_saves_in_its_own_names(tmp_path):
    """transformers would save in the checkpoint's names (it reverts the renaming on save); the folder written must be
    a SharedBert checkpoint that loads without any renaming and names no BERT model type."""
    saved_bert(tmp_path / "bert", BertForMaskedLM)
    model = SharedBertForMaskedLM.from_pretrained(tmp_path / "bert", attention_type="standard").eval()
    assert model.config.model_type == "sharedbert"
    model.save_pretrained(tmp_path / "saved")
    keys = set(load_file(tmp_path / "saved" / "model.safetensors"))
    assert keys == set(model.state_dict()) - {"cls.predictions.decoder.weight"}  # tied to the word embeddings
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["model_type"] == "sharedbert"
    again = SharedBertForMaskedLM.from_pretrained(tmp_path / "saved", key_mapping={}).eval()
    with torch.no_grad():
        torch.testing.assert_close(again(**inputs()).logits, model(**inputs()).logits, rtol=0, atol=0)


REFUSED = [({"attention_type": t}, f"attention_type={t!r}") for t in ATTENTION_TYPES if t != "standard"] + [
    ({}, "attention_type='shared'"),  # the default attention type
    ({"attention_type": "standard", "layer_sharing": "all"}, "layer_sharing='all'"),
    ({"attention_type": "standard", "layer_sharing": "ffn", "num_unique_layers": 1}, "layer_sharing='ffn'"),
    ({"attention_type": "standard", "layer_norm_position": "pre"}, "layer_norm_position='pre'"),
]


@pytest.mark.parametrize("overrides, named", REFUSED, ids=[named for _, named in REFUSED])
def test_other_configs_given_a_bert_are_refused_naming_the_conversion(tmp_path, overrides, named):
    saved_bert(tmp_path)
    with pytest.raises(IncompatibleCheckpointError) as error:
        SharedBertModel.from_pretrained(tmp_path, **overrides)
    message = str(error.value)
    assert "sharedbert.conversion.from_bert" in message and str(tmp_path) in message and named in message


def test_the_refusal_holds_when_the_caller_asks_for_the_loading_info(tmp_path):
    saved_bert(tmp_path)
    with pytest.raises(IncompatibleCheckpointError, match="sharedbert.conversion.from_bert"):
        SharedBertModel.from_pretrained(tmp_path, attention_type="shared", output_loading_info=True)


def test_a_bert_config_given_explicitly_is_refused_too(tmp_path):
    """The weights' names decide, not the folder's config.json."""
    saved_bert(tmp_path)
    config = SharedBertConfig(**BERT_SIZES, attention_type="symmetric")
    with pytest.raises(IncompatibleCheckpointError, match="attention_type='symmetric'"):
        SharedBertModel.from_pretrained(tmp_path, config=config)


def test_grouped_key_value_heads_given_a_bert_are_refused(tmp_path):
    """transformers' own refusal (the key and value weights have another shape), before any renaming is judged."""
    saved_bert(tmp_path)
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        SharedBertModel.from_pretrained(tmp_path, attention_type="standard", num_key_value_heads=2)


def test_all_minilm_l6_v2_loads_with_its_outputs(minilm_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    batch = tokenizer(["A man is playing a guitar.", "Shared attention keeps one projection of three, and this "
                       "sentence is longer than the first one."], padding=True, return_tensors="pt")
    bert = BertModel.from_pretrained(minilm_path).eval()
    model = SharedBertModel.from_pretrained(minilm_path, attention_type="standard").eval()
    with torch.no_grad():
        expected, got = bert(**batch), model(**batch)
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=0, atol=1e-5)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, rtol=0, atol=1e-5)
