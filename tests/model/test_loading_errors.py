"""Loading is strict: pickle is never unpickled, damaged weight files and bad configs are refused, and nothing of the
encoder is ever silently random-initialised. A new task head on a base checkpoint stays the normal start of
fine-tuning.

The model file refuses what would otherwise fail silently (pickle weights, a checkpoint of another attention type or
sharing: its one `from_pretrained` hook); transformers refuses mismatched shapes and invalid config values, and
safetensors a damaged file. The package's own loader (`sharedbert.loading.from_pretrained`, through
`weight_checks`) adds messages naming the file, the folder and the fix, refuses NaN or Inf weights, and refuses a
misspelled config field with a suggestion."""

import itertools
import json
import re
import shutil

import pytest
import torch
from conftest import INVALID_CONFIG, tiny_config
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel, BertConfig, BertModel

import sharedbert
from sharedbert import loading
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


def pickled_folder(folder, model):
    """A model folder with config.json and pickle weights only (pytorch_model.bin and a booby-trapped model.pt)."""
    model.config.save_pretrained(folder)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    torch.save({"payload": _Tripwire(folder.parent / "unpickled")}, folder / "model.pt")
    return folder


@pytest.fixture
def no_unpickling(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("torch.load was called")

    monkeypatch.setattr(torch, "load", refuse)


@pytest.mark.parametrize("loader", [SharedBertModel.from_pretrained, AutoModel.from_pretrained])
def test_model_classes_never_unpickle_a_folder_of_pickle_weights(tmp_path, no_unpickling, loader):
    """transformers alone would fall back to pytorch_model.bin: the model file's `use_safetensors=True` default."""
    folder = pickled_folder(tmp_path / "weights", SharedBertModel(tiny_config()))
    with pytest.raises(OSError) as error:
        loader(folder)
    assert "model.safetensors" in str(error.value) and str(folder) in str(error.value)
    assert not (tmp_path / "unpickled").exists()


@pytest.mark.parametrize("kind", ["sharedbert", "bert"])
def test_the_package_loader_refuses_pickle_weights_naming_the_fix(tmp_path, no_unpickling, kind):
    """The package's jobs load through `loading.from_pretrained`: safetensors only for any model class (a BERT's
    too), said in words that name the files and the conversion."""
    config = tiny_config()
    model = SharedBertModel(config) if kind == "sharedbert" else BertModel(BertConfig(
        vocab_size=config.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37))
    folder = pickled_folder(tmp_path / "weights", model)
    with pytest.raises(OSError) as error:
        loading.from_pretrained(AutoModel, folder)
    message = str(error.value)
    assert "pickle" in message and "pytorch_model.bin" in message and "save_pretrained" in message
    assert str(folder) in message and not (tmp_path / "unpickled").exists()


@pytest.mark.parametrize("use_safetensors", [False, None])
def test_opting_out_of_safetensors_is_refused(tmp_path, use_safetensors):
    model = SharedBertModel(tiny_config())
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="safetensors weights only"):
        SharedBertModel.from_pretrained(tmp_path, use_safetensors=use_safetensors)
    # The package's loader refuses the opt-out for any model class, a BERT's too, before anything is read.
    for loader in (BertModel, AutoModel, SharedBertModel):
        with pytest.raises(ValueError, match="safetensors weights only"):
            loading.from_pretrained(loader, tmp_path, use_safetensors=use_safetensors)


# -- damaged safetensors -------------------------------------------------------------------------------------------
# The model classes refuse a damaged file with safetensors' own error; the package's loader names the file.


def damage(path, how):
    data = bytearray(path.read_bytes())
    header_end = 8 + int.from_bytes(data[:8], "little")
    generator = torch.Generator().manual_seed(0)
    cut = {"nothing": 0, "8 bytes": 8, "header only": header_end, "half": len(data) // 2, "all but one byte": -1}
    if how in cut:
        data = data[: cut[how]]
    elif how == "garbage file":
        data = bytearray(torch.randint(0, 256, (len(data),), dtype=torch.uint8, generator=generator).tolist())
    elif how == "garbage header length":
        data[:8] = (2**40).to_bytes(8, "little")
    else:
        data[8:40] = bytes(torch.randint(0, 256, (32,), dtype=torch.uint8, generator=generator).tolist())
    path.write_bytes(bytes(data))


DAMAGE = ["nothing", "8 bytes", "header only", "half", "all but one byte", "garbage file", "garbage header length",
          "garbage header text"]


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_weights_are_refused_and_the_package_loader_names_the_file(checkpoint, how):
    path = checkpoint / "model.safetensors"
    damage(path, how)
    with pytest.raises(SafetensorError):
        SharedBertModel.from_pretrained(checkpoint)
    with pytest.raises(OSError, match="corrupt or truncated") as error:
        loading.from_pretrained(AutoModel, checkpoint)
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
        loading.from_pretrained(SharedBertModel, checkpoint)
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
    """transformers' strict validation refuses the value, naming the field; the package's loader names the folder
    too (for every loader: a model class, an Auto class, a config class)."""
    edit_config(checkpoint, **{field: INVALID_CONFIG_FIELDS[field]})
    with pytest.raises(INVALID_CONFIG, match=field):
        SharedBertModel.from_pretrained(checkpoint)
    for loader in (SharedBertModel, AutoModel, AutoConfig):
        with pytest.raises(ValueError, match=field) as error:
            loading.from_pretrained(loader, checkpoint)
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
        # A choice is refused as it is set, a rule between fields when the model is built: either way before any
        # module is built.
        with pytest.raises(INVALID_CONFIG, match=field):
            setattr(changed, field, value)
            SharedBertModel(changed)


@pytest.mark.parametrize("typo, field", [("atention_type", "attention_type"), ("layer_shring", "layer_sharing"),
                                         ("num_unique_layer", "num_unique_layers")])
def test_misspelled_field_suggests_the_right_one(checkpoint, typo, field):
    """The package's loader refuses a typo that transformers would keep as an unknown key (or drop, as a keyword),
    leaving the field at its default: as a keyword of any loader, and in config.json naming the folder."""
    expected = f"did you mean `{field}`"
    for loader in (SharedBertModel, AutoModel, AutoConfig):
        with pytest.raises(ValueError, match=expected):
            loading.from_pretrained(loader, checkpoint, **{typo: "x"})
    edit_config(checkpoint, **{typo: "x"})
    for loader in (SharedBertModel, AutoModel, AutoConfig):
        with pytest.raises(ValueError, match=expected) as error:
            loading.from_pretrained(loader, checkpoint)
        assert str(checkpoint) in str(error.value)


def test_the_loaders_options_are_not_taken_for_typos(checkpoints):
    """Every keyword transformers' from_pretrained takes is farther than two edits from every field, or it would be
    refused as a typo whenever a caller passes it."""
    for option in sorted(loading.LOADING_OPTIONS):
        loading.check_config_fields([option])
    model, info = loading.from_pretrained(SharedBertForSequenceClassification, checkpoints / "shared",
                                          num_labels=3, output_loading_info=True, ignore_mismatched_sizes=True,
                                          key_mapping={}, dtype=torch.float32, attn_implementation="eager")
    assert model.config.num_labels == 3 and "classifier.weight" in info["missing_keys"]


def test_unrelated_unknown_config_keys_are_kept(checkpoint):
    """Hub configs carry many extra keys; only near-misses of real fields are errors."""
    edit_config(checkpoint, my_training_note="lr 1e-4")
    assert SharedBertModel.from_pretrained(checkpoint).config.my_training_note == "lr 1e-4"
    assert loading.from_pretrained(SharedBertModel, checkpoint).config.my_training_note == "lr 1e-4"


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
    """transformers' own refusal (its load report, logged just before, names the weight and both shapes)."""
    path = checkpoint / "model.safetensors"
    weights = load_file(path)
    weights["encoder.feed_forward.1.intermediate.weight"] = torch.zeros(36, 32)
    save_file(weights, path, metadata={"format": "pt"})
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        SharedBertModel.from_pretrained(checkpoint)


def test_loading_info_hands_the_judgement_to_the_caller(checkpoint):
    """transformers' own test suite passes `output_loading_info=True` and inspects the keys itself."""
    path = checkpoint / "model.safetensors"
    weights = load_file(path)
    del weights["encoder.feed_forward.0.output.bias"]
    save_file(weights, path, metadata={"format": "pt"})
    _, info = SharedBertModel.from_pretrained(checkpoint, output_loading_info=True)
    assert set(info["missing_keys"]) == {"encoder.feed_forward.0.output.bias"}


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
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        SharedBertForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    model = SharedBertForSequenceClassification.from_pretrained(tmp_path, num_labels=3, ignore_mismatched_sizes=True)
    assert model.classifier.weight.shape == (3, 32)
