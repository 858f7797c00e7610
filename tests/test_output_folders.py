"""No command writes over data it did not make (`sharedbert.atomic.check_output_folder`, the one rule every command
that writes a folder follows when it starts).

Each case is planted: an output that is the input (`convert SRC SRC`), inside it or around it; an existing folder of
the user's (`convert BERT FOLDER` with a notes file in FOLDER), for convert, finetune, pretrain, export, build-minilm
and upload's staging; and the temporary copies a killed run leaves beside its output. Nothing planted may change,
and every refusal names the folders and the fix. Tiny models, offline, refused before anything is loaded.
"""

import hashlib
import json
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertModel

import sharedbert
from sharedbert.atomic import OutputFolderError, check_output_folder
from sharedbert.cli import main as cli

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "on", "mat", "."]


def snapshot(folder: Path) -> dict:
    """Every file under `folder` with its content's hash: what must not change."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def bert(tmp_path) -> Path:
    """A tiny BERT folder with its tokenizer, as `sharedbert convert` takes it."""
    folder = tmp_path / "bert"
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=37, max_position_embeddings=32)).save_pretrained(folder)
    sharedbert.SharedBertTokenizer(vocab={t: i for i, t in enumerate(VOCAB)}).save_pretrained(folder)
    return folder


@pytest.fixture
def occupied(tmp_path) -> Path:
    """A folder of the user's: nothing a command made."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("three months of notes")
    (folder / "data").mkdir()
    (folder / "data" / "train.csv").write_text("text,label\nhi,1\n")
    return folder


# -- the rule itself ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["the input", "inside the input", "around the input"])
def test_an_output_that_is_inside_or_around_an_input_is_refused_even_with_overwrite(where, tmp_path):
    source = tmp_path / "model"
    (source / "sub").mkdir(parents=True)
    (source / "config.json").write_text("{}")
    output = {"the input": source, "inside the input": source / "sub" / "out", "around the input": tmp_path}[where]
    before = snapshot(tmp_path)
    with pytest.raises(OutputFolderError) as refused:
        check_output_folder(output, overwrite=True, inputs=[str(source)], label="OUT")
    message = str(refused.value)
    assert f"is {where}" in message or "holds the input" in message
    assert str(output) in message and str(source) in message and "Pick an output folder outside" in message
    assert snapshot(tmp_path) == before


def test_a_link_to_the_input_is_the_input(tmp_path):
    source = tmp_path / "model"
    source.mkdir()
    (tmp_path / "link").symlink_to(source)
    with pytest.raises(OutputFolderError, match="is the input"):
        check_output_folder(tmp_path / "link", overwrite=True, inputs=[source])


def test_a_folder_of_the_users_is_refused_without_overwrite_and_named(occupied):
    before = snapshot(occupied)
    with pytest.raises(OutputFolderError) as refused:
        check_output_folder(occupied, inputs=["owner/hub-id"], label="--output-dir")
    message = str(refused.value)
    assert f"--output-dir {occupied} exists and is not empty; pass --overwrite" in message
    assert "data, notes.txt" in message  # what replacing it would delete
    assert snapshot(occupied) == before
    # With the flag, or when the caller recognises the folder as its own earlier output, it may be replaced.
    assert check_output_folder(occupied, overwrite=True) == occupied
    assert check_output_folder(occupied, earlier_output=lambda folder: True) == occupied
    assert snapshot(occupied) == before  # the check itself deletes nothing
    (occupied.parent / "empty").mkdir()
    assert check_output_folder(occupied.parent / "empty") == occupied.parent / "empty"
    (occupied.parent / "file").write_text("x")
    with pytest.raises(OutputFolderError, match="exists and is not a folder"):
        check_output_folder(occupied.parent / "file", overwrite=True)


def test_temporary_copies_a_killed_run_left_are_cleaned_when_the_next_run_starts(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors").write_text("the finished run")
    for kind in ("tmp", "new", "old"):  # folders of a killed atomic_directory
        (tmp_path / f".out.{kind}-abc").mkdir()
        (tmp_path / f".out.{kind}-abc" / "model.safetensors").write_text("stale")
    (tmp_path / ".out.tmp-def").write_text("half a file")  # a killed atomic_write_bytes
    (tmp_path / ".other.new-abc").mkdir()  # another output's: not touched
    check_output_folder(out, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.new-abc", "out"]
    assert (out / "model.safetensors").read_text() == "the finished run"


def test_a_complete_copy_left_aside_by_a_killed_replacement_is_put_back_first(tmp_path):
    # Killed between moving the old output aside and renaming the new one in: the new, complete one is restored,
    # and then (being the command's own finished output) is refused like any other without --overwrite.
    (tmp_path / ".out.new-abc").mkdir()
    (tmp_path / ".out.new-abc" / "model.safetensors").write_text("new")
    (tmp_path / ".out.old-abc").mkdir()
    with pytest.raises(OutputFolderError, match="exists and is not empty"):
        check_output_folder(tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (tmp_path / "out" / "model.safetensors").read_text() == "new"


# -- every command --------------------------------------------------------------------------------------------------


def test_convert_src_src_leaves_the_source_as_it_was(bert, capsys):
    before = snapshot(bert)
    assert cli(["convert", str(bert), str(bert)]) == 2
    error = capsys.readouterr().err
    assert f"OUT {bert} is the input {bert}" in error and "Traceback" not in error
    assert cli(["convert", str(bert), str(bert), "--overwrite"]) == 2  # never, flag or not
    assert cli(["convert", str(bert), str(bert / "converted")]) == 2
    assert "is inside the input" in capsys.readouterr().err
    assert snapshot(bert) == before and not list(bert.parent.glob(".bert.*"))


def test_convert_into_a_folder_of_the_users_deletes_nothing(bert, occupied, capsys):
    before = snapshot(occupied)
    assert cli(["convert", str(bert), str(occupied)]) == 2
    error = capsys.readouterr().err
    assert f"OUT {occupied} exists and is not empty; pass --overwrite" in error and "notes.txt" in error
    assert snapshot(occupied) == before
    # A stale copy of a killed convert is cleaned when the next one starts; --overwrite replaces the folder whole.
    stale = occupied.parent / f".{occupied.name}.new-killed"
    stale.mkdir()
    assert cli(["convert", str(bert), str(occupied), "--overwrite"]) == 0
    assert not stale.exists() and not (occupied / "notes.txt").exists()
    assert json.loads((occupied / "config.json").read_text())["model_type"] == "sharedbert"
    # Its own earlier output a rerun replaces as it is (a healing rerun resumes and saves there again) ...
    assert cli(["convert", str(bert), str(occupied), "--attention-type", "symmetric"]) == 0
    assert json.loads((occupied / "config.json").read_text())["attention_type"] == "symmetric"
    # ... but not once something else lives there: files `sharedbert export` added, a note of the user's.
    for planted in ("onnx/model.onnx", "1_Pooling/notes.md"):
        (occupied / planted).parent.mkdir(exist_ok=True)
        (occupied / planted).write_bytes(b"not the converter's")
        assert cli(["convert", str(bert), str(occupied)]) == 2
        assert "exists and is not empty; pass --overwrite" in capsys.readouterr().err
        assert (occupied / planted).read_bytes() == b"not the converter's"
        (occupied / planted).unlink()
        (occupied / planted).parent.rmdir()


def test_finetune_and_pretrain_refuse_an_output_inside_their_input(bert, tmp_path, capsys):
    before = snapshot(bert)
    assert cli(["finetune", "--task", "sst2", "--model", str(bert), "--output-dir", str(bert / "run")]) == 2
    assert f"--output-dir {bert / 'run'} is inside the input {bert}" in capsys.readouterr().err
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the cat sat on the mat.\n" * 20)
    assert cli(["pretrain", "--corpus", str(corpus), "--output-dir", str(corpus), "--overwrite"]) == 2
    assert f"--output-dir {corpus} is the input {corpus}" in capsys.readouterr().err
    assert snapshot(bert) == before and (corpus / "a.txt").is_file()


def test_export_refuses_a_folder_of_the_users(bert, occupied, tmp_path, capsys):
    model = tmp_path / "shared"
    sharedbert.SharedBertModel(sharedbert.SharedBertConfig(
        vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=32)).save_pretrained(model)
    before = snapshot(occupied)
    assert cli(["export", str(model), str(occupied)]) == 2
    error = capsys.readouterr().err
    assert f"OUT {occupied} exists and is not empty; pass --overwrite" in error
    assert cli(["export", str(model), str(model / "onnx")]) == 2
    assert "is inside the input" in capsys.readouterr().err
    assert snapshot(occupied) == before and not (model / "onnx").exists()


def test_build_minilm_refuses_a_folder_of_the_users_before_any_work(occupied, tmp_path, capsys):
    before = snapshot(occupied)
    assert cli(["build-minilm", str(occupied), "--work-dir", str(tmp_path / "work")]) == 2
    error = capsys.readouterr().err
    assert f"{occupied} exists and is not empty; pass --overwrite" in error
    assert snapshot(occupied) == before and not (tmp_path / "work").exists()


# --- evaluate's single output files ----------------------------------------------------------------------------------

def evaluate_outputs(tmp_path, **fields):
    """Only evaluate's output check: it runs before the model is read, so a missing model is the next error."""
    from sharedbert.training.evaluation import EvaluateArguments, _check_output_files

    _check_output_files(EvaluateArguments(model=str(tmp_path / "no-model"), task="sst2", **fields))


def test_evaluate_refuses_to_write_its_predictions_over_its_own_input_file(tmp_path):
    data = tmp_path / "mine.tsv"
    data.write_text("sentence\tlabel\ngood\t1\n")
    with pytest.raises(OutputFolderError, match="--predictions .*mine.tsv is the input"):
        evaluate_outputs(tmp_path, file=str(data), predictions_path=str(data))
    with pytest.raises(OutputFolderError, match="is the input"):
        evaluate_outputs(tmp_path, file=str(data), predictions_path=str(data), overwrite=True)
    assert data.read_text() == "sentence\tlabel\ngood\t1\n"


def test_evaluate_replaces_only_its_own_earlier_files_without_overwrite(tmp_path):
    notes, results, predictions = tmp_path / "notes.json", tmp_path / "results.json", tmp_path / "predictions.tsv"
    notes.write_text('{"my": "notes"}')
    with pytest.raises(OutputFolderError, match="--output .*notes.json exists and was not written by this command; "
                                                "pass --overwrite"):
        evaluate_outputs(tmp_path, results_path=str(notes))
    evaluate_outputs(tmp_path, results_path=str(notes), overwrite=True)  # the user said so
    results.write_text(json.dumps({"task": "sst2", "split": "validation", "metrics": {}, "model": "m",
                                   "eval_samples": 3}))
    predictions.write_text("index\tprediction\n0\tpositive\n")
    evaluate_outputs(tmp_path, results_path=str(results), predictions_path=str(predictions))  # evaluate's own
    predictions.write_text("my,own,csv\n")
    with pytest.raises(OutputFolderError, match="--predictions"):
        evaluate_outputs(tmp_path, predictions_path=str(predictions))
    with pytest.raises(OutputFolderError, match="is a folder"):
        evaluate_outputs(tmp_path, results_path=str(tmp_path))
