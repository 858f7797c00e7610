"""Faults during long work: `sharedbert pretrain` and `finetune` killed with SIGKILL at a random moment, or stopped
with Ctrl-C, resume from their last checkpoint and follow the same trajectory as a run never stopped (same loss at
every step, same final weights, same metrics); no half-written folder is left where the next command reads.

Each run that is stopped, and each run that resumes after a kill, is a real `python -m sharedbert` process on a tiny
model, with a corpus and a labelled data set made up here (so this runs where only the repository exists). What they
are compared with, the runs never stopped, and the commands that only read a checkpoint or discard it, run in this
process (conftest's `run_command_here`): the same `sharedbert` command line without the seconds a new Python spends
importing torch and transformers, which stopping and resuming do not involve."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import Trainer

from conftest import child_pythonpath, run_command_here, start_child

WORDS = ("the a film story actor plot scene music light dark slow quick long short night day city river song "
         "friend house road window garden paper stone").split()
GOOD, BAD = ("great", "wonderful", "lovely", "brilliant"), ("awful", "boring", "dreadful", "terrible")
TINY_MODEL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=64, attention_type="shared", layer_sharing="attention")
# A kill can land anywhere from the first checkpoint to near the end of the run. Every failure report of this module
# names the seed (tests/conftest.py), and SHAREDBERT_KILL_SEED replays it.
KILL_SEED = int(os.environ.get("SHAREDBERT_KILL_SEED", random.randrange(10**6)))


def _env():
    env = dict(os.environ, PYTHONPATH=child_pythonpath(), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    env.pop("SHAREDBERT_KILL_SEED", None)
    return env


def _command(*args):
    return [sys.executable, "-m", "sharedbert", *map(str, args)]


def _run(args, timeout=300):
    done = subprocess.run(_command(*args), env=_env(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _start(args):
    return start_child(_command(*args), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_checkpoint(checkpoint_dir: Path, step: int, process, timeout=240):
    """Block until a checkpoint of at least `step` is complete (Trainer writes its trainer_state.json last); returns
    its step."""
    from sharedbert.training.checkpointing import is_complete

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        steps = [int(p.name.split("-")[1]) for p in checkpoint_dir.glob("checkpoint-*")
                 if p.name.split("-")[1].isdigit() and is_complete(p)]
        if steps and max(steps) >= step:
            return max(steps)
        if process.poll() is not None:
            raise AssertionError(f"the run ended before checkpoint {step}: {process.stderr.read()[-3000:]}")
        time.sleep(0.02)
    raise AssertionError(f"no checkpoint {step} within {timeout} s")


def _kill_after_checkpoint(args, checkpoints: Path, step: int, delay: float = 0.0):
    """Start the command, wait for its checkpoint `step`, let it run `delay` seconds more, then SIGKILL it."""
    process = _start(args)
    _wait_for_checkpoint(checkpoints, step, process)
    time.sleep(delay)
    process.kill()
    process.communicate()
    assert process.returncode == -signal.SIGKILL, f"kill seed {KILL_SEED}: the run finished before the kill"


def _losses(folder: Path) -> dict[int, float]:
    log = json.loads((folder / "trainer_log.json").read_text())
    return {entry["step"]: entry["loss"] for entry in log if "loss" in entry}


def _assert_same_run(resumed: Path, reference: Path):
    expected, got = _losses(reference), _losses(resumed)
    assert got.keys() == expected.keys()
    for step in expected:
        assert got[step] == pytest.approx(expected[step], rel=1e-4, abs=1e-5), f"loss differs at step {step}"
    weights, reference_weights = load_file(resumed / "model.safetensors"), load_file(reference / "model.safetensors")
    assert weights.keys() == reference_weights.keys()
    for name, tensor in reference_weights.items():
        torch.testing.assert_close(weights[name], tensor, atol=1e-5, rtol=1e-4, msg=f"weight {name} differs")


def _options(extra: dict) -> list:
    """Command-line options from keywords: `no_resume=True` is the flag --no-resume, others take their value."""
    out = []
    for key, value in extra.items():
        out += [f"--{key.replace('_', '-')}"] + ([] if value is True else [value])
    return out


def _no_half_written_siblings(folder: Path):
    leftovers = [p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.")]
    assert leftovers == []


# ---------------------------------------------------------------------------------------------------------------------
# Pretraining


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("corpus")
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20))) + " ." for _ in range(600)]
    (folder / "text.txt").write_text("\n".join(lines) + "\n")
    config = folder / "tiny.json"
    config.write_text(json.dumps(TINY_MODEL))
    # One vocabulary for every run compared here: WordPiece training breaks ties in hash order, so two trainings can
    # differ (how a resumed run keeps its own is tested separately).
    from sharedbert.training.vocab import train_wordpiece

    train_wordpiece(lines, vocab_size=120).save_pretrained(folder / "tokenizer")
    return folder


# The pretraining runs killed are killed at a checkpoint up to step 40 plus up to 0.3 s: 80 steps more keep the run
# from finishing inside that delay on an idle machine (with 60 steps, 20 tiny steps took under 0.22 s and the kill
# landed after the output was in place).
PRETRAIN_STEPS = 120


def _pretrain_args(corpus, output, **extra):
    # fp32 unless a test asks otherwise: the default, "auto", is bf16 on a CPU with native bf16 and fp32 elsewhere, and
    # the bf16 test below needs a reference that differs from its bf16 run on every machine.
    extra.setdefault("precision", "fp32")
    args = ["pretrain", "--corpus", corpus / "text.txt", "--config", corpus / "tiny.json", "--tokenizer",
            corpus / "tokenizer",
            "--block-size", 32, "--batch-size", 8, "--max-steps", PRETRAIN_STEPS, "--learning-rate", 3e-3,
            "--eval-fraction", 0.05, "--seed", 3, "--checkpoint-steps", 5, "--logging-steps", 1, "--output-dir", output]
    return args + _options(extra)


@pytest.fixture(scope="module")
def pretrain_reference(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("pretrain-ref") / "model"
    run_command_here(_pretrain_args(corpus, output))
    assert not output.with_name("model-checkpoints").exists()  # checkpoints are dropped once the output is saved
    return output


@pytest.mark.slow
def test_pretrain_stopped_by_ctrl_c_then_killed_at_a_random_moment_resumes_to_the_same_result(
        corpus, pretrain_reference, tmp_path):
    """One run stopped twice, each time in a process of its own: Ctrl-C saves a checkpoint and exits cleanly; the run
    that resumes from it is killed at a random moment; the run that resumes again ends as one never stopped. The
    killed run's checkpoint is not resumed under other settings, and --no-resume starts afresh."""
    output, checkpoints = tmp_path / "model", tmp_path / "model-checkpoints"
    process = _start(_pretrain_args(corpus, output, checkpoint_steps=10))
    _wait_for_checkpoint(checkpoints, 10, process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-3000:]
    assert "run the same command again to resume" in stderr
    assert not output.exists()
    saved = sorted(int(p.name.split("-")[1]) for p in checkpoints.glob("checkpoint-*"))
    # Trainer keeps the two newest (save_total_limit): the newest is the step where Ctrl-C landed, saved on the way out
    assert 1 <= len(saved) <= 2 and 10 <= saved[-1] < PRETRAIN_STEPS and saved[0] >= 10

    # The resumed run (checkpoints every 5 steps, not part of a run's settings) killed at one of its checkpoints up to
    # step 40, plus up to 0.3 s.
    rng = random.Random(KILL_SEED)
    kill_points = range(saved[-1] + 5, 41, 5)
    assert kill_points, f"Ctrl-C landed at step {saved[-1]}, too late to leave a kill point before step 40"
    _kill_after_checkpoint(_pretrain_args(corpus, output), checkpoints, rng.choice(kill_points),
                           rng.uniform(0.0, 0.3))
    assert not output.exists()  # the output folder only ever appears complete
    from sharedbert.training import latest_checkpoint

    saved_step = int(latest_checkpoint(checkpoints).name.split("-")[1])
    assert saved_step > saved[-1]  # the kill landed in the resumed run, after it saved
    # A copy of the killed run's checkpoints, for --no-resume below (the signature holds no output folder).
    shutil.copytree(checkpoints, tmp_path / "afresh-checkpoints")

    # The same command with other settings does not resume the checkpoint silently, and leaves it as it was: the run
    # below resumes it.
    refused = run_command_here(_pretrain_args(corpus, output, learning_rate=1e-3), expect=2)
    assert "learning_rate: checkpoint 0.003, now 0.001" in refused and "--no-resume" in refused
    assert not output.exists()

    resumed = _run(_pretrain_args(corpus, output))
    assert "resuming from" in resumed.stderr
    _assert_same_run(output, pretrain_reference)
    assert json.loads((output / "pretrain_results.json").read_text())["eval_loss"] == pytest.approx(
        json.loads((pretrain_reference / "pretrain_results.json").read_text())["eval_loss"], rel=1e-4)
    assert not checkpoints.exists()
    _no_half_written_siblings(output)

    # --no-resume discards the checkpoint and starts afresh: the steps up to the checkpoint's train at the new learning
    # rate (step 1's loss comes before any update), where a resumed run would have kept every one of the killed run's.
    afresh = tmp_path / "afresh"
    printed = run_command_here(_pretrain_args(corpus, afresh, learning_rate=1e-3, no_resume=True))
    assert "resuming from" not in printed
    assert json.loads((afresh / "pretrain_results.json").read_text())["steps"] == PRETRAIN_STEPS
    got, reference = _losses(afresh), _losses(pretrain_reference)
    assert got.keys() == reference.keys()
    assert any(abs(got[step] - reference[step]) > 1e-6 for step in range(2, saved_step + 1))


@pytest.mark.slow
def test_a_resumed_run_keeps_the_vocabulary_it_trained(corpus, tmp_path):
    from sharedbert.training import latest_checkpoint

    output, checkpoints = tmp_path / "model", tmp_path / "model-checkpoints"
    args = [a for a in _pretrain_args(corpus, output) if a != corpus / "tokenizer"]
    args[args.index("--tokenizer")] = "--train-vocab"
    args.insert(args.index("--train-vocab") + 1, 120)
    _kill_after_checkpoint(args, checkpoints, 5)
    trained = json.loads((latest_checkpoint(checkpoints) / "tokenizer.json").read_text())["model"]["vocab"]
    resumed = _run(args)
    assert "vocabulary of" in resumed.stderr and "trained before the restart" in resumed.stderr
    assert json.loads((output / "tokenizer.json").read_text())["model"]["vocab"] == trained


# ---------------------------------------------------------------------------------------------------------------------
# bf16 (emulated on a CPU without native bf16, ~10x slower there: these runs are tiny and --precision bf16 is forced)


@pytest.fixture(scope="module")
def bf16_reference(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("pretrain-bf16-ref") / "model"
    assert "precision: bf16 (asked for)" in run_command_here(_pretrain_args(corpus, output, precision="bf16"))
    return output


@pytest.mark.slow
def test_pretrain_in_bf16_killed_at_a_checkpoint_resumes_to_the_same_result_or_in_fp32_when_asked(
        corpus, bf16_reference, pretrain_reference, tmp_path):
    """Precision is not part of a run's signature: a run started where bf16 is native can go on where it is not. One
    killed bf16 run is resumed twice: in bf16 (the same result) and, from a copy of its checkpoints, in fp32."""
    # bf16 autocast really is on: the same run in fp32 gives other losses.
    bf16_losses, fp32_losses = _losses(bf16_reference), _losses(pretrain_reference)
    assert any(abs(bf16_losses[step] - fp32_losses[step]) > 1e-4 for step in fp32_losses)
    results = json.loads((bf16_reference / "pretrain_results.json").read_text())
    assert results["precision"] == "bf16" and results["precision_setting"] == "bf16"
    assert results["resumed_from_precision"] is None and results["sparse_prediction"] is True

    rng = random.Random(KILL_SEED)
    output, checkpoints = tmp_path / "model", tmp_path / "model-checkpoints"
    _kill_after_checkpoint(_pretrain_args(corpus, output, precision="bf16"), checkpoints, rng.choice(range(5, 45, 5)),
                           rng.uniform(0.0, 0.3))
    from sharedbert.training import checkpoint_precision, latest_checkpoint

    latest = latest_checkpoint(checkpoints)
    assert checkpoint_precision(latest) == "bf16"
    saved_step = int(latest.name.split("-")[1])  # the step both resumptions start from (a save cut short is not it)
    shutil.copytree(checkpoints, tmp_path / "in-fp32-checkpoints")
    resumed = _run(_pretrain_args(corpus, output, precision="bf16"))
    assert "resuming from" in resumed.stderr and "note: the checkpoint trained in" not in resumed.stderr
    _assert_same_run(output, bf16_reference)
    results = json.loads((output / "pretrain_results.json").read_text())
    assert results["precision"] == "bf16" and results["resumed_from_precision"] == "bf16"

    # The same checkpoint resumed in fp32 when asked, and it says so.
    output = tmp_path / "in-fp32"
    printed = run_command_here(_pretrain_args(corpus, output, precision="fp32"))
    assert "resuming from" in printed and "note: the checkpoint trained in bf16; continuing in fp32" in printed
    results = json.loads((output / "pretrain_results.json").read_text())
    assert results["precision"] == "fp32" and results["resumed_from_precision"] == "bf16"
    assert results["steps"] == PRETRAIN_STEPS
    got, reference = _losses(output), _losses(bf16_reference)
    assert got.keys() == reference.keys()
    for step in reference:  # the bf16 steps before the checkpoint are kept; the fp32 steps after it differ
        if step <= saved_step:
            assert got[step] == pytest.approx(reference[step], rel=1e-4, abs=1e-5), step
    assert any(abs(got[step] - reference[step]) > 1e-4 for step in reference if step > saved_step)


# ---------------------------------------------------------------------------------------------------------------------
# Fine-tuning


@pytest.fixture(scope="module")
def classification_data(tmp_path_factory, corpus):
    """A tiny SharedBert (with a tokenizer trained on the words used) and a labelled CSV train/validation pair."""
    from sharedbert import SharedBertConfig, SharedBertForMaskedLM
    from sharedbert.training.vocab import train_wordpiece

    folder = tmp_path_factory.mktemp("classify")
    rng = random.Random(1)

    def rows(n):
        out = ["sentence,label"]
        for _ in range(n):
            label = rng.randrange(2)
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
            words.insert(rng.randrange(len(words) + 1), rng.choice(GOOD if label else BAD))
            out.append(f"{' '.join(words)},{label}")
        return "\n".join(out) + "\n"

    (folder / "train.csv").write_text(rows(320))
    (folder / "dev.csv").write_text(rows(48))
    tokenizer = train_wordpiece(list(WORDS) + list(GOOD) + list(BAD), vocab_size=200, min_frequency=1,
                                model_max_length=64)
    torch.manual_seed(0)
    model = SharedBertForMaskedLM(SharedBertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                                   **TINY_MODEL))
    model.save_pretrained(folder / "base")
    tokenizer.save_pretrained(folder / "base")
    return folder


def _finetune_args(data, output, **extra):
    # 3 epochs of 20 steps (kills and resumes cross epoch boundaries), evaluated 4 times: the best-weights record
    # must survive a restart too.
    args = ["finetune", "--model", data / "base", "--train-file", data / "train.csv", "--validation-file",
            data / "dev.csv", "--text-columns", "sentence", "--label-column", "label", "--epochs", 3,
            "--batch-size", 16, "--learning-rate", 3e-3, "--max-length", 32, "--seed", 5, "--checkpoint-steps", 4,
            "--logging-steps", 1, "--output-dir", output]
    return args + _options(extra)


@pytest.fixture(scope="module")
def finetune_reference(classification_data, tmp_path_factory):
    output = tmp_path_factory.mktemp("finetune-ref") / "model"
    run_command_here(_finetune_args(classification_data, output))
    return output


def _assert_same_evaluation(resumed: Path, reference: Path):
    got, expected = (json.loads((folder / "eval_results.json").read_text()) for folder in (resumed, reference))
    assert got["best_step"] == expected["best_step"] and got["total_steps"] == expected["total_steps"] == 60
    assert got["metrics"] == pytest.approx(expected["metrics"], abs=1e-6)


@pytest.mark.slow
def test_finetune_stopped_by_ctrl_c_then_killed_at_a_random_moment_resumes_to_the_same_result(
        classification_data, finetune_reference, tmp_path):
    """One run stopped twice, each time in a process of its own: Ctrl-C saves a checkpoint; the run that resumes from
    it is killed at a random moment; the run that resumes again ends as one never stopped, best evaluation included."""
    output, checkpoints = tmp_path / "model", tmp_path / "model-checkpoints"
    process = _start(_finetune_args(classification_data, output))
    _wait_for_checkpoint(checkpoints, 8, process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-3000:]
    stopped = latest_step(checkpoints)
    assert not output.exists() and stopped >= 8

    # The resumed run killed at one of its checkpoints up to step 36 (of 60), plus up to 0.1 s.
    rng = random.Random(KILL_SEED + 1)
    kill_points = range(stopped + 4, 37, 4)
    assert kill_points, f"Ctrl-C landed at step {stopped}, too late to leave a kill point before step 36"
    _kill_after_checkpoint(_finetune_args(classification_data, output), checkpoints, rng.choice(kill_points),
                           rng.uniform(0.0, 0.1))
    assert not output.exists()
    from sharedbert.training.checkpointing import latest_checkpoint

    # What must survive the restart is in Trainer's own state, the best weights beside it.
    latest = latest_checkpoint(checkpoints)
    assert int(latest.name.split("-")[1]) > stopped  # the kill landed in the resumed run, after it saved
    state = json.loads((latest / "trainer_state.json").read_text())
    assert not (latest / "run_state.json").exists() and (latest / "optimizer.pt").is_file()
    assert state["stateful_callbacks"]["RunRecord"]["args"]["signature"]["seed"] == 5
    best = state["stateful_callbacks"]["KeepBestCallback"]["attributes"]
    assert (best["best_step"] is not None) == (latest / "best_model.safetensors").is_file()
    # A save cut short by the kill (no trainer_state.json, Trainer's last file) is passed over and deleted.
    _, step = latest.name.split("-")
    cut_short = checkpoints / f"checkpoint-{int(step) + 1}"
    if not cut_short.exists():
        shutil.copytree(latest, cut_short)
        (cut_short / "trainer_state.json").unlink()

    _run(_finetune_args(classification_data, output))
    assert not checkpoints.exists()
    _assert_same_run(output, finetune_reference)
    _assert_same_evaluation(output, finetune_reference)
    _no_half_written_siblings(output)


def latest_step(checkpoints: Path) -> int:
    return max(int(p.name.split("-")[1]) for p in checkpoints.glob("checkpoint-*"))


# ---------------------------------------------------------------------------------------------------------------------
# The pieces that make resumption exact


def test_epoch_seeded_sampler_depends_on_seed_and_epoch_only_and_leaves_the_global_generator_alone():
    from torch.utils.data import RandomSampler

    from sharedbert.training import EpochSeededSampler

    sampler = EpochSeededSampler(RandomSampler(range(50)), seed=7)
    state = torch.get_rng_state()
    first = list(sampler)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(123)  # whatever the global generator holds, the order is the same
    assert list(sampler) == first and sorted(first) == list(range(50))
    sampler.set_epoch(1)
    assert list(sampler) != first


def test_batch_seeded_collator_masks_a_batch_the_same_way_whenever_it_is_collated(corpus):
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling

    from sharedbert.training import BatchSeededCollator

    tokenizer = AutoTokenizer.from_pretrained(corpus / "tokenizer")
    collate = BatchSeededCollator(DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3), seed=1)
    features = [{"input_ids": tokenizer(line)["input_ids"]} for line in
                (corpus / "text.txt").read_text().splitlines()[:8]]
    state = torch.get_rng_state()
    first = collate(features)
    assert torch.equal(torch.get_rng_state(), state)  # dropout's stream is untouched
    torch.manual_seed(99)
    again = collate(features)
    assert torch.equal(first["input_ids"], again["input_ids"]) and torch.equal(first["labels"], again["labels"])
    assert (first["labels"] != -100).any()  # something was masked
    other = BatchSeededCollator(collate.collate, seed=2)(features)
    assert not torch.equal(other["labels"], first["labels"])


def test_the_commands_trainer_keeps_mean_losses_unscaled_for_bert_too(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    from sharedbert.training import ResumableTrainer, training_arguments

    bert = BertForSequenceClassification(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                    intermediate_size=37, vocab_size=99))
    # BERT's heads accept `num_items_in_batch` (so Trainer would scale their loss by the number of processes under
    # DDP) but return a per-batch mean.
    trainer = ResumableTrainer(model=bert, args=training_arguments(tmp_path, evaluations=0, num_train_examples=8))
    assert trainer.model_accepts_loss_kwargs is False


def test_checkpoints_are_trainers_own_in_the_checkpoint_folder_keeping_save_total_limit(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    from sharedbert.training import ResumableTrainer, training_arguments

    bert = BertForSequenceClassification(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                    intermediate_size=37, vocab_size=99))
    trainer = ResumableTrainer(model=bert, args=training_arguments(tmp_path / "out", evaluations=0,
                                                                                   num_train_examples=8),
                               checkpoint_dir=tmp_path / "ck")
    assert trainer.args.output_dir == str(tmp_path / "ck") and trainer.args.save_total_limit == 2
    assert type(trainer)._save_checkpoint is Trainer._save_checkpoint and type(trainer).train is Trainer.train
    mine = ResumableTrainer(model=bert, args=training_arguments(tmp_path / "out", evaluations=0, num_train_examples=8,
                                                                save_total_limit=5), checkpoint_dir=tmp_path / "ck")
    assert mine.args.save_total_limit == 5  # a caller's limit is Trainer's to keep


def test_the_newest_complete_checkpoint_is_resumed_and_saves_cut_short_are_deleted(tmp_path):
    from sharedbert.training.checkpointing import latest_checkpoint, remove_incomplete_checkpoints

    def checkpoint(step, state):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if state is not None:
            (folder / "trainer_state.json").write_text(state)
        return folder

    best = {"KeepBestCallback": {"args": {}, "attributes": {"checkpoint_files": ["best_model.safetensors"]}}}
    whole = checkpoint(4, json.dumps({"global_step": 4, "stateful_callbacks": best}))
    (whole / "best_model.safetensors").write_bytes(b"weights")
    checkpoint(8, json.dumps({"global_step": 8})[:9])  # trainer_state.json cut short
    checkpoint(12, json.dumps({"global_step": 12, "stateful_callbacks": best}))  # killed before the best weights
    checkpoint(16, None)  # killed before trainer_state.json
    assert latest_checkpoint(tmp_path) == whole
    remove_incomplete_checkpoints(tmp_path, whole)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-4"]
    remove_incomplete_checkpoints(tmp_path, None)
    assert latest_checkpoint(tmp_path) is None and not any(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------------------------------
# Healing


@pytest.fixture(scope="module")
def tiny_bert(corpus, tmp_path_factory):
    from transformers import AutoTokenizer, BertConfig, BertModel

    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(corpus / "tokenizer")
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _heal_args(tiny_bert, corpus, output):
    return ["convert", tiny_bert, output, "--attention-type", "shared", "--heal", "--corpus", corpus / "text.txt",
            "--steps", 80, "--batch-size", 8, "--max-words", 12, "--warmup-steps", 5, "--checkpoint-steps", 5,
            "--threads", 1, "--no-progress"]


@pytest.mark.slow
def test_heal_killed_at_a_random_moment_resumes_to_the_same_weights(tiny_bert, corpus, tmp_path):
    reference = tmp_path / "reference"
    run_command_here(_heal_args(tiny_bert, corpus, reference))
    rng = random.Random(KILL_SEED + 2)
    output, checkpoints = tmp_path / "model", tmp_path / "model-checkpoints"
    _kill_after_checkpoint(_heal_args(tiny_bert, corpus, output), checkpoints, rng.choice(range(5, 60, 5)),
                           delay=rng.uniform(0.0, 0.1))
    assert not output.exists()

    _run(_heal_args(tiny_bert, corpus, output))
    got, expected = load_file(output / "model.safetensors"), load_file(reference / "model.safetensors")
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, atol=1e-5, rtol=1e-4, msg=f"weight {name} differs")
    report = json.loads((output / "conversion_report.json").read_text())["heal"]
    assert report["steps"] == 80 and report["last_loss"] == pytest.approx(
        json.loads((reference / "conversion_report.json").read_text())["heal"]["last_loss"], rel=1e-5)


# ---------------------------------------------------------------------------------------------------------------------
# Reproducing a failure


@pytest.mark.slow
def test_a_failure_names_the_kill_seed_and_how_to_replay_it(tmp_path):
    """Any failing test of a module with a KILL_SEED, not only the asserts that mention it, reports the seed.

    The nested pytest gets the suite's hook that does it (its source, read from tests/conftest.py) in a conftest of
    its own, and no installed plugin: the suite's whole conftest imports torch, transformers and sharedbert, seconds
    of start-up this hook, which needs pytest alone, does not use."""
    import inspect

    import conftest

    hook = inspect.getsource(conftest.pytest_runtest_makereport)
    assert hook.startswith("@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(")
    (tmp_path / "conftest.py").write_text("import pytest\n\n\n" + hook)
    (tmp_path / "test_kill.py").write_text("KILL_SEED = 4321\n\n\ndef test_weights_differ():\n    assert 1 == 2\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_kill.py"],
                          cwd=tmp_path, env=dict(_env(), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "kill seed 4321" in done.stdout
    assert "SHAREDBERT_KILL_SEED=4321 python -m pytest test_kill.py::test_weights_differ" in done.stdout
