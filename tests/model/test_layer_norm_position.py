"""`layer_norm_position`: BERT's post-LayerNorm layers (the default, what every converted checkpoint is) or
pre-LayerNorm layers with a final LayerNorm after the stack (GPT-2's placement), checked against the formula."""

import pytest
import torch

import sharedbert
from sharedbert.conversion.bert import from_bert

from conftest import INVALID_CONFIG, tiny_config


def test_pre_layer_norm_computes_x_plus_f_of_ln_x_and_a_final_layer_norm():
    torch.manual_seed(0)
    model = sharedbert.SharedBertModel(tiny_config(attention_type="standard", layer_norm_position="pre",
                                                   num_hidden_layers=2)).eval()
    stack = model.encoder
    assert stack.final_layer_norm is not None
    ids = torch.randint(1, 99, (2, 7))
    with torch.no_grad():
        x = model.embeddings(input_ids=ids)
        for depth in range(2):
            attention, feed_forward = stack.attention[depth], stack.feed_forward[depth]
            attended, _ = attention.self(attention.output.LayerNorm(x))
            x = x + attention.output.dense(attended)
            ffn = feed_forward.output(feed_forward.activation(feed_forward.intermediate(feed_forward.LayerNorm(x))))
            x = x + ffn
        expected = stack.final_layer_norm(x)
        assert torch.allclose(model(input_ids=ids).last_hidden_state, expected, atol=1e-5)


def test_post_is_the_default_and_unchanged():
    config = tiny_config()
    assert config.layer_norm_position == "post"
    assert sharedbert.SharedBertModel(config).encoder.final_layer_norm is None


@pytest.mark.parametrize("attention_type", ["shared", "shared_lowrank_query"])
def test_a_pre_layer_norm_decoder_round_trips_and_generates(attention_type, tmp_path):
    config = tiny_config(attention_type=attention_type, layer_norm_position="pre", is_decoder=True)
    model = sharedbert.SharedBertLMHeadModel(config).eval()
    model.save_pretrained(tmp_path)
    reloaded = sharedbert.SharedBertLMHeadModel.from_pretrained(tmp_path).eval()
    assert reloaded.config.layer_norm_position == "pre"
    ids = torch.randint(1, 99, (1, 5))
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reloaded(ids).logits)
        full = model(ids).logits
    # The cache: one step at a time gives the full forward's logits.
    tokens = model.generate(ids, max_new_tokens=4, do_sample=False)
    assert tokens.shape == (1, 9)
    with torch.no_grad():
        past = model(ids[:, :4], use_cache=True).past_key_values
        step = model(ids[:, 4:], past_key_values=past).logits
    assert torch.allclose(step[:, -1], full[:, -1], atol=1e-5)


def test_an_unknown_position_is_refused_naming_the_field():
    with pytest.raises(INVALID_CONFIG, match="layer_norm_position"):
        tiny_config(layer_norm_position="sandwich")


def test_a_bert_converts_to_post_layer_norm_only():
    from transformers import BertConfig, BertModel

    bert = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=37))
    with pytest.raises(ValueError, match="post-LayerNorm"):
        from_bert(bert, layer_norm_position="pre")
