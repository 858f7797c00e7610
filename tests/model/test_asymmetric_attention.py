"""The attention types whose scores have a direction (issue 42): `shared_kv`, `shared_head_query` and
`shared_lowrank_query`. The paper's `shared` type scores every token pair with a symmetric form, S·diag(dq⊙dk)·Sᵀ;
these do not, and the two that keep the paper's one projection cost at most 40% of standard attention's projection
parameters."""

import pytest
import torch
from conftest import INVALID_CONFIG, tiny_config

from sharedbert import SharedBertConfig, SharedBertLMHeadModel, SharedBertModel
from sharedbert.configuration_sharedbert import ATTENTION_TYPES
from sharedbert.loading import check_config_fields
from sharedbert.parameter_counts import count_parameters
from sharedbert.model_sizes import PRESETS

DIRECTED_TYPES = ["shared_kv", "shared_head_query", "shared_lowrank_query"]
ONE_PROJECTION_TYPES = ["shared_head_query", "shared_lowrank_query"]


def scores(attention_type: str, perturb: bool = True) -> torch.Tensor:
    """Per-head scores q_i·k_j (batch, heads, i, j) of the first self-attention of a tiny model, every parameter
    moved off its initial value (so M_h ≠ I and B ≠ 0)."""
    torch.manual_seed(0)
    model = SharedBertModel(tiny_config(attention_type=attention_type)).eval()
    attention = model.encoder.attention[0].self
    if perturb:
        with torch.no_grad():
            for parameter in attention.parameters():
                parameter.add_(0.3 * torch.randn_like(parameter))
    hidden = torch.randn(2, 6, 32)
    with torch.no_grad():
        query, key, _ = attention.project(hidden)
    return query @ key.transpose(-1, -2)


@pytest.mark.parametrize("attention_type", DIRECTED_TYPES)
def test_swapping_two_tokens_roles_changes_the_score(attention_type):
    score = scores(attention_type)
    i, j = 1, 4
    assert not torch.allclose(score[..., i, j], score[..., j, i], atol=1e-4)
    # Not one pair by chance: the whole score matrix is far from its transpose.
    asymmetry = (score - score.transpose(-1, -2)).norm() / score.norm()
    assert asymmetry > 0.05


def test_the_papers_shared_form_is_symmetric_so_the_test_above_can_fail():
    score = scores("shared")
    torch.testing.assert_close(score, score.transpose(-1, -2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attention_type", ONE_PROJECTION_TYPES)
def test_at_initialisation_the_one_projection_types_compute_the_papers_form(attention_type):
    torch.manual_seed(0)
    shared = SharedBertModel(tiny_config(attention_type="shared")).eval()
    with torch.no_grad():  # move dq, dk, dv off ones so that the comparison means something
        for name, parameter in shared.named_parameters():
            if name.endswith("_scale"):
                parameter.add_(0.3 * torch.randn_like(parameter))
    directed = SharedBertModel(tiny_config(attention_type=attention_type)).eval()
    missing, unexpected = directed.load_state_dict(shared.state_dict(), strict=False)
    assert not unexpected and missing and all("query_head_matrix" in k or "query_" in k for k in missing)
    ids = torch.randint(5, 99, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(directed(ids).last_hidden_state, shared(ids).last_hidden_state,
                                   rtol=0, atol=1e-6)


@pytest.mark.parametrize("preset", ["bert-base", "minilm-l6"])
@pytest.mark.parametrize("attention_type", ONE_PROJECTION_TYPES)
def test_the_one_projection_types_cost_at_most_40_percent_of_standard_projections(preset, attention_type):
    standard = count_parameters(SharedBertConfig(**PRESETS[preset], attention_type="standard")).qkv_per_layer
    paper = count_parameters(SharedBertConfig(**PRESETS[preset], attention_type="shared")).qkv_per_layer
    ours = count_parameters(SharedBertConfig(**PRESETS[preset], attention_type=attention_type)).qkv_per_layer
    assert paper < ours <= 0.40 * standard
    d, heads = PRESETS[preset]["hidden_size"], PRESETS[preset]["num_attention_heads"]
    if attention_type == "shared_head_query":
        assert ours - paper == heads * (d // heads) ** 2
    else:
        rank = d // 12
        assert ours - paper == 2 * d * rank + rank  # A (with its bias a) and B


def test_shared_kv_self_attention_costs_two_of_standards_three_projections():
    standard = count_parameters(SharedBertConfig(attention_type="standard")).qkv_per_layer
    shared_kv = count_parameters(SharedBertConfig(attention_type="shared_kv")).qkv_per_layer
    d = 768
    assert shared_kv == 2 * d * d + 4 * d and 0.66 < shared_kv / standard < 0.67


def test_attention_rank_defaults_to_a_twelfth_of_the_width_is_recorded_and_is_checked():
    config = SharedBertConfig(attention_type="shared_lowrank_query", hidden_size=384, num_attention_heads=12)
    assert config.attention_rank == 32 and config.effective_attention_rank == 32
    assert config.to_dict()["attention_rank"] == 32  # a later change of the default cannot change a saved model
    assert SharedBertConfig(attention_type="shared").to_dict()["attention_rank"] is None
    assert SharedBertConfig(attention_type="shared_lowrank_query", attention_rank=5).effective_attention_rank == 5
    assert SharedBertConfig(attention_type="shared_lowrank_query", hidden_size=8,
                            num_attention_heads=2).effective_attention_rank == 1
    model = SharedBertModel(tiny_config(attention_type="shared_lowrank_query", attention_rank=3))
    assert model.encoder.attention[0].self.query_down.weight.shape == (3, 32)
    for bad in (0, -2, 33):
        with pytest.raises(INVALID_CONFIG, match="attention_rank"):
            tiny_config(attention_type="shared_lowrank_query", attention_rank=bad)
    with pytest.raises(INVALID_CONFIG, match="attention_rank"):
        tiny_config(attention_type="shared_lowrank_query", attention_rank=2.5)
    with pytest.raises(ValueError, match="did you mean `attention_rank`"):
        check_config_fields({"attention_rnak": 4})  # the package's loader's check


def test_every_type_is_a_self_and_a_cross_attention_type_with_standard_cross_attention_by_default():
    for attention_type in DIRECTED_TYPES:
        assert attention_type in ATTENTION_TYPES
        config = tiny_config(attention_type=attention_type, is_decoder=True, add_cross_attention=True)
        assert config.effective_cross_attention_type == "standard"
    with pytest.raises(INVALID_CONFIG, match="attention_type"):
        tiny_config(attention_type="shared_head_querry")


@pytest.mark.parametrize("attention_type", DIRECTED_TYPES)
def test_a_causal_decoder_sees_no_future_token(attention_type):
    torch.manual_seed(0)
    model = SharedBertLMHeadModel(tiny_config(attention_type=attention_type, is_decoder=True)).eval()
    with torch.no_grad():  # the extra parameters off their initial values: the paper's form would hide a leak in them
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    ids = torch.randint(5, 99, (1, 8))
    changed = ids.clone()
    changed[0, 5:] = torch.randint(5, 99, (3,))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits[:, :5], model(changed).logits[:, :5], rtol=0, atol=1e-6)


@pytest.mark.parametrize("attention_type", DIRECTED_TYPES)
def test_as_cross_attention_the_types_read_the_encoder_states(attention_type):
    torch.manual_seed(0)
    config = tiny_config(attention_type="standard", is_decoder=True, add_cross_attention=True,
                         cross_attention_type=attention_type)
    model = SharedBertLMHeadModel(config).eval()
    assert type(model.sharedbert.encoder.crossattention[0].self).__name__ == {
        "shared_kv": "SharedKeyValueAttention", "shared_head_query": "SharedHeadQueryAttention",
        "shared_lowrank_query": "SharedLowRankQueryAttention"}[attention_type]
    ids, states = torch.randint(5, 99, (2, 5)), torch.randn(2, 6, 32)
    with torch.no_grad():
        first = model(ids, encoder_hidden_states=states).logits
        second = model(ids, encoder_hidden_states=states + 1.0).logits
    assert not torch.allclose(first, second)
