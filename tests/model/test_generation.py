"""The decoder: causal self-attention, cross-attention, the KV cache and `generate`, checked against transformers' own
BERT decoder (`BertLMHeadModel`) and `EncoderDecoderModel`."""

import pytest
import torch
from conftest import INVALID_CONFIG, tiny_config
from transformers import (
    BertConfig,
    BertLMHeadModel,
    DynamicCache,
    EncoderDecoderCache,
    EncoderDecoderModel,
)

from sharedbert import ATTENTION_TYPES, SharedBertLMHeadModel, SharedBertModel
from sharedbert.conversion.bert import from_bert
from sharedbert.export.folding import fold_for_inference, is_folded
from sharedbert.modeling_sharedbert import ATTENTION_CLASSES, SharedKeyValueAttention, SharedProjectionAttention

SHARING = [("none", None), ("all", 1), ("attention", 2)]


def random_bert_decoder(cross_attention: bool) -> BertLMHeadModel:
    config = BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, is_decoder=True,
        add_cross_attention=cross_attention,
    )  # fmt: skip
    bert = BertLMHeadModel(config).eval()
    with torch.no_grad():  # move every weight away from its initial value so nothing matches by accident
        for parameter in bert.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.02)
    return bert


def decoder(attention_type="shared", layer_sharing="none", num_unique_layers=None, cross_attention=True,
            cross_attention_type=None):
    config = tiny_config(
        attention_type=attention_type,
        layer_sharing=layer_sharing,
        num_unique_layers=num_unique_layers,
        is_decoder=True,
        add_cross_attention=cross_attention,
        cross_attention_type=cross_attention_type,
    )
    model = SharedBertLMHeadModel(config).eval()
    with torch.no_grad():  # the per-channel vectors start at 1 and P_h at I: move them so each type is itself
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return model


def encoder_states(batch=2, source=5, hidden=32):
    states = torch.randn(batch, source, hidden)
    mask = torch.ones(batch, source, dtype=torch.long)
    mask[-1, 3:] = 0
    return {"encoder_hidden_states": states, "encoder_attention_mask": mask}


def prompt(batch=2, length=4):
    return torch.randint(5, 99, (batch, length))


# --- transformers' BERT decoder as the reference -------------------------------------------------------------------


@pytest.mark.parametrize("cross_attention", [False, True])
def test_standard_decoder_reproduces_bert_lm_head_model(cross_attention):
    bert = random_bert_decoder(cross_attention)
    ours = from_bert(bert, attention_type="standard")
    assert type(ours) is SharedBertLMHeadModel and ours.config.is_decoder
    ids = prompt()
    mask = torch.ones_like(ids)
    mask[0, 0] = 0  # a padded (left) position
    extra = encoder_states() if cross_attention else {}
    with torch.no_grad():
        expected = bert(ids, attention_mask=mask, **extra).logits
        got = ours(ids, attention_mask=mask, **extra).logits
    assert (expected - got).abs().max() <= 1e-5

    def bert_cache():
        # transformers 5.23's own BertLMHeadModel needs this handed in when it has cross-attention (NOTES); ours not.
        return {"past_key_values": EncoderDecoderCache(DynamicCache(), DynamicCache())} if cross_attention else {}

    for settings in ({"num_beams": 1}, {"num_beams": 3}):
        expected = bert.generate(ids, max_new_tokens=8, do_sample=False, **settings, **extra, **bert_cache())
        got = ours.generate(ids, max_new_tokens=8, do_sample=False, **settings, **extra)
        assert torch.equal(expected, got), settings


# --- the cache ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
@pytest.mark.parametrize("layer_sharing, unique", SHARING)
def test_cached_generation_equals_uncached(attention_type, layer_sharing, unique):
    model = decoder(attention_type, layer_sharing, unique)
    ids, extra = prompt(), encoder_states()
    runs = {
        use_cache: model.generate(
            ids, max_new_tokens=10, do_sample=False, use_cache=use_cache, return_dict_in_generate=True,
            output_logits=True, **extra,
        )  # fmt: skip
        for use_cache in (True, False)
    }
    assert torch.equal(runs[True].sequences, runs[False].sequences)
    for cached, uncached in zip(runs[True].logits, runs[False].logits, strict=True):
        assert (cached - uncached).abs().max() <= 1e-4
    beams = [
        model.generate(ids, max_new_tokens=6, num_beams=3, do_sample=False, use_cache=use_cache, **extra)
        for use_cache in (True, False)
    ]
    assert torch.equal(*beams)


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_outputs_with_past_key_values_equal_outputs_without(attention_type):
    model = decoder(attention_type, "all", 2)
    ids, extra = prompt(length=9), encoder_states()
    with torch.no_grad():
        full = model(ids, use_cache=False, **extra).logits
        first = model(ids[:, :5], use_cache=True, **extra)
        assert isinstance(first.past_key_values, EncoderDecoderCache)
        assert first.past_key_values.get_seq_length() == 5
        second = model(ids[:, 5:7], past_key_values=first.past_key_values, **extra)
        third = model(ids[:, 7:], past_key_values=second.past_key_values, **extra)
    stepped = torch.cat([first.logits, second.logits, third.logits], dim=1)
    assert (full - stepped).abs().max() <= 1e-5


def test_decoder_without_cross_attention_uses_a_dynamic_cache():
    model = decoder(cross_attention=False)
    ids = prompt(length=6)
    with torch.no_grad():
        full = model(ids, use_cache=False).logits
        first = model(ids[:, :4])
        assert type(first.past_key_values) is DynamicCache
        second = model(ids[:, 4:], past_key_values=first.past_key_values)
    assert (full - torch.cat([first.logits, second.logits], 1)).abs().max() <= 1e-5


def test_cache_slots_belong_to_depths_not_to_stored_modules():
    model = decoder("shared", "all", 1)  # one stored attention module runs at all 4 depths
    with torch.no_grad():
        cache = model(prompt(), **encoder_states()).past_key_values
    assert len(cache.self_attention_cache.layers) == model.config.num_hidden_layers
    keys = [layer.keys for layer in cache.self_attention_cache.layers]
    assert all(k.shape == keys[0].shape for k in keys)
    assert not torch.allclose(keys[0], keys[1])  # depth 1 cached its own keys, not depth 0's


# --- masking ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_a_position_never_sees_a_later_one(attention_type, attn_implementation):
    model = decoder(attention_type)
    model.set_attn_implementation(attn_implementation)
    ids, extra = prompt(length=8), encoder_states()
    with torch.no_grad():
        base = model(ids, use_cache=False, **extra).logits
        for changed in range(1, 8):
            edited = ids.clone()
            edited[:, changed] = (edited[:, changed] + 1) % 99
            logits = model(edited, use_cache=False, **extra).logits
            assert (logits[:, :changed] - base[:, :changed]).abs().max() <= 1e-5
            assert (logits[:, changed:] - base[:, changed:]).abs().max() > 1e-4  # the change itself is seen


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_cross_attention_mask_hides_masked_encoder_positions(attention_type):
    model = decoder(attention_type)
    ids, extra = prompt(), encoder_states()
    edited = dict(extra, encoder_hidden_states=extra["encoder_hidden_states"].clone())
    edited["encoder_hidden_states"][-1, 3:] += 10.0  # masked out in the last row only
    with torch.no_grad():
        base = model(ids, **extra).logits
        assert (model(ids, **edited).logits - base).abs().max() <= 1e-5
        edited["encoder_hidden_states"][-1, 0] += 10.0  # a visible position
        assert (model(ids, **edited).logits[-1] - base[-1]).abs().max() > 1e-3


# --- cross-attention keys and values once per generation ----------------------------------------------------------


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
@pytest.mark.parametrize("layer_sharing, unique", [("none", None), ("all", 1)])
def test_cross_attention_keys_and_values_are_computed_once_per_generation(attention_type, layer_sharing, unique):
    model = decoder(attention_type, layer_sharing, unique)
    calls = []
    for module in model.sharedbert.encoder.crossattention:
        original = module.self.project_key_value

        def spy(hidden_states, original=original):
            calls.append(hidden_states.shape)
            return original(hidden_states)

        module.self.project_key_value = spy
    model.generate(prompt(), max_new_tokens=7, do_sample=False, **encoder_states())
    # One computation per depth (each depth has its cache slot), however many tokens were generated.
    assert len(calls) == model.config.num_hidden_layers
    calls.clear()
    model.generate(prompt(), max_new_tokens=7, do_sample=False, use_cache=False, **encoder_states())
    assert len(calls) == 7 * model.config.num_hidden_layers  # without the cache: every step again


# --- cross_attention_type: cross-attention of another type than self-attention --------------------------------------


@pytest.mark.parametrize(
    "self_type, cross_type",
    [("shared", "standard"), ("standard", "shared"), ("symmetric", "pairwise"), ("standard", "shared_kv")],
)
def test_cross_attention_type_sets_cross_attention_alone(tmp_path, self_type, cross_type):
    model = decoder(self_type, "all", 1, cross_attention_type=cross_type)
    stack = model.sharedbert.encoder
    assert all(type(module.self) is ATTENTION_CLASSES[self_type] for module in stack.attention)
    assert all(type(module.self) is ATTENTION_CLASSES[cross_type] for module in stack.crossattention)
    ids, extra = prompt(), encoder_states()
    cached = model.generate(ids, max_new_tokens=8, do_sample=False, **extra)
    assert torch.equal(model.generate(ids, max_new_tokens=8, do_sample=False, use_cache=False, **extra), cached)
    with torch.no_grad():
        expected = model(ids, **extra).logits
    model.save_pretrained(tmp_path)
    reloaded = SharedBertLMHeadModel.from_pretrained(tmp_path).eval()
    assert reloaded.config.cross_attention_type == cross_type
    with torch.no_grad():
        assert torch.equal(reloaded(ids, **extra).logits, expected)
    # Folding folds whichever sublayers are shared-projection attention, and only those.
    folded = fold_for_inference(model)
    with torch.no_grad():
        assert (folded(ids, **extra).logits - expected).abs().max() <= 1e-5
    folded_stack = folded.sharedbert.encoder
    for module, original in zip((*folded_stack.attention, *folded_stack.crossattention),
                                (*stack.attention, *stack.crossattention)):
        folds = isinstance(original.self, (SharedProjectionAttention, SharedKeyValueAttention))
        assert is_folded(module) == folds


def test_checkpoint_of_another_cross_attention_type_is_refused_by_name(tmp_path):
    decoder("shared", cross_attention_type="standard").save_pretrained(tmp_path)
    with pytest.raises(ValueError) as error:
        SharedBertLMHeadModel.from_pretrained(tmp_path, cross_attention_type="shared")
    message = str(error.value)
    assert "cross_attention_type='standard' weights" in message and "asks for 'shared'" in message
    assert "It holds attention_type=" not in message  # the self-attention weights do fit


def test_standard_cross_attention_converts_exactly_beside_fitted_self_attention():
    """from_bert fits each sublayer by its own type: standard cross-attention is BERT's, copied exactly."""
    bert = random_bert_decoder(cross_attention=True)
    ours = from_bert(bert, attention_type="shared", cross_attention_type="standard")
    for depth in range(bert.config.num_hidden_layers):
        theirs = bert.bert.encoder.layer[depth].crossattention.self
        mine = ours.sharedbert.encoder.crossattention[depth].self
        for name in ("query", "key", "value"):
            assert torch.equal(getattr(mine, name).weight, getattr(theirs, name).weight), (depth, name)
        assert type(ours.sharedbert.encoder.attention[depth].self) is SharedProjectionAttention


def test_unknown_cross_attention_type_is_refused():
    with pytest.raises(INVALID_CONFIG, match=r"cross_attention_type(.|\n)*'shared', 'standard'"):
        tiny_config(is_decoder=True, add_cross_attention=True, cross_attention_type="separate")


# --- bad inputs ------------------------------------------------------------------------------------------------


def test_cross_attention_without_encoder_states_is_refused():
    with pytest.raises(ValueError, match="no `encoder_hidden_states`"):
        decoder()(prompt())


@pytest.mark.parametrize("states", [torch.randn(3, 5, 32), torch.randn(2, 5, 16), torch.randn(2, 32)])
def test_encoder_states_of_another_shape_are_refused(states):
    """torch's own shape errors, as in BERT: none of these gives a result."""
    with pytest.raises(RuntimeError):
        decoder()(prompt(), encoder_hidden_states=states)


def test_encoder_mask_of_another_shape_is_refused():
    extra = encoder_states()
    with pytest.raises(ValueError, match="encoder_attention_mask"):
        decoder()(
            prompt(), encoder_hidden_states=extra["encoder_hidden_states"], encoder_attention_mask=torch.ones(2, 9)
        )


def test_cache_of_another_batch_size_is_refused():
    model = decoder()
    with torch.no_grad():
        cache = model(prompt(batch=3), **encoder_states(batch=3)).past_key_values
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):  # the cache's own concatenation
        model(prompt(batch=2, length=1), past_key_values=cache, **encoder_states(batch=2))


def test_encoder_refuses_decoder_inputs_and_lm_head_needs_a_decoder_config():
    with pytest.raises(ValueError, match="bidirectional encoder"):
        SharedBertModel(tiny_config())(prompt(), encoder_hidden_states=torch.randn(2, 5, 32))
    with pytest.raises(ValueError, match="is_decoder=True"):
        SharedBertLMHeadModel(tiny_config())
    with pytest.raises(ValueError, match="add_cross_attention=True"):
        decoder(cross_attention=False)(prompt(), encoder_hidden_states=torch.randn(2, 5, 32))


# --- outputs, folding ------------------------------------------------------------------------------------------


def test_attentions_and_cross_attentions_are_recorded_per_depth():
    model = decoder("shared", "all", 1)
    model.set_attn_implementation("eager")  # sdpa returns no weights
    with torch.no_grad():
        output = model(prompt(), output_attentions=True, output_hidden_states=True, **encoder_states())
    depth = model.config.num_hidden_layers
    assert len(output.attentions) == depth and len(output.cross_attentions) == depth
    assert output.attentions[0].shape == (2, 4, 4, 4)  # (batch, heads, target, target)
    assert output.cross_attentions[0].shape == (2, 4, 4, 5)  # (batch, heads, target, source)


@pytest.mark.parametrize("layer_sharing, unique", [("none", None), ("all", 1)])
def test_folding_works_on_self_and_cross_attention(layer_sharing, unique):
    model = decoder("shared", layer_sharing, unique, cross_attention_type="shared_kv")
    ids, extra = prompt(), encoder_states()
    with torch.no_grad():
        expected = model(ids, **extra).logits
    tokens = model.generate(ids, max_new_tokens=8, do_sample=False, **extra)
    folded = fold_for_inference(model)
    assert all(is_folded(module) for module in folded.sharedbert.encoder.crossattention)
    with torch.no_grad():
        assert (folded(ids, **extra).logits - expected).abs().max() <= 1e-5
    assert torch.equal(folded.generate(ids, max_new_tokens=8, do_sample=False, **extra), tokens)


# --- transformers' EncoderDecoderModel --------------------------------------------------------------------------


@pytest.mark.parametrize("attention_type", ["shared", "pairwise"])
def test_sharedbert_serves_as_encoder_and_decoder_of_encoder_decoder_model(tmp_path, attention_type):
    SharedBertModel(tiny_config(attention_type=attention_type)).save_pretrained(tmp_path / "encoder")
    # The decoder starts from an encoder checkpoint, as BERT2BERT does: cross-attention is new.
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(tmp_path / "encoder", tmp_path / "encoder")
    assert type(model.decoder) is SharedBertLMHeadModel
    assert model.decoder.config.is_decoder and model.decoder.config.add_cross_attention
    model.config.decoder_start_token_id, model.config.pad_token_id = 2, 0
    model.generation_config.decoder_start_token_id, model.generation_config.pad_token_id = 2, 0
    source = torch.randint(5, 99, (3, 7))
    labels = torch.randint(5, 99, (3, 6))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    model.train()
    loss = model(input_ids=source, labels=labels).loss
    loss.backward()
    projection = "shared_proj" if attention_type == "shared" else "query"
    assert getattr(model.encoder.encoder.attention[0].self, projection).weight.grad.abs().sum() > 0
    assert model.decoder.sharedbert.encoder.crossattention[0].output.dense.weight.grad.abs().sum() > 0
    optimizer.step()
    moved = [name for name, p in model.named_parameters() if not torch.equal(before[name], p)]
    assert any(name.startswith("encoder.") for name in moved) and any(".crossattention." in name for name in moved)
    model.eval()
    cached = model.generate(source, max_new_tokens=6, do_sample=False)
    uncached = model.generate(source, max_new_tokens=6, do_sample=False, use_cache=False)
    assert torch.equal(cached, uncached) and cached.shape == (3, 7)
    model.save_pretrained(tmp_path / "seq2seq")
    reloaded = EncoderDecoderModel.from_pretrained(tmp_path / "seq2seq")
    assert torch.equal(reloaded.generate(source, max_new_tokens=6, do_sample=False), cached)


def test_activation_checkpointing_gives_the_decoder_the_same_gradients():
    model = decoder("shared", "attention", 2)
    model.train()
    ids, extra = prompt(length=6), encoder_states()
    states = extra["encoder_hidden_states"].requires_grad_()

    def gradients():
        model.zero_grad()
        states.grad = None
        model(ids, labels=ids, **extra).loss.backward()
        return [p.grad.clone() for p in model.parameters()] + [states.grad.clone()]

    plain = gradients()
    model.activation_checkpointing_enable()
    checkpointed = gradients()
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(plain, checkpointed, strict=True))
    assert checkpointed[-1].abs().sum() > 0  # the encoder states receive their gradient through the checkpoint
