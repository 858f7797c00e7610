"""Bad inputs, tried for every attention type: each gives an error, never a silent result. Where torch or transformers
would compute a wrong result without complaint (a padding mask of another shape, both ids and embeddings, a
cross-attention decoder without encoder states) the model refuses with a message naming the argument; where torch
already refuses (ids outside the vocabulary, float ids, tensors of mismatched sizes, empty inputs), as in
transformers' BERT, its own error stands. Then numerics: all-padding rows, reduced precision and determinism.

Decisions recorded here:
* Empty inputs (batch 0 or sequence length 0) fail in the attention's reshape, as in BERT: there is no [CLS] token to
  pool in an empty sequence and a loss over zero items is NaN; skip empty batches before calling the model.
* A row that is all padding is computed (its output is meaningless but finite) and does not change other rows.
* Tolerances, measured on this CPU (hidden 64, 4x16 tokens, 3 seeds per attention type) with margin: bf16 autocast
  loss within 1e-3 of fp32 (seen <= 6e-5), gradient relative error < 5% (seen 0.4-0.5%); fp16 inference hidden
  states within 3e-2 of fp32 (seen <= 7e-3), logits within 1e-3 (seen <= 9e-5).
"""

import pytest
import torch
from conftest import tiny_config

from sharedbert import ATTENTION_TYPES, SharedBertForMaskedLM, SharedBertForSequenceClassification, SharedBertModel


VOCAB, MAX_POSITIONS, TYPES = 99, 64, 2  # tiny_config's sizes


@pytest.fixture(scope="module", params=ATTENTION_TYPES)
def model(request):
    torch.manual_seed(0)
    return SharedBertModel(tiny_config(attention_type=request.param)).eval()


def ids(batch=3, length=7):
    return torch.randint(1, VOCAB, (batch, length))


# Each case: keyword arguments for the model, the exception type, and words the message must contain (none where the
# error is torch's own).
BAD_INPUTS = {
    # Refused by the model: each would otherwise give a result without complaint, or only a shape error from torch.
    "longer than max_position_embeddings": (
        lambda: dict(input_ids=ids(2, MAX_POSITIONS + 1)), ValueError, ["max_position_embeddings=64", "truncat"]
    ),
    "ids and embeds": (
        lambda: dict(input_ids=ids(), inputs_embeds=torch.randn(3, 7, 32)), ValueError, ["exactly one"]
    ),
    "neither ids nor embeds": (lambda: dict(), ValueError, ["exactly one"]),
    "mask shorter": (
        lambda: dict(input_ids=ids(), attention_mask=torch.ones(3, 6, dtype=torch.long)),
        ValueError,
        ["attention_mask", "(3, 6)", "(3, 7)"],
    ),
    "mask for another batch": (
        lambda: dict(input_ids=ids(), attention_mask=torch.ones(2, 7, dtype=torch.long)),
        ValueError,
        ["attention_mask", "(2, 7)"],
    ),
    "1-D mask": (
        lambda: dict(input_ids=ids(), attention_mask=torch.ones(7, dtype=torch.long)), ValueError, ["attention_mask"]
    ),
    "3-D mask": (lambda: dict(input_ids=ids(), attention_mask=torch.ones(3, 7, 7)), ValueError, ["attention_mask"]),
    # Refused by torch itself, as in BERT.
    "empty batch": (lambda: dict(input_ids=ids(0, 7)), RuntimeError, []),
    "empty sequence": (lambda: dict(input_ids=ids(2, 0)), RuntimeError, []),
    "id == vocab_size": (lambda: dict(input_ids=torch.full((2, 5), VOCAB)), IndexError, []),
    "negative id": (lambda: dict(input_ids=torch.tensor([[2, 3, -1, 4]])), IndexError, []),
    "float ids": (lambda: dict(input_ids=ids().float()), RuntimeError, []),
    "1-D ids": (lambda: dict(input_ids=ids()[0]), RuntimeError, []),
    "4-D mask of the wrong size": (
        lambda: dict(input_ids=ids(), attention_mask=torch.ones(3, 1, 6, 7, dtype=torch.bool)), RuntimeError, []
    ),
    "token type == type_vocab_size": (
        lambda: dict(input_ids=ids(), token_type_ids=torch.full((3, 7), TYPES)), IndexError, []
    ),
    "token types of the wrong shape": (
        lambda: dict(input_ids=ids(), token_type_ids=torch.zeros(3, 6, dtype=torch.long)), RuntimeError, []
    ),
    "position id == max_position_embeddings": (
        lambda: dict(input_ids=ids(1, 3), position_ids=torch.tensor([[0, 1, MAX_POSITIONS]])), IndexError, []
    ),
    "embeds of the wrong width": (lambda: dict(inputs_embeds=torch.randn(3, 7, 31)), RuntimeError, []),
    "float64 embeds": (lambda: dict(inputs_embeds=torch.randn(3, 7, 32, dtype=torch.float64)), RuntimeError, []),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_an_error(model, case):
    make_inputs, error_type, words = BAD_INPUTS[case]
    with pytest.raises(error_type) as error:
        model(**make_inputs())
    for word in words:
        assert word in str(error.value), (case, str(error.value))


# Inputs that are unusual but valid: each must give the same result as its canonical form.
EQUIVALENT_INPUTS = {
    "bool mask": lambda i, m: dict(input_ids=i, attention_mask=m.bool()),
    "float mask": lambda i, m: dict(input_ids=i, attention_mask=m.float()),
    "int32 ids": lambda i, m: dict(input_ids=i.int(), attention_mask=m),
    "4-D bool mask": lambda i, m: dict(input_ids=i, attention_mask=(m[:, None, None, :].bool()).expand(-1, 1, 7, -1)),
    "token types shared across the batch": lambda i, m: dict(
        input_ids=i, attention_mask=m, token_type_ids=torch.zeros(1, 7, dtype=torch.long)
    ),
    "explicit default positions": lambda i, m: dict(input_ids=i, attention_mask=m, position_ids=torch.arange(7)[None]),
}


@pytest.mark.parametrize("case", sorted(EQUIVALENT_INPUTS))
def test_equivalent_inputs_give_the_same_result(model, case):
    input_ids, mask = ids(), torch.ones(3, 7, dtype=torch.long)
    mask[1, 4:] = 0
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        actual = model(**EQUIVALENT_INPUTS[case](input_ids, mask)).last_hidden_state
    # A 4-D mask also masks the padded queries' own rows; compare the real tokens, which must agree everywhere.
    real = mask.bool()
    torch.testing.assert_close(actual[real], expected[real], rtol=1e-5, atol=1e-5)


def test_heads_apply_the_same_checks():
    model = SharedBertForSequenceClassification(tiny_config())
    with pytest.raises(ValueError, match="attention_mask"):
        model(ids(), attention_mask=torch.ones(7, dtype=torch.long))
    with pytest.raises(ValueError, match="exactly one"):
        model(ids(), inputs_embeds=torch.randn(3, 7, 32))


# -- all-padding rows ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_all_padding_rows_stay_finite_and_isolated(attention_type, attn_implementation):
    torch.manual_seed(0)
    model = SharedBertForMaskedLM(tiny_config(attention_type=attention_type, attn_implementation=attn_implementation))
    input_ids = ids(4, 9)
    mask = torch.ones_like(input_ids)
    mask[1] = 0  # a row that is all padding
    mask[2, 5:] = 0
    labels = torch.where(mask.bool(), input_ids, -100)
    output = model(input_ids, attention_mask=mask, labels=labels)
    output.loss.backward()
    assert torch.isfinite(output.logits).all() and torch.isfinite(output.loss)
    for name, parameter in model.named_parameters():
        assert parameter.grad is None or torch.isfinite(parameter.grad).all(), name

    # Padding changes nothing for the other rows: row 2 alone, unpadded, gives the same hidden states.
    model.eval()
    with torch.no_grad():
        batched = model.sharedbert(input_ids, attention_mask=mask).last_hidden_state
        alone = model.sharedbert(input_ids[2:3, :5]).last_hidden_state
        every_row_padding = model.sharedbert(input_ids, attention_mask=torch.zeros_like(mask)).last_hidden_state
    torch.testing.assert_close(batched[2, :5], alone[0], rtol=1e-5, atol=1e-5)
    assert torch.isfinite(every_row_padding).all()


# -- precision and determinism -------------------------------------------------------------------------------------


def _batch():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, VOCAB, (4, 16), generator=generator)
    mask = torch.ones_like(input_ids)
    mask[1, 10:] = 0
    mask[2] = 0
    return input_ids, mask, torch.tensor([0, 1, 2, 1])


def _gradient(model):
    return torch.cat([p.grad.flatten().float() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_bf16_autocast_training_step_is_close_to_fp32(attention_type):
    torch.manual_seed(0)
    model = SharedBertForSequenceClassification(tiny_config(attention_type=attention_type, num_labels=3))
    input_ids, mask, labels = _batch()
    loss32 = model(input_ids, attention_mask=mask, labels=labels).loss
    loss32.backward()
    gradient32 = _gradient(model)
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss16 = model(input_ids, attention_mask=mask, labels=labels).loss
    loss16.backward()
    gradient16 = _gradient(model)
    assert torch.isfinite(loss16) and torch.isfinite(gradient16).all()
    assert abs(loss16.item() - loss32.item()) < 1e-3
    assert (gradient16 - gradient32).norm() / gradient32.norm() < 0.05


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_fp16_inference_is_close_to_fp32(attention_type):
    torch.manual_seed(0)
    model = SharedBertForSequenceClassification(tiny_config(attention_type=attention_type, num_labels=3)).eval()
    input_ids, mask, _ = _batch()
    with torch.no_grad():
        hidden32 = model.sharedbert(input_ids, attention_mask=mask).last_hidden_state
        logits32 = model(input_ids, attention_mask=mask).logits
        model.half()
        hidden16 = model.sharedbert(input_ids, attention_mask=mask).last_hidden_state
        logits16 = model(input_ids, attention_mask=mask).logits
    assert hidden16.dtype == torch.float16 and torch.isfinite(hidden16).all() and torch.isfinite(logits16).all()
    torch.testing.assert_close(hidden16.float(), hidden32, rtol=0, atol=3e-2)
    torch.testing.assert_close(logits16.float(), logits32, rtol=0, atol=1e-3)


def _train_three_steps(attention_type, seed):
    torch.manual_seed(seed)
    config = tiny_config(attention_type=attention_type, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = SharedBertForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    input_ids, mask, _ = _batch()
    losses = []
    for _ in range(3):
        loss = model(input_ids, attention_mask=mask, labels=torch.where(mask.bool(), input_ids, -100)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, model.state_dict()


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_fixed_seed_gives_identical_results(attention_type):
    """Initialisation, dropout and three optimiser steps repeat bit for bit; another seed differs."""
    losses_a, state_a = _train_three_steps(attention_type, seed=3)
    losses_b, state_b = _train_three_steps(attention_type, seed=3)
    losses_c, _ = _train_three_steps(attention_type, seed=4)
    assert losses_a == losses_b
    assert all(torch.equal(state_a[key], state_b[key]) for key in state_a)
    assert losses_a != losses_c


def test_the_forward_never_reads_a_tensor_back_to_the_host():
    """On a GPU, reading a value (`int(ids.max())`) would force a device-to-host synchronisation at every forward: the
    model's checks read shapes only. A meta tensor has no values at all, so any host read would raise: a forward on
    the meta device proves none happens. (Given a padding mask, transformers' mask functions read it themselves.)"""
    config = tiny_config()
    with torch.device("meta"):
        model = SharedBertModel(config)
    ids = torch.zeros(2, 8, dtype=torch.long, device="meta")
    hidden = model(input_ids=ids, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    assert hidden.shape == (2, 8, config.hidden_size) and hidden.device.type == "meta"
