"""Folding for inference as a transform (`sharedbert.export.folding.fold_for_inference`): a folded copy with the same
outputs, whose folded path is what runs; the model passed in is untouched and no module keeps folding state; the copy
saves as an ordinary checkpoint."""

import pytest
import torch

import sharedbert
from sharedbert.export.folding import (
    FOLDED_CLASSES,
    FoldedSharedKeyValueAttention,
    FoldedSharedProjectionAttention,
    fold_for_inference,
    is_folded,
)
from sharedbert.modeling_sharedbert import SharedProjectionAttention

from conftest import tiny_config


def _shared_model(negative_score_scale=False, **overrides):
    """A tiny shared-attention model whose per-channel vectors are no longer the all-ones of initialisation."""
    model = sharedbert.SharedBertModel(tiny_config(attention_type="shared", **overrides))
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, SharedProjectionAttention):
                module.query_scale.uniform_(0.5, 1.5)
                module.key_scale.uniform_(0.5, 1.5)
                module.value_scale.uniform_(-1.5, 1.5)
                if negative_score_scale:
                    module.key_scale[3] = -0.7  # one dq⊙dk < 0: √ cannot be folded, the query keeps its scaling
    return model.eval()


def _run(model, grad=False):
    ids = torch.randint(1, 99, (3, 17), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, 17, dtype=torch.long)
    mask[1, 11:] = 0  # padding in one row, so the mask path is exercised too
    with torch.set_grad_enabled(grad):
        return model(input_ids=ids, attention_mask=mask).last_hidden_state


@pytest.mark.parametrize("negative_score_scale", [False, True], ids=["sqrt-folded", "query-scaled"])
@pytest.mark.parametrize("layer_sharing", ["none", "all"])
def test_folded_copy_matches_and_runs_the_folded_path(negative_score_scale, layer_sharing):
    model = _shared_model(negative_score_scale, layer_sharing=layer_sharing)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    reference = _run(model)
    folded = fold_for_inference(model)
    assert folded is not model and is_folded(folded) and not is_folded(model)
    attention = folded.encoder.attention[0].self
    assert isinstance(attention, FoldedSharedProjectionAttention)
    assert attention.keeps_query_scale == negative_score_scale
    assert torch.equal(attention.key_scale, torch.ones_like(attention.key_scale))
    assert torch.equal(attention.value_scale, torch.ones_like(attention.value_scale))
    with torch.inference_mode():
        assert (_run(folded) - reference).abs().max().item() <= 1e-5
    # The folded forward ignores dv: changing it in the copy changes nothing, while in the model it would.
    with torch.no_grad():
        attention.value_scale.mul_(3.0)
    with torch.inference_mode():
        assert (_run(folded) - reference).abs().max().item() <= 1e-5
    # The model passed in is untouched, and none of its modules holds anything folded.
    assert all(torch.equal(tensor, before[name]) for name, tensor in model.state_dict().items())
    assert not any("folded" in name for name, _ in model.named_buffers())


def test_a_model_keeps_no_folding_state():
    """Training-mode modules carry no folding machinery: no folded buffers, no train() override, no version tracking."""
    from sharedbert.modeling_sharedbert import SharedBertAttention, SharedBertSelfOutput

    model = _shared_model()
    assert not any("fold" in name for name, _ in model.named_buffers())
    for cls in (SharedProjectionAttention, SharedBertAttention, SharedBertSelfOutput, sharedbert.SharedBertModel):
        assert not any("fold" in name for name in vars(cls)), cls
    assert "train" not in vars(SharedBertAttention)


def test_folded_copy_saves_as_an_ordinary_checkpoint(tmp_path):
    model = _shared_model()
    folded = fold_for_inference(model)
    assert set(folded.state_dict()) == set(model.state_dict())
    folded.save_pretrained(tmp_path)
    reloaded = sharedbert.SharedBertModel.from_pretrained(tmp_path).eval()
    assert not is_folded(reloaded)
    assert (_run(reloaded) - _run(model)).abs().max().item() <= 1e-5


def test_gradients_flow_through_a_folded_copy_but_not_into_what_was_folded():
    folded = fold_for_inference(_shared_model())
    _run(folded, grad=True).sum().backward()
    attention = folded.encoder.attention[0].self
    assert attention.shared_proj.weight.grad is not None
    assert attention.value_scale.grad is None and not attention.value_scale.requires_grad


def test_folded_copy_follows_dtype_moves():
    model = _shared_model()
    folded = fold_for_inference(model).to(torch.float64)
    with torch.inference_mode():
        out = _run(folded)
    assert out.dtype == torch.float64
    assert (out - _run(model.to(torch.float64))).abs().max().item() <= 1e-5


@pytest.mark.parametrize("attention_type", ["standard", "symmetric", "pairwise"])
def test_other_attention_types_have_nothing_to_fold(attention_type):
    model = sharedbert.SharedBertModel(tiny_config(attention_type=attention_type)).eval()
    folded = fold_for_inference(model)
    assert not is_folded(folded)
    with torch.inference_mode():
        assert torch.equal(_run(folded), _run(model))


def test_shared_kv_cross_attention_folds():
    config = tiny_config(attention_type="standard", is_decoder=True, add_cross_attention=True,
                         cross_attention_type="shared_kv")
    model = sharedbert.SharedBertLMHeadModel(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "key_scale"):
                module.key_scale.uniform_(0.5, 1.5)
                module.value_scale.uniform_(-1.5, 1.5)
    ids = torch.randint(1, 99, (2, 9), generator=torch.Generator().manual_seed(1))
    states = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(2))
    folded = fold_for_inference(model)
    assert isinstance(folded.sharedbert.encoder.crossattention[0].self, FoldedSharedKeyValueAttention)
    with torch.inference_mode():
        expected = model(ids, encoder_hidden_states=states).logits
        assert (folded(ids, encoder_hidden_states=states).logits - expected).abs().max().item() <= 1e-5


def test_wrapped_projection_is_refused():
    class Wrapped(torch.nn.Module):  # stands in for an adapter wrapper such as a LoRA layer
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)

    model = _shared_model()
    model.encoder.attention[0].output.dense = Wrapped(model.encoder.attention[0].output.dense)
    with pytest.raises(ValueError, match="merge_and_unload"):
        fold_for_inference(model)


def _perturbed(model_class, seed=0, negative_score_scale=False, **overrides):
    """A tiny model whose every parameter is off its initial value (M_h ≠ I, B ≠ 0, vectors ≠ 1)."""
    torch.manual_seed(seed)
    model = model_class(tiny_config(**overrides))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(("query_scale", "key_scale")):
                parameter.uniform_(0.5, 1.5)
            elif name.endswith("value_scale"):
                parameter.uniform_(-1.5, 1.5)
            else:
                parameter.add_(0.05 * torch.randn_like(parameter))
        if negative_score_scale:
            for module in model.modules():
                if isinstance(module, SharedProjectionAttention):
                    module.key_scale[3] = -0.7
    return model.eval()


@pytest.mark.parametrize("negative_score_scale", [False, True], ids=["sqrt-folded", "query-scaled"])
@pytest.mark.parametrize("attention_type", ["shared_kv", "shared_head_query", "shared_lowrank_query"])
def test_the_directed_types_fold_with_the_same_outputs(tmp_path, attention_type, negative_score_scale):
    model = _perturbed(sharedbert.SharedBertModel, negative_score_scale=negative_score_scale,
                       attention_type=attention_type, layer_sharing="attention", num_unique_layers=2)
    reference = _run(model)
    folded = fold_for_inference(model)
    attention = folded.encoder.attention[0].self
    assert isinstance(attention, FOLDED_CLASSES[type(model.encoder.attention[0].self)])
    assert torch.equal(attention.value_scale, torch.ones_like(attention.value_scale))
    with torch.inference_mode():
        assert (_run(folded) - reference).abs().max().item() <= 1e-5
    # What was folded away is not read any more: dv scaled in the copy changes nothing.
    with torch.no_grad():
        attention.value_scale.mul_(3.0)
        attention.key_scale.mul_(3.0)
    with torch.inference_mode():
        assert (_run(folded) - reference).abs().max().item() <= 1e-5
    # ... and the copy, with its vectors at one, saves as an ordinary checkpoint of the same function.
    folded = fold_for_inference(model)
    folded.save_pretrained(tmp_path)
    reloaded = sharedbert.SharedBertModel.from_pretrained(tmp_path).eval()
    assert not is_folded(reloaded)
    with torch.inference_mode():
        assert (_run(reloaded) - reference).abs().max().item() <= 1e-5


@pytest.mark.parametrize("attention_type", ["shared_kv", "shared_head_query", "shared_lowrank_query"])
def test_a_folded_decoder_generates_as_the_original_with_its_cache(attention_type):
    model = _perturbed(sharedbert.SharedBertLMHeadModel, attention_type=attention_type, is_decoder=True,
                       add_cross_attention=True, cross_attention_type=attention_type)
    folded = fold_for_inference(model)
    assert isinstance(folded.sharedbert.encoder.crossattention[0].self, tuple(FOLDED_CLASSES.values()))
    ids = torch.randint(5, 99, (2, 3), generator=torch.Generator().manual_seed(1))
    states = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        expected = model(ids, encoder_hidden_states=states).logits
        assert (folded(ids, encoder_hidden_states=states).logits - expected).abs().max().item() <= 1e-5
        arguments = dict(encoder_hidden_states=states, max_new_tokens=6, do_sample=False)
        assert torch.equal(folded.generate(ids, **arguments), model.generate(ids, **arguments))
