"""Loading is strict: pickle is refused, damaged weight files and bad configs fail with a message naming the file or
field, and nothing of the encoder is ever silently random-initialised. A new task head on a base checkpoint stays
the normal start of fine-tuning."""

import itertools
import json
import re
import shutil

import pytest
import torch
from conftest import INVALID_CONFIG, tiny_config
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel

import sharedbert
from sharedbert import (
    ATTENTION_TYPES,
    SharedBertConfig,
    SharedBertForMaskedLM,
    SharedBertForSequenceClassification,
    SharedBertModel,
)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One saved base model per attention type (module-scoped: saving is the slow part)."""
    root = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    for attention_type in ATTENTION_TYPES:
        SharedBertModel(tiny_config(attention_type=attention_type)).save_pretrained(root / attention_type)
    return root


@pytest.fixture
def checkpoint(checkpoints, tmp_path):
    """A private copy of the shared-attention checkpoint, free to damage."""
    folder = tmp_path / "model"
    shutil.copytree(checkpoints / "shared", folder)
    return folder


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


# -- pickle --------------------------------------------------------------------------------------------------------


class _Tripwire:
    """Unpickling this creates a marker file: proof that a pickle was executed."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("loader", [SharedBertModel.from_pretrained, AutoModel.from_pretrained])
def test_pickle_weights_are_refused_without_unpickling(tmp_path, monkeypatch, loader):
    model = SharedBertModel(tiny_config())
    folder = tmp_path / "pickled"
    model.config.save_pretrained(folder)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    marker = tmp_path / "unpickled"
    torch.save({"payload": _Tripwire(marker)}, folder / "model.pt")

    def no_unpickling(*args, **kwargs):
        raise AssertionError("torch.load was called")

    monkeypatch.setattr(torch, "load", no_unpickling)
    with pytest.raises(OSError) as error:
        loader(folder)
    message = str(error.value)
    assert "pickle" in message and "safetensors" in message and str(folder) in message
    assert not marker.exists()


@pytest.mark.parametrize("use_safetensors", [False, None])
def test_opting_out_of_safetensors_is_refused(tmp_path, use_safetensors):
    model = SharedBertModel(tiny_config())
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="safetensors weights only"):
        SharedBertModel.from_pretrained(tmp_path, use_safetensors=use_safetensors)


# -- damaged safetensors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keep", ["nothing", "8 bytes", "header only", "half", "all but one byte"])
def test_truncated_weights_name_the_file(checkpoint, keep):
    path = checkpoint / "model.safetensors"
    data = path.read_bytes()
    header_end = 8 + int.from_bytes(data[:8], "little")
    cut = {"nothing": 0, "8 bytes": 8, "header only": header_end, "half": len(data) // 2, "all but one byte": -1}
    path.write_bytes(data[: cut[keep]])
    with pytest.raises(OSError, match="corrupt or truncated") as error:
        SharedBertModel.from_pretrained(checkpoint)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("where", ["whole file", "header length", "header text"])
def test_garbage_in_the_header_names_the_file(checkpoint, where):
    path = checkpoint / "model.safetensors"
    data = bytearray(path.read_bytes())
    generator = torch.Generator().manual_seed(0)
    if where == "whole file":
        data = bytearray(torch.randint(0, 256, (len(data),), dtype=torch.uint8, generator=generator).tolist())
    elif where == "header length":
        data[:8] = (2**40).to_bytes(8, "little")
    else:
        data[8:40] = bytes(torch.randint(0, 256, (32,), dtype=torch.uint8, generator=generator).tolist())
    path.write_bytes(bytes(data))
    with pytest.raises(OSError, match="corrupt or truncated") as error:
        SharedBertModel.from_pretrained(checkpoint)
    assert str(path) in str(error.value)


def test_garbage_in_the_tensor_bytes_is_caught_as_non_finite(checkpoint):
    """safetensors has no checksum: overwritten tensor bytes still parse. 0xFF bytes read as NaN in float32."""
    path = checkpoint / "model.safetensors"
    data = bytearray(path.read_bytes())
    header_end = 8 + int.from_bytes(data[:8], "little")
    header = json.loads(data[8:header_end])
    start, end = header["encoder.attention.0.self.shared_proj.weight"]["data_offsets"]
    data[header_end + start : header_end + start + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="NaN or Inf") as error:
        SharedBertModel.from_pretrained(checkpoint)
    assert str(path) in str(error.value) and "encoder.attention.0.self.shared_proj.weight" in str(error.value)


# -- config --------------------------------------------------------------------------------------------------------

INVALID_CONFIG_FIELDS = {
    "num_attention_heads": 5,  # hidden_size 32 is not divisible by 5
    "attention_type": "bogus",
    "layer_sharing": "some",
    "sharing_order": "random",
    "num_unique_layers": 2,  # with layer_sharing="none" and 4 layers
    "hidden_dropout_prob": 1.5,
    "vocab_size": 0,
    "pad_token_id": 500,  # beyond vocab_size
    "hidden_act": "no_such_activation",
    "add_cross_attention": True,  # without is_decoder
}


@pytest.mark.parametrize("field", sorted(INVALID_CONFIG_FIELDS))
def test_invalid_config_json_names_the_field_and_folder(checkpoint, field):
    edit_config(checkpoint, **{field: INVALID_CONFIG_FIELDS[field]})
    with pytest.raises(ValueError, match=field) as error:
        SharedBertModel.from_pretrained(checkpoint)
    assert str(checkpoint) in str(error.value)


@pytest.mark.parametrize("field", sorted(INVALID_CONFIG_FIELDS))
def test_invalid_keyword_override_names_the_field(checkpoints, field):
    """transformers sets keyword overrides after the config's own checks ran: they must be checked too."""
    with pytest.raises(INVALID_CONFIG, match=field):
        SharedBertModel.from_pretrained(checkpoints / "shared", **{field: INVALID_CONFIG_FIELDS[field]})
    with pytest.raises(INVALID_CONFIG, match=field):
        AutoModel.from_pretrained(checkpoints / "shared", **{field: INVALID_CONFIG_FIELDS[field]})


def test_config_changed_after_construction_is_checked_before_building(checkpoints):
    config = SharedBertConfig.from_pretrained(checkpoints / "shared")
    with pytest.raises(INVALID_CONFIG, match="hidden_size"):
        config.hidden_size = "wide"  # a wrong type: refused as it is set
    for field, value in (("attention_type", "bogus"), ("add_cross_attention", True)):
        changed = SharedBertConfig.from_pretrained(checkpoints / "shared")
        setattr(changed, field, value)  # a choice, or a rule between fields: refused before any module is built
        with pytest.raises(INVALID_CONFIG, match=field):
            SharedBertModel(changed)


@pytest.mark.parametrize("typo, field", [("atention_type", "attention_type"), ("layer_shring", "layer_sharing"),
                                         ("num_unique_layer", "num_unique_layers")])
def test_misspelled_field_suggests_the_right_one(checkpoint, typo, field):
    expected = f"did you mean `{field}`"
    with pytest.raises(ValueError, match=expected):
        SharedBertModel.from_pretrained(checkpoint, **{typo: "x"})
    with pytest.raises(ValueError, match=expected):
        AutoModel.from_pretrained(checkpoint, **{typo: "x"})
    with pytest.raises(ValueError, match=expected):
        AutoConfig.from_pretrained(checkpoint, **{typo: "x"})
    edit_config(checkpoint, **{typo: "x"})
    with pytest.raises(ValueError, match=expected) as error:
        SharedBertModel.from_pretrained(checkpoint)
    assert str(checkpoint) in str(error.value)


def test_unrelated_unknown_config_keys_are_kept(checkpoint):
    """Hub configs carry many extra keys; only near-misses of real fields are errors."""
    edit_config(checkpoint, my_training_note="lr 1e-4")
    assert SharedBertModel.from_pretrained(checkpoint).config.my_training_note == "lr 1e-4"


# -- checkpoint / config mismatch ----------------------------------------------------------------------------------


@pytest.mark.parametrize("saved, requested", list(itertools.permutations(ATTENTION_TYPES, 2)))
def test_attention_type_override_names_both_types(checkpoints, saved, requested):
    with pytest.raises(ValueError) as error:
        SharedBertModel.from_pretrained(checkpoints / saved, attention_type=requested)
    message = str(error.value)
    assert f"attention_type={saved!r} weights" in message and f"asks for {requested!r}" in message
    assert str(checkpoints / saved) in message


def test_layer_sharing_mismatch_is_an_error(tmp_path):
    SharedBertModel(tiny_config(layer_sharing="all", num_unique_layers=1)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="missing from the checkpoint") as error:
        SharedBertModel.from_pretrained(tmp_path, layer_sharing="none", num_unique_layers=4)
    # Layers 1-3 of attention and feed-forward are missing (the message lists the first few, in any order).
    assert re.search(r"encoder\.(attention|feed_forward)\.[123]\.", str(error.value))


@pytest.mark.parametrize(
    "key", ["encoder.attention.2.self.shared_proj.weight", "encoder.feed_forward.0.output.bias",
            "embeddings.word_embeddings.weight"]
)
def test_missing_encoder_weight_is_an_error(checkpoint, key):
    path = checkpoint / "model.safetensors"
    weights = load_file(path)
    del weights[key]
    save_file(weights, path, metadata={"format": "pt"})
    with pytest.raises(ValueError, match="missing from the checkpoint") as error:
        SharedBertModel.from_pretrained(checkpoint)
    assert key in str(error.value) and str(checkpoint) in str(error.value)


def test_unexpected_encoder_weight_is_an_error(checkpoint):
    path = checkpoint / "model.safetensors"
    weights = load_file(path)
    weights["encoder.attention.0.self.extra.weight"] = torch.zeros(3)
    save_file(weights, path, metadata={"format": "pt"})
    with pytest.raises(ValueError, match="does not have") as error:
        SharedBertModel.from_pretrained(checkpoint)
    assert "encoder.attention.0.self.extra.weight" in str(error.value)


def test_wrong_shape_weight_is_an_error(checkpoint):
    path = checkpoint / "model.safetensors"
    weights = load_file(path)
    weights["encoder.feed_forward.1.intermediate.weight"] = torch.zeros(36, 32)
    save_file(weights, path, metadata={"format": "pt"})
    with pytest.raises(ValueError, match="shapes differ") as error:
        SharedBertModel.from_pretrained(checkpoint)
    assert "encoder.feed_forward.1.intermediate.weight: checkpoint (36, 32) vs model (37, 32)" in str(error.value)
    assert str(checkpoint) in str(error.value)


# -- new task heads are the normal case ----------------------------------------------------------------------------


@pytest.mark.parametrize("source_class", [SharedBertModel, SharedBertForMaskedLM])
def test_base_checkpoint_into_a_task_head_loads(tmp_path, source_class):
    torch.manual_seed(0)
    source = source_class(tiny_config())
    source.save_pretrained(tmp_path)
    model, info = SharedBertForSequenceClassification.from_pretrained(tmp_path, num_labels=3,
                                                                      output_loading_info=True)
    assert {"classifier.weight", "classifier.bias"} <= set(info["missing_keys"])
    source_state = source.state_dict()
    prefix = "" if source_class is SharedBertModel else "sharedbert."
    for key, value in model.sharedbert.embeddings.state_dict().items():
        assert torch.equal(value, source_state[f"{prefix}embeddings.{key}"])
    for key, value in model.sharedbert.encoder.state_dict().items():
        assert torch.equal(value, source_state[f"{prefix}encoder.{key}"])
    logits = model(torch.randint(1, 99, (2, 6))).logits
    assert logits.shape == (2, 3) and torch.isfinite(logits).all()


def test_auto_class_loads_the_same_head(checkpoints):
    model = sharedbert.SharedBertForSequenceClassification.from_pretrained(checkpoints / "pairwise")
    assert model.config.attention_type == "pairwise"


def test_task_head_of_another_size_needs_the_usual_opt_in(tmp_path):
    SharedBertForSequenceClassification(tiny_config(num_labels=2)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="ignore_mismatched_sizes=True") as error:
        SharedBertForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    assert "classifier.weight: checkpoint (2, 32) vs model (3, 32)" in str(error.value)
    model = SharedBertForSequenceClassification.from_pretrained(tmp_path, num_labels=3, ignore_mismatched_sizes=True)
    assert model.classifier.weight.shape == (3, 32)


def test_opt_in_never_lets_the_encoder_change_size(checkpoint):
    path = checkpoint / "model.safetensors"
    weights = load_file(path)
    weights["encoder.feed_forward.1.intermediate.weight"] = torch.zeros(36, 32)
    save_file(weights, path, metadata={"format": "pt"})
    with pytest.raises(ValueError, match="encoder.feed_forward.1.intermediate.weight: checkpoint"):
        SharedBertModel.from_pretrained(checkpoint, ignore_mismatched_sizes=True)
