"""Seq2seq from the command line: `sharedbert finetune` on your own source/target pairs (checked before training,
scored with chrF and BLEU, resumable) and `sharedbert generate` for a file of inputs."""

import json
import random
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import REPO_ROOT, start_child
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, BertConfig, BertModel

from sharedbert.cli import main as cli
from sharedbert.data import DataError
from sharedbert.data.pairs import read_pairs, read_sources
from sharedbert.training.finetuning import finetune

WORDS = ["red", "green", "blue", "small", "large", "dog", "cat", "bird", "runs", "sleeps", "sings", "the", "a"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_path).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """Copying short word sequences, as JSON lines (train) and CSV (validation)."""
    folder = tmp_path_factory.mktemp("pairs")
    rng = random.Random(0)
    rows = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 6))) for _ in range(48)]
    (folder / "train.jsonl").write_text("".join(json.dumps({"src": r, "tgt": r}) + "\n" for r in rows[:40]))
    (folder / "dev.csv").write_text("src,tgt\n" + "".join(f"{r},{r}\n" for r in rows[40:]))
    return folder


def arguments(pairs, model, out, *extra):
    return ["finetune", "--model", str(model), "--train-file", str(pairs / "train.jsonl"), "--validation-file",
            str(pairs / "dev.csv"), "--source-column", "src", "--target-column", "tgt", "--max-length", "16",
            "--batch-size", "8", "--max-steps", "6", "--evaluations", "2", "--precision", "fp32", "--output-dir",
            str(out), *extra]


# --- bad files are refused before anything is loaded ------------------------------------------------------------


@pytest.mark.parametrize("name, content, message", [
    ("missing.csv", None, "file not found"),
    ("bad.csv", "src,text\na,b\n", "line 1: no column \\[.tgt.\\]"),
    ("empty-target.jsonl", '{"src": "a b", "tgt": "a b"}\n{"src": "c", "tgt": " "}\n', "line 2: the target"),
    ("broken.jsonl", '{"src": "a", "tgt": "a"}\n{"src": "b",\n', "line 2: invalid JSON"),
    ("latin1.csv", "src,tgt\ncaf\xe9,caf\xe9\n".encode("latin-1"), "line 2.*not UTF-8"),
    ("notes.docx", "src,tgt\n", "unknown file type"),
])
def test_a_bad_pairs_file_is_refused_with_its_line_and_the_fix(tmp_path, name, content, message):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_pairs(path, "src", "tgt")
    # Through the job, with a model that does not exist: the data is checked first, nothing is trained or written.
    good = tmp_path / "good.csv"
    good.write_text("src,tgt\na b,a b\n")
    with pytest.raises(DataError, match=message):
        finetune(model=str(tmp_path / "no-model"), train_file=str(path), validation_file=str(good),
                 source_column="src", target_column="tgt", output_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_command_line_reports_a_bad_file_and_exits_2(tmp_path, pairs, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("src,target\na,b\n")
    code = cli(["finetune", "--train-file", str(bad), "--validation-file", str(pairs / "dev.csv"),
                "--source-column", "src", "--target-column", "tgt", "--output-dir", str(tmp_path / "o")])
    assert code == 2 and "line 1: no column ['tgt']" in capsys.readouterr().err


def test_sources_come_from_lines_or_a_column(tmp_path):
    (tmp_path / "in.txt").write_text("first one\nsecond\n\n")
    assert read_sources(tmp_path / "in.txt") == ["first one", "second"]
    (tmp_path / "gap.txt").write_text("first\n\nthird\n")
    with pytest.raises(DataError, match="line 2: an empty line"):
        read_sources(tmp_path / "gap.txt")
    (tmp_path / "in.jsonl").write_text('{"text": "x y"}\n')
    assert read_sources(tmp_path / "in.jsonl", "text") == ["x y"]
    with pytest.raises(DataError, match="--source-column"):
        read_sources(tmp_path / "in.jsonl")


# --- fine-tuning, generation and resume ---------------------------------------------------------------------------


def test_finetune_warm_starts_a_fully_shared_model_scores_it_and_generate_writes_its_outputs(tmp_path, tiny_bert,
                                                                                              pairs, capsys):
    out = tmp_path / "seq2seq"
    assert cli(arguments(pairs, tiny_bert, out, "--share-encoder-decoder-layers",
                         "--share-encoder-decoder-embeddings")) == 0
    result = json.loads((out / "eval_results.json").read_text())
    assert set(result["metrics"]) == {"chrf", "bleu"} and all(0 <= v <= 100 for v in result["metrics"].values())
    assert result["cross_attention_type"] == "standard" and result["total_steps"] == 6
    model = AutoModelForSeq2SeqLM.from_pretrained(out, trust_remote_code=True)
    assert model.config.share_encoder_decoder_layers and model.decoder.attention is None
    (tmp_path / "in.txt").write_text("the red dog\na small cat sings\nblue\n")
    capsys.readouterr()
    generated = tmp_path / "out.jsonl"
    for beams in ("1", "2"):
        assert cli(["generate", str(out), "--input", str(tmp_path / "in.txt"), "--output", str(generated),
                    "--num-beams", beams, "--max-new-tokens", "8", "--overwrite"]) == 0
        rows = [json.loads(line) for line in generated.read_text().splitlines()]
        assert [row["source"] for row in rows] == ["the red dog", "a small cat sings", "blue"]  # the input's order
        assert all(isinstance(row["output"], str) for row in rows)
    assert cli(["generate", str(out), "--input", str(tmp_path / "in.txt"), "--output", str(generated)]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert cli(["generate", str(tiny_bert), "--input", str(tmp_path / "in.txt"), "--output",
                str(tmp_path / "encoder.jsonl")]) == 2  # an encoder, not a seq2seq model
    assert "is not a seq2seq model" in capsys.readouterr().err and not (tmp_path / "encoder.jsonl").exists()


@pytest.mark.parametrize("no_convert", [False, True])
def test_a_bert_converted_on_the_fly_is_warned_about_with_the_fixes(tiny_bert, pairs, caplog, no_convert):
    from sharedbert.training.seq2seq_finetuning import Seq2SeqFinetuneArguments, load_seq2seq

    args = Seq2SeqFinetuneArguments(model=str(tiny_bert), train_file=str(pairs / "train.jsonl"),
                                    validation_file=str(pairs / "dev.csv"), source_column="src", target_column="tgt",
                                    no_convert=no_convert)
    warned = not no_convert
    with caplog.at_level("WARNING", logger="sharedbert.training.seq2seq_finetuning"):
        model, _ = load_seq2seq(args, AutoTokenizer.from_pretrained(tiny_bert))
    assert model.config.attention_type == ("shared" if warned else "standard")
    messages = " ".join(r.getMessage() for r in caplog.records if r.name.endswith("seq2seq_finetuning"))
    if warned:
        assert "unhealed" in messages and "--heal" in messages and "--no-convert" in messages
    else:
        assert messages == ""


@pytest.mark.slow
def test_a_killed_run_resumes_and_ends_where_an_uninterrupted_one_does(tmp_path, tiny_bert, pairs):
    command = [sys.executable, "-m", "sharedbert.cli", *arguments(pairs, tiny_bert, tmp_path / "run",
                                                                   "--checkpoint-steps", "2")]
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    child = start_child(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoints = tmp_path / "run-checkpoints"
    deadline = time.monotonic() + 300
    while not any(checkpoints.glob("checkpoint-*")) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=300) == 130 and not (tmp_path / "run").exists()
    assert cli(arguments(pairs, tiny_bert, tmp_path / "run", "--checkpoint-steps", "2")) == 0
    assert cli(arguments(pairs, tiny_bert, tmp_path / "straight")) == 0
    resumed, straight = (json.loads((tmp_path / name / "trainer_log.json").read_text()) for name in ("run",
                                                                                                     "straight"))
    last = [next(e["loss"] for e in reversed(log) if "loss" in e) for log in (resumed, straight)]
    assert last[0] == pytest.approx(last[1], rel=1e-5)
    assert not checkpoints.exists()  # discarded once the output is saved
