"""One loader (`sharedbert.loading`): every route of the package that loads what a user names goes through it, so what
the config file used to refuse itself (a misspelled field, an invalid one named with its folder) is refused on each
route, and no module calls transformers' or sentence-transformers' loaders around it."""

import ast
import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from transformers import AutoModel, AutoTokenizer

from sharedbert import SharedBertModel, SharedBertTokenizer, loading, sentence_embeddings
from sharedbert.data import TaskSpec
from sharedbert.export.tracing import load_for_export
from sharedbert.hub import ModelFolderError, load_for_hub
from sharedbert.training.models import load_classifier, load_tokenizer

# A vocabulary beyond the special tokens, within tiny_config's vocab_size.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"word{i}" for i in range(40)]
PACKAGE = Path(__file__).resolve().parents[1] / "sharedbert"
# Loads that do not go through the loader, each with the reason. Anything else calling `.from_pretrained(` or
# `SentenceTransformer(` in the package is a route around the gates.
NOT_THROUGH_THE_LOADER = {
    "loading.py": "the loader itself",
    "modeling_sharedbert.py": "the Hub model file: its one hook calls transformers' own from_pretrained",
    "hub/verify_child.py": "the verification child loads the staged copy as a Hub user does, without the package",
    "hub/verify.py": "reloads a folder load_for_hub has just loaded and checked, as sentence-transformers",
    "hub/exported_files.py": "the staged folder's tokenizer, staged by the package and checked before",
    "recipes/demo.py": "reloads the demo's own output the way its log tells a user to",
    "recipes/build_minilm.py": "compares the build's own output with its source, both checked when they were made",
    "conversion/bert.py": "reads a BERT's config and an EncoderDecoderModel after both gates, to convert them",
}


def _loads_outside_the_loader() -> dict[str, list[int]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name == "SentenceTransformer" or (name == "from_pretrained" and isinstance(node.func, ast.Attribute)):
                found.setdefault(where, []).append(node.lineno)
    return found


def test_no_module_loads_around_the_loader():
    found = _loads_outside_the_loader()
    assert "loading.py" in found  # the scan sees calls at all
    assert {where: lines for where, lines in found.items() if where not in NOT_THROUGH_THE_LOADER} == {}


def test_the_listed_exceptions_still_load():
    """An exception is dropped once its module loads through the loader."""
    found = _loads_outside_the_loader()
    assert sorted(where for where in NOT_THROUGH_THE_LOADER if where not in found) == []


@pytest.fixture
def saved(tmp_path):
    """A SharedBert classifier folder with its tokenizer, free to edit."""
    folder = tmp_path / "model"
    torch.manual_seed(0)
    model = SharedBertModel(tiny_config())
    model.save_pretrained(folder)
    SharedBertTokenizer(vocab={token: i for i, token in enumerate(VOCAB)}).save_pretrained(folder)
    return folder


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _routes(folder: Path):
    """Each package route that loads a SharedBert folder, as a callable."""
    spec = TaskSpec(name="t", text_columns=("sentence",), label_column="label", labels=("a", "b"),
                    metrics=("accuracy",), main_metric="accuracy")
    return {
        "loading.from_pretrained": lambda: loading.from_pretrained(AutoModel, folder),
        "training.models.load_classifier": lambda: load_classifier(folder, spec),
        "hub.load_for_hub": lambda: load_for_hub(folder),
        "export.load_for_export": lambda: load_for_export(folder, "base"),
        "sentence_embeddings.load": lambda: sentence_embeddings.load(folder),
    }


ROUTES = ["loading.from_pretrained", "training.models.load_classifier", "hub.load_for_hub", "export.load_for_export",
          "sentence_embeddings.load"]


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_refuses_a_misspelled_field_naming_the_folder(saved, route):
    """The config file keeps unknown keys, as transformers' configs do (AutoModel alone loads this folder with the
    default attention type): the loader's check is what refuses it, on every route."""
    edit_config(saved, atention_type="shared")
    assert AutoModel.from_pretrained(saved).config.atention_type == "shared"
    with pytest.raises((ValueError, ModelFolderError), match="did you mean `attention_type`") as error:
        _routes(saved)[route]()
    assert str(saved) in str(error.value)


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_names_the_folder_of_an_invalid_field(saved, route):
    edit_config(saved, num_attention_heads=5)
    with pytest.raises((ValueError, ModelFolderError), match="num_attention_heads") as error:
        _routes(saved)[route]()
    assert str(saved) in str(error.value)


def test_a_tokenizer_loads_through_the_loader_with_its_checks(saved, tmp_path):
    """load_tokenizer refuses a folder without a vocabulary (the loader's tokenizer check); with one it loads."""
    assert len(load_tokenizer(saved)) == len(AutoTokenizer.from_pretrained(saved))
    bare = tmp_path / "bare"
    shutil.copytree(saved, bare, ignore=shutil.ignore_patterns("tokenizer*", "vocab*", "special*"))
    with pytest.raises((OSError, ValueError), match="vocabulary"):
        load_tokenizer(bare)


def test_from_bert_and_pretrain_configs_refuse_a_misspelled_field(tmp_path):
    """Where the package builds a config from a user's fields rather than loading one."""
    from sharedbert.conversion.bert import from_bert
    from sharedbert.model_sizes import config_values

    with pytest.raises(ValueError, match="did you mean `attention_type`"):
        from_bert("nowhere", atention_type="shared")  # refused before anything is read
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"hidden_size": 32, "layer_shring": "all"}))
    with pytest.raises(ValueError, match=f"`layer_shring` in {config}: did you mean `layer_sharing`"):
        config_values(str(config))
