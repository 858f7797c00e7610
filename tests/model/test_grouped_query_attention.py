"""Grouped-query and multi-query attention (`num_key_value_heads` on standard attention): what it computes, its
cache, its parameter counts, its refusals, conversion from a BERT and export."""

import pytest
import torch
from conftest import tiny_config
from transformers import BertConfig, BertModel
from transformers.cache_utils import EncoderDecoderCache

from sharedbert import SharedBertConfig, SharedBertLMHeadModel, SharedBertModel
from sharedbert.conversion.bert import from_bert
from sharedbert.configuration_sharedbert import ATTENTION_TYPES
from sharedbert.modeling_sharedbert import StandardAttention
from sharedbert.parameter_counts import count_parameters, standard_bert_config

HIDDEN, HEADS = 32, 4  # tiny_config's sizes
HEAD_DIM = HIDDEN // HEADS


def expanded_to_every_head(grouped: SharedBertModel) -> SharedBertModel:
    """A multi-head standard model whose key and value heads are the grouped model's, each repeated for the query
    heads of its group: the same function written without grouping."""
    config = SharedBertConfig(**{**grouped.config.to_dict(), "num_key_value_heads": None})
    full = SharedBertModel(config).eval()
    state = grouped.state_dict()
    groups = HEADS // grouped.config.num_key_value_heads
    for name, tensor in list(state.items()):
        if name.endswith(("self.key.weight", "self.key.bias", "self.value.weight", "self.value.bias")):
            heads = tensor.view(-1, 1, HEAD_DIM, *tensor.shape[1:])
            state[name] = heads.expand(-1, groups, *heads.shape[2:]).reshape(HIDDEN, *tensor.shape[1:])
    full.load_state_dict(state)
    return full


@pytest.mark.parametrize("num_key_value_heads", [1, 2])
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_grouped_attention_equals_standard_attention_with_each_key_value_head_repeated(num_key_value_heads,
                                                                                        implementation):
    torch.manual_seed(0)
    grouped = SharedBertModel(tiny_config(attention_type="standard", num_key_value_heads=num_key_value_heads,
                                          attn_implementation=implementation)).eval()
    full = expanded_to_every_head(grouped)
    full.config._attn_implementation = implementation
    ids = torch.randint(5, 99, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        expected = full(ids, attention_mask=mask).last_hidden_state
        got = grouped(ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_as_many_key_value_heads_as_heads_is_standard_attention():
    torch.manual_seed(0)
    plain = SharedBertModel(tiny_config(attention_type="standard")).eval()
    explicit = SharedBertModel(tiny_config(attention_type="standard", num_key_value_heads=HEADS)).eval()
    explicit.load_state_dict(plain.state_dict())  # same shapes: loads strictly
    ids = torch.randint(5, 99, (2, 7))
    with torch.no_grad():
        assert torch.equal(plain(ids).last_hidden_state, explicit(ids).last_hidden_state)


@pytest.mark.parametrize("num_key_value_heads", [1, 2, 4])
def test_the_decoder_cache_holds_keys_and_values_at_the_key_value_heads_exactly(num_key_value_heads):
    torch.manual_seed(0)
    config = tiny_config(attention_type="standard", num_key_value_heads=num_key_value_heads, is_decoder=True,
                         add_cross_attention=True)
    model = SharedBertLMHeadModel(config).eval()
    ids, states = torch.randint(5, 99, (3, 7)), torch.randn(3, 5, HIDDEN)
    with torch.no_grad():
        output = model(ids, encoder_hidden_states=states, use_cache=True)
    cache = output.past_key_values
    assert isinstance(cache, EncoderDecoderCache)
    for part, length in ((cache.self_attention_cache, 7), (cache.cross_attention_cache, 5)):
        for layer in part.layers:
            assert layer.keys.shape == layer.values.shape == (3, num_key_value_heads, length, HEAD_DIM)
    # Multi-query's cache is exactly 1/heads of standard attention's.
    standard_bytes = 2 * 4 * 3 * HEADS * (7 + 5) * HEAD_DIM * 4  # K and V, 4 depths, float32
    held = sum(layer.keys.nbytes + layer.values.nbytes for part in (cache.self_attention_cache,
                                                                     cache.cross_attention_cache)
               for layer in part.layers)
    assert held * HEADS == standard_bytes * num_key_value_heads


@pytest.mark.parametrize("num_key_value_heads", [1, 2])
def test_step_by_step_decoding_with_the_grouped_cache_equals_the_full_forward(num_key_value_heads):
    torch.manual_seed(0)
    model = SharedBertLMHeadModel(tiny_config(attention_type="standard", num_key_value_heads=num_key_value_heads,
                                              is_decoder=True)).eval()
    ids = torch.randint(5, 99, (2, 10))
    with torch.no_grad():
        full = model(ids).logits
        first = model(ids[:, :6], use_cache=True)
        rest = model(ids[:, 6:], past_key_values=first.past_key_values).logits
        generated = model.generate(ids[:, :4], max_new_tokens=5, do_sample=False)
        uncached = model.generate(ids[:, :4], max_new_tokens=5, do_sample=False, use_cache=False)
    torch.testing.assert_close(rest, full[:, 6:], atol=1e-5, rtol=1e-5)
    assert torch.equal(generated, uncached)


@pytest.mark.parametrize("num_key_value_heads", [1, 2])
def test_parameter_counts_are_exact(num_key_value_heads):
    config = tiny_config(attention_type="standard", num_key_value_heads=num_key_value_heads)
    kv = num_key_value_heads * HEAD_DIM
    expected = (HIDDEN * HIDDEN + HIDDEN) + 2 * (HIDDEN * kv + kv)
    counts = count_parameters(config)
    assert counts.qkv_per_layer == expected
    assert counts.qkv_total == 4 * expected
    plain = count_parameters(tiny_config(attention_type="standard"))
    assert plain.model - counts.model == 4 * 2 * (HIDDEN * HIDDEN + HIDDEN - HIDDEN * kv - kv)
    # The "standard BERT of the same dimensions" a model card compares with has one key/value head per head.
    assert standard_bert_config(config).num_key_value_heads is None


@pytest.mark.parametrize("attention_type", [t for t in ATTENTION_TYPES if t != "standard"])
def test_types_without_separate_key_and_value_projections_refuse_it_naming_the_field(attention_type):
    with pytest.raises(Exception, match="num_key_value_heads.*attention_type='standard'"):
        tiny_config(attention_type=attention_type, num_key_value_heads=2)


def test_a_count_that_does_not_divide_the_heads_is_refused_with_the_ones_that_do():
    with pytest.raises(Exception, match=r"must divide `num_attention_heads` \(4\).*\[1, 2, 4\]"):
        tiny_config(attention_type="standard", num_key_value_heads=3)


def test_the_field_is_saved_and_loaded_and_old_configs_have_one_head_per_query_head(tmp_path):
    model = SharedBertModel(tiny_config(attention_type="standard", num_key_value_heads=2))
    model.save_pretrained(tmp_path)
    loaded = SharedBertModel.from_pretrained(tmp_path)
    assert loaded.config.num_key_value_heads == 2
    assert loaded.encoder.attention[0].self.key.out_features == 2 * HEAD_DIM
    old = SharedBertConfig.from_dict({k: v for k, v in tiny_config().to_dict().items() if k != "num_key_value_heads"})
    assert old.num_key_value_heads is None


def bert(num_layers: int = 2) -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=99, hidden_size=HIDDEN, num_hidden_layers=num_layers,
                                num_attention_heads=HEADS, intermediate_size=37)).eval()


def test_conversion_keeps_the_query_and_mean_pools_each_group_of_key_and_value_heads():
    source = bert()
    model, report = from_bert(source, attention_type="standard", num_key_value_heads=2, return_report=True)
    for layer in range(2):
        ours, theirs = model.encoder.attention[layer].self, source.encoder.layer[layer].attention.self
        assert isinstance(ours, StandardAttention) and ours.num_key_value_groups == 2
        assert torch.equal(ours.query.weight, theirs.query.weight)
        for name in ("key", "value"):
            heads = getattr(theirs, name).weight.view(2, 2, HEAD_DIM, HIDDEN)
            torch.testing.assert_close(getattr(ours, name).weight, heads.mean(1).reshape(2 * HEAD_DIM, HIDDEN))
            bias = getattr(theirs, name).bias.view(2, 2, HEAD_DIM)
            torch.testing.assert_close(getattr(ours, name).bias, bias.mean(1).reshape(-1))
    assert all(0 < fit.retained_energy < 1 for fit in report)


def test_conversion_with_one_key_value_head_per_head_is_exact():
    source = bert()
    model = from_bert(source, attention_type="standard", num_key_value_heads=HEADS)
    ids = torch.randint(5, 99, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).last_hidden_state, source(ids).last_hidden_state, atol=1e-5,
                                   rtol=1e-5)
