"""Inference-time folding of shared attention (`fold_for_inference` / `unfold`): same outputs, used only for inference,
never saved, never trained, and refused once stale."""

import pytest
import torch
from safetensors.torch import load_file

import sharedbert
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


def _corrupt_folded_copies(model):
    for module in model.modules():
        if isinstance(module, SharedProjectionAttention):
            module.folded_proj_weight.mul_(3.0)


@pytest.mark.parametrize("negative_score_scale", [False, True], ids=["sqrt-folded", "query-scaled"])
@pytest.mark.parametrize("layer_sharing", ["none", "all"])
def test_folded_outputs_match_and_the_folded_path_is_used(negative_score_scale, layer_sharing):
    model = _shared_model(negative_score_scale, layer_sharing=layer_sharing)
    reference = _run(model)
    assert model.fold_for_inference() is model and model.is_folded
    attention = model.encoder.attention[0].self
    assert (attention.folded_query_scale is None) == (not negative_score_scale)
    with torch.inference_mode():
        folded = _run(model)
    assert (folded - reference).abs().max().item() <= 1e-5
    # Damaging the folded copies changes inference outputs: they, not the parameters, are what ran.
    _corrupt_folded_copies(model)
    with torch.inference_mode():
        assert (_run(model) - reference).abs().max().item() > 1e-3


def test_folding_never_reaches_saved_weights(tmp_path):
    model = _shared_model().fold_for_inference()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    assert not any("folded" in name for name in before)
    model.save_pretrained(tmp_path)
    saved = load_file(tmp_path / "model.safetensors")
    assert set(saved) == set(before)
    for name, tensor in saved.items():
        assert torch.equal(tensor, before[name]), name
    reloaded = sharedbert.SharedBertModel.from_pretrained(tmp_path).eval()
    assert not reloaded.is_folded
    model.unfold()
    assert torch.allclose(_run(reloaded), _run(model), atol=1e-6)


def test_training_mode_and_gradients_use_the_parameters():
    model = _shared_model()
    reference = _run(model)
    model.fold_for_inference()
    _corrupt_folded_copies(model)
    # Eval mode with gradients on (e.g. a probe being trained): the unfolded path, and gradients reach dv.
    out = _run(model, grad=True)
    assert torch.allclose(out, reference, atol=1e-6)
    out.sum().backward()
    assert model.encoder.attention[0].self.value_scale.grad is not None
    # train() drops the folded copies altogether.
    model.train()
    assert not model.is_folded
    assert model.encoder.attention[0].output.folded_weight is None


def test_stale_fold_is_refused_until_folded_again():
    model = _shared_model().fold_for_inference()
    with torch.no_grad():
        model.encoder.attention[1].self.value_scale.mul_(2.0)  # the weights change after folding
    with torch.inference_mode(), pytest.raises(RuntimeError, match="fold_for_inference"):
        _run(model)
    model.fold_for_inference()
    with torch.inference_mode():
        folded = _run(model)
    model.unfold()
    assert (folded - _run(model)).abs().max().item() <= 1e-5


def test_fold_follows_dtype_moves():
    model = _shared_model().fold_for_inference().to(torch.float64)
    with torch.inference_mode():
        folded = _run(model)
    assert folded.dtype == torch.float64
    model.unfold()
    assert (folded - _run(model)).abs().max().item() <= 1e-5


@pytest.mark.parametrize("attention_type", ["standard", "symmetric", "pairwise"])
def test_other_attention_types_have_nothing_to_fold(attention_type, tmp_path):
    model = sharedbert.SharedBertModel(tiny_config(attention_type=attention_type)).eval()
    reference = _run(model)
    model.fold_for_inference()
    assert not model.is_folded
    with torch.inference_mode():
        assert torch.equal(_run(model), reference)
    model.save_pretrained(tmp_path)
    assert torch.allclose(_run(sharedbert.SharedBertModel.from_pretrained(tmp_path).eval()), reference, atol=1e-6)


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
        model.fold_for_inference()
