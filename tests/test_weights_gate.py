"""The weights gate (issue 52): every command that loads weights a user names refuses damaged ones before any loader
reads them, with a message that names the file and the fix, and a folder without a tokenizer vocabulary is refused.

Each test plants one case in a tiny model folder and runs the command as a user would (`sharedbert.cli.main`, in
process): a NaN weight (finetune from SharedBert and BERT folders, convert, export of a sentence-transformers folder
and of its Dense module, resume from a checkpoint, evaluate), a truncated model.safetensors (convert, finetune), a
truncated optimizer.pt in a checkpoint, a shard index without `weight_map`, a weights file without read permission,
and a folder without tokenizer files. Before the gate these were accepted (NaN outputs, an empty vocabulary) or ended
in SafetensorError, `[Errno 22] Invalid argument`, a bare KeyError 'weight_map' or "missing"."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import child_pythonpath, tiny_config
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

import sharedbert
from sharedbert.training import checkpointing

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "a", "it", "was", "."]
VOCAB = {token: i for i, token in enumerate(WORDS)}
POISONED = "sharedbert.encoder.attention.0.self.shared_proj.weight"


def run(argv) -> int:
    from sharedbert.cli import main

    try:
        return main([str(a) for a in argv])
    except SystemExit as stop:
        return stop.code


def refused(code: int, capsys, *needles) -> str:
    """The command's stderr, after checking it exited 2 (bad input) and says each of `needles`."""
    err = capsys.readouterr().err
    assert code == 2, err[-3000:]
    for needle in needles:
        assert str(needle) in err, err[-3000:]
    assert "Traceback" not in err
    return err


def poison(path: Path, key: str | None = None) -> str:
    """Write NaN into one tensor of a safetensors file (the first floating one unless `key`); returns its name."""
    weights = load_file(path)
    key = key or next(name for name, tensor in weights.items() if tensor.is_floating_point())
    weights[key] = weights[key].clone()
    weights[key].view(-1)[0] = float("nan")
    save_file(weights, path, metadata={"format": "pt"})
    return key


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.fixture
def task(tmp_path) -> dict:
    folder = tmp_path / "data"
    folder.mkdir()
    rows = "text,label\n" + "".join(f"{text},{label}\n" for text, label in [
        ("a good film", 1), ("a bad film", 0), ("it was good", 1), ("it was bad", 0)] * 2)
    for split in ("train", "validation"):
        (folder / f"{split}.csv").write_text(rows, encoding="utf-8")
    return {"train": folder / "train.csv", "validation": folder / "validation.csv"}


def task_args(task, output) -> list:
    return ["--train-file", task["train"], "--validation-file", task["validation"], "--text-columns", "text",
            "--label-column", "label", "--output-dir", output, "--precision", "fp32"]


@pytest.fixture
def classifier(tmp_path) -> Path:
    """A tiny SharedBert classifier with its tokenizer."""
    torch.manual_seed(0)
    folder = tmp_path / "sharedbert"
    config = tiny_config(vocab_size=len(WORDS), num_labels=2, id2label={0: "0", 1: "1"}, label2id={"0": 0, "1": 1})
    sharedbert.SharedBertForSequenceClassification(config).save_pretrained(folder)
    sharedbert.SharedBertTokenizer(vocab=VOCAB).save_pretrained(folder)
    return folder


@pytest.fixture
def bert(tmp_path) -> Path:
    """A tiny BERT classifier with its tokenizer."""
    torch.manual_seed(0)
    folder = tmp_path / "bert"
    config = BertConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=64, num_labels=2)
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(vocab=VOCAB).save_pretrained(folder)
    return folder


@pytest.fixture
def sentence_model(tmp_path) -> Path:
    """A tiny SharedBert sentence-transformers folder: Transformer -> mean Pooling -> Dense -> Normalize."""
    from sentence_transformers.sentence_transformer.modules import Dense

    torch.manual_seed(0)
    folder = tmp_path / "sentence"
    sharedbert.SharedBertModel(tiny_config(vocab_size=len(WORDS))).save_pretrained(folder)
    sharedbert.SharedBertTokenizer(vocab=VOCAB).save_pretrained(folder)
    sharedbert.sentence_embeddings.write_default_modules(folder, 32, max_seq_length=32)
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    modules[3].update(idx=3, name="3", path="3_Normalize")
    (folder / "2_Normalize").rename(folder / "3_Normalize")
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "2_Dense").mkdir()
    Dense(32, 16).save(str(folder / "2_Dense"))
    return folder


# -- NaN weights -------------------------------------------------------------------------------------------------


def test_nan_weights_are_refused_by_evaluate_naming_the_file_and_tensor(classifier, task, capsys):
    """evaluate refused NaN before the gate (after loading); now every route runs the same check, before loading."""
    poison(classifier / "model.safetensors", POISONED)
    code = run(["evaluate", "--model", classifier, "--file", task["validation"], "--task", "mine",
                "--text-columns", "text", "--label-column", "label"])
    refused(code, capsys, "NaN or Inf", classifier / "model.safetensors", POISONED)


@pytest.mark.parametrize("source, extra", [("sharedbert", []), ("bert", []), ("bert", ["--no-convert"])])
def test_nan_weights_are_refused_by_finetune(classifier, bert, task, tmp_path, capsys, source, extra):
    folder = classifier if source == "sharedbert" else bert
    poison(folder / "model.safetensors")
    code = run(["finetune", "--model", folder, *task_args(task, tmp_path / "out"), "--max-steps", 1, *extra])
    refused(code, capsys, "NaN or Inf", folder / "model.safetensors", "earlier checkpoint")
    assert not (tmp_path / "out").exists()


def test_nan_weights_are_refused_by_convert(bert, tmp_path, capsys):
    poison(bert / "model.safetensors", "bert.encoder.layer.0.attention.self.query.weight")
    code = run(["convert", bert, tmp_path / "out"])
    refused(code, capsys, "NaN or Inf", bert / "model.safetensors", "bert.encoder.layer.0.attention.self.query")
    assert not (tmp_path / "out").exists()


def test_nan_weights_are_refused_by_from_bert(bert):
    from sharedbert.conversion.bert import from_bert

    poison(bert / "model.safetensors")
    with pytest.raises(ValueError, match="NaN or Inf") as error:
        from_bert(bert)
    assert str(bert / "model.safetensors") in str(error.value)


@pytest.mark.parametrize("where", ["model.safetensors", "2_Dense/model.safetensors"])
def test_nan_weights_are_refused_by_export_of_a_sentence_transformers_folder(sentence_model, tmp_path, capsys,
                                                                              where):
    poison(sentence_model / where)
    refused(run(["export", sentence_model, tmp_path / "out"]), capsys, "NaN or Inf", sentence_model / where)
    assert not (tmp_path / "out").exists()


# -- damaged files -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["convert", "finetune"])
def test_a_truncated_weights_file_is_refused_naming_it(bert, task, tmp_path, capsys, command):
    truncate(bert / "model.safetensors")
    if command == "convert":
        code = run(["convert", bert, tmp_path / "out"])
    else:
        code = run(["finetune", "--model", bert, *task_args(task, tmp_path / "out"), "--max-steps", 1])
    refused(code, capsys, "corrupt or truncated", bert / "model.safetensors", "re-download or re-save")


def sharded(folder: Path) -> Path:
    """`folder`'s weights saved again in shards (model.safetensors.index.json + model-0000N-of-0000M.safetensors)."""
    model = sharedbert.SharedBertForSequenceClassification.from_pretrained(folder)
    (folder / "model.safetensors").unlink()
    model.save_pretrained(folder, max_shard_size="20KB")
    assert (folder / "model.safetensors.index.json").is_file() and not (folder / "model.safetensors").exists()
    return folder / "model.safetensors.index.json"


@pytest.mark.parametrize("damage", ["no weight_map", "not JSON", "a missing shard", "a NaN in a shard",
                                    "a NaN in model.safetensors beside the index"])
def test_a_damaged_shard_index_or_shard_is_refused_naming_it(classifier, task, capsys, damage):
    whole = load_file(classifier / "model.safetensors")
    index = sharded(classifier)
    table = json.loads(index.read_text())
    shard = classifier / sorted(set(table["weight_map"].values()))[-1]
    if damage == "no weight_map":
        index.write_text(json.dumps({"metadata": table["metadata"]}))
        needles = [index, "no weight_map", "save_pretrained"]
    elif damage == "not JSON":
        index.write_text("{\"weight_map\": ")
        needles = [index, "not a JSON object"]
    elif damage == "a missing shard":
        shard.unlink()
        needles = [index, shard.name, "missing"]
    elif damage == "a NaN in model.safetensors beside the index":  # transformers reads this one, not the shards
        save_file(whole, classifier / "model.safetensors", metadata={"format": "pt"})
        poison(classifier / "model.safetensors", POISONED)
        needles = [classifier / "model.safetensors", "NaN or Inf", POISONED]
    else:
        poison(shard)
        needles = [shard, "NaN or Inf"]
    code = run(["evaluate", "--model", classifier, "--file", task["validation"], "--task", "mine",
                "--text-columns", "text", "--label-column", "label"])
    refused(code, capsys, *needles)


def _without_file_permission_override():
    """In the child, before it runs: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the capability bounding set,
    so that even root is denied a file without read permission (the child's own capabilities are recomputed from the
    bounding set when it execs Python)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP failed")


@pytest.mark.slow
def test_a_weights_file_without_read_permission_is_refused_as_such(classifier, task, tmp_path):
    """transformers reported it as missing. The tests run as root here, who reads any file: the command then runs in
    a child without root's permission override (skipped where that cannot be dropped)."""
    weights = classifier / "model.safetensors"
    weights.chmod(0)
    command = [sys.executable, "-m", "sharedbert", "evaluate", "--model", str(classifier), "--file",
               str(task["validation"]), "--task", "mine", "--text-columns", "text", "--label-column", "label"]
    env = dict(os.environ, PYTHONPATH=child_pythonpath(), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300,
                              preexec_fn=_without_file_permission_override if os.geteuid() == 0 else None)
    except subprocess.SubprocessError as error:
        pytest.skip(f"running as root, and root's permission to read any file cannot be dropped here ({error})")
    finally:
        weights.chmod(0o644)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "permission denied" in done.stderr and str(weights) in done.stderr and "chmod" in done.stderr
    assert "Traceback" not in done.stderr


# -- resuming a checkpoint ---------------------------------------------------------------------------------------


@pytest.fixture
def kept_checkpoint(classifier, task, tmp_path, monkeypatch) -> tuple[Path, list]:
    """A finished 2-step finetune whose checkpoints were kept (they are deleted once the output is saved), and the
    command that resumes them."""
    monkeypatch.setattr(checkpointing.RunCheckpoints, "discard", lambda self: None)
    checkpoints = tmp_path / "checkpoints"
    command = ["finetune", "--model", classifier, "--max-steps", 2, "--checkpoint-steps", 1, "--checkpoint-dir",
               checkpoints, "--batch-size", 4]
    assert run(command + task_args(task, tmp_path / "first")) == 0
    latest = checkpointing.latest_checkpoint(checkpoints)
    assert latest is not None and (latest / "optimizer.pt").is_file()
    return latest, command + task_args(task, tmp_path / "resumed")


@pytest.mark.parametrize("damage", ["truncated optimizer.pt", "NaN weights", "NaN optimizer state"])
def test_a_damaged_checkpoint_is_refused_on_resume_naming_the_file_and_no_resume(kept_checkpoint, capsys, damage):
    latest, command = kept_checkpoint
    capsys.readouterr()
    if damage == "truncated optimizer.pt":
        damaged, needles = latest / "optimizer.pt", ["corrupt or truncated"]
        truncate(damaged)
    elif damage == "NaN weights":
        damaged, needles = latest / "model.safetensors", ["NaN or Inf"]
        poison(damaged)
    else:
        damaged, needles = latest / "optimizer.pt", ["NaN or Inf", "diverged"]
        state = torch.load(damaged, weights_only=True)
        next(iter(state["state"].values()))["exp_avg"].view(-1)[0] = float("nan")
        torch.save(state, damaged)
    refused(run(command), capsys, damaged, "--no-resume", *needles)
    assert "Errno 22" not in capsys.readouterr().err


def test_an_intact_checkpoint_passes_the_gate_and_resumes(kept_checkpoint, tmp_path, capsys):
    """The gate reads every file of the checkpoint it refuses above; an intact one resumes (how exactly is
    tests/training/test_resume.py's to check)."""
    latest, command = kept_checkpoint
    assert run(command) == 0, capsys.readouterr().err[-3000:]
    assert (tmp_path / "resumed" / "model.safetensors").is_file()


# -- tokenizer files -----------------------------------------------------------------------------------------------


def strip_tokenizer(folder: Path, keep_config: bool = False) -> None:
    for name in ("tokenizer.json", "vocab.txt", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    if not keep_config:
        (folder / "tokenizer_config.json").unlink(missing_ok=True)


@pytest.mark.parametrize("keep_config", [False, True], ids=["no tokenizer files", "tokenizer_config.json only"])
@pytest.mark.parametrize("command", ["evaluate", "finetune", "export"])
def test_a_folder_without_a_tokenizer_vocabulary_is_refused(classifier, task, tmp_path, capsys, command,
                                                            keep_config):
    """It was evaluated, fine-tuned and exported with five special tokens for a vocabulary (every word [UNK])."""
    strip_tokenizer(classifier, keep_config)
    argv = {"evaluate": ["evaluate", "--model", classifier, "--file", task["validation"], "--task", "mine",
                         "--text-columns", "text", "--label-column", "label"],
            "finetune": ["finetune", "--model", classifier, *task_args(task, tmp_path / "out"), "--max-steps", 1],
            "export": ["export", classifier, tmp_path / "out"]}[command]
    refused(run(argv), capsys, classifier, "no tokenizer vocabulary", "tokenizer.save_pretrained")
    assert not (tmp_path / "out").exists()


def test_export_of_a_sentence_transformers_folder_without_a_tokenizer_is_refused(sentence_model, tmp_path, capsys):
    strip_tokenizer(sentence_model)
    refused(run(["export", sentence_model, tmp_path / "out"]), capsys, "no tokenizer vocabulary")


def test_finetune_takes_the_tokenizer_given_for_a_folder_without_one(classifier, task, tmp_path, capsys):
    tokenizer = tmp_path / "tokenizer"
    shutil.copytree(classifier, tokenizer)
    strip_tokenizer(classifier)
    code = run(["finetune", "--model", classifier, "--tokenizer", tokenizer, *task_args(task, tmp_path / "out"),
                "--max-steps", 1])
    assert code == 0, capsys.readouterr().err[-3000:]
    assert (tmp_path / "out" / "tokenizer.json").is_file()


def test_upload_refuses_nan_weights_before_staging(classifier, tmp_path, capsys):
    """`upload` loads through the Hub publisher's load_for_hub, which runs the same gate."""
    poison(classifier / "model.safetensors", POISONED)
    code = run(["upload", classifier, "--repo-id", "someone/model", "--dry-run", tmp_path / "staged"])
    err = capsys.readouterr().err
    assert code != 0 and "NaN or Inf" in err and str(classifier / "model.safetensors") in err, err[-3000:]
    assert not (tmp_path / "staged").exists()
