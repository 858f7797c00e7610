"""Upload publishes the model and nothing else: no file from outside the folder, no credential, no code of its own.

Each case is planted in a tiny model folder (offline) and must be refused before anything is staged, with a message
naming each offending file or key and the fix (`sharedbert.hub.contents`):

* a module file, a module folder or a tokenizer file that is a link leading out of the folder;
* token, `.env` and credential-like files inside module folders;
* secret-like keys in config.json / tokenizer_config.json (`*_api_key`, `hub_token`, nested, `hf_...` values);
* a tokenizer_config.json that names an installed tokenizer class but carries an `auto_map` to a planted module
  under a `folder--module.Class` reference: refused at the source; never re-saved by staging; and the verification
  child, which passes trust_remote_code=True, refuses to import it even when the parent's check is bypassed. The
  planted module writes a marker file when imported: it must never appear.

A dry run lists every file it would push, with its size.
"""

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch

import sharedbert
from conftest import tiny_config
from sharedbert import hub, sentence_embeddings

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "sat", "on", "mat", "."]
REPO = "alice/sharedbert-safety"
FAKE_TOKEN = "hf_PlantedTestToken0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    """A sentence-transformers SharedBert folder that stages as it is (Transformer -> 1_Pooling -> 2_Normalize)."""
    folder = tmp_path_factory.mktemp("clean") / "model"
    torch.manual_seed(0)
    sharedbert.SharedBertModel(tiny_config(vocab_size=len(VOCAB))).save_pretrained(folder)
    sharedbert.SharedBertTokenizer(vocab={t: i for i, t in enumerate(VOCAB)}).save_pretrained(folder)
    sentence_embeddings.write_default_modules(folder, hidden_size=tiny_config().hidden_size, max_seq_length=16)
    return folder


@pytest.fixture
def model(clean, tmp_path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(clean, copy)
    return copy


def edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def refused(folder: Path, tmp_path: Path) -> str:
    """Stage `folder` (without the fresh-process verification); return the refusal, checking nothing was staged."""
    with pytest.raises(hub.ModelFolderError) as error:
        hub.stage_for_hub(folder, tmp_path / "staged", repo_id=REPO, verify=False)
    assert not (tmp_path / "staged").exists()
    return str(error.value)


def outside(tmp_path: Path) -> Path:
    """A folder beside the model with things of the user's that must never be published."""
    place = tmp_path / "elsewhere"
    place.mkdir(exist_ok=True)
    (place / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True,
                                                   "private_notes": "do not publish"}))
    return place


# -- files that do not live in the folder ---------------------------------------------------------------------------


def test_a_module_file_that_links_outside_is_refused(model, tmp_path):
    (model / "1_Pooling" / "config.json").unlink()
    (model / "1_Pooling" / "config.json").symlink_to(outside(tmp_path) / "config.json")
    message = refused(model, tmp_path)
    assert f"1_Pooling/config.json is a link to {tmp_path / 'elsewhere' / 'config.json'}, outside the folder" in \
        message and "Replace the link by a copy" in message


def test_a_module_folder_that_links_outside_is_refused(model, tmp_path):
    shutil.rmtree(model / "1_Pooling")
    (model / "1_Pooling").symlink_to(outside(tmp_path), target_is_directory=True)
    message = refused(model, tmp_path)
    assert f"1_Pooling is a link to {tmp_path / 'elsewhere'}, outside the folder" in message


def test_a_tokenizer_file_that_links_outside_is_refused_and_a_link_inside_is_not(model, tmp_path):
    moved = tmp_path / "elsewhere-tokenizer.json"
    shutil.move(model / "tokenizer.json", moved)
    (model / "tokenizer.json").symlink_to(moved)
    assert "tokenizer.json is a link to" in refused(model, tmp_path)
    (model / "tokenizer.json").unlink()
    shutil.move(moved, model / "1_Pooling" / "kept.json")  # a link that stays inside the folder is fine
    (model / "tokenizer.json").symlink_to(Path("1_Pooling") / "kept.json")
    staged = hub.stage_for_hub(model, tmp_path / "staged", repo_id=REPO, verify=False)
    assert "tokenizer.json" in staged.files and not (tmp_path / "staged" / "tokenizer.json").is_symlink()


# -- credentials ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["1_Pooling/hf_token.txt", "2_Normalize/.env", "1_Pooling/credentials.json",
                                     "2_Normalize/secrets.txt", "1_Pooling/openai_api_key.txt", "1_Pooling/token"])
def test_credential_files_in_module_folders_are_refused(planted, model, tmp_path):
    (model / planted).write_text(f"HF_TOKEN={FAKE_TOKEN}\n")
    message = refused(model, tmp_path)
    assert f"{planted} is named like a credential" in message and "Move it out of the model folder" in message
    assert FAKE_TOKEN not in message


SECRETS = {
    "config.json": ({"openai_api_key": "sk-live-0123456789abcdefghij", "notes": {"token": "abc"}},
                    ["'openai_api_key'", "'notes.token'"]),
    "tokenizer_config.json": ({"hub_token": "not-even-token-shaped", "extra": ["x", FAKE_TOKEN]},
                              ["'hub_token'", "'extra[1]'"]),
    "1_Pooling/config.json": ({"password": "hunter2"}, ["'password'"]),
}


@pytest.mark.parametrize("name", SECRETS)
def test_secret_keys_in_published_json_files_are_refused_naming_each(name, model, tmp_path):
    changes, keys = SECRETS[name]
    edit_json(model / name, **changes)
    message = refused(model, tmp_path)
    for key in keys:
        assert f"{name} holds a secret under {key}" in message, message
    assert f"Remove the key from {name}" in message
    assert FAKE_TOKEN not in message and "hunter2" not in message


def test_ordinary_token_keys_are_not_secrets(model, tmp_path):
    # Special tokens, the tokenizer class and token ids are what tokenizer configs are made of.
    edit_json(model / "tokenizer_config.json", cls_token="[CLS]", additional_special_tokens=["[MASK]"],
              tokenizer_class="SharedBertTokenizer", token=None)
    edit_json(model / "config.json", pad_token_id=0, decoder_start_token_id=2)
    staged = hub.stage_for_hub(model, tmp_path / "staged", repo_id=REPO, verify=False)
    assert "tokenizer_config.json" in staged.files


# -- code planted behind an installed tokenizer class ---------------------------------------------------------------


def plant_module(tmp_path: Path) -> tuple[str, Path]:
    """A module that leaves a marker file when imported; returns its `folder--module.Class` reference and the
    marker's path."""
    planted, marker = tmp_path / "planted", tmp_path / "IMPORTED"
    planted.mkdir()
    (planted / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('the planted module ran')\n"
        "from transformers import PreTrainedTokenizerFast\n\n\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n")
    assert "--" not in str(planted)
    return f"{planted}--evil.EvilTokenizer", marker


def test_a_planted_tokenizer_auto_map_is_refused_at_the_source(model, tmp_path):
    reference, marker = plant_module(tmp_path)
    edit_json(model / "tokenizer_config.json", auto_map={"AutoTokenizer": [reference, None]})
    assert json.loads((model / "tokenizer_config.json").read_text())["tokenizer_class"] == "SharedBertTokenizer"
    message = refused(model, tmp_path)
    assert f"tokenizer_config.json: auto_map AutoTokenizer -> {[reference, None]}" in message
    assert "remove the auto_map from tokenizer_config.json" in message
    assert not marker.exists()


def test_staging_never_re_saves_an_auto_map_the_user_did_not_ask_for(clean, tmp_path):
    reference, marker = plant_module(tmp_path)
    loaded = hub.load_for_hub(clean)
    # As if the tokenizer had been loaded from a folder with the planted map (a tokenizer keeps its loading kwargs).
    loaded.tokenizer.init_kwargs["auto_map"] = {"AutoTokenizer": [reference, None]}
    staged = hub.stage_for_hub(clean, tmp_path / "staged", repo_id=REPO, verify=False, loaded=loaded)
    tokenizer_config = json.loads((staged.path / "tokenizer_config.json").read_text())
    assert reference not in json.dumps(tokenizer_config) and not hub.contents.foreign_auto_maps(staged.path)
    assert not marker.exists()


@pytest.fixture(scope="module")
def staged_clean(clean, tmp_path_factory):
    loaded = hub.load_for_hub(clean)
    staged = hub.stage_for_hub(clean, tmp_path_factory.mktemp("staged") / "staged", repo_id=REPO, verify=False,
                               loaded=loaded)
    return staged.path, loaded


def test_verification_refuses_a_staged_folder_with_foreign_code(staged_clean, tmp_path):
    source, loaded = staged_clean
    reference, marker = plant_module(tmp_path)
    folder = tmp_path / "staged"
    shutil.copytree(source, folder)
    edit_json(folder / "tokenizer_config.json", auto_map={"AutoTokenizer": [reference, None]})
    with pytest.raises(hub.VerificationError, match="would run code that is not this package's"):
        hub.verify_staged(folder, loaded)
    edit_json(folder / "tokenizer_config.json", auto_map={"AutoTokenizer": [None, "tokenization_sharedbert.SharedBertTokenizer"]})
    with (folder / "modeling_sharedbert.py").open("a") as handle:
        handle.write("\nimport os  # changed\n")
    with pytest.raises(hub.VerificationError, match="modeling_sharedbert.py is not one of the package's code files"):
        hub.verify_staged(folder, loaded)
    assert not marker.exists()


@pytest.mark.slow
def test_the_verification_child_trusts_only_the_packages_files(staged_clean, tmp_path, monkeypatch):
    """The parent's check bypassed: the child itself, which loads with trust_remote_code=True, refuses to import the
    planted module (a `folder--module.Class` reference) and never runs it."""
    source, loaded = staged_clean
    reference, marker = plant_module(tmp_path)
    folder = tmp_path / "staged"
    shutil.copytree(source, folder)
    edit_json(folder / "tokenizer_config.json", auto_map={"AutoTokenizer": [reference, None]})
    monkeypatch.setattr(hub.verify, "check_staged_code", lambda staged: hub.contents.code_file_digests())
    with pytest.raises(hub.VerificationError) as error:
        hub.verify_staged(folder, loaded)
    assert "refused to import evil.py" in str(error.value), error.value
    assert not marker.exists()


# -- what would be pushed -------------------------------------------------------------------------------------------


def test_a_dry_run_lists_every_file_it_would_push(clean, tmp_path, monkeypatch):
    from sharedbert.cli.upload import main

    monkeypatch.setattr(hub.staging, "verify_staged", lambda staged, loaded, **kwargs: {
        "loaded": ["AutoConfig"], "max_abs_diff": 0.0, "classes": {}})
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(clean), "--repo-id", REPO, "--dry-run", str(tmp_path / "staged")])
    assert code == 0, err.getvalue()
    printed = out.getvalue()
    files = hub.hub_files(tmp_path / "staged")
    assert f"Staged {len(files)} files, all that would be pushed" in printed
    listed = [line.strip().split(" (")[0] for line in printed.splitlines() if line.startswith("  ")]
    assert listed == files and "1_Pooling/config.json" in files


def test_overwrite_without_a_dry_run_is_refused(clean):
    with pytest.raises(hub.HubError, match="--overwrite only applies to --dry-run"):
        hub.publish(model_dir=str(clean), repo_id=REPO, overwrite=True)
