"""Named sharing presets (`sharedbert.sharing_presets`): each builds a valid model at several sizes with the budget its
comment states, sets every sharing field, and reaches `SharedBertConfig`, `sharedbert convert` and `sharedbert
pretrain` in one line; a preset contradicted by a flag is refused naming both."""

import json

import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer

from sharedbert import SharedBertConfig
from sharedbert.parameter_counts import count_parameters
from sharedbert.sharing_presets import SHARING_FIELDS, SHARING_PRESETS, sharing_preset

# (layers, hidden, heads): the frontier study's width-128 model, a MiniLM-like one with 12 heads, and one of 2 heads.
SIZES = [(4, 128, 4), (6, 96, 12), (2, 32, 2)]


def budget(name: str, layers: int, hidden: int, heads: int) -> float:
    """Stored self-attention projection parameters of the preset's model over standard attention's at that size."""
    sizes = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=2 * hidden)
    ours = count_parameters(SharedBertConfig(**sharing_preset(name), **sizes)).qkv_total
    return ours / count_parameters(SharedBertConfig(**sharing_preset("standard"), **sizes)).qkv_total


@pytest.mark.parametrize("name", SHARING_PRESETS)
def test_every_preset_sets_every_sharing_field_and_builds_at_every_size(name):
    assert set(sharing_preset(name)) == set(SHARING_FIELDS)
    for layers, hidden, heads in SIZES:
        config = SharedBertConfig(**sharing_preset(name), num_hidden_layers=layers, hidden_size=hidden,
                                  num_attention_heads=heads, intermediate_size=2 * hidden)
        config.validate()
        assert all(getattr(config, key) == value for key, value in sharing_preset(name).items() if value is not None)


@pytest.mark.parametrize("layers, hidden, heads", SIZES)
def test_budgets_are_what_the_presets_say(layers, hidden, heads):
    assert budget("standard", layers, hidden, heads) == 1.0
    assert budget("mqa", layers, hidden, heads) == pytest.approx((1 + 2 / heads) / 3)
    assert budget("albert-attention", layers, hidden, heads) == pytest.approx(1 / layers)
    assert budget("albert", layers, hidden, heads) == pytest.approx(1 / layers)
    assert budget("mqa-albert-attention", layers, hidden, heads) == pytest.approx((1 + 2 / heads) / 3 / layers)
    # Ws (d²), b, dq, dk, dv (d each) against Wq, Wk, Wv and their biases (3·(d² + d)).
    assert budget("shared-projection", layers, hidden, heads) == pytest.approx((hidden + 4) / (3 * (hidden + 1)))


def test_the_frontier_arm_a_preset_names_is_the_same_configuration():
    from sharedbert.sharing_presets import _NO_SHARING

    assert sharing_preset("mqa-albert-attention") == {
        **_NO_SHARING, "attention_type": "standard", "num_key_value_heads": 1, "layer_sharing": "attention",
        "num_unique_layers": 1}
    assert budget("mqa-albert-attention", 4, 128, 4) == 0.125  # the frontier's mqa-att1: 12.5% at width 128


def test_an_unknown_preset_is_refused_naming_the_presets():
    with pytest.raises(ValueError, match="Unknown sharing preset 'alberta'.*albert-attention"):
        sharing_preset("alberta")


def test_a_preset_is_a_fresh_dict_each_time():
    import sharedbert

    assert sharedbert.sharing_preset is sharing_preset  # `from sharedbert import sharing_preset`, as the docs show
    sharing_preset("mqa")["num_key_value_heads"] = 4
    assert SHARING_PRESETS["mqa"]["num_key_value_heads"] == 1


def test_the_jobs_take_the_preset_and_refuse_a_flag_that_contradicts_it():
    from sharedbert.recipes.convert_and_heal import ConvertArguments
    from sharedbert.training.pretraining import PretrainArguments

    convert = ConvertArguments(src="bert", out="out", sharing_preset="albert-attention")
    assert (convert.attention_type, convert.layer_sharing, convert.num_unique_layers) == ("standard", "attention", 1)
    # Repeating the preset's value is no contradiction.
    assert ConvertArguments(src="b", out="o", sharing_preset="mqa", num_key_value_heads=1).num_key_value_heads == 1
    with pytest.raises(ValueError, match="'mqa' sets num_key_value_heads=1, and --num-key-value-heads 2 was given"):
        ConvertArguments(src="b", out="o", sharing_preset="mqa", num_key_value_heads=2)
    with pytest.raises(ValueError, match="--attention-type shared_kv"):
        PretrainArguments(corpus=["x"], sharing_preset="albert", attention_type="shared_kv")
    # Without a preset nothing changes.
    assert ConvertArguments(src="b", out="o").attention_type == "shared"


def test_pretraining_with_a_preset_replaces_every_sharing_field_of_the_config_file(tmp_path):
    from sharedbert.training.pretraining import PretrainArguments, _model_values

    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(num_hidden_layers=4, hidden_size=64, num_attention_heads=4,
                                      intermediate_size=128, attention_type="standard", num_key_value_heads=2,
                                      layer_sharing="attention", num_unique_layers=2, sharing_order="cycle")))
    values = _model_values(PretrainArguments(corpus=["x"], config=str(config), sharing_preset="albert"))
    assert {key: values[key] for key in SHARING_FIELDS} == sharing_preset("albert")
    model_config = SharedBertConfig(**values)
    assert (model_config.num_key_value_heads, model_config.sharing_order, model_config.num_unique_layers) == (
        None, "sequence", 1)
    # Without a preset the config file's sharing stands.
    assert _model_values(PretrainArguments(corpus=["x"], config=str(config)))["num_key_value_heads"] == 2


def test_sharedbert_convert_builds_the_preset_from_a_bert(tmp_path):
    from sharedbert.cli import main as cli

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
    BertTokenizer(vocab={token: i for i, token in enumerate(vocab)}).save_pretrained(tmp_path / "bert")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                         intermediate_size=48, max_position_embeddings=32)).save_pretrained(tmp_path / "bert")
    assert cli(["convert", str(tmp_path / "bert"), str(tmp_path / "out"), "--sharing-preset",
                "mqa-albert-attention"]) in (0, None)
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (saved["attention_type"], saved["num_key_value_heads"], saved["layer_sharing"],
            saved["num_unique_layers"]) == ("standard", 1, "attention", 1)
    # The card and the report say how the model shares, not only its attention type.
    card = (tmp_path / "out" / "README.md").read_text()
    assert ("sharing preset `mqa-albert-attention`: attention_type `standard`, layer_sharing `attention`, "
            "num_unique_layers `1`, sharing_order `sequence`, num_key_value_heads `1`") in card
    assert "query_rank" not in card and "attention_rank" not in card  # unset fields are not named
    assert json.loads((tmp_path / "out" / "conversion_report.json").read_text())["sharing_preset"] == (
        "mqa-albert-attention")
    with pytest.raises(SystemExit):
        cli(["convert", str(tmp_path / "bert"), str(tmp_path / "out2"), "--sharing-preset", "nope"])


def test_sharedbert_params_counts_every_preset_at_a_size(capsys):
    from sharedbert.cli import main as cli
    from sharedbert.model_sizes import PRESETS
    from sharedbert.parameter_counts import parameter_counts

    rows = {row.sharing_preset: row for row in parameter_counts(config="bert-mini", sharing_presets=True)}
    assert list(rows) == list(SHARING_PRESETS)
    size = PRESETS["bert-mini"]
    for name, row in rows.items():
        share = budget(name, size["num_hidden_layers"], size["hidden_size"], size["num_attention_heads"])
        assert row.qkv_total / rows["standard"].qkv_total == pytest.approx(share)
    assert rows["albert"].model < rows["albert-attention"].model < rows["standard"].model
    assert cli(["params", "bert-mini", "--sharing-presets"]) == 0
    printed = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[4:]}
    assert printed["mqa"][1:3] == [f"{rows['mqa'].qkv_total:,}", "50.0%"]  # 4 heads: (1 + 2/4)/3
    assert printed["mqa-albert-attention"][2] == "12.5%"


def test_the_card_of_a_conversion_without_a_preset_names_its_rank():
    from sharedbert.conversion import conversion_card

    card = conversion_card("bert", "shared_lowrank_query", "none", sharing={"attention_rank": 32, "query_rank": None})
    assert "(attention_type `shared_lowrank_query`, layer_sharing `none`, attention_rank `32`)" in card
    assert "sharing preset" not in card
    assert "(attention_type `shared`, layer_sharing `none`)" in conversion_card("bert", "shared", "none")


def test_the_guide_lists_every_preset_and_no_other():
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "model.md").read_text(encoding="utf-8")
    section = guide.split("### Sharing presets", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|")[1].strip().strip("`") for line in section.splitlines() if line.startswith("| `")]
    assert rows == list(SHARING_PRESETS)
