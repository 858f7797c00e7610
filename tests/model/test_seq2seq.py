"""SharedBertForConditionalGeneration: exactness against transformers' EncoderDecoderModel, the cache, what the sharing
options share (parameter count, gradients from both sides, storage), warm start, save/load and remote code,
Seq2SeqTrainer and PEFT."""

import json
import textwrap

import pytest
import torch
from conftest import INVALID_CONFIG, tiny_config
from safetensors import safe_open
from transformers import AutoModelForSeq2SeqLM, BertConfig, BertForMaskedLM, EncoderDecoderModel

from sharedbert import (
    ATTENTION_TYPES,
    SharedBertForConditionalGeneration,
    SharedBertForMaskedLM,
    SharedBertModel,
    SharedBertTokenizer,
)
from sharedbert.conversion.bert import encoder_decoder_to_seq2seq, from_bert, warm_start_seq2seq
from sharedbert.export.folding import fold_for_inference, is_folded
from sharedbert.modeling_sharedbert import SharedBertAttention, SharedBertOnlyMLMHead

FULLY_SHARED = {"share_encoder_decoder_layers": True, "share_encoder_decoder_embeddings": True}
VARIANTS = {
    "nothing": {},
    "layers": {"share_encoder_decoder_layers": True},
    "embeddings": {"share_encoder_decoder_embeddings": True},
    "all": FULLY_SHARED,
    "all+scaled+albert": {**FULLY_SHARED, "scale_embedding": True, "layer_sharing": "all", "num_unique_layers": 2},
    "all+standard-cross": {**FULLY_SHARED, "cross_attention_type": "standard"},
}


# A 99-token vocabulary: BERT's five special tokens (ids 0-4: pad, unk, cls, sep, mask), then plain words.
VOCAB = {
    token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(94))])
}


def seq2seq(attention_type="shared", **overrides):
    config = tiny_config(
        attention_type=attention_type, is_encoder_decoder=True, decoder_start_token_id=2, eos_token_id=3, **overrides
    )
    model = SharedBertForConditionalGeneration(config).eval()
    perturb(model)
    return model


def perturb(model, scale=0.05):
    with torch.no_grad():  # away from the initial values (unit scales, zero biases) so every path matters
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * scale)


def batch(rows=3, length=7):
    input_ids = torch.randint(5, 99, (rows, length))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, 4:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def random_bert_mlm(tmp_path=None):
    config = BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    bert = BertForMaskedLM(config).eval()
    perturb(bert, 0.02)
    if tmp_path is not None:
        bert.save_pretrained(tmp_path)
    return bert


# --- the same function as transformers' EncoderDecoderModel ---------------------------------------------------------


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_unshared_seq2seq_computes_what_encoder_decoder_model_computes(attention_type):
    """An EncoderDecoderModel of two SharedBerts and the seq2seq class with its weights agree: logits and tokens."""
    encoder = SharedBertModel(tiny_config(attention_type=attention_type))
    decoder_config = tiny_config(attention_type=attention_type, is_decoder=True, add_cross_attention=True)
    from sharedbert import SharedBertLMHeadModel

    reference = EncoderDecoderModel(encoder=encoder, decoder=SharedBertLMHeadModel(decoder_config)).eval()
    perturb(reference)
    reference.config.decoder_start_token_id = reference.generation_config.decoder_start_token_id = 2
    reference.config.pad_token_id = reference.generation_config.pad_token_id = 0
    model = encoder_decoder_to_seq2seq(reference)
    inputs, labels = batch(), torch.randint(5, 99, (3, 6))
    with torch.no_grad():
        expected, got = reference(**inputs, labels=labels), model(**inputs, labels=labels)
    assert (expected.logits - got.logits).abs().max() <= 1e-5
    assert abs(expected.loss - got.loss) <= 1e-5
    for beams in (1, 3):
        expected = reference.generate(**inputs, max_new_tokens=6, num_beams=beams, do_sample=False)
        assert torch.equal(model.generate(**inputs, max_new_tokens=6, num_beams=beams, do_sample=False), expected)


def test_bert2bert_converts_exactly_into_the_seq2seq_class():
    from transformers import BertLMHeadModel, BertModel

    config = BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    decoder_config = BertConfig(**{**config.to_dict(), "is_decoder": True, "add_cross_attention": True})
    bert2bert = EncoderDecoderModel(encoder=BertModel(config), decoder=BertLMHeadModel(decoder_config)).eval()
    perturb(bert2bert, 0.02)
    bert2bert.config.decoder_start_token_id = bert2bert.generation_config.decoder_start_token_id = 2
    bert2bert.config.pad_token_id = bert2bert.generation_config.pad_token_id = 0
    model = encoder_decoder_to_seq2seq(bert2bert, attention_type="standard")
    inputs = batch()
    with torch.no_grad():
        assert (bert2bert(**inputs, decoder_input_ids=inputs["input_ids"]).logits
                - model(**inputs, decoder_input_ids=inputs["input_ids"]).logits).abs().max() <= 1e-5  # fmt: skip
    for beams in (1, 3):
        expected = bert2bert.generate(**inputs, max_new_tokens=6, num_beams=beams, do_sample=False)
        assert torch.equal(model.generate(**inputs, max_new_tokens=6, num_beams=beams, do_sample=False), expected)
    # Shared self-attention beside BERT's own cross-attention: the cross-attention weights carry over exactly.
    mixed = encoder_decoder_to_seq2seq(bert2bert, attention_type="shared", cross_attention_type="standard")
    assert mixed.config.cross_attention_type == "standard"
    for depth, layer in enumerate(bert2bert.decoder.bert.encoder.layer):
        for name in ("query", "key", "value"):
            assert torch.equal(getattr(mixed.decoder.crossattention[depth].self, name).weight,
                               getattr(layer.crossattention.self, name).weight)


# --- generation and the cache ---------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_cached_generation_equals_uncached(attention_type, variant):
    model = seq2seq(attention_type, **VARIANTS[variant])
    inputs = batch()
    runs = {
        use_cache: model.generate(
            **inputs, max_new_tokens=8, do_sample=False, use_cache=use_cache, return_dict_in_generate=True,
            output_logits=True,
        )  # fmt: skip
        for use_cache in (True, False)
    }
    assert torch.equal(runs[True].sequences, runs[False].sequences)
    for cached, uncached in zip(runs[True].logits, runs[False].logits, strict=True):
        assert (cached - uncached).abs().max() <= 1e-4
    assert (runs[True].logits[0][0] - runs[True].logits[0][1]).abs().max() > 1e-3  # the source matters
    beams = [
        model.generate(**inputs, max_new_tokens=5, num_beams=3, do_sample=False, use_cache=use_cache)
        for use_cache in (True, False)
    ]
    assert torch.equal(*beams)


def test_decoder_is_causal_and_the_source_mask_is_applied():
    model = seq2seq(**FULLY_SHARED)
    inputs, targets = batch(), torch.randint(5, 99, (3, 6))
    with torch.no_grad():
        base = model(**inputs, decoder_input_ids=targets).logits
        edited = targets.clone()
        edited[:, 4] = (edited[:, 4] + 1) % 99
        changed = model(**inputs, decoder_input_ids=edited).logits
        assert (changed[:, :4] - base[:, :4]).abs().max() <= 1e-5 and (changed[:, 4:] - base[:, 4:]).abs().max() > 1e-4
        source = inputs["input_ids"].clone()
        source[-1, 4:] = (source[-1, 4:] + 7) % 99  # padded positions of the last row
        masked = model(input_ids=source, attention_mask=inputs["attention_mask"], decoder_input_ids=targets).logits
        assert (masked - base).abs().max() <= 1e-5


# --- what sharing shares --------------------------------------------------------------------------------------


def _count(module):
    return sum(parameter.numel() for parameter in module.parameters())


def test_fully_shared_model_counts_each_part_once():
    config = tiny_config(is_encoder_decoder=True, **FULLY_SHARED)
    model = SharedBertForConditionalGeneration(config)
    assert model.decoder.attention is None and model.decoder.feed_forward is None and model.decoder_embeddings is None
    # Expected from the parts: one encoder stack with embeddings, the decoder's cross-attention sets, the LM head
    # without its weight matrix (tied to the word embeddings).
    encoder = _count(SharedBertModel(config, add_pooling_layer=False))
    cross = len(set(config.attention_layer_map)) * _count(SharedBertAttention(config, is_cross_attention=True))
    head = SharedBertOnlyMLMHead(config)
    head_without_matrix = _count(head) - head.predictions.decoder.weight.numel()
    assert _count(model) == encoder + cross + head_without_matrix
    unshared = SharedBertForConditionalGeneration(tiny_config(is_encoder_decoder=True))
    assert _count(unshared) == _count(model) + _count(SharedBertModel(config, add_pooling_layer=False).encoder) + (
        _count(SharedBertModel(config).embeddings)
    )


def test_cross_attention_type_changes_only_the_cross_attention_parameters():
    def built(cross_type):
        config = tiny_config(is_encoder_decoder=True, cross_attention_type=cross_type, **FULLY_SHARED)
        return config, SharedBertForConditionalGeneration(config)

    _, shared = built("shared")
    config, mixed = built("standard")
    _, shared_kv = built("shared_kv")
    assert type(mixed.decoder.crossattention[0].self).__name__ == "StandardAttention"
    assert type(shared_kv.decoder.crossattention[0].self).__name__ == "SharedKeyValueAttention"
    assert type(mixed.sharedbert.encoder.attention[0].self).__name__ == "SharedProjectionAttention"
    d, sets = config.hidden_size, len(set(config.attention_layer_map))
    # Standard: Wq, Wk, Wv and three biases; shared: Ws, b and dq, dk, dv; shared_kv: Wq, Ws, two biases, dk, dv.
    assert _count(mixed) - _count(shared) == sets * ((3 * d * d + 3 * d) - (d * d + 4 * d))
    assert _count(mixed) - _count(shared_kv) == sets * ((3 * d * d + 3 * d) - (2 * d * d + 4 * d))


MINILM_DIMS = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                   intermediate_size=1536)


def _minilm_bert2bert_parameters() -> int:
    """BERT2BERT at all-MiniLM-L6-v2's sizes, counted on the meta device (the encoder without its pooler)."""
    from transformers import BertLMHeadModel, BertModel

    with torch.device("meta"):
        return _count(BertModel(BertConfig(**MINILM_DIMS), add_pooling_layer=False)) + _count(
            BertLMHeadModel(BertConfig(**MINILM_DIMS, is_decoder=True, add_cross_attention=True)))


def _minilm_seq2seq_parameters(**config) -> int:
    """A SharedBert seq2seq model at all-MiniLM-L6-v2's sizes with `config`, counted on the meta device."""
    with torch.device("meta"):
        return _count(SharedBertForConditionalGeneration(
            tiny_config(**MINILM_DIMS, max_position_embeddings=512, is_encoder_decoder=True, **config)))


def test_parameters_at_minilm_dims_against_bert2bert():
    """At all-MiniLM-L6-v2's sizes the fully shared model with the default cross-attention (standard) has at most
    52% of BERT2BERT's parameters; shared_kv cross-attention is smaller, shared smaller still."""
    default, shared, shared_kv = (_minilm_seq2seq_parameters(**FULLY_SHARED, **extra) for extra in (
        {}, {"cross_attention_type": "shared"}, {"cross_attention_type": "shared_kv"}))
    assert shared < shared_kv < default
    assert default / _minilm_bert2bert_parameters() <= 0.52, default


# docs/generation.md's parameter table: each row's label and the seq2seq config it describes (None: BERT2BERT).
GUIDE_PARAMETER_ROWS = {
    "BERT2BERT (transformers' `EncoderDecoderModel`)": None,
    "SharedBert seq2seq, standard attention, nothing shared": {"attention_type": "standard"},
    "fully shared, standard attention (BERTShare)": {"attention_type": "standard", **FULLY_SHARED},
    "fully shared, shared attention, `shared_kv` cross-attention": {
        **FULLY_SHARED, "cross_attention_type": "shared_kv"},
    "shared attention, nothing shared, `standard` cross-attention (the default)": {},
    "shared attention, nothing shared, `shared_kv` cross-attention": {"cross_attention_type": "shared_kv"},
    "fully shared, shared attention, `shared` cross-attention": {**FULLY_SHARED, "cross_attention_type": "shared"},
    "fully shared, shared attention, `standard` cross-attention (the default)": FULLY_SHARED,
}


def test_the_generation_guides_parameter_table_is_what_the_models_count():
    import re

    from conftest import REPO_ROOT

    guide = (REPO_ROOT / "docs" / "generation.md").read_text(encoding="utf-8")
    table = guide[guide.index("## Parameters"):]
    rows = {label: (int(count.replace(",", "")), float(ratio)) for label, count, ratio in
            re.findall(r"^\| (.+?) \| ([\d,]+) \| ([\d.]+) \|$", table, re.MULTILINE)}
    assert set(rows) == set(GUIDE_PARAMETER_ROWS)
    bert2bert = _minilm_bert2bert_parameters()
    for label, config in GUIDE_PARAMETER_ROWS.items():
        counted = bert2bert if config is None else _minilm_seq2seq_parameters(**config)
        assert rows[label] == (counted, round(counted / bert2bert, 3)), label


def test_one_step_trains_the_shared_weights_from_both_sides():
    model = seq2seq("shared", **FULLY_SHARED)
    model.train()
    inputs, labels = batch(), torch.randint(5, 99, (3, 6))
    shared_weight = model.sharedbert.encoder.attention[0].self.shared_proj.weight
    embedding = model.sharedbert.embeddings.word_embeddings.weight

    def gradients(detach_encoder: bool):
        model.zero_grad()
        encoder_outputs = model.get_encoder()(**inputs)
        if detach_encoder:  # the decoder's use of the shared weights only
            encoder_outputs.last_hidden_state = encoder_outputs.last_hidden_state.detach()
        model(attention_mask=inputs["attention_mask"], encoder_outputs=encoder_outputs, labels=labels).loss.backward()
        return shared_weight.grad.clone(), embedding.grad.clone()

    decoder_only = gradients(detach_encoder=True)
    total = gradients(detach_encoder=False)
    for both, decoder_part in zip(total, decoder_only):
        assert decoder_part.abs().sum() > 0  # the decoder's use reaches the shared tensor
        assert (both - decoder_part).abs().sum() > 0  # and so does the encoder's
    before = shared_weight.detach().clone()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    assert not torch.equal(before, shared_weight)
    # One tensor: the decoder's self-attention at depth 0 is the moved one.
    assert model.get_decoder_input_embeddings().word_embeddings.weight is embedding
    assert model.cls.predictions.decoder.weight is embedding


@pytest.mark.parametrize("variant", ["nothing", "all"])
def test_save_load_is_bit_exact_and_stores_each_shared_tensor_once(tmp_path, variant):
    model = seq2seq(**VARIANTS[variant])
    model.save_pretrained(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as saved:
        keys = set(saved.keys())
    assert "cls.predictions.decoder.weight" not in keys  # tied: stored once, as the word embeddings
    shares = variant == "all"
    assert any(key.startswith("decoder.attention.") for key in keys) is not shares
    assert any(key.startswith("decoder_embeddings.") for key in keys) is not shares
    stored = 0
    with safe_open(tmp_path / "model.safetensors", "pt") as saved:
        for key in keys:
            stored += saved.get_tensor(key).numel()
    assert stored == _count(model)  # every distinct parameter once, nothing twice
    for loader in (SharedBertForConditionalGeneration, AutoModelForSeq2SeqLM):
        reloaded = loader.from_pretrained(tmp_path).eval()
        assert type(reloaded) is SharedBertForConditionalGeneration
        for key, value in model.state_dict().items():
            assert torch.equal(value, reloaded.state_dict()[key]), key
        inputs = batch()
        assert torch.equal(
            reloaded.generate(**inputs, max_new_tokens=5, do_sample=False),
            model.generate(**inputs, max_new_tokens=5, do_sample=False),
        )


# --- bad configurations and inputs ------------------------------------------------------------------------------


def test_three_way_tying_refuses_two_vocabularies_and_separate_vocabularies_work():
    with pytest.raises(INVALID_CONFIG, match="decoder_vocab_size.*use one tokenizer"):
        tiny_config(is_encoder_decoder=True, share_encoder_decoder_embeddings=True, decoder_vocab_size=50)
    model = seq2seq(decoder_vocab_size=50)
    assert model.cls.predictions.decoder.weight is model.decoder_embeddings.word_embeddings.weight
    assert model.decoder_embeddings.word_embeddings.num_embeddings == 50
    assert model.generate(**batch(), max_new_tokens=4, do_sample=False).max() < 50
    with pytest.raises(IndexError):  # an id beyond the target vocabulary: the embedding lookup refuses it
        model(**batch(), decoder_input_ids=torch.tensor([[60]] * 3))


def test_resizing_follows_the_one_vocabulary_or_is_refused_for_two():
    shared = seq2seq(**FULLY_SHARED)
    shared.resize_token_embeddings(120)
    assert shared.config.vocab_size == shared.config.target_vocab_size == 120
    assert shared.cls.predictions.decoder.weight is shared.sharedbert.embeddings.word_embeddings.weight
    assert shared.config.get_text_config(decoder=True).vocab_size == 120
    assert shared.generate(**batch(), max_new_tokens=3, do_sample=False).shape == (3, 4)
    with pytest.raises(NotImplementedError, match="separate source and target embeddings"):
        seq2seq().resize_token_embeddings(120)


def test_seq2seq_needs_its_config_and_a_start_token():
    with pytest.raises(ValueError, match="is_encoder_decoder=True"):
        SharedBertForConditionalGeneration(tiny_config())
    with pytest.raises(INVALID_CONFIG, match="is_encoder_decoder"):
        tiny_config(share_encoder_decoder_layers=True)
    model = SharedBertForConditionalGeneration(tiny_config(is_encoder_decoder=True))
    with pytest.raises(ValueError, match="decoder_start_token_id"):
        model(**batch(), labels=torch.randint(5, 99, (3, 4)))


def test_scale_embedding_multiplies_word_embeddings_by_root_d():
    plain, scaled = (seq2seq(scale_embedding=flag) for flag in (False, True))
    scaled.load_state_dict(plain.state_dict())
    ids = torch.randint(5, 99, (2, 4))
    embeddings = plain.sharedbert.embeddings
    positions = embeddings.position_embeddings.weight[:4] + embeddings.token_type_embeddings.weight[0]
    words = embeddings.word_embeddings(ids)
    expected = embeddings.LayerNorm(words * 32**0.5 + positions)
    with torch.no_grad():
        assert torch.allclose(scaled.sharedbert.embeddings(ids), expected, atol=1e-6)
        assert torch.allclose(plain.sharedbert.embeddings(ids), embeddings.LayerNorm(words + positions), atol=1e-6)


# --- warm start (Rothe et al.) -------------------------------------------------------------------------------------


@pytest.mark.parametrize("share", [False, True], ids=["bert2bert", "bertshare"])
def test_warm_start_from_one_bert_checkpoint_fills_both_sides(tmp_path, share):
    bert = random_bert_mlm(tmp_path)
    vocab = VOCAB
    model = warm_start_seq2seq(
        tmp_path, tokenizer=SharedBertTokenizer(vocab=vocab), attention_type="standard",
        share_encoder_decoder_layers=share, share_encoder_decoder_embeddings=share,
    )  # fmt: skip
    assert (model.config.decoder_start_token_id, model.config.eos_token_id, model.config.pad_token_id) == (2, 3, 0)
    assert model.generation_config.decoder_start_token_id == 2
    reference = from_bert(bert, attention_type="standard")
    ours, theirs = model.state_dict(), reference.state_dict()
    decoder_side = "sharedbert.encoder." if share else "decoder."
    bert_key = theirs["sharedbert.encoder.attention.1.self.key.weight"]
    assert torch.equal(ours["sharedbert.encoder.attention.1.self.key.weight"], bert_key)
    assert torch.equal(ours[f"{decoder_side}attention.1.self.key.weight"], bert_key)
    assert torch.equal(ours["cls.predictions.dense.weight"], theirs["cls.predictions.dense.weight"])
    # The encoder is BERT's: its states match the original's.
    inputs = batch()
    with torch.no_grad():
        expected = bert.bert(**inputs).last_hidden_state
        assert (model.get_encoder()(**inputs).last_hidden_state - expected).abs().max() <= 1e-5
    model.generate(**inputs, max_new_tokens=3, do_sample=False)


def test_warm_start_from_a_sharedbert_checkpoint(tmp_path):
    config = tiny_config(attention_type="pairwise", layer_sharing="attention", num_unique_layers=2)
    source = SharedBertForMaskedLM(config)
    perturb(source)
    source.save_pretrained(tmp_path)
    model = warm_start_seq2seq(tmp_path, decoder_start_token_id=2, **FULLY_SHARED)
    assert model.config.attention_type == "pairwise" and model.config.share_encoder_decoder_layers
    for key, value in source.state_dict().items():
        if key.startswith("sharedbert."):
            assert torch.equal(model.state_dict()[key], value), key
    with pytest.raises(ValueError, match="missing|fit"):
        warm_start_seq2seq(tmp_path, decoder_start_token_id=2, attention_type="shared")
    # Cross-attention starts untrained either way, so its type is a seq2seq choice a SharedBert checkpoint allows.
    standard_cross = warm_start_seq2seq(tmp_path, decoder_start_token_id=2, cross_attention_type="standard",
                                        **FULLY_SHARED)
    assert standard_cross.config.cross_attention_type == "standard"
    assert type(standard_cross.decoder.crossattention[0].self).__name__ == "StandardAttention"
    for key, value in model.state_dict().items():
        if ".crossattention." not in key:
            assert torch.equal(standard_cross.state_dict()[key], value), key


# --- remote code, Trainer, PEFT ---------------------------------------------------------------------------------

REMOTE_CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    import transformers
    folder, out = sys.argv[1], sys.argv[2]
    batch = {k: torch.tensor(v) for k, v in json.load(open(folder + "/inputs.json")).items()}
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    tokens = model.generate(**batch, max_new_tokens=5, do_sample=False)
    json.dump([type(model).__name__, tokens.tolist()], open(out, "w"))
    """
)


@pytest.mark.slow
def test_remote_code_loads_and_generates_without_the_package(tmp_path):
    from sharedbert.hub import run_isolated

    model = seq2seq(**FULLY_SHARED)
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["auto_map"]["AutoModelForSeq2SeqLM"].endswith(
        "SharedBertForConditionalGeneration"
    )
    inputs = batch()
    (folder / "inputs.json").write_text(json.dumps({k: v.tolist() for k, v in inputs.items()}))
    (tmp_path / "child.py").write_text(REMOTE_CHILD)
    result = run_isolated(tmp_path / "child.py", [folder, tmp_path / "out.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    name, tokens = json.loads((tmp_path / "out.json").read_text())
    assert name == "SharedBertForConditionalGeneration"
    assert tokens == model.generate(**inputs, max_new_tokens=5, do_sample=False).tolist()


def test_seq2seq_trainer_trains_and_predicts_with_generate(tmp_path):
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

    vocab = VOCAB
    tokenizer = SharedBertTokenizer(vocab=vocab)
    model = seq2seq(**FULLY_SHARED)
    model.config.pad_token_id = model.generation_config.pad_token_id = 0
    # A copy task: the target is the source.
    rows = [[int(t) for t in torch.randint(5, 99, (int(n),))] for n in torch.randint(3, 8, (24,))]
    data = [{"input_ids": [2, *r, 3], "labels": [*r, 3]} for r in rows]
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=8, per_device_eval_batch_size=8, num_train_epochs=2,
        learning_rate=1e-3, predict_with_generate=True, generation_max_length=10, report_to=[], save_strategy="no",
        use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    trainer = Seq2SeqTrainer(
        model=model, args=args, train_dataset=data, eval_dataset=data[:8], processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
    )  # fmt: skip
    before = model.sharedbert.encoder.attention[0].self.shared_proj.weight.detach().clone()
    trainer.train()
    assert not torch.equal(before, model.sharedbert.encoder.attention[0].self.shared_proj.weight)
    prediction = trainer.predict(data[:8])
    generated = torch.as_tensor(prediction.predictions)
    assert generated.shape[0] == 8 and (generated[:, 0] == 2).all()  # each starts with decoder_start_token_id
    # generation_max_length=10 was honoured (the Trainer pads to the generation config's max_length with pad id 0).
    assert (generated[:, 10:] == 0).all() and (generated[:, 1:10] != 0).any()
    assert "test_loss" in prediction.metrics


def test_peft_lora_wraps_each_shared_module_once_and_generates():
    from peft import LoraConfig, get_peft_model

    model = seq2seq(**FULLY_SHARED)
    inputs = batch()
    expected = model.generate(**inputs, max_new_tokens=5, do_sample=False)
    lora = get_peft_model(model, LoraConfig(task_type="SEQ_2_SEQ_LM", r=4, target_modules=[
        "shared_proj", "query", "key", "value", "dense", "intermediate"]))

    def wrapped(suffix, within=""):
        return [name for name, module in lora.named_modules()
                if within in name and name.endswith(suffix) and hasattr(module, "lora_A")]

    # Self-attention's projection once per set (stored once, used by both stacks); the decoder's own (standard)
    # cross-attention projections once per layer.
    assert len(wrapped("shared_proj")) == model.config.num_hidden_layers
    assert all(len(wrapped(f".self.{name}", within="crossattention.")) == model.config.num_hidden_layers
               for name in ("query", "key", "value"))
    # LoRA starts as the identity (B = 0): generation is unchanged.
    assert torch.equal(lora.generate(**inputs, max_new_tokens=5, do_sample=False), expected)
    lora.train()
    loss = lora(**inputs, labels=torch.randint(5, 99, (3, 5))).loss
    loss.backward()
    trainable = [p for p in lora.parameters() if p.requires_grad]
    assert trainable and all(p.grad is not None for p in trainable if p.dim() == 2)


def test_folding_serves_the_seq2seq_model():
    model = seq2seq(**FULLY_SHARED)
    inputs = batch()
    tokens = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    with torch.no_grad():
        expected = model(**inputs, decoder_input_ids=inputs["input_ids"]).logits
    folded = fold_for_inference(model)
    assert is_folded(folded)
    with torch.no_grad():
        assert (folded(**inputs, decoder_input_ids=inputs["input_ids"]).logits - expected).abs().max() <= 1e-5
    assert torch.equal(folded.generate(**inputs, max_new_tokens=6, do_sample=False), tokens)


@pytest.mark.slow
def test_bert2bert_from_minilm_matches_transformers_on_real_text(minilm_path):
    """The study's starting point: transformers' own BERT2BERT from all-MiniLM-L6-v2 and the same model as a
    standard-attention SharedBert seq2seq give the same logits and tokens on real sentences; the shared warm start
    from the same checkpoint builds and generates."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    bert2bert = EncoderDecoderModel.from_encoder_decoder_pretrained(minilm_path, minilm_path).eval()
    for config in (bert2bert.config, bert2bert.generation_config):
        config.decoder_start_token_id, config.pad_token_id = tokenizer.cls_token_id, tokenizer.pad_token_id
        config.eos_token_id = tokenizer.sep_token_id
    sentences = ["Weight sharing makes the model smaller.", "A paraphrase says the same thing in other words."]
    inputs = tokenizer(sentences, padding=True, return_tensors="pt")
    inputs.pop("token_type_ids")
    model = encoder_decoder_to_seq2seq(bert2bert, attention_type="standard")
    with torch.no_grad():
        targets = inputs["input_ids"][:, :6]
        expected = bert2bert(**inputs, decoder_input_ids=targets).logits
        assert (model(**inputs, decoder_input_ids=targets).logits - expected).abs().max() <= 1e-5
    expected = bert2bert.generate(**inputs, max_new_tokens=8, num_beams=2, do_sample=False)
    assert torch.equal(model.generate(**inputs, max_new_tokens=8, num_beams=2, do_sample=False), expected)
    shared = warm_start_seq2seq(minilm_path, tokenizer=tokenizer, attention_type="shared", **FULLY_SHARED)
    assert _count(shared) / _count(bert2bert) <= 0.55
    tokens = shared.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert (tokens[:, 0] == tokenizer.cls_token_id).all()


def test_automodel_of_a_seq2seq_checkpoint_is_its_encoder(tmp_path):
    """AutoModel on a seq2seq folder gives the encoder with the seq2seq model's encoder weights (the decoder side
    stays behind, as T5EncoderModel does)."""
    from transformers import AutoModel

    config = tiny_config(is_encoder_decoder=True)
    seq2seq = SharedBertForConditionalGeneration(config).eval()
    seq2seq.save_pretrained(tmp_path / "seq2seq")
    encoder = AutoModel.from_pretrained(tmp_path / "seq2seq").eval()
    assert type(encoder).__name__ == "SharedBertModel"
    ids = torch.randint(5, config.vocab_size, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(encoder(input_ids=ids).last_hidden_state,
                                   seq2seq.get_encoder()(input_ids=ids).last_hidden_state, rtol=0, atol=0)
