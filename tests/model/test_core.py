"""The model core: config validation, sharing maps, save/load, tied embeddings, attention backends, checkpointing,
conversion from BERT, remote code and parameter accounting."""

import json
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import INVALID_CONFIG, tiny_config
from safetensors import safe_open
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, BertConfig

import sharedbert
from sharedbert import (
    ATTENTION_TYPES,
    SharedBertConfig,
    SharedBertForMaskedLM,
    SharedBertForPreTraining,
    SharedBertForQuestionAnswering,
    SharedBertForSequenceClassification,
    SharedBertLMHeadModel,
    SharedBertModel,
)
from sharedbert.configuration_sharedbert import AUTO_MAP
from sharedbert.conversion.bert import fit_attention, from_bert

SHARING = [("none", None), ("all", 1), ("all", 2), ("attention", 1), ("ffn", 2)]


def inputs(batch=3, seq=9, vocab=99, pad_last=True):
    input_ids = torch.randint(1, vocab, (batch, seq))
    attention_mask = torch.ones(batch, seq, dtype=torch.long)
    if pad_last:
        attention_mask[-1, seq // 2 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


# --- config -------------------------------------------------------------------------------------------------------


# Invalid values and misspelled fields in general are property-tested in test_properties.py; these are the
# decoder and sequence-to-sequence combinations.
@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"add_cross_attention": True}, "is_decoder"),
        ({"is_encoder_decoder": True, "is_decoder": True}, "is_encoder_decoder"),
        ({"share_encoder_decoder_layers": True}, "is_encoder_decoder"),
        ({"is_encoder_decoder": True, "share_encoder_decoder_embeddings": True, "decoder_vocab_size": 50},
         "decoder_vocab_size"),
    ],
)
def test_invalid_decoder_settings_name_the_field(overrides, field):
    with pytest.raises(INVALID_CONFIG, match=field):
        tiny_config(**overrides)


def test_unknown_attention_type_error_lists_allowed_values():
    with pytest.raises(INVALID_CONFIG) as error:
        tiny_config(attention_type="linear")
    for allowed in ATTENTION_TYPES:
        assert allowed in str(error.value)


@pytest.mark.parametrize("field, value", [("attention_type", "linear"), ("sharing_order", "random"),
                                          ("layer_norm_position", "middle"), ("num_unique_layers", 0),
                                          ("attention_rank", -1), ("decoder_vocab_size", 2.5)])
def test_a_choice_or_size_is_refused_as_it_is_set_not_only_when_a_model_is_built(field, value):
    """The choice fields are Literals and the optional sizes transformers' positive_int_field: strict validation
    checks them on every assignment, as it checks the types."""
    config = tiny_config()
    with pytest.raises(INVALID_CONFIG, match=field):
        setattr(config, field, value)


@pytest.mark.parametrize(
    "order, expected",
    [
        ("sequence", [0, 0, 1, 1, 2, 2]),
        ("cycle", [0, 1, 2, 0, 1, 2]),
        ("cycle_rev", [0, 1, 2, 2, 1, 0]),
    ],
)
def test_sharing_orders_follow_takase_and_kiyono(order, expected):
    config = tiny_config(num_hidden_layers=6, layer_sharing="all", num_unique_layers=3, sharing_order=order)
    assert config.attention_layer_map == expected
    assert config.ffn_layer_map == expected


def test_partial_sharing_shares_only_the_named_sublayer():
    config = tiny_config(num_hidden_layers=4, layer_sharing="attention", num_unique_layers=1)
    assert config.attention_layer_map == [0, 0, 0, 0]
    assert config.ffn_layer_map == [0, 1, 2, 3]
    model = SharedBertModel(config)
    assert len(model.encoder.attention) == 1 and len(model.encoder.feed_forward) == 4


# --- sharing, save/load -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
@pytest.mark.parametrize("layer_sharing, unique", SHARING)
def test_save_load_round_trip_is_bit_exact(tmp_path, attention_type, layer_sharing, unique):
    config = tiny_config(attention_type=attention_type, layer_sharing=layer_sharing, num_unique_layers=unique)
    model = SharedBertForMaskedLM(config).eval()
    # Make every parameter distinctive (the ones-initialised scales and identity bilinears included).
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.01)
    model.save_pretrained(tmp_path)
    reloaded = SharedBertForMaskedLM.from_pretrained(tmp_path).eval()
    for (name, a), (_, b) in zip(model.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name
    for field in SharedBertConfig.__dataclass_fields__:
        if field not in ("architectures", "dtype", "transformers_version"):
            assert getattr(reloaded.config, field) == getattr(config, field), field
    batch = inputs()
    with torch.no_grad():
        assert torch.equal(model(**batch).logits, reloaded(**batch).logits)


def test_safetensors_holds_each_shared_tensor_once(tmp_path):
    sizes = {}
    for layer_sharing, unique in [("none", None), ("all", 1)]:
        config = tiny_config(hidden_size=64, intermediate_size=256, layer_sharing=layer_sharing, num_unique_layers=unique)
        model = SharedBertModel(config)
        folder = tmp_path / layer_sharing
        model.save_pretrained(folder)
        with safe_open(folder / "model.safetensors", "pt") as handle:
            keys = list(handle.keys())
            stored = sum(handle.get_tensor(k).numel() for k in keys)
        assert stored == sum(p.numel() for p in model.parameters())
        assert sorted(keys) == sorted(model.state_dict())
        assert {k.split(".")[2] for k in keys if k.startswith("encoder.attention.")} == (
            {"0", "1", "2", "3"} if layer_sharing == "none" else {"0"}
        )
        sizes[layer_sharing] = ((folder / "model.safetensors").stat().st_size, stored)
    (bytes_none, params_none), (bytes_all, params_all) = sizes["none"], sizes["all"]
    assert params_all < params_none
    assert abs(bytes_all / bytes_none - params_all / params_none) < 0.01


def test_hidden_states_and_attentions_have_one_entry_per_layer_application():
    config = tiny_config(num_hidden_layers=4, layer_sharing="all", num_unique_layers=1, attn_implementation="eager")
    model = SharedBertModel(config).eval()
    with torch.no_grad():
        output = model(**inputs(), output_hidden_states=True, output_attentions=True)
    assert len(output.hidden_states) == 5
    assert len(output.attentions) == 4
    assert torch.equal(output.hidden_states[-1], output.last_hidden_state)
    # The same weights at every depth still give different states at every depth.
    assert not torch.allclose(output.hidden_states[1], output.hidden_states[2])


# --- tied embeddings ----------------------------------------------------------------------------------------------


def test_tied_decoder_survives_save_load_and_resize(tmp_path):
    model = SharedBertForMaskedLM(tiny_config())
    decoder, embeddings = model.get_output_embeddings(), model.get_input_embeddings()
    assert decoder.weight is embeddings.weight
    model.save_pretrained(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as handle:
        assert "cls.predictions.decoder.weight" not in set(handle.keys())
    reloaded = SharedBertForMaskedLM.from_pretrained(tmp_path)
    assert reloaded.get_output_embeddings().weight is reloaded.get_input_embeddings().weight
    reloaded.resize_token_embeddings(120)
    assert reloaded.get_input_embeddings().weight.shape == (120, 32)
    assert reloaded.get_output_embeddings().weight is reloaded.get_input_embeddings().weight
    assert reloaded.get_output_embeddings().bias.shape == (120,)
    assert reloaded.config.vocab_size == 120
    with torch.no_grad():
        assert reloaded(torch.tensor([[119, 5, 7]])).logits.shape == (1, 3, 120)


def test_untied_decoder_is_its_own_tensor(tmp_path):
    model = SharedBertForMaskedLM(tiny_config(tie_word_embeddings=False))
    assert model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()
    model.save_pretrained(tmp_path)
    reloaded = SharedBertForMaskedLM.from_pretrained(tmp_path)
    assert torch.equal(reloaded.get_output_embeddings().weight, model.get_output_embeddings().weight)


# --- backends and training -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_sparse_prediction_gives_the_dense_loss_and_gradients(attention_type):
    torch.manual_seed(0)
    dense = SharedBertForMaskedLM(tiny_config(attention_type=attention_type)).train()
    sparse = SharedBertForMaskedLM(tiny_config(attention_type=attention_type, sparse_prediction=True)).train()
    sparse.load_state_dict(dense.state_dict())
    batch = inputs()
    labels = torch.full_like(batch["input_ids"], -100)
    labelled = torch.rand(labels.shape) < 0.3
    labelled[0, 0] = True
    labels[labelled] = batch["input_ids"][labelled]
    dense_out, sparse_out = dense(**batch, labels=labels), sparse(**batch, labels=labels)
    assert sparse_out.logits.shape == (int(labelled.sum()), 99)  # one row per labelled token
    torch.testing.assert_close(sparse_out.logits, dense_out.logits[labelled], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sparse_out.loss, dense_out.loss, rtol=1e-5, atol=1e-5)
    dense_out.loss.backward()
    sparse_out.loss.backward()
    for (name, a), (_, b) in zip(dense.named_parameters(), sparse.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-6, msg=name)


def test_pretraining_head_predicts_sparsely_too():
    torch.manual_seed(0)
    dense = SharedBertForPreTraining(tiny_config()).train()
    sparse = SharedBertForPreTraining(tiny_config(sparse_prediction=True)).train()
    sparse.load_state_dict(dense.state_dict())
    batch = inputs()
    labels = batch["input_ids"].masked_fill(torch.rand(batch["input_ids"].shape) < 0.7, -100)
    labels[0, 0] = batch["input_ids"][0, 0]
    next_sentence = torch.tensor([0, 1, 0])
    dense_out = dense(**batch, labels=labels, next_sentence_label=next_sentence)
    sparse_out = sparse(**batch, labels=labels, next_sentence_label=next_sentence)
    assert sparse_out.prediction_logits.shape == (int((labels != -100).sum()), 99)
    torch.testing.assert_close(sparse_out.loss, dense_out.loss, rtol=1e-5, atol=1e-5)


def test_sparse_prediction_leaves_inference_dense():
    model = SharedBertForMaskedLM(tiny_config(sparse_prediction=True))
    batch = inputs()
    labels = batch["input_ids"].masked_fill(torch.rand(batch["input_ids"].shape) < 0.5, -100)
    model.eval()
    assert model(**batch, labels=labels).logits.shape == (3, 9, 99)  # evaluation scores every position
    model.train()
    assert model(**batch).logits.shape == (3, 9, 99)  # no labels: nothing to be sparse about


@pytest.mark.parametrize("attention_type", ATTENTION_TYPES)
def test_eager_and_sdpa_agree(attention_type):
    torch.manual_seed(0)
    eager = SharedBertModel(tiny_config(attention_type=attention_type, attn_implementation="eager")).eval()
    sdpa = SharedBertModel(tiny_config(attention_type=attention_type, attn_implementation="sdpa")).eval()
    sdpa.load_state_dict(eager.state_dict())
    assert sdpa.config._attn_implementation == "sdpa"
    batch = inputs()
    with torch.no_grad():
        a, b = eager(**batch).last_hidden_state, sdpa(**batch).last_hidden_state
    mask = batch["attention_mask"].bool()
    assert (a - b)[mask].abs().max() < 1e-5


@pytest.mark.parametrize("attention_type", ["shared", "pairwise"])
def test_gradient_checkpointing_gives_the_same_gradients_and_trains(attention_type):
    config = tiny_config(attention_type=attention_type, layer_sharing="attention", num_unique_layers=2)
    model = SharedBertForSequenceClassification(config).train()
    batch = dict(inputs(batch=8), labels=torch.randint(0, 2, (8,)))
    model(**batch).loss.backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.activation_checkpointing_enable()
    assert model.is_activation_checkpointing
    model(**batch).loss.backward()
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(parameter.grad, reference[name], rtol=1e-4, atol=1e-6, msg=name)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(25):
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # It trains (Adam at lr 5e-3 may spike once the loss is near zero, so the best step is what is compared).
    assert min(losses) < 0.5 * losses[0]


# --- conversion from BERT ------------------------------------------------------------------------------------------


def _random_bert(model_class_name="BertModel", **overrides):
    import transformers

    config = BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **overrides,
    )
    return getattr(transformers, model_class_name)(config).eval()


@pytest.mark.parametrize(
    "bert_class, field",
    [("BertModel", "last_hidden_state"), ("BertForMaskedLM", "logits"), ("BertForSequenceClassification", "logits"),
     ("BertForQuestionAnswering", "start_logits"), ("BertForTokenClassification", "logits")],
)
def test_standard_conversion_of_random_bert_is_exact(tmp_path, bert_class, field):
    bert = _random_bert(bert_class)
    with torch.no_grad():  # move every weight away from its initial value so nothing matches by accident
        for parameter in bert.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.02)
    bert.save_pretrained(tmp_path)
    converted = from_bert(tmp_path, attention_type="standard")
    assert type(converted).__name__ == bert_class.replace("Bert", "SharedBert", 1)
    batch = dict(inputs(), token_type_ids=torch.randint(0, 2, (3, 9)))
    with torch.no_grad():
        expected, got = getattr(bert(**batch), field), getattr(converted(**batch), field)
    assert (expected - got).abs().max() <= 1e-5


@pytest.mark.slow
def test_standard_conversion_of_minilm_matches_bert_on_real_text(minilm_path, mlm_text_dir):
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    bert = BertModel.from_pretrained(minilm_path).eval()
    converted = from_bert(minilm_path, attention_type="standard")
    text = mlm_text_dir / "wikitext-2-raw" / "wiki.test.raw"
    if not text.is_file():
        pytest.skip(f"WikiText-2 test split not found at {text}")
    sentences = [line.strip() for line in text.read_text(encoding="utf-8").splitlines() if len(line.strip()) > 40][:16]
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        expected, got = bert(**batch).last_hidden_state, converted(**batch).last_hidden_state
    assert (expected - got).abs().max() <= 1e-5


def test_shared_conversion_is_exact_when_qkv_rows_are_proportional(tmp_path):
    """If Wq, Wk, Wv (with biases) are per-channel multiples of one matrix, the rank-1 fit is exact."""
    bert = _random_bert()
    with torch.no_grad():
        for layer in bert.encoder.layer:
            attention = layer.attention.self
            base_w, base_b = attention.query.weight.clone(), attention.query.bias.clone() + 0.1
            for projection in (attention.query, attention.key, attention.value):
                scale = torch.rand(32) + 0.5
                projection.weight.copy_(base_w * scale[:, None])
                projection.bias.copy_(base_b * scale)
    converted, report = from_bert(bert, attention_type="shared", return_report=True)
    assert all(abs(fit.retained_energy - 1.0) < 1e-6 for fit in report)
    batch = inputs()
    with torch.no_grad():
        assert (bert(**batch).last_hidden_state - converted(**batch).last_hidden_state).abs().max() < 1e-4


def test_shared_fit_is_the_per_channel_rank_one_optimum():
    torch.manual_seed(1)
    q, k, v = (torch.randn(8, 9) for _ in range(3))
    fitted, retained = fit_attention("shared", q, k, v, num_heads=2)
    row = torch.cat([fitted["shared_proj.weight"], fitted["shared_proj.bias"][:, None]], 1)
    scales = torch.stack([fitted["query_scale"], fitted["key_scale"], fitted["value_scale"]], 1)
    approx = scales[:, :, None] * row[:, None, :]  # (channel, 3, in+1)
    stacked = torch.stack([q, k, v], 1)
    best = torch.linalg.svdvals(stacked.double())[:, 0].pow(2).sum()  # Eckart–Young: σ1² per channel
    assert torch.isclose(torch.tensor(retained, dtype=torch.float64), best / stacked.double().pow(2).sum(), atol=1e-6)
    error = (stacked - approx).pow(2).sum()
    assert torch.isclose(error.double(), stacked.double().pow(2).sum() - best, rtol=1e-4)


def test_from_bert_refuses_a_non_bert_checkpoint(tmp_path):
    SharedBertModel(tiny_config()).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="sharedbert"):
        from_bert(tmp_path)
    with pytest.raises(OSError, match="neither a local folder"):
        from_bert(tmp_path / "does-not-exist")


# --- Auto classes and remote code -------------------------------------------------------------------------------


def test_auto_classes_resolve_to_sharedbert(tmp_path):
    SharedBertForSequenceClassification(tiny_config()).save_pretrained(tmp_path)
    assert type(AutoConfig.from_pretrained(tmp_path)) is SharedBertConfig
    assert type(AutoModel.from_pretrained(tmp_path)) is SharedBertModel
    assert type(AutoModelForSequenceClassification.from_pretrained(tmp_path)) is SharedBertForSequenceClassification


def test_saved_config_names_every_auto_class(tmp_path):
    SharedBertForQuestionAnswering(tiny_config()).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["auto_map"] == AUTO_MAP
    assert saved["model_type"] == "sharedbert"
    for name in ("configuration_sharedbert.py", "modeling_sharedbert.py"):
        assert (tmp_path / name).read_text() == (Path(sharedbert.__file__).parent / name).read_text()


REMOTE_CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    import transformers
    try:
        import sharedbert
        raise SystemExit("the sharedbert package is importable in the isolated child")
    except ImportError:
        pass
    folder, out = sys.argv[1], sys.argv[2]
    batch = {k: torch.tensor(v) for k, v in json.load(open(folder + "/inputs.json")).items()}
    results = {}
    for auto, overrides in [
        ("AutoModel", {}), ("AutoModelForMaskedLM", {}), ("AutoModelForSequenceClassification", {}),
        ("AutoModelForTokenClassification", {}), ("AutoModelForQuestionAnswering", {}),
        ("AutoModelForPreTraining", {}), ("AutoModelForNextSentencePrediction", {}),
        ("AutoModelForCausalLM", {"is_decoder": True}),
    ]:
        model = getattr(transformers, auto).from_pretrained(folder, trust_remote_code=True, **overrides).eval()
        assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
        with torch.no_grad():
            output = model(**batch)
        results[auto] = [type(model).__name__, output[0].tolist()]
    generated = model.generate(batch["input_ids"], max_new_tokens=4, do_sample=False)
    results["generate"] = generated.tolist()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    results["tokenizer"] = [type(tokenizer).__name__, tokenizer("hello world")["input_ids"]]
    json.dump(results, open(out, "w"))
    """
)


@pytest.mark.slow
def test_remote_code_loads_every_head_without_the_package(tmp_path):
    from sharedbert.hub import run_isolated

    folder = tmp_path / "model"
    base = SharedBertForMaskedLM(tiny_config(layer_sharing="attention", num_unique_layers=2)).eval()
    base.save_pretrained(folder)
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"])}
    sharedbert.SharedBertTokenizer(vocab=vocab).save_pretrained(folder)
    batch = inputs()
    (folder / "inputs.json").write_text(json.dumps({k: v.tolist() for k, v in batch.items()}))
    (tmp_path / "child.py").write_text(REMOTE_CHILD)
    result = run_isolated(tmp_path / "child.py", [folder, tmp_path / "out.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((tmp_path / "out.json").read_text())
    for auto, model_class in [
        ("AutoModel", SharedBertModel),
        ("AutoModelForMaskedLM", SharedBertForMaskedLM),
        ("AutoModelForPreTraining", SharedBertForPreTraining),
    ]:
        assert results[auto][0] == model_class.__name__
        local = model_class.from_pretrained(folder).eval()
        with torch.no_grad():
            expected = local(**batch)[0]
        assert (torch.tensor(results[auto][1]) - expected).abs().max() <= 1e-5
    assert results["AutoModelForSequenceClassification"][0] == "SharedBertForSequenceClassification"
    assert results["AutoModelForNextSentencePrediction"][0] == "SharedBertForNextSentencePrediction"
    decoder = SharedBertLMHeadModel.from_pretrained(folder, is_decoder=True).eval()
    assert results["AutoModelForCausalLM"][0] == "SharedBertLMHeadModel"
    with torch.no_grad():
        assert (torch.tensor(results["AutoModelForCausalLM"][1]) - decoder(**batch).logits).abs().max() <= 1e-5
    expected = decoder.generate(batch["input_ids"], max_new_tokens=4, do_sample=False)
    assert results["generate"] == expected.tolist()
    assert results["tokenizer"] == ["SharedBertTokenizer", [2, 5, 6, 3]]


# --- parameter accounting --------------------------------------------------------------------------------------------


def test_parameter_counts_at_bert_base_match_the_paper():
    from transformers import BertModel

    from sharedbert.parameter_counts import count_parameters, reduction

    standard = count_parameters(SharedBertConfig(attention_type="standard"))
    shared = count_parameters(SharedBertConfig(attention_type="shared"))
    assert (standard.qkv_per_layer, shared.qkv_per_layer) == (1_771_776, 592_896)
    assert (standard.model, shared.model) == (109_482_240, 95_335_680)
    assert round(reduction(shared.qkv_per_layer, standard.qkv_per_layer), 2) == 66.54
    assert round(reduction(shared.model, standard.model), 2) == 12.92
    with torch.device("meta"):
        bert = BertModel(BertConfig())
    assert sum(p.numel() for p in bert.parameters()) == standard.model


def test_params_command_prints_the_table(capsys):
    from sharedbert.cli import main

    assert main(["params", "bert-base"]) == 0
    printed = capsys.readouterr().out
    assert "592,896" in printed and "66.54%" in printed and "95,335,680" in printed and "12.92%" in printed
    # docs/model.md's "Parameters" shows the table itself: header, rule and every row, as the command prints them
    docs = (Path(__file__).resolve().parents[2] / "docs" / "model.md").read_text(encoding="utf-8")
    block = docs.split("## Parameters", 1)[1].split("```\n", 2)[1].strip("\n").splitlines()
    table = [line for line in printed.splitlines() if line and not line.startswith(("Parameters of", "'fewer'"))]
    assert block == table, "docs/model.md's parameter table is not `sharedbert params bert-base`'s output"


@pytest.mark.parametrize("preset, shares", [
    ("bert-base", {"shared": 33.46, "shared_head_query": 36.24, "shared_lowrank_query": 39.02, "shared_kv": 66.75}),
    ("minilm-l6", {"shared": 33.59, "shared_head_query": 36.36, "shared_lowrank_query": 39.14, "shared_kv": 66.84}),
])
def test_params_command_shows_the_directed_types_within_40_percent_of_standard(capsys, preset, shares):
    """Issue 42's budget: at bert-base and all-MiniLM-L6-v2 dims, the one-projection directed types' projections cost
    at most 40% of standard attention's (docs/model.md quotes these shares)."""
    from sharedbert.cli import main

    assert main(["params", preset]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()
            if len(line.split()) == 6 and line.split()[1] == "none"}
    for attention_type, share in shares.items():
        assert round(100 - float(rows[attention_type][3].rstrip("%")), 2) == share, attention_type
        assert share <= 40 or attention_type == "shared_kv"
