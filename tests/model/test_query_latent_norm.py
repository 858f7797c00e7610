"""The rank-r query's normalised code (`query_latent_norm`, multi-head latent attention's `q_a_layernorm`): what it
computes, the scale it starts at, its parameter counts, its refusals, its cache, and saving and loading."""

import pytest
import torch
from conftest import tiny_config
from safetensors.torch import load_file
from test_grouped_query_attention import bert  # the same tiny BERT (2 layers, tiny_config's sizes)

from sharedbert import SharedBertConfig, SharedBertLMHeadModel, SharedBertModel
from sharedbert.conversion.bert import from_bert
from sharedbert.modeling_sharedbert import IncompatibleCheckpointError, SharedBertRMSNorm
from sharedbert.parameter_counts import count_parameters, standard_bert_config

HIDDEN, HEADS = 32, 4  # tiny_config's sizes
HEAD_DIM = HIDDEN // HEADS


def normed(**overrides):
    return tiny_config(attention_type="standard", query_rank=8, query_latent_norm=True, **overrides)


def test_the_query_is_the_rms_normalised_code_times_b():
    torch.manual_seed(0)
    attention = SharedBertModel(normed()).eval().encoder.attention[0].self
    with torch.no_grad():
        attention.query_norm.weight.uniform_(0.5, 1.5)  # a learned scale, not the ones it starts at
    x = torch.randn(2, 5, HIDDEN)
    code = x @ attention.query_down.weight.T + attention.query_down.bias
    rms = code.pow(2).mean(-1, keepdim=True).add(attention.query_norm.variance_epsilon).sqrt()
    expected = (code / rms * attention.query_norm.weight) @ attention.query_up.weight.T
    with torch.no_grad():
        query = attention.project_query(x)  # (batch, heads, length, head_dim)
    torch.testing.assert_close(query.transpose(1, 2).reshape(2, 5, HIDDEN), expected, atol=1e-6, rtol=1e-5)


def test_the_norm_computes_in_float32_and_returns_the_input_dtype():
    norm = SharedBertRMSNorm(8)
    x = (torch.randn(3, 8) * 1e3).to(torch.bfloat16)
    out = norm(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().pow(2).mean(-1), torch.ones(3), atol=2e-2, rtol=0)


def test_at_initialisation_the_normalised_query_is_several_times_larger_than_the_plain_factored_one():
    """The reason for the option: with BERT's initialiser both factors are small, so the plain rank-r query starts
    about a tenth of a full Wq's scale; the normalised code gives it unit scale before B."""
    sizes = dict(hidden_size=128, num_attention_heads=4, intermediate_size=512)
    ids = torch.randint(5, 99, (4, 32))

    def query_std(**overrides):
        torch.manual_seed(0)
        model = SharedBertModel(tiny_config(attention_type="standard", **sizes, **overrides)).eval()
        seen = {}
        hook = model.embeddings.register_forward_hook(lambda m, args, out: seen.setdefault("x", out))
        with torch.no_grad():
            model(ids)
        hook.remove()
        with torch.no_grad():
            return float(model.encoder.attention[0].self.project_query(seen["x"]).std())

    full, plain, normalised = query_std(), query_std(query_rank=32), query_std(query_rank=32, query_latent_norm=True)
    assert plain < full / 5
    assert normalised > 3 * plain and normalised < full


@pytest.mark.parametrize("rank, num_key_value_heads", [(4, None), (8, 1)])
def test_parameter_counts_add_the_scale_once_per_stored_layer(rank, num_key_value_heads):
    plain = tiny_config(attention_type="standard", query_rank=rank, num_key_value_heads=num_key_value_heads,
                        layer_sharing="attention", num_unique_layers=2)
    with_norm = SharedBertConfig(**{**plain.to_dict(), "query_latent_norm": True})
    assert count_parameters(with_norm).qkv_total == count_parameters(plain).qkv_total + 2 * rank
    # The "standard BERT of the same dimensions" has the full query and so no code to normalise.
    baseline = standard_bert_config(with_norm)
    assert (baseline.query_rank, baseline.query_latent_norm) == (None, False)


def test_it_is_refused_without_a_rank_naming_the_field():
    with pytest.raises(Exception, match="query_latent_norm.*query_rank` is None"):
        tiny_config(attention_type="standard", query_latent_norm=True)


def test_conversion_from_a_bert_refuses_it_and_names_the_way_out():
    refusal = "query_latent_norm=True has no fit.*convert with query_rank alone.*--query-latent-norm"
    with pytest.raises(ValueError, match=refusal):
        from_bert(bert(), attention_type="standard", query_rank=8, query_latent_norm=True)


def test_gradients_reach_both_factors_and_the_scale():
    torch.manual_seed(0)
    model = SharedBertModel(normed())
    model(torch.randint(5, 99, (2, 6))).last_hidden_state.pow(2).sum().backward()
    attention = model.encoder.attention[0].self
    for parameter in (attention.query_down.weight, attention.query_up.weight, attention.query_norm.weight):
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0


def test_step_by_step_decoding_equals_the_full_forward():
    torch.manual_seed(0)
    model = SharedBertLMHeadModel(normed(num_key_value_heads=1, is_decoder=True, layer_sharing="attention",
                                         num_unique_layers=1)).eval()
    ids = torch.randint(5, 99, (2, 10))
    with torch.no_grad():
        full = model(ids).logits
        first = model(ids[:, :6], use_cache=True)
        rest = model(ids[:, 6:], past_key_values=first.past_key_values).logits
    torch.testing.assert_close(rest, full[:, 6:], atol=1e-5, rtol=1e-5)


def test_saved_and_loaded_as_is_and_old_configs_have_no_norm(tmp_path):
    torch.manual_seed(0)
    model = SharedBertModel(normed()).eval()
    with torch.no_grad():
        model.encoder.attention[1].self.query_norm.weight.fill_(0.7)
    model.save_pretrained(tmp_path)
    assert "encoder.attention.1.self.query_norm.weight" in load_file(tmp_path / "model.safetensors")
    loaded = SharedBertModel.from_pretrained(tmp_path).eval()
    assert loaded.config.query_latent_norm is True
    assert torch.equal(loaded.encoder.attention[1].self.query_norm.weight, torch.full((8,), 0.7))
    ids = torch.randint(5, 99, (2, 7))
    with torch.no_grad():
        assert torch.equal(loaded(ids).last_hidden_state, model(ids).last_hidden_state)
    old = SharedBertConfig.from_dict({k: v for k, v in tiny_config().to_dict().items() if k != "query_latent_norm"})
    assert old.query_latent_norm is False


def test_a_checkpoint_and_a_config_that_disagree_on_the_norm_are_refused(tmp_path):
    """Neither way may load half a model: the norm's scale dropped, or a norm left at its initial value."""
    with_norm, without = tmp_path / "with", tmp_path / "without"
    SharedBertModel(normed()).save_pretrained(with_norm)
    SharedBertModel(tiny_config(attention_type="standard", query_rank=8)).save_pretrained(without)
    with pytest.raises(IncompatibleCheckpointError, match="query_norm"):
        SharedBertModel.from_pretrained(with_norm, query_latent_norm=False)
    with pytest.raises(IncompatibleCheckpointError, match="query_norm"):
        SharedBertModel.from_pretrained(without, query_latent_norm=True)
