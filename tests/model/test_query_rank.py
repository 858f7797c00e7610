"""A rank-r query for standard attention (`query_rank`): what it computes, its parameter counts, its refusals, its
cache beside grouped-query attention, saving and loading, and conversion from a BERT."""

import pytest
import torch
from conftest import tiny_config
from test_grouped_query_attention import bert  # the same tiny BERT (2 layers, tiny_config's sizes)

from sharedbert import SharedBertConfig, SharedBertLMHeadModel, SharedBertModel
from sharedbert.configuration_sharedbert import ATTENTION_TYPES
from sharedbert.conversion.bert import from_bert
from sharedbert.modeling_sharedbert import IncompatibleCheckpointError, StandardAttention
from sharedbert.parameter_counts import count_parameters, standard_bert_config

HIDDEN, HEADS = 32, 4  # tiny_config's sizes
HEAD_DIM = HIDDEN // HEADS


def factored(full: SharedBertModel, rank: int) -> SharedBertModel:
    """`full`'s weights in a model with `query_rank=rank`, each query [Wq | bq] written as up @ [A | a] by its SVD:
    exact when `rank` reaches the rank of [Wq | bq]."""
    model = SharedBertModel(SharedBertConfig(**{**full.config.to_dict(), "query_rank": rank})).eval()
    state = {k: v for k, v in full.state_dict().items() if ".self.query." not in k}
    for name, attention in ((n, m) for n, m in full.named_modules() if isinstance(m, StandardAttention)):
        rows = torch.cat([attention.query.weight, attention.query.bias[:, None]], 1).double()
        u, s, vh = torch.linalg.svd(rows, full_matrices=False)
        down = s[:rank, None].sqrt() * vh[:rank]
        state[f"{name}.query_up.weight"] = (u[:, :rank] * s[:rank].sqrt()).float()
        state[f"{name}.query_down.weight"], state[f"{name}.query_down.bias"] = down[:, :-1].float(), down[:, -1].float()
    model.load_state_dict(state)  # strict: every weight of the low-rank model is written
    return model


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("num_key_value_heads", [None, 1])
def test_a_full_rank_factorisation_of_the_query_computes_what_standard_attention_computes(implementation,
                                                                                          num_key_value_heads):
    torch.manual_seed(0)
    full = SharedBertModel(tiny_config(attention_type="standard", num_key_value_heads=num_key_value_heads,
                                       attn_implementation=implementation)).eval()
    model = factored(full, HIDDEN)
    model.config._attn_implementation = implementation
    ids = torch.randint(5, 99, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        torch.testing.assert_close(model(ids, attention_mask=mask).last_hidden_state,
                                   full(ids, attention_mask=mask).last_hidden_state, atol=1e-5, rtol=1e-5)


def test_a_lower_rank_changes_the_output_and_is_not_a_disguised_full_query():
    torch.manual_seed(0)
    full = SharedBertModel(tiny_config(attention_type="standard")).eval()
    with torch.no_grad():  # queries and keys large enough for attention to be far from uniform, which hides the query
        for attention in full.encoder.attention:
            attention.self.query.weight.mul_(30)
            attention.self.key.weight.mul_(30)
    low = factored(full, 4)
    ids = torch.randint(5, 99, (2, 9))
    with torch.no_grad():
        difference = (low(ids).last_hidden_state - full(ids).last_hidden_state).abs().max()
    assert difference > 1e-2
    for attention in low.encoder.attention:
        assert not hasattr(attention.self, "query")
        assert attention.self.query_down.weight.shape == (4, HIDDEN)
        assert attention.self.query_up.weight.shape == (HIDDEN, 4) and attention.self.query_up.bias is None


@pytest.mark.parametrize("rank, num_key_value_heads", [(4, None), (8, 1), (16, 2)])
def test_parameter_counts_are_exact(rank, num_key_value_heads):
    config = tiny_config(attention_type="standard", query_rank=rank, num_key_value_heads=num_key_value_heads)
    kv = (num_key_value_heads or HEADS) * HEAD_DIM
    expected = (HIDDEN * rank + rank + rank * HIDDEN) + 2 * (HIDDEN * kv + kv)
    counts = count_parameters(config)
    assert counts.qkv_per_layer == expected
    assert counts.qkv_total == 4 * expected
    # The "standard BERT of the same dimensions" a model card compares with has the full query.
    assert standard_bert_config(config).query_rank is None


@pytest.mark.parametrize("attention_type", [t for t in ATTENTION_TYPES if t != "standard"])
def test_the_other_types_refuse_it_naming_the_field(attention_type):
    with pytest.raises(Exception, match="query_rank.*attention_type='standard'"):
        tiny_config(attention_type=attention_type, query_rank=4)


@pytest.mark.parametrize("rank, message", [(HIDDEN + 1, "cannot exceed `hidden_size`"), (0, "query_rank")])
def test_a_rank_outside_one_to_hidden_size_is_refused(rank, message):
    with pytest.raises(Exception, match=message):
        tiny_config(attention_type="standard", query_rank=rank)


def test_step_by_step_decoding_of_a_low_rank_query_multi_query_decoder_equals_the_full_forward():
    torch.manual_seed(0)
    config = tiny_config(attention_type="standard", query_rank=8, num_key_value_heads=1, is_decoder=True,
                         layer_sharing="attention", num_unique_layers=1)
    model = SharedBertLMHeadModel(config).eval()
    ids = torch.randint(5, 99, (2, 10))
    with torch.no_grad():
        full = model(ids).logits
        first = model(ids[:, :6], use_cache=True)
        rest = model(ids[:, 6:], past_key_values=first.past_key_values).logits
    torch.testing.assert_close(rest, full[:, 6:], atol=1e-5, rtol=1e-5)
    # The query's rank does not touch the cache: one key/value head, as multi-query attention's.
    assert all(layer.keys.shape[1] == 1 for layer in first.past_key_values.layers)


def test_the_field_is_saved_and_loaded_and_old_configs_have_the_full_query(tmp_path):
    torch.manual_seed(0)
    model = SharedBertModel(tiny_config(attention_type="standard", query_rank=8)).eval()
    model.save_pretrained(tmp_path)
    loaded = SharedBertModel.from_pretrained(tmp_path).eval()
    assert loaded.config.query_rank == 8
    ids = torch.randint(5, 99, (2, 7))
    with torch.no_grad():
        assert torch.equal(loaded(ids).last_hidden_state, model(ids).last_hidden_state)
    old = SharedBertConfig.from_dict({k: v for k, v in tiny_config().to_dict().items() if k != "query_rank"})
    assert old.query_rank is None


def test_a_low_rank_checkpoint_loaded_with_a_full_query_config_is_refused_as_standard_weights(tmp_path):
    SharedBertModel(tiny_config(attention_type="standard", query_rank=8)).save_pretrained(tmp_path)
    with pytest.raises(IncompatibleCheckpointError, match="query_down") as error:
        SharedBertModel.from_pretrained(tmp_path, query_rank=None)
    # The weights are standard attention's: the message must not send the user to another attention type.
    assert "attention_type=" not in str(error.value).split("\n")[1]


def test_conversion_takes_the_best_rank_r_query_and_reports_the_energy_it_loses():
    source = bert()
    model, report = from_bert(source, attention_type="standard", query_rank=4, return_report=True)
    model.requires_grad_(False)
    source.requires_grad_(False)
    for layer, fit in enumerate(report):
        ours, theirs = model.encoder.attention[layer].self, source.encoder.layer[layer].attention.self
        rows = torch.cat([theirs.query.weight, theirs.query.bias[:, None]], 1).double()
        approximation = ours.query_up.weight.double() @ torch.cat(
            [ours.query_down.weight, ours.query_down.bias[:, None]], 1).double()
        singular = torch.linalg.svdvals(rows)
        # Eckart–Young: the error of the best rank-4 approximation is the energy beyond the 4th singular value.
        error = float((rows - approximation).pow(2).sum())
        assert error == pytest.approx(float(singular[4:].pow(2).sum()), rel=1e-4)
        assert torch.equal(ours.key.weight, theirs.key.weight)
        total = sum(float(torch.cat([m.weight, m.bias[:, None]], 1).double().pow(2).sum())
                    for m in (theirs.query, theirs.key, theirs.value))
        assert fit.retained_energy == pytest.approx(1 - error / total, rel=1e-4)


def test_conversion_at_full_rank_computes_what_the_bert_computes():
    source = bert()
    model = from_bert(source, attention_type="standard", query_rank=HIDDEN)
    ids = torch.randint(5, 99, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).last_hidden_state, source(ids).last_hidden_state, atol=1e-5,
                                   rtol=1e-5)


def test_a_bert_checkpoint_does_not_load_into_a_low_rank_query(tmp_path):
    bert().save_pretrained(tmp_path)
    with pytest.raises(IncompatibleCheckpointError, match="query_rank=8"):
        SharedBertModel.from_pretrained(tmp_path, attention_type="standard", query_rank=8)
