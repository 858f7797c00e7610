"""Healing by distillation: the loss falls, resume continues exactly, Ctrl-C saves, bad corpora fail clearly; the CLI
and the sentence-embedding helper."""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, BertConfig, BertModel, BertTokenizer

from sharedbert.conversion.bert import from_bert
from sharedbert import sentence_embeddings
from sharedbert.sentence_embeddings import encode, sts_spearman
from sharedbert.data import TextInMemory, TextPieces
from sharedbert.training.healing import HealingBatches, heal
from sharedbert.training.healing_arguments import HealConfig
from sharedbert.data import DataError

WORDS = ("the a man woman dog cat plays runs sees guitar ball park river city old young small big red blue green "
         "quickly slowly and or but with on in under over near house tree car book song day night sun moon").split()


def make_tokenizer():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS
    return BertTokenizer(vocab={token: i for i, token in enumerate(vocab)})


def make_teacher():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(WORDS) + 7, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    return BertModel(config).eval()


@pytest.fixture
def corpus(tmp_path):
    """Two files: one UTF-8 with CRLF line ends, one Latin-1 (undecodable as UTF-8), as in the shared mlm-text."""
    g = torch.Generator().manual_seed(0)
    sentences = [" ".join(WORDS[i] for i in torch.randint(len(WORDS), (12,), generator=g)) + " ." for _ in range(120)]
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_bytes("\r\n".join(sentences[:60]).encode())
    (folder / "b.txt").write_bytes(("caf\xe9 " + "\n".join(sentences[60:])).encode("latin-1"))
    return folder


def small_config(**overrides):
    values = dict(max_steps=12, batch_size=8, min_words=4, max_words=12, learning_rate=3e-3, warmup_steps=2,
                  checkpoint_minutes=1e9, progress=False, threads=1)
    values.update(overrides)
    return HealConfig(**values)


def test_text_pieces_decode_any_bytes_and_are_reproducible(corpus):
    pieces = TextPieces(corpus, 4, 12, seed=0)
    assert all(4 <= len(p.split()) <= 12 for p in pieces.pieces[:-1])
    assert "caf\ufffd" in " ".join(pieces.pieces)  # Latin-1 é replaced, not a crash
    assert pieces.batch(5, 3) == TextPieces(corpus, 4, 12, seed=0).batch(5, 3)
    # Positions run on across epochs: position len(pieces) starts a new permutation of the same pieces.
    n = len(pieces)
    assert sorted(pieces.batch(n, n)) == sorted(pieces.pieces)


def test_healing_reports_the_precision_it_ran_in(corpus, tmp_path):
    """"auto" means bf16 on one CPU and fp32 on another, so the result says which one ran, and bf16 really ran."""
    from sharedbert.precision import resolve_precision

    teacher, tokenizer = make_teacher(), make_tokenizer()
    results = {}
    for precision in ("fp32", "bf16", "auto"):
        student = from_bert(teacher, attention_type="shared")
        results[precision] = heal(student, teacher, tokenizer, corpus, tmp_path / precision,
                                  small_config(max_steps=2, precision=precision), resume=False)
    assert [results[p].precision for p in ("fp32", "bf16")] == ["fp32", "bf16"]
    assert results["auto"].precision == resolve_precision("auto")
    assert results["fp32"].losses != results["bf16"].losses  # the same steps, rounded differently


def test_text_in_memory_is_a_corpus_with_its_own_fingerprint(corpus, tmp_path):
    """A task's sentences heal without being written to files; the fingerprint follows the texts, so a checkpoint
    healed on other sentences is not resumed silently."""
    texts = [" ".join(WORDS[i : i + 9]) for i in range(30)]
    in_memory = TextInMemory("thirty sentences", texts)
    pieces = TextPieces(in_memory, 4, 12, seed=0)
    assert pieces.files == [] and " ".join(pieces.pieces).split() == " ".join(texts).split()
    assert pieces.fingerprint == TextPieces(TextInMemory("thirty sentences", list(texts)), 4, 12, seed=0).fingerprint
    assert pieces.fingerprint != TextPieces(TextInMemory("thirty sentences", texts[:-1] + ["a b c d"]), 4, 12,
                                            seed=0).fingerprint
    with pytest.raises(TypeError, match="other than strings"):
        TextInMemory("labels", [1, 0])
    with pytest.raises(ValueError, match="holds 2 words"):
        TextPieces(TextInMemory("two words", ["too short"]), 4, 12, seed=0)

    teacher, tokenizer = make_teacher(), make_tokenizer()
    student = from_bert(teacher, attention_type="shared")
    result = heal(student, teacher, tokenizer, in_memory, tmp_path / "ck", small_config(max_steps=3), resume=False)
    assert result.steps == 3
    with pytest.raises(ValueError, match="another corpus"):  # resuming on other text is refused
        heal(student, teacher, tokenizer, corpus, tmp_path / "ck", small_config(max_steps=6))


def test_healing_lowers_the_distillation_loss(corpus, tmp_path):
    teacher, tokenizer = make_teacher(), make_tokenizer()
    student = from_bert(teacher, attention_type="shared")
    result = heal(student, teacher, tokenizer, corpus, tmp_path / "ck", small_config(max_steps=25), resume=False)
    assert result.steps == 25 and not result.interrupted
    assert sum(result.losses[-5:]) / 5 < 0.7 * sum(result.losses[:5]) / 5
    assert json.loads((tmp_path / "ck" / "checkpoint-25" / "trainer_state.json").read_text())["global_step"] == 25
    # The teacher is untouched.
    torch.testing.assert_close(teacher.encoder.layer[0].attention.self.query.weight,
                               make_teacher().encoder.layer[0].attention.self.query.weight)


def test_the_relational_term_compares_in_batch_similarities_and_is_weighted_in():
    """similarity_weight adds the squared gap between the student's and the teacher's in-batch cosine-similarity
    matrices: zero for an exact copy and for a batch of one, positive for a shared conversion, and it enters the
    total with its weight (the default 0 leaves the loss as it was)."""
    from sharedbert.training.distillation import Distiller

    teacher, tokenizer = make_teacher(), make_tokenizer()
    batch = tokenizer(["the man plays guitar .", "a dog runs in the park", "old red car"], padding=True,
                      return_tensors="pt")
    copy = from_bert(teacher, attention_type="standard").eval()
    shared = from_bert(teacher, attention_type="shared").eval()
    torch.manual_seed(1)
    with torch.no_grad():  # move the conversion further off the teacher
        for name, weight in shared.named_parameters():
            if name.endswith("shared_proj.weight"):
                weight.add_(0.3 * torch.randn_like(weight))
    with torch.no_grad():
        _, exact = Distiller(copy, teacher, small_config()).loss(batch)
        plain, parts = Distiller(shared, teacher, small_config()).loss(batch)
        weighted, _ = Distiller(shared, teacher, small_config(similarity_weight=10.0)).loss(batch)
        _, single = Distiller(shared, teacher, small_config()).loss({k: v[:1] for k, v in batch.items()})
    assert exact["similarity"] < 1e-10 and single["similarity"] < 1e-10
    assert parts["similarity"] > 1e-6
    assert float(plain) == pytest.approx(parts["hidden"] + parts["attention"] + parts["embedding"], rel=1e-5)
    assert float(weighted - plain) == pytest.approx(10.0 * parts["similarity"], rel=1e-4)
    with pytest.raises(ValueError, match="similarity_weight must be >= 0"):
        small_config(similarity_weight=-1.0)


@pytest.mark.slow
def test_resume_continues_exactly_like_an_uninterrupted_run(corpus, tmp_path):
    teacher, tokenizer = make_teacher(), make_tokenizer()
    config = small_config(max_steps=8)
    straight = from_bert(teacher, attention_type="pairwise")
    full = heal(straight, teacher, tokenizer, corpus, tmp_path / "a", config, resume=False)

    first = from_bert(teacher, attention_type="pairwise")
    part = heal(first, teacher, tokenizer, corpus, tmp_path / "b", config, resume=False, stop_after_steps=3)
    assert part.steps == 3 and part.interrupted
    assert [p.name for p in (tmp_path / "b").glob("checkpoint-*")] == ["checkpoint-3"]
    assert json.loads((tmp_path / "b" / "checkpoint-3" / "trainer_state.json").read_text())["global_step"] == 3
    # The data of a step is a function of the step: the short and long pieces read before it.
    long_steps = sum(config.is_long_step(step) for step in range(3))
    assert HealingBatches(corpus, config, 8).positions(3) == (
        (3 - long_steps) * config.batch_size, long_steps * config.resolved_long_batch_size())
    # A fresh process would start from a fresh conversion: resume must restore weights, optimizer, schedule, data.
    second = from_bert(teacher, attention_type="pairwise")
    rest = heal(second, teacher, tokenizer, corpus, tmp_path / "b", config, resume=True)
    assert rest.steps == 8 and not rest.interrupted
    assert rest.losses == pytest.approx(full.losses, rel=1e-4)
    for (name, a), b in zip(straight.state_dict().items(), second.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)

    # A checkpoint of another attention type is refused, not loaded partially.
    with pytest.raises(ValueError, match=r"does not match the model .*shared_proj.*--no-resume"):
        heal(from_bert(teacher, attention_type="shared"), teacher, tokenizer, corpus, tmp_path / "b", config,
             resume=True)
    # Nor is one healed by another recipe: a larger budget would restart the annealed learning rate mid-way.
    with pytest.raises(ValueError, match=r"other settings \(max_steps 8 -> 20; learning_rate 0.003 -> 0.001\).*"
                                         r"--no-resume"):
        heal(from_bert(teacher, attention_type="pairwise"), teacher, tokenizer, corpus, tmp_path / "b",
             small_config(max_steps=20, learning_rate=1e-3), resume=True)
    # Threads, checkpointing and a time cap on a step budget change how the run goes, not what it computes.
    again = heal(from_bert(teacher, attention_type="pairwise"), teacher, tokenizer, corpus, tmp_path / "b",
                 small_config(max_steps=8, threads=None, max_minutes=30.0, checkpoint_steps=2), resume=True)
    assert again.steps == 8 and again.losses == pytest.approx(full.losses, rel=1e-4)


def test_a_time_budget_stops_on_the_clock_anneals_over_it_and_is_not_exceeded_on_resume(corpus, tmp_path):
    """With minutes alone, training stops once the steps' own seconds reach the budget, the learning rate falls with
    the share of it used, and resuming a spent budget loads the checkpoint and trains no further."""
    teacher, tokenizer = make_teacher(), make_tokenizer()
    config = small_config(max_steps=None, max_minutes=0.01, warmup_steps=0)
    student = from_bert(teacher, attention_type="shared")
    result = heal(student, teacher, tokenizer, corpus, tmp_path / "ck", config, resume=False)
    assert result.steps > 1 and not result.interrupted and 0.6 <= result.elapsed_seconds < 30
    log = json.loads((tmp_path / "ck" / f"checkpoint-{result.steps}" / "trainer_state.json").read_text())["log_history"]
    rates = [entry["learning_rate"] for entry in log if "learning_rate" in entry]
    assert rates == sorted(rates, reverse=True) and rates[-1] < 0.5 * config.learning_rate
    again = heal(from_bert(teacher, attention_type="shared"), teacher, tokenizer, corpus, tmp_path / "ck", config)
    assert again.steps == result.steps and again.losses == result.losses


def _as_old_loop_checkpoint(checkpoint, teacher, config, corpus, losses, elapsed):
    """Rewrite a Trainer checkpoint of a healing run as the loop before Trainer saved its state: one `latest/` folder
    holding the weights (safetensors) and config, the optimizer's tensors in `optimizer.safetensors` and torch's
    generator state in `rng.safetensors`, and as `trainer_state.json` the loop's progress with the optimizer's
    param groups and scalars, the scheduler and the Python and NumPy generator states (what sharedbert's
    `checkpointing.writing_checkpoint` wrote until it was deleted as unused)."""
    import random

    import numpy as np
    from safetensors.torch import save_file, save_model

    from sharedbert.training.checkpointing import restore_weights
    from sharedbert.training.healing import _lr_lambda, _optimizer, HealingClock

    student = from_bert(teacher, attention_type="pairwise")
    restore_weights(checkpoint, student)
    optimizer = _optimizer(student, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(config, HealingClock()))
    optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", weights_only=True))  # after: LambdaLR sets lr
    scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=True))
    step = int(checkpoint.name.split("-")[1])
    position, long_position = HealingBatches(corpus, config, config.max_steps).positions(step)
    state = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, values in state["state"].items():
        for name, value in values.items():
            if torch.is_tensor(value):
                tensors[f"{index}.{name}"] = value.detach().contiguous()
            else:
                scalars[f"{index}.{name}"] = value
    version, internal, gauss = random.getstate()
    kind, keys, rng_position, has_gauss, cached_gaussian = np.random.get_state()
    rng = {"python": [version, list(internal), gauss],
           "numpy": [kind, keys.tolist(), int(rng_position), int(has_gauss), float(cached_gaussian)]}
    progress = dict(step=step, elapsed_seconds=elapsed, position=position, long_position=long_position,
                    corpus=TextPieces(corpus, config.min_words, config.max_words, config.seed).fingerprint,
                    losses=losses, snapshots_done=[], heal_config=config.heal_settings(),
                    optimizer={"param_groups": state["param_groups"], "scalars": scalars},
                    scheduler=scheduler.state_dict(), rng=[rng])
    legacy = checkpoint.parent / "latest"
    legacy.mkdir()
    save_model(student, str(legacy / "model.safetensors"))
    student.config.to_json_file(str(legacy / "config.json"))
    save_file(tensors, str(legacy / "optimizer.safetensors"))
    save_file({"0.torch": torch.get_rng_state()}, str(legacy / "rng.safetensors"))
    (legacy / "trainer_state.json").write_text(json.dumps(progress, indent=1), encoding="utf-8")
    shutil.rmtree(checkpoint)
    return legacy


@pytest.mark.slow
def test_a_checkpoint_of_the_old_healing_loop_resumes_exactly(corpus, tmp_path):
    """Healing checkpoints written before healing ran on Trainer (one `latest/` folder) are rewritten as Trainer
    checkpoints and go on to the same losses and weights as a run never stopped; one whose data positions do not
    follow from its step (written before long batches) is refused by name, never restarted over."""
    teacher, tokenizer = make_teacher(), make_tokenizer()
    config = small_config(max_steps=8, long_fraction=0.5, long_min_words=20, long_max_words=30)
    straight = from_bert(teacher, attention_type="pairwise")
    full = heal(straight, teacher, tokenizer, corpus, tmp_path / "a", config, resume=False)
    part = heal(from_bert(teacher, attention_type="pairwise"), teacher, tokenizer, corpus, tmp_path / "b", config,
                resume=False, stop_after_steps=3)
    legacy = _as_old_loop_checkpoint(tmp_path / "b" / "checkpoint-3", teacher, config, corpus, part.losses, 1.5)
    from sharedbert.training.healing import has_checkpoint

    assert has_checkpoint(tmp_path / "b")  # so `convert` treats it as a resumption (no new calibration)
    second = from_bert(teacher, attention_type="pairwise")
    rest = heal(second, teacher, tokenizer, corpus, tmp_path / "b", config)
    assert rest.steps == 8 and not legacy.exists() and rest.elapsed_seconds > 1.5
    assert rest.losses == pytest.approx(full.losses, rel=1e-4)
    for (name, a), b in zip(straight.state_dict().items(), second.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)

    part = heal(from_bert(teacher, attention_type="pairwise"), teacher, tokenizer, corpus, tmp_path / "c", config,
                resume=False, stop_after_steps=3)
    legacy = _as_old_loop_checkpoint(tmp_path / "c" / "checkpoint-3", teacher, config, corpus, part.losses, 1.5)
    state = json.loads((legacy / "trainer_state.json").read_text())
    del state["long_position"]  # as written before long batches
    (legacy / "trainer_state.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"latest was healed by an earlier sharedbert with other batches.*"
                                         r"--no-resume"):
        heal(from_bert(teacher, attention_type="pairwise"), teacher, tokenizer, corpus, tmp_path / "c", config)
    assert legacy.is_dir() and not list((tmp_path / "c").glob("checkpoint-*"))
    result = heal(from_bert(teacher, attention_type="pairwise"), teacher, tokenizer, corpus, tmp_path / "c", config,
                  resume=False)
    assert result.steps == 8 and not legacy.exists()


# Healing in a process of its own, as a user runs it, that sends itself Ctrl-C after step 2; then, as a training run
# does, it waits inside `sigint_stops` for the test's own Ctrl-C. In a child, because a SIGINT that escaped the handler
# would end a pytest worker rather than fail one test.
CTRL_C_DURING_HEALING = """
import json, os, signal, sys, time
from pathlib import Path
from test_heal import make_teacher, make_tokenizer, small_config
from sharedbert.conversion.bert import from_bert
from sharedbert.training.checkpointing import sigint_stops
from sharedbert.training.healing import heal

corpus, checkpoints = Path(sys.argv[1]), Path(sys.argv[2])
teacher, tokenizer = make_teacher(), make_tokenizer()
found = signal.getsignal(signal.SIGINT)

def interrupt(step, loss):
    if step == 2:
        os.kill(os.getpid(), signal.SIGINT)

result = heal(from_bert(teacher, attention_type="symmetric"), teacher, tokenizer, corpus, checkpoints,
              small_config(), resume=False, on_step=interrupt)
print(json.dumps({"interrupted": result.interrupted, "steps": result.steps,
                  "handler_put_back": signal.getsignal(signal.SIGINT) is found}), flush=True)

with sigint_stops({}) as flag:
    print("ready", flush=True)
    deadline = time.monotonic() + 60
    while not flag.get("stop") and time.monotonic() < deadline:
        time.sleep(0.01)
print("stopped" if flag.get("stop") else "ran to its end")
"""


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_stops_in_a_child_started_while_the_suite_ignores_it(corpus, tmp_path):
    """Ctrl-C during healing saves a checkpoint and stops, and a child a test stops with Ctrl-C gets it when the suite
    runs in the background. `make test &` starts the suite with SIGINT ignored; a child started with plain Popen
    inherits that, ignores the test's SIGINT and runs to its end (test_seq2seq_study's stopped cell then finished and
    exited 0). The suite's `start_child` gives the child SIGINT at its default, so `sigint_stops` handles it as in a
    terminal: here both the SIGINT the healing child sends itself and the one this test sends it. One child checks
    both, as each would spend most of its time importing torch and transformers."""
    from conftest import start_child

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    found = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job of a non-interactive shell
    try:
        # stderr to a file: read only at the end, a pipe could fill and stall the child while stdout is read
        with open(tmp_path / "stderr.txt", "w") as stderr_file:
            child = start_child([sys.executable, "-c", CTRL_C_DURING_HEALING, str(corpus), str(tmp_path / "ck")],
                                stdout=subprocess.PIPE, stderr=stderr_file, text=True, env=env)
    finally:
        signal.signal(signal.SIGINT, found)
    printed = []
    while not printed or printed[-1] not in ("ready", ""):
        printed.append(child.stdout.readline().strip())
    if printed[-1] == "ready":
        child.send_signal(signal.SIGINT)
    stdout, _ = child.communicate(timeout=300)
    assert child.returncode == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert printed[-1] == "ready", (tmp_path / "stderr.txt").read_text()[-3000:]
    result = json.loads(printed[-2])
    assert result["interrupted"] and result["steps"] in (2, 3)  # the step in flight finishes
    state = json.loads((tmp_path / "ck" / f"checkpoint-{result['steps']}" / "trainer_state.json").read_text())
    assert state["global_step"] == result["steps"]
    assert result["handler_put_back"]  # the handler found on entry is in place again
    assert stdout.split() == ["stopped"]  # the test's SIGINT reached the child's handler


# A process started with SIGINT ignored (as a background job is): Ctrl-C handling must leave it ignored, so a SIGINT
# neither stops training nor kills the process, and nothing else is installed on the way.
SIGINT_IGNORED_CHILD = """
import os, signal
from sharedbert.training.checkpointing import sigint_stops

assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN, "the child should start with SIGINT ignored"
with sigint_stops({}) as flag:
    inside = signal.getsignal(signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C would abort if a handler had been installed
print(inside is signal.SIG_IGN, bool(flag.get("stop")), signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
"""


@pytest.mark.slow
def test_ctrl_c_stays_ignored_in_a_process_that_started_with_it_ignored():
    completed = subprocess.run(
        [sys.executable, "-c", SIGINT_IGNORED_CHILD], capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # inherited through exec, as with `cmd &`
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    # Ignored while active (no handler installed), no stop requested, still ignored afterwards.
    assert completed.stdout.split() == ["True", "False", "True"]


def test_healing_runs_to_its_budget_when_ctrl_c_is_ignored(corpus, tmp_path):
    teacher, tokenizer = make_teacher(), make_tokenizer()
    student = from_bert(teacher, attention_type="shared")
    found = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        def interrupt(step, loss):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            if step == 2:
                os.kill(os.getpid(), signal.SIGINT)

        result = heal(student, teacher, tokenizer, corpus, tmp_path / "ck", small_config(max_steps=5), resume=False,
                      on_step=interrupt)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, found)
    assert result.steps == 5 and not result.interrupted


def test_bad_corpus_and_budget_give_clear_errors(tmp_path):
    teacher, tokenizer = make_teacher(), make_tokenizer()
    student = from_bert(teacher, attention_type="shared")
    with pytest.raises(DataError, match="no such file or folder"):
        heal(student, teacher, tokenizer, tmp_path / "missing.txt", tmp_path / "ck", small_config())
    (tmp_path / "empty.txt").write_text("  \n\r\n")
    with pytest.raises(ValueError, match="holds 0 words"):
        heal(student, teacher, tokenizer, tmp_path / "empty.txt", tmp_path / "ck", small_config())
    (tmp_path / "no-text").mkdir()
    with pytest.raises(DataError, match=r"no text files \(\.txt"):
        heal(student, teacher, tokenizer, tmp_path / "no-text", tmp_path / "ck", small_config())
    with pytest.raises(ValueError, match="budget"):
        HealConfig()


def test_convert_command_heals_and_saves_a_loadable_folder(corpus, tmp_path, capsys):
    from sharedbert.cli import main

    make_teacher().save_pretrained(tmp_path / "bert")
    make_tokenizer().save_pretrained(tmp_path / "bert")
    out = tmp_path / "out"
    code = main(["convert", str(tmp_path / "bert"), str(out), "--attention-type", "shared", "--heal", "--corpus",
                 str(corpus), "--steps", "3", "--batch-size", "4", "--no-progress", "--threads", "1",
                 "--max-length", "24", "--long-fraction", "0", "--precision", "fp32"])
    assert code == 0
    printed = capsys.readouterr().err  # the library's log, which the command shows on stderr
    assert "attention set 1:" in printed and "Healed 3 steps" in printed
    from sharedbert.training.checkpointing import read_run_record

    state = read_run_record(tmp_path / "out-checkpoints" / "checkpoint-3")["record"]  # kept in Trainer's own state
    assert {k: state["heal_config"][k] for k in ("max_length", "long_fraction", "precision")} == {
        "max_length": 24, "long_fraction": 0.0, "precision": "fp32"}  # the healing options reach the run
    model = AutoModel.from_pretrained(out)
    assert model.config.attention_type == "shared" and model.config.converted_from == str(tmp_path / "bert")
    assert "base_model: " + str(tmp_path / "bert") in (out / "README.md").read_text()
    assert (out / "tokenizer.json").is_file() and (tmp_path / "out-checkpoints" / "checkpoint-3").is_dir()
    # Without --corpus, healing reads the shared raw text (build-minilm's default too): another corpus than the
    # checkpoint's, which is refused; without the shared data, the missing default is named with its variable.
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "bert"), str(out), "--heal", "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert "trained on another corpus" in err or "SHAREDBERT_DATA" in err, err
    assert main(["convert", str(tmp_path / "bert"), str(out), "--heal", "--corpus", str(tmp_path / "nope"),
                 "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert "sharedbert convert: error:" in err and "no such file or folder" in err


def test_convert_command_with_neither_heal_nor_corpus_only_converts(tmp_path, capsys):
    """`sharedbert convert SRC OUT`: the --heal switch shares its name with ConvertArguments.heal (a HealConfig, set
    from Python only), which must stay unset when the switch is off."""
    from sharedbert.cli import main

    make_teacher().save_pretrained(tmp_path / "bert")
    make_tokenizer().save_pretrained(tmp_path / "bert")
    assert main(["convert", str(tmp_path / "bert"), str(tmp_path / "out")]) == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "out" / "conversion_report.json").read_text())
    assert report["heal"] is None and report["calibration"] is None
    assert AutoModel.from_pretrained(tmp_path / "out").config.attention_type == "shared"


def test_convert_with_a_corpus_calibrates_first_and_not_again_when_healing_resumes(corpus, tmp_path, capsys):
    from sharedbert.cli import main
    from sharedbert.recipes.convert_and_heal import convert_checkpoint

    make_teacher().save_pretrained(tmp_path / "bert")
    make_tokenizer().save_pretrained(tmp_path / "bert")
    common = [str(tmp_path / "bert"), "--attention-type", "shared", "--no-progress", "--threads", "1"]

    def convert(out, *extra):
        assert main(["convert", common[0], str(tmp_path / out), *common[1:], *extra]) == 0
        return capsys.readouterr().err, json.loads((tmp_path / out / "conversion_report.json").read_text())

    printed, report = convert("calibrated", "--corpus", str(corpus), "--calibration-sentences", "16")
    assert "Calibrated on 16 pieces" in printed and report["calibration"]["sentences"] == 16 and report["heal"] is None
    assert "Calibrated in closed form on 16 pieces" in (tmp_path / "calibrated" / "README.md").read_text()
    printed, report = convert("plain", "--corpus", str(corpus), "--calibration-sentences", "0")
    assert "Calibrat" not in printed and report["calibration"] is None
    calibrated, plain = (AutoModel.from_pretrained(tmp_path / name) for name in ("calibrated", "plain"))
    weight = "encoder.attention.0.self.shared_proj.weight"
    assert not torch.equal(calibrated.state_dict()[weight], plain.state_dict()[weight])

    heal_args = ("--corpus", str(corpus), "--calibration-sentences", "16", "--heal", "--steps", "2", "--batch-size",
                 "4")
    printed, _ = convert("healed", *heal_args)
    assert "Calibrated on 16 pieces" in printed and "Healed 2 steps" in printed
    printed, report = convert("healed", *heal_args)  # resumes from the finished checkpoint: nothing to calibrate
    assert "Calibration skipped: healing resumes from a checkpoint" in printed
    assert report["calibration"]["sentences"] == 16  # ... yet the resumed student was calibrated: the report says so
    assert "Calibrated in closed form on 16 pieces" in (tmp_path / "healed" / "README.md").read_text()
    with pytest.raises(ValueError, match="calibrated on 16 pieces, but this run's would be not calibrated: pass "
                                         "--calibration-sentences 16"):
        convert_checkpoint(src=str(tmp_path / "bert"), out=tmp_path / "healed", corpus=corpus,
                           calibration_sentences=0, heal=dict(max_steps=2, batch_size=4, progress=False))
    assert main(["convert", common[0], str(tmp_path / "healed"), *common[1:], *heal_args[:2], "--heal", "--steps",
                 "2", "--batch-size", "4"]) == 2  # the CLI's default (512 pieces) differs too: a clear error
    assert "pass --calibration-sentences 16" in capsys.readouterr().err
    printed, report = convert("healed", *heal_args[:2], "--calibration-sentences", "0", *heal_args[4:], "--no-resume")
    assert "Calibrat" not in printed and report["calibration"] is None  # starting afresh takes the new options
    printed, report = convert("healed", *heal_args[:2], "--calibration-sentences", "0", *heal_args[4:])
    assert report["calibration"] is None and "Calibrated" not in (tmp_path / "healed" / "README.md").read_text()
    printed, _ = convert("standard", "--corpus", str(corpus), "--attention-type", "standard")
    assert "Calibration skipped: standard attention converts exactly" in printed


class _Messages(logging.Handler):
    """What transformers logs (its loggers do not propagate to the root logger, where caplog listens)."""

    def __init__(self):
        super().__init__()
        self.text = ""

    def emit(self, record):
        self.text += record.getMessage() + "\n"


def test_converting_a_fine_tuned_classifier_shows_no_load_report_but_a_broken_encoder_does(corpus, tmp_path):
    """The demo converts the BERT it has just fine-tuned: loading its encoder as the teacher leaves the classifier
    behind, as it should, and transformers' "LOAD REPORT ... classifier.weight UNEXPECTED" table must not interrupt
    the conversion's output. A checkpoint whose encoder lacks a weight still gets the report."""
    from safetensors.torch import load_file, save_file
    from transformers import BertForSequenceClassification

    from sharedbert.recipes.convert_and_heal import convert_checkpoint
    from sharedbert.training.models import load_bert_encoder

    BertForSequenceClassification(make_teacher().config).save_pretrained(tmp_path / "classifier")
    make_tokenizer().save_pretrained(tmp_path / "classifier")
    messages, transformers_logger = _Messages(), logging.getLogger("transformers")
    transformers_logger.addHandler(messages)
    try:
        convert_checkpoint(src=str(tmp_path / "classifier"), out=tmp_path / "out", corpus=corpus,
                           calibration_sentences=8)
        assert "LOAD REPORT" not in messages.text
        weights = load_file(tmp_path / "classifier" / "model.safetensors")
        del weights["bert.encoder.layer.0.attention.self.query.weight"]
        save_file(weights, tmp_path / "classifier" / "model.safetensors", metadata={"format": "pt"})
        load_bert_encoder(tmp_path / "classifier")
    finally:
        transformers_logger.removeHandler(messages)
    assert "LOAD REPORT" in messages.text and "encoder.layer.0.attention.self.query.weight" in messages.text


def test_calibration_cuts_pieces_to_a_short_position_table(corpus, tmp_path):
    """Calibration pieces run up to 40 words; a model with a 24-position table calibrates on them cut to 24 tokens
    (it used to fail with 'Sequence length ... exceeds max_position_embeddings')."""
    from sharedbert.recipes.convert_and_heal import convert_checkpoint

    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(WORDS) + 7, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=48, max_position_embeddings=24)).save_pretrained(tmp_path / "bert")
    make_tokenizer().save_pretrained(tmp_path / "bert")
    report = convert_checkpoint(src=str(tmp_path / "bert"), out=tmp_path / "out", corpus=corpus,
                                calibration_sentences=16)
    assert report["calibration"]["sentences"] == 16


def test_healing_mixes_long_batches_up_to_the_position_table(corpus, tmp_path, monkeypatch):
    """A share of the steps reads long pieces, truncated at the position table (64 here), never beyond it."""
    teacher, tokenizer = make_teacher(), make_tokenizer()
    config = small_config(max_steps=10, long_fraction=0.5, long_min_words=60, long_max_words=90, long_batch_size=2)
    lengths = []
    from sharedbert.training.distillation import Distiller

    original = Distiller.loss

    def record(self, batch):
        lengths.append(tuple(batch["input_ids"].shape))
        return original(self, batch)

    monkeypatch.setattr(Distiller, "loss", record)
    heal(from_bert(teacher, attention_type="shared"), teacher, tokenizer, corpus, tmp_path / "ck", config,
         resume=False)
    long_steps = [step for step in range(10) if config.is_long_step(step)]
    assert 0 < len(long_steps) < 10
    for step, shape in enumerate(lengths):
        if step in long_steps:
            assert shape == (2, 64)  # 60-90 words of one token each, cut at the 64 positions
        else:
            assert shape[0] == config.batch_size and shape[1] <= 14
    with pytest.raises(ValueError, match="long_fraction"):
        small_config(long_fraction=1.5)
    with pytest.raises(ValueError, match="precision"):
        small_config(precision="fp16")


def test_healing_in_bf16_on_a_tiny_input(corpus, tmp_path):
    """precision="bf16" runs the loss under autocast (slow on CPUs without native bf16, so only 2 tiny steps)."""
    teacher, tokenizer = make_teacher(), make_tokenizer()
    config = small_config(max_steps=2, batch_size=2, max_length=16, long_fraction=0.0, precision="bf16")
    result = heal(from_bert(teacher, attention_type="shared"), teacher, tokenizer, corpus, tmp_path / "ck", config,
                  resume=False)
    assert result.steps == 2 and all(torch.isfinite(torch.tensor(result.losses)))


def make_sentence_transformer_bert(folder):
    """A tiny BERT saved as a sentence-transformers model, as all-MiniLM-L6-v2 is (Transformer → Pooling → Normalize,
    max_seq_length 48)."""
    make_teacher().save_pretrained(folder)
    make_tokenizer().save_pretrained(folder)
    sentence_embeddings.write_default_modules(folder, hidden_size=32, max_seq_length=48)
    return folder


def test_converting_a_sentence_transformers_model_keeps_its_modules(corpus, tmp_path):
    """The converted, healed folder loads in SentenceTransformer as Transformer → Pooling(mean) → Normalize with the
    source's max_seq_length, and its embeddings are unit-length and exactly what healing matched: the Pooling module
    applied to the encoder's output, normalised."""
    from sentence_transformers import SentenceTransformer

    from sharedbert.recipes import convert_checkpoint

    source = make_sentence_transformer_bert(tmp_path / "st-bert")
    out = tmp_path / "out"
    report = convert_checkpoint(src=str(source), out=out, heal=small_config(max_steps=3), corpus=corpus,
                                resume=False)
    assert set(report["sentence_transformers_files"]) == {"modules.json", "sentence_bert_config.json",
                                                          "1_Pooling/config.json"}
    model = SentenceTransformer(str(out), trust_remote_code=True, device="cpu")
    assert [type(m).__name__ for m in model] == ["Transformer", "Pooling", "Normalize"]
    assert model.max_seq_length == 48 and model[1].pooling_mode == "mean"
    sentences = ["the man plays guitar .", "a dog", "the old woman sees the big red car near the river ."]
    got = model.encode(sentences, convert_to_tensor=True)
    torch.testing.assert_close(got.norm(dim=-1), torch.ones(3))

    encoder = AutoModel.from_pretrained(out).eval()
    batch = make_tokenizer()(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = encoder(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    modules = json.loads((out / "modules.json").read_text(encoding="utf-8"))
    assert modules[-1]["type"].endswith(".Normalize")  # unit-length embeddings, as the original's


def test_encode_and_sts_go_through_sentence_transformers(tmp_path):
    source = make_sentence_transformer_bert(tmp_path / "st-bert")
    sentences = ["the man plays guitar .", "a dog", "the old woman sees the big red car near the river ."]
    vectors = encode(source, sentences, batch_size=2)
    assert vectors.shape == (3, 32)
    torch.testing.assert_close(vectors.norm(dim=-1), torch.ones(3))
    # An in-memory model gets the default modules (mean pooling, Normalize): the same vectors as its folder's.
    in_memory = encode(make_teacher(), sentences, tokenizer=make_tokenizer())
    torch.testing.assert_close(in_memory, vectors, rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="list"):
        encode(source, "a dog")
    with pytest.raises(ValueError, match="tokenizer"):
        encode(make_teacher(), sentences)
    # Identical pairs (cosine 1) scored 5, different pairs scored 0: the ranking agrees, whatever the weights.
    tsv = tmp_path / "dev.tsv"
    pairs = [(s, s, 5.0) for s in sentences] + [(a, b, 0.0) for a, b in zip(sentences, sentences[1:] + sentences[:1])]
    rows = ["index\tsentence1\tsentence2\tscore"] + [f"{i}\t{a}\t{b}\t{s}" for i, (a, b, s) in enumerate(pairs)]
    tsv.write_text("\n".join(rows) + "\n")
    assert sts_spearman(source, tsv) > 0.8
    with pytest.raises(ValueError, match="sentence1"):
        (tmp_path / "bad.tsv").write_text("a\tb\n1\t2\n")
        sts_spearman(source, tmp_path / "bad.tsv")


def test_convert_command_sets_the_low_rank_querys_rank(tmp_path, capsys):
    from sharedbert.cli import main

    make_teacher().save_pretrained(tmp_path / "bert")
    make_tokenizer().save_pretrained(tmp_path / "bert")
    code = main(["convert", str(tmp_path / "bert"), str(tmp_path / "out"), "--attention-type", "shared_lowrank_query",
                 "--attention-rank", "3"])
    assert code == 0, capsys.readouterr().err
    model = AutoModel.from_pretrained(tmp_path / "out")
    assert model.config.attention_type == "shared_lowrank_query" and model.config.attention_rank == 3
    assert model.encoder.attention[0].self.query_down.out_features == 3


def test_convert_command_converts_to_multi_query_attention_with_a_rank_r_query(tmp_path, capsys):
    from sharedbert.cli import main

    make_teacher().save_pretrained(tmp_path / "bert")
    make_tokenizer().save_pretrained(tmp_path / "bert")
    code = main(["convert", str(tmp_path / "bert"), str(tmp_path / "out"), "--attention-type", "standard",
                 "--num-key-value-heads", "1", "--query-rank", "4"])
    assert code == 0, capsys.readouterr().err
    model = AutoModel.from_pretrained(tmp_path / "out")
    assert model.config.num_key_value_heads == 1 and model.config.query_rank == 4
    attention = model.encoder.attention[0].self
    assert attention.query_down.out_features == 4 and attention.key.out_features == attention.head_dim


def test_healings_settings_still_import_and_unpickle_from_the_module_that_defined_them():
    """The settings moved from healing to healing_arguments; a user's `from sharedbert.training.healing import ...`
    and the TrainingArguments pickled into a Trainer checkpoint before the move (it names the class by its old module)
    still find them."""
    import pickle

    from sharedbert.training import healing, healing_arguments

    for name in ("HealConfig", "HealScheduleConfig", "HealDataConfig", "HealLossConfig", "HealRuntimeConfig",
                 "changed_settings", "RUNTIME_SETTINGS"):
        assert getattr(healing, name) is getattr(healing_arguments, name), name
    config = HealConfig(max_steps=3)
    moved = pickle.dumps(config, protocol=0)  # the text protocol: a module name is a line, free of length prefixes
    before_the_move = moved.replace(b"sharedbert.training.healing_arguments", b"sharedbert.training.healing")
    assert before_the_move != moved
    assert pickle.loads(before_the_move).heal_settings() == config.heal_settings()


def test_heal_config_is_training_arguments_keeping_healings_own_defaults_settings_and_optimizer(tmp_path):
    """HealConfig composes with TrainingArguments as the other jobs' arguments do: the Trainer takes it (a field of
    TrainingArguments set from Python reaches it), the five shared fields keep healing's defaults and meanings, what
    checkpoints and reports record is healing's own 26 settings, and the optimizer stays healing's (no weight decay
    on vectors such as shared attention's dq/dk/dv, which Trainer's default would decay)."""
    from transformers import TrainingArguments

    from sharedbert.training.healing import _optimizer, _training_arguments
    from sharedbert.training.healing_arguments import changed_settings

    config = HealConfig(max_minutes=1.0, max_grad_norm=0.5)
    assert isinstance(config, TrainingArguments)
    assert (config.max_steps, config.seed, config.warmup_steps) == (None, 0, 30)
    settings = config.heal_settings()
    assert len(settings) == 26 and "max_grad_norm" not in settings and "output_dir" not in settings
    assert json.loads(json.dumps(settings)) == settings
    assert changed_settings(settings, HealConfig(max_minutes=1.0, max_grad_norm=0.9)) == []
    arguments = _training_arguments(tmp_path, config, 8, "fp32")
    assert (arguments.max_steps, arguments.seed, arguments.max_grad_norm) == (8, 0, 0.5)
    assert arguments.output_dir == str(tmp_path) and arguments.per_device_train_batch_size == 1
    assert config.max_steps is None  # the run's copy, not the caller's settings
    student = from_bert(make_teacher(), attention_type="shared")
    groups = _optimizer(student, config).param_groups
    vectors = {id(p) for name, p in student.named_parameters() if name.endswith("_scale")}  # dq, dk, dv
    assert vectors and all(group["weight_decay"] == 0.0 for group in groups
                           if vectors & {id(p) for p in group["params"]})
