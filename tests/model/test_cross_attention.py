"""Cross-attention types: the standard default, configs that record their type, and checkpoints saved under earlier
defaults (shared cross-attention, then shared_kv), which load as they were saved."""

import json
from pathlib import Path

import pytest
import torch
from conftest import INVALID_CONFIG, tiny_config
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForSeq2SeqLM, BertConfig, BertLMHeadModel

from sharedbert import SharedBertConfig, SharedBertLMHeadModel
from sharedbert.configuration_sharedbert import ATTENTION_TYPES, DEFAULT_CROSS_ATTENTION_TYPE
from sharedbert.conversion.bert import from_bert
from sharedbert.modeling_sharedbert import (
    SharedBertForConditionalGeneration,
    SharedKeyValueAttention,
    SharedProjectionAttention,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


# --- the default and what configs record ------------------------------------------------------------------------


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_a_decoder_without_a_named_type_gets_the_default_for_its_attention(attention_type):
    config = tiny_config(attention_type=attention_type, is_decoder=True, add_cross_attention=True)
    # T5's and BERTShare's choice, whatever the self-attention: shared_kv trailed it on the seq2seq study's task.
    assert config.effective_cross_attention_type == DEFAULT_CROSS_ATTENTION_TYPE == "standard"
    model = SharedBertLMHeadModel(config)
    assert all(type(module.self).__name__ == "StandardAttention" for module in model.sharedbert.encoder.crossattention)


def test_configs_with_cross_attention_record_the_type_they_resolved_to(tmp_path):
    config = tiny_config(is_encoder_decoder=True)
    assert config.attention_type == "shared"
    assert config.cross_attention_type is None and config.to_dict()["cross_attention_type"] == "standard"
    SharedBertForConditionalGeneration(config).save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["cross_attention_type"] == "standard"
    assert AutoConfig.from_pretrained(tmp_path).effective_cross_attention_type == "standard"
    # An encoder has no cross-attention: nothing is recorded, so a decoder made from it later gets the default then.
    encoder = tiny_config()
    assert encoder.to_dict()["cross_attention_type"] is None


def test_a_config_written_by_hand_without_the_type_is_read_as_before_it_existed(tmp_path):
    """Configs of decoders that do not name the type were written when cross-attention followed attention_type."""
    values = {**tiny_config(is_decoder=True, add_cross_attention=True).to_dict()}
    values.pop("cross_attention_type")
    (tmp_path / "config.json").write_text(json.dumps(values))
    assert SharedBertConfig.from_pretrained(tmp_path).effective_cross_attention_type == "shared"
    # A keyword override still wins.
    overridden = SharedBertConfig.from_pretrained(tmp_path, cross_attention_type="shared_kv")
    assert overridden.effective_cross_attention_type == "shared_kv"


# --- checkpoints saved under earlier defaults ---------------------------------------------------------------------


@pytest.mark.parametrize("fixture, saved_type, attention_class", [
    # Saved before shared_kv existed (commit e4d8749), when cross-attention followed attention_type.
    ("before-shared-kv", "shared", SharedProjectionAttention),
    # Saved while shared attention's default cross-attention was shared_kv (commit 0420628).
    ("shared-kv-default", "shared_kv", SharedKeyValueAttention),
])
def test_checkpoints_saved_under_an_earlier_default_load_as_they_were_saved(fixture, saved_type, attention_class):
    """Fixtures saved by earlier versions of the package, with the outputs they computed then."""
    saved = load_file(FIXTURES / f"{fixture}-outputs.safetensors")
    seq2seq = AutoModelForSeq2SeqLM.from_pretrained(FIXTURES / f"seq2seq-{fixture}").eval()
    decoder = SharedBertLMHeadModel.from_pretrained(FIXTURES / f"decoder-{fixture}").eval()
    for model in (seq2seq, decoder):
        assert model.config.attention_type == "shared" and model.config.effective_cross_attention_type == saved_type
    assert isinstance(seq2seq.decoder.crossattention[0].self, attention_class)
    assert isinstance(decoder.sharedbert.encoder.crossattention[0].self, attention_class)
    with torch.no_grad():
        seq2seq_logits = seq2seq(input_ids=saved["input_ids"], attention_mask=saved["attention_mask"],
                                 decoder_input_ids=saved["decoder_input_ids"]).logits
        decoder_logits = decoder(input_ids=saved["decoder_input_ids"],
                                 encoder_hidden_states=saved["encoder_hidden_states"],
                                 encoder_attention_mask=saved["attention_mask"]).logits
    torch.testing.assert_close(seq2seq_logits, saved["seq2seq_logits"], rtol=0, atol=1e-5)
    torch.testing.assert_close(decoder_logits, saved["decoder_logits"], rtol=0, atol=1e-5)


def test_an_old_checkpoint_saved_again_keeps_its_type(tmp_path):
    model = AutoModelForSeq2SeqLM.from_pretrained(FIXTURES / "seq2seq-before-shared-kv")
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["cross_attention_type"] == "shared"
    assert AutoModelForSeq2SeqLM.from_pretrained(tmp_path).config.effective_cross_attention_type == "shared"


# --- shared_kv itself -------------------------------------------------------------------------------------------


def test_shared_kv_scores_are_not_a_symmetric_form_of_the_two_sides():
    """Shared cross-attention's score of (decoder state x, encoder state h) equals that of (h, x); shared_kv's not."""
    torch.manual_seed(0)
    scores = {}
    for cross_type in ("shared", "shared_kv"):
        model = SharedBertLMHeadModel(tiny_config(is_decoder=True, add_cross_attention=True,
                                                  cross_attention_type=cross_type)).eval()
        attention = model.sharedbert.encoder.crossattention[0].self
        with torch.no_grad():
            for parameter in attention.parameters():
                parameter.add_(0.3 * torch.randn_like(parameter))
            x, h = torch.randn(1, 1, 32), torch.randn(1, 1, 32)
            forward = attention.project_query(x) @ attention.project_key_value(h)[0].transpose(-1, -2)
            backward = attention.project_query(h) @ attention.project_key_value(x)[0].transpose(-1, -2)
        scores[cross_type] = (forward.flatten(), backward.flatten())
    torch.testing.assert_close(*scores["shared"])
    assert not torch.allclose(*scores["shared_kv"], atol=1e-3)


@pytest.mark.parametrize("fit_method", ["weights", "auto"])
def test_a_bert_decoder_whose_keys_and_values_share_a_projection_converts_to_shared_kv_exactly(fit_method):
    """Exact when Wv = diag(c)·Wk, by either fit: the weight fit (per channel, rank 1 over Wk and Wv; the query
    copied) and the default, invariant one (keys and values on one subspace per head; query and output refitted)."""
    torch.manual_seed(0)
    bert = BertLMHeadModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=37, is_decoder=True, add_cross_attention=True)).eval()
    with torch.no_grad():
        for layer in bert.bert.encoder.layer:
            cross = layer.crossattention.self
            factor = torch.rand(32) + 0.5
            cross.value.weight.copy_(factor[:, None] * cross.key.weight)
            cross.value.bias.copy_(factor * cross.key.bias)
    ours = from_bert(bert, attention_type="standard", cross_attention_type="shared_kv", fit_method=fit_method).eval()
    assert all(isinstance(m.self, SharedKeyValueAttention) for m in ours.sharedbert.encoder.crossattention)
    copied = torch.equal(ours.sharedbert.encoder.crossattention[0].self.query.weight,
                         bert.bert.encoder.layer[0].crossattention.self.query.weight)
    assert copied == (fit_method == "weights")
    ids, states = torch.randint(0, 50, (2, 7)), torch.randn(2, 5, 32)
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, encoder_hidden_states=states).logits,
                                   bert(ids, encoder_hidden_states=states).logits, rtol=0, atol=1e-5)


def test_an_unknown_cross_attention_type_names_the_allowed_ones():
    with pytest.raises(INVALID_CONFIG, match="shared_kv"):
        tiny_config(is_decoder=True, add_cross_attention=True, cross_attention_type="kv")
    with pytest.raises(INVALID_CONFIG, match=r"'attention_type' expected one of \('shared', 'standard'"):
        tiny_config(attention_type="kv")
    assert tiny_config(attention_type="shared_kv").attention_type == "shared_kv"  # a self-attention type too now
