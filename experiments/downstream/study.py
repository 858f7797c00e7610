"""The paper's downstream claims with character-level encoders that learn: MLM pretraining on raw text, then GLUE
fine-tuning (SST-2, MRPC, RTE, CoLA, STS-B) read as characters, scored clean, under seeded character noise and, for
SST-2, out of domain. README.md beside this file is the declared design and the report.

    python experiments/downstream/study.py cell --arm standard --seed 1 --threads 1      # one cell, resumable
    python experiments/downstream/study.py grid --arms standard shared --seeds 1 2 3 4 5 --threads 1
    python experiments/downstream/study.py report                                   # results/summary-cpu.{json,md,png}
    python experiments/downstream/study.py evaluate --cell cpu-standard-seed1 --tsv my.tsv  # SST-2 model on a TSV
    python experiments/downstream/study.py grids --grid fp32=A.json --grid bf16=B.json  # claims over two grids
    python experiments/downstream/study.py pilot --arm shared --seed 1 --threads 1        # train-split scores only

A cell pretrains one arm's encoder (Trainer, BERT's 80/10/10 masking, fixed validation masks, checkpoints it resumes
from), saves it as a model folder under runs/downstream/CELL/pretrained (save_pretrained, safetensors, plus the
character vocabulary), fine-tunes it on each task (Trainer; a finished task is kept and skipped on a re-run), scores
every fine-tuned model on the dev set clean and under each declared noise, and writes results/cells/CELL.json
atomically. A finished cell is skipped unless --force.

Nothing here imports another study's code. The masking (`corpus_masks`) and the context-free null (`mlm_nulls`) are
small re-implementations of the char-level study's (charlm) ideas, written for this study's special tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS_DIR = HERE / "results" / "cells"
PILOT_DIR = HERE / "results" / "pilot"
WORK_DIR = REPO / "runs" / "downstream"

# --------------------------------------------------------------------------------------------------------------------
# Declared design: recipes, arms, tasks, noise, margins (README.md, Method)
# --------------------------------------------------------------------------------------------------------------------

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0-4; characters from 5
PAD, UNK, CLS, SEP, MASK = range(5)
VALIDATION_MASK_SEED = 0  # the same validation masks for every arm and seed
HELD_OUT_FILE = "austen-emma.txt"  # never pretrained on: the out-of-domain text
# Files of the corpus that are not UTF-8 and have no byte-order mark, with the encoding they are in (the shared data's
# README: two Latin-1 Gutenberg books). Every other file is read strictly as UTF-8.
ENCODINGS = {"chesterton-ball.txt": "latin-1", "shakespeare-caesar.txt": "latin-1"}


@dataclasses.dataclass(frozen=True)
class Recipe:
    # the encoder
    width: int
    layers: int
    heads: int
    context: int  # characters + [CLS] + [SEP]; also fine-tuning's maximum length
    # pretraining (MLM)
    pretrain_iters: int
    pretrain_batch: int
    eval_interval: int
    validation_windows: int  # in-domain held-out windows scored (fixed masks)
    ood_windows: int  # windows of the held-out book scored at the end
    # fine-tuning (every task, every arm)
    finetune_steps: int  # a task's steps, or fewer where finetune_max_epochs ends first
    finetune_batch: int
    finetune_lr: float = 3e-4
    finetune_warmup: float = 0.1
    finetune_weight_decay: float = 0.01
    dropout: float = 0.1  # fine-tuning's (BERT's)
    pretrain_dropout: float = 0.0  # the charlm study's CPU recipe, whose MLM left the plateau; 0.1 did not (README)
    # pretraining's optimiser: the charlm study's (nanoGPT's) values
    learning_rate: float = 1e-3
    min_learning_rate: float = 1e-4
    warmup_iters: int = 100
    beta2: float = 0.99
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    mask_probability: float = 0.15
    validation_fraction: float = 0.02  # the end of each pretraining file is held out (in-domain validation)
    min_char_count: int = 20  # rarer characters are [UNK]
    # robustness
    noise_types: tuple[str, ...] = ("swap", "delete", "keyboard", "insert", "case")
    noise_intensities: tuple[float, ...] = (0.05, 0.15)
    ood_sentences: int = 500
    eval_limit: int | None = None  # score at most this many dev rows per task (the test recipe only)
    # Added by the second, Shakespeare study (shakespeare/README.md); their defaults are the first study's recipes.
    finetune_max_epochs: float | None = None  # a small task stops after this many passes over its training rows
    corpus: tuple[str, ...] = ()  # files of the shared data folder, the held-out book among them; () = all of mlm-text

    @property
    def ffn(self) -> int:
        return 4 * self.width


RECIPES = {
    # One core, about 15 minutes a cell (README, Pilot).
    "cpu": Recipe(width=128, layers=4, heads=4, context=128, pretrain_iters=6000, pretrain_batch=8,
                  eval_interval=1000, validation_windows=512, ood_windows=512, finetune_steps=120, finetune_batch=32,
                  noise_types=("swap", "delete", "keyboard")),
    # Where a GPU is lent: the same script, a bigger encoder and budget (README, "Ready for a GPU").
    # (The recipe gate's fallbacks, "cpu-c64" and "cpu-long", are added below: README, "Recipe gate".)
    "gpu": Recipe(width=256, layers=6, heads=8, context=256, pretrain_iters=20000, pretrain_batch=64,
                  eval_interval=1000, validation_windows=2048, ood_windows=2048, finetune_steps=1500,
                  finetune_batch=32, finetune_lr=2e-4, warmup_iters=500),
    # The tests' recipe: seconds, on synthetic data.
    "test": Recipe(width=16, layers=2, heads=2, context=32, pretrain_iters=6, pretrain_batch=4, eval_interval=3,
                   validation_windows=8, ood_windows=8, finetune_steps=3, finetune_batch=4, warmup_iters=2,
                   min_char_count=1, noise_types=("swap", "delete", "keyboard"), ood_sentences=10, eval_limit=12),
}

# The recipe gate's fallbacks, in the declared order (README, "Recipe gate"): the charlm study's context (64, where its
# MLM learned) at the same characters per update, then twice the updates at context 128 (about 25 minutes a cell).
RECIPES["cpu-c64"] = dataclasses.replace(RECIPES["cpu"], context=64, pretrain_batch=16)
RECIPES["cpu-long"] = dataclasses.replace(RECIPES["cpu"], pretrain_iters=12000)
# The second study (shakespeare/README.md, declared before its first cell): cpu-c64 pretrained on tiny Shakespeare,
# where the diagnostic's encoders learned, and fine-tuned 3,000 steps (the probe's budget that passed a bag of
# characters on SST-2's training split), capped at 10 epochs so that a small task is not passed over 38 times.
RECIPES["shakespeare"] = dataclasses.replace(
    RECIPES["cpu-c64"], finetune_steps=3000, finetune_max_epochs=10,
    corpus=("tinyshakespeare/input.txt", "mlm-text/gutenberg-nltk/austen-emma.txt"))

# The arms, one line each: SharedBertConfig fields beyond the recipe's sizes. "reference": transformers' own BERT.
# "match_parameters_of": the FFN width raised until the arm has the named arm's parameter count (MLM model).
# An arm may set its own sizes (hidden_size, intermediate_size) over the recipe's.
ARMS = {
    "standard": {"attention_type": "standard"},
    "shared": {"attention_type": "shared"},
    "symmetric": {"attention_type": "symmetric"},
    "pairwise": {"attention_type": "pairwise"},
    "shared-matched": {"attention_type": "shared", "match_parameters_of": "standard"},
    # stands in for the frontier study's best configuration at <= 35% until that study names it
    "shared-lowrank-query": {"attention_type": "shared_lowrank_query"},
    "bert": {"reference": "bert"},
}
ARM_KEYS = ("match_parameters_of", "reference")
DEFAULT_ARMS = tuple(ARMS)  # the declared arms: every grid's default and the report's declared cells
# Added after the declaration, as shakespeare/README.md provides for: the frontier study's best configuration at
# <= 35% (`best` in experiments/frontier/results/summary.json, at width 128, whose sizes are this recipe's): one
# stored standard attention layer for all four, its savings spent on width. Run with --arms; a comparison of its own.
ADDED_ARMS = {
    "standard-att1-wide": {"attention_type": "standard", "layer_sharing": "attention", "num_unique_layers": 1,
                           "hidden_size": 148, "intermediate_size": 592},
}
ARMS.update(ADDED_ARMS)
DECLARED_SEEDS = (1, 2, 3, 4, 5)  # every arm on these seeds, paired by seed (README, "Seeds")

TASKS = ("sst2", "mrpc", "rte", "cola", "stsb")
# Each task's GLUE score (0-100) and the margin (in those points) of every verdict on it; README, "Verdict rule".
MARGINS = {"sst2": 1.0, "mrpc": 2.0, "rte": 3.0, "cola": 3.0, "stsb": 2.0, "average": 1.0}
# The paper's GLUE claims (arXiv 2412.00359): shared's average minus each arm's, in points.
PAPER = {"standard": 0.38, "symmetric": 5.81, "pairwise": 1.06}

# --------------------------------------------------------------------------------------------------------------------
# Characters
# --------------------------------------------------------------------------------------------------------------------

WHITESPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Whitespace runs (line breaks of the books included) become one space: GLUE's sentences have no line breaks."""
    return WHITESPACE.sub(" ", text).strip()


@dataclasses.dataclass
class Vocabulary:
    characters: list[str]

    def __post_init__(self):
        self.index = {c: i + len(SPECIALS) for i, c in enumerate(self.characters)}

    @property
    def size(self) -> int:
        return len(SPECIALS) + len(self.characters)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(c, UNK) for c in text]

    def to_json(self) -> dict:
        return {"specials": list(SPECIALS), "characters": self.characters,
                "note": "id = len(specials) + position in characters; any other character is [UNK]; "
                        "whitespace runs are one space"}

    @classmethod
    def from_json(cls, data: dict) -> "Vocabulary":
        if tuple(data["specials"]) != SPECIALS:
            raise SystemExit(f"vocabulary specials {data['specials']} are not this script's {list(SPECIALS)}.")
        return cls(list(data["characters"]))


def read_corpus(source) -> dict[str, str]:
    """Every text file of the corpus (a folder, or a list of files and folders; the package's reader: strict UTF-8,
    or the encoding ENCODINGS names), whitespace normalised, by name. The held-out book is one of them; the caller
    keeps it out of pretraining."""
    from sharedbert.data.text import corpus_files, read_corpus_text

    texts = {}
    for path in corpus_files(source):
        if path.name in texts:
            raise SystemExit(f"two corpus files are named {path.name}: the study names texts by file name.")
        texts[path.name] = normalise(read_corpus_text(path, ENCODINGS.get(path.name)))
    return texts


@dataclasses.dataclass
class Corpus:
    vocabulary: Vocabulary
    train_ids: "torch.Tensor"
    validation_ids: "torch.Tensor"
    ood_ids: "torch.Tensor"
    files: dict  # name -> {"characters", "sha256"}
    sha256: str  # of the whole pretraining corpus as read (every file, in order)
    train_counts: "torch.Tensor"


def load_corpus(source, recipe: Recipe) -> Corpus:
    import torch

    texts = read_corpus(source)
    if HELD_OUT_FILE not in texts:
        raise SystemExit(f"the corpus ({source}) has no {HELD_OUT_FILE}: the study holds that book out as its "
                         "out-of-domain text.")
    train_parts, validation_parts = [], []
    digest, files = hashlib.sha256(), {}
    for name, text in sorted(texts.items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
        files[name] = {"characters": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()}
        if name == HELD_OUT_FILE:
            continue
        split = int(len(text) * (1 - recipe.validation_fraction))
        train_parts.append(text[:split])
        validation_parts.append(text[split:])
    train = " ".join(train_parts)
    counts: dict[str, int] = {}
    for character in train:
        counts[character] = counts.get(character, 0) + 1
    vocabulary = Vocabulary(sorted(c for c, n in counts.items() if n >= recipe.min_char_count))
    encode = lambda text: torch.tensor(vocabulary.encode(text), dtype=torch.long)  # noqa: E731
    train_ids = encode(train)
    return Corpus(vocabulary, train_ids, encode(" ".join(validation_parts)), encode(texts[HELD_OUT_FILE]), files,
                  digest.hexdigest(), torch.bincount(train_ids, minlength=vocabulary.size))


# --------------------------------------------------------------------------------------------------------------------
# Masked-LM data: BERT's 80/10/10 on [CLS] + characters + [SEP] windows
# --------------------------------------------------------------------------------------------------------------------

def corrupt(body, selected, generator, vocab_size: int):
    """BERT's corruption of the selected characters: 80% [MASK], 10% a random character, 10% unchanged."""
    import torch

    labels = torch.where(selected, body, torch.full_like(body, -100))
    draw = torch.rand(body.shape, generator=generator)
    random_ids = torch.randint(len(SPECIALS), vocab_size, body.shape, generator=generator)
    inputs = torch.where(selected & (draw < 0.8), torch.full_like(body, MASK), body)
    inputs = torch.where(selected & (draw >= 0.8) & (draw < 0.9), random_ids, inputs)
    return inputs, labels


def framed(inputs, labels):
    import torch

    one = torch.tensor([CLS]), torch.tensor([SEP]), torch.tensor([-100])
    return {"input_ids": torch.cat([one[0], inputs, one[1]]), "labels": torch.cat([one[2], labels, one[2]])}


class TrainWindows:
    """Item k: the window at a position drawn from a generator seeded by (seed, k), its mask from the same generator,
    so a seed gives every arm the same windows and masks, whatever order they are read in (resume included)."""

    def __init__(self, ids, length: int, context: int, seed: int, mask_probability: float, vocab_size: int):
        self.ids, self.length, self.body, self.seed = ids, length, context - 2, seed
        self.mask_probability, self.vocab_size = mask_probability, vocab_size

    def __len__(self):
        return self.length

    def __getitem__(self, k: int) -> dict:
        import torch

        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + k)
        start = int(torch.randint(len(self.ids) - self.body + 1, (1,), generator=generator))
        body = self.ids[start:start + self.body]
        selected = torch.rand(self.body, generator=generator) < self.mask_probability
        return framed(*corrupt(body, selected, generator, self.vocab_size))


def fixed_windows(ids, context: int, count: int, mask_probability: float, vocab_size: int) -> list[dict]:
    """`count` non-overlapping windows spread evenly over `ids`, each with exactly round(p × body) targets, chosen and
    corrupted by one generator of fixed seed: every arm and seed is scored on the same masks, every window has the
    same number of targets (so batch means are the token mean)."""
    import torch

    body = context - 2
    available = len(ids) // body
    if available < 1:
        raise SystemExit(f"a validation text of {len(ids)} characters is shorter than one window of {body}.")
    chosen = sorted({round(i * (available - 1) / max(1, count - 1)) for i in range(min(count, available))})
    generator = torch.Generator().manual_seed(VALIDATION_MASK_SEED)
    targets = round(mask_probability * body)
    examples = []
    for window in chosen:
        part = ids[window * body:(window + 1) * body]
        selected = torch.zeros(body, dtype=torch.bool)
        selected[torch.randperm(body, generator=generator)[:targets]] = True
        examples.append(framed(*corrupt(part, selected, generator, vocab_size)))
    return examples


def examples_sha256(examples: list[dict]) -> str:
    digest = hashlib.sha256()
    for example in examples:
        digest.update(example["input_ids"].numpy().tobytes() + example["labels"].numpy().tobytes())
    return digest.hexdigest()


def mlm_nulls(counts, examples: list[dict], vocab_size: int) -> dict:
    """Two context-free predictors on the scored positions (the charlm study's nulls): `unigram` predicts the
    training character frequencies u everywhere; `context_free` sees only the input at the position: u under [MASK],
    and under a visible character c (kept or a uniform replacement, equally likely) p(t | c) ∝ u(t)(½[t = c] + ½/C)
    over the C characters. A model that uses context ends below `context_free`."""
    import torch

    chars = vocab_size - len(SPECIALS)
    u = counts[len(SPECIALS):].double() + 1e-12
    u = u / u.sum()
    posterior = u[None, :] * (0.5 * torch.eye(chars, dtype=torch.double) + 0.5 / chars)
    posterior = posterior / posterior.sum(1, keepdim=True)
    unigram, context_free = [], []
    for example in examples:
        selected = example["labels"] != -100
        targets = example["labels"][selected] - len(SPECIALS)
        inputs = example["input_ids"][selected]
        unigram.append(-u.log()[targets])
        visible = inputs != MASK
        scores = -u.log()[targets]
        scores[visible] = -posterior.log()[inputs[visible] - len(SPECIALS), targets[visible]]
        context_free.append(scores)
    return {"unigram": float(torch.cat(unigram).mean()), "context_free": float(torch.cat(context_free).mean())}


# --------------------------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------------------------

def mlm_model(arm: str, recipe: Recipe, vocab_size: int, intermediate_size: int | None = None):
    settings = ARMS[arm]
    common = dict(vocab_size=vocab_size, hidden_size=recipe.width, num_hidden_layers=recipe.layers,
                  num_attention_heads=recipe.heads, max_position_embeddings=recipe.context, type_vocab_size=2,
                  hidden_dropout_prob=recipe.pretrain_dropout, attention_probs_dropout_prob=recipe.pretrain_dropout,
                  pad_token_id=PAD)
    if "reference" in settings:
        from transformers import BertConfig, BertForMaskedLM

        return BertForMaskedLM(BertConfig(intermediate_size=recipe.ffn, **common))
    from sharedbert import SharedBertConfig, SharedBertForMaskedLM

    if intermediate_size is None and "match_parameters_of" in settings:
        intermediate_size = matched_intermediate_size(arm, recipe, vocab_size)
    fields = {key: value for key, value in settings.items() if key not in ARM_KEYS}
    sizes = {**common, "intermediate_size": intermediate_size or recipe.ffn, **fields}  # the arm's own sizes win
    return SharedBertForMaskedLM(SharedBertConfig(**sizes))


def parameter_count(arm: str, recipe: Recipe, vocab_size: int, intermediate_size: int | None = None) -> int:
    import torch

    with torch.device("meta"):
        return sum(p.numel() for p in mlm_model(arm, recipe, vocab_size, intermediate_size).parameters())


def matched_intermediate_size(arm: str, recipe: Recipe, vocab_size: int) -> int:
    """The FFN width at which the arm has its target arm's parameter count (counts are linear in the FFN width)."""
    target = parameter_count(ARMS[arm]["match_parameters_of"], recipe, vocab_size)
    base = parameter_count(arm, recipe, vocab_size, recipe.ffn)
    per_unit = parameter_count(arm, recipe, vocab_size, recipe.ffn + 1) - base
    return recipe.ffn + round((target - base) / per_unit)


def attention_projection_parameters(model) -> int:
    """Wq, Wk, Wv and whatever replaces them (not the output projection), as the charlm study counts them."""
    return sum(p.numel() for name, p in model.named_parameters() if ".self." in name and ".attention." in name)


def precision_and_device(precision: str) -> tuple[str, str]:
    import torch

    from sharedbert.precision import resolve_precision

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return resolve_precision(precision, device), device


# --------------------------------------------------------------------------------------------------------------------
# Pretraining
# --------------------------------------------------------------------------------------------------------------------

def latest_complete_checkpoint(run_dir: Path) -> Path | None:
    """The newest checkpoint-N whose trainer_state.json (Trainer writes it last) reads: a killed save is skipped."""
    complete = []
    for folder in run_dir.glob("checkpoint-*"):
        try:
            step = int(folder.name.removeprefix("checkpoint-"))
            json.loads((folder / "trainer_state.json").read_text())
        except (ValueError, OSError):
            continue
        complete.append((step, folder))
    return max(complete)[1] if complete else None


def collate_mlm(examples):
    import torch

    return {"input_ids": torch.stack([e["input_ids"] for e in examples]),
            "labels": torch.stack([e["labels"] for e in examples])}


def pretrain(arm: str, seed: int, recipe: Recipe, corpus: Corpus, run_dir: Path, precision: str, device: str) -> dict:
    """Pretrain (or resume) the arm's encoder; save it to run_dir/pretrained atomically; return its record."""
    import torch
    from transformers import Trainer, TrainingArguments, set_seed

    from sharedbert.atomic import atomic_directory, atomic_write_text

    record_path = run_dir / "pretrained" / "pretraining.json"
    if record_path.exists():
        return json.loads(record_path.read_text())
    set_seed(seed)
    vocab_size = corpus.vocabulary.size
    model = mlm_model(arm, recipe, vocab_size)
    train = TrainWindows(corpus.train_ids, recipe.pretrain_iters * recipe.pretrain_batch, recipe.context, seed,
                         recipe.mask_probability, vocab_size)
    validation = fixed_windows(corpus.validation_ids, recipe.context, recipe.validation_windows,
                               recipe.mask_probability, vocab_size)
    checkpoints = run_dir / "pretraining"
    resume = latest_complete_checkpoint(checkpoints)
    newest = int(resume.name.split("-")[1]) if resume else -1
    for folder in checkpoints.glob("checkpoint-*"):  # a checkpoint cut short by a kill, newer than the newest complete
        if int(folder.name.split("-")[1]) > newest:
            shutil.rmtree(folder)
    arguments = TrainingArguments(
        output_dir=str(checkpoints), max_steps=recipe.pretrain_iters, per_device_train_batch_size=recipe.pretrain_batch,
        per_device_eval_batch_size=64, train_sampling_strategy="sequential", learning_rate=recipe.learning_rate,
        lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr": recipe.min_learning_rate},
        warmup_steps=recipe.warmup_iters, adam_beta2=recipe.beta2, weight_decay=recipe.weight_decay,
        max_grad_norm=recipe.grad_clip, eval_strategy="steps", eval_steps=recipe.eval_interval,
        eval_on_start=resume is None, save_strategy="steps", save_steps=recipe.eval_interval, save_total_limit=2,
        logging_steps=min(50, recipe.eval_interval), seed=seed, bf16=precision == "bf16", use_cpu=device == "cpu",
        prediction_loss_only=True, report_to=[], disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=arguments, train_dataset=train, eval_dataset=validation,
                      data_collator=collate_mlm, callbacks=list(TRAINER_CALLBACKS))
    started, cpu_started = time.perf_counter(), time.process_time()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    train_seconds, train_cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    if not any(e.get("step") == recipe.pretrain_iters and "eval_loss" in e for e in trainer.state.log_history):
        trainer.evaluate()
    curve = sorted({e["step"]: e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e}.items())
    ood = fixed_windows(corpus.ood_ids, recipe.context, recipe.ood_windows, recipe.mask_probability, vocab_size)
    ood_loss = trainer.evaluate(eval_dataset=ood)["eval_loss"]
    nulls = {"validation": mlm_nulls(corpus.train_counts, validation, vocab_size),
             "held_out_book": mlm_nulls(corpus.train_counts, ood, vocab_size)}
    final = curve[-1][1]
    record = {
        "validation_loss": final, "held_out_book_loss": ood_loss, "nulls": nulls,
        "below_context_free_null": nulls["validation"]["context_free"] - final,
        "learns": nulls["validation"]["context_free"] - final >= LEARNS_BELOW_NULL,
        "curve": [{"iteration": step, "characters": step * recipe.pretrain_batch * (recipe.context - 2), "loss": loss}
                  for step, loss in curve],
        "train_losses": [{"iteration": e["step"], "loss": e["loss"]} for e in trainer.state.log_history if "loss" in e],
        "validation_sha256": examples_sha256(validation), "held_out_book_sha256": examples_sha256(ood),
        "validation_windows": len(validation), "held_out_book_windows": len(ood),
        "seconds_this_process": train_seconds, "cpu_seconds_this_process": train_cpu_seconds,  # with its evaluations
        "resumed_from": resume.name if resume else None,
        "parameters": sum(p.numel() for p in model.parameters()),
        "attention_projection_parameters": attention_projection_parameters(model),
        "intermediate_size": model.config.intermediate_size,
    }
    with atomic_directory(run_dir / "pretrained") as folder:
        trainer.model.save_pretrained(folder)  # safetensors; AutoModel.from_pretrained loads the encoder
        (folder / "char_vocabulary.json").write_text(json.dumps(corpus.vocabulary.to_json(), indent=1))
        atomic_write_text(folder / "pretraining.json", json.dumps(record, indent=1) + "\n")
    shutil.rmtree(checkpoints, ignore_errors=True)  # the saved encoder replaces them
    return record


TRAINER_CALLBACKS: list = []  # the tests' way to stop pretraining after a checkpoint, as a kill would
LEARNS_BELOW_NULL = 0.5  # nats below the context-free null (the frontier study's reading of charlm's "learns")

# --------------------------------------------------------------------------------------------------------------------
# GLUE as characters
# --------------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Rows:
    texts: list[tuple[str, ...]]
    labels: list  # class ids or floats

    def __len__(self):
        return len(self.texts)


def read_glue(glue_dir: Path, task: str, split: str) -> Rows:
    """A GLUE TSV (the package's TaskSpec names its columns and labels), unquoted as GLUE writes it."""
    from sharedbert.data.tasks import get_task

    spec = get_task(task)
    path = Path(glue_dir) / spec.folder / {"train": "train.tsv", "dev": "dev.tsv"}[split]
    if not path.is_file():
        raise SystemExit(f"{path}: no such file (--glue-dir must hold {spec.folder}/train.tsv and dev.tsv).")
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = list(spec.headerless_columns) if spec.headerless_columns else rows.pop(0)
    columns = {name: header.index(name) for name in (*spec.text_columns, spec.label_column)}
    texts, labels = [], []
    for number, row in enumerate(rows, start=1 if spec.headerless_columns else 2):
        if len(row) != len(header):
            raise SystemExit(f"{path}, line {number}: {len(row)} columns, the header has {len(header)}.")
        texts.append(tuple(row[columns[c]].strip() for c in spec.text_columns))
        value = row[columns[spec.label_column]].strip()
        try:
            labels.append(float(value) if spec.is_regression else spec.labels.index(value))
        except ValueError:
            raise SystemExit(f"{path}, line {number}, column {columns[spec.label_column] + 1}: label {value!r} is not "
                             f"one of {spec.labels or 'a number'}.") from None
    return Rows(texts, labels)


def encode_example(vocabulary: Vocabulary, texts: tuple[str, ...], max_length: int) -> dict:
    """[CLS] a [SEP] (b [SEP]), characters truncated longest-first to max_length, token types 0 / 1."""
    parts = [vocabulary.encode(normalise(text)) for text in texts]
    budget = max_length - 1 - len(parts)
    while sum(len(p) for p in parts) > budget:
        longest = max(range(len(parts)), key=lambda i: len(parts[i]))
        parts[longest] = parts[longest][:-1]
    ids, types = [CLS], [0]
    for segment, part in enumerate(parts):
        ids += part + [SEP]
        types += [segment] * (len(part) + 1)
    return {"input_ids": ids, "token_type_ids": types}


def collate_classification(examples):
    import torch

    length = max(len(e["input_ids"]) for e in examples)
    pad = lambda key, value: torch.tensor([e[key] + [value] * (length - len(e[key])) for e in examples])  # noqa: E731
    batch = {"input_ids": pad("input_ids", PAD), "token_type_ids": pad("token_type_ids", 0),
             "attention_mask": torch.tensor([[1] * len(e["input_ids"]) + [0] * (length - len(e["input_ids"]))
                                             for e in examples])}
    if "labels" in examples[0]:
        batch["labels"] = torch.tensor([e["labels"] for e in examples])
    return batch


class Encoded:
    def __init__(self, rows: Rows, vocabulary: Vocabulary, max_length: int):
        self.items = [{**encode_example(vocabulary, texts, max_length), "labels": label}
                      for texts, label in zip(rows.texts, rows.labels)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]


def glue_score(task: str, metrics: dict) -> float:
    """GLUE's per-task score in points: MRPC the mean of F1 and accuracy, STS-B of Pearson and Spearman."""
    if task == "mrpc":
        return 50 * (metrics["f1"] + metrics["accuracy"])
    if task == "stsb":
        return 50 * (metrics["pearson"] + metrics["spearman"])
    return 100 * metrics["matthews_correlation" if task == "cola" else "accuracy"]


def task_metrics(task: str, predictions, labels) -> dict:
    import warnings

    from sharedbert.data.tasks import compute_metrics, get_task

    with warnings.catch_warnings():  # a constant prediction has no correlation: scored 0, not NaN
        warnings.simplefilter("ignore")
        metrics = compute_metrics(get_task(task), predictions, labels)
    metrics = {name: (0.0 if not math.isfinite(value) else value) for name, value in metrics.items()}
    return {**metrics, "score": glue_score(task, metrics)}


def baseline(task: str, train: Rows, dev: Rows) -> dict:
    """The majority class of the training rows (classification) or their mean (STS-B), scored on the dev rows."""
    import statistics

    if task == "stsb":
        constant = statistics.fmean(train.labels)
        return {"predicts": constant, **task_metrics(task, [constant] * len(dev), dev.labels)}
    majority = max(set(train.labels), key=train.labels.count)
    return {"predicts": majority, **task_metrics(task, [majority] * len(dev), dev.labels)}


def predict(model, dataset, precision: str, device: str, regression: bool, batch_size: int = 64):
    import torch

    model.eval()
    outputs = []
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
        for start in range(0, len(dataset), batch_size):
            batch = collate_classification([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
            batch.pop("labels", None)
            logits = model(**{k: v.to(device) for k, v in batch.items()}).logits.float().cpu()
            outputs.append(logits.reshape(-1) if regression else logits.argmax(-1))
    return torch.cat(outputs).tolist() if outputs else []


# --------------------------------------------------------------------------------------------------------------------
# Noise: seeded by (type, intensity, task, row), never by arm or seed, so every arm is scored on the same noisy text
# --------------------------------------------------------------------------------------------------------------------

KEYBOARD_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def keyboard_neighbours() -> dict[str, str]:
    """Letters next to each letter on a QWERTY keyboard (same row left/right, the rows above and below)."""
    place = {c: (r, i) for r, row in enumerate(KEYBOARD_ROWS) for i, c in enumerate(row)}
    near = {}
    for c, (r, i) in place.items():
        near[c] = "".join(d for d, (s, j) in place.items() if d != c and abs(s - r) <= 1 and abs(j + 0.5 * s -
                                                                                                 (i + 0.5 * r)) <= 1)
    return near


NEIGHBOURS = keyboard_neighbours()


def noisy(text: str, kind: str, intensity: float, rng: random.Random) -> str:
    """The text with each letter hit with probability `intensity`: `swap` (with the next character, if a letter),
    `delete`, `keyboard` (a QWERTY neighbour, case kept), `case` (flipped); `insert` adds a random lowercase letter
    after each character with that probability."""
    chars, out, i = list(text), [], 0
    while i < len(chars):
        c = chars[i]
        hit = rng.random() < intensity
        if kind == "insert":
            out.append(c)
            if hit:
                out.append(rng.choice("abcdefghijklmnopqrstuvwxyz"))
        elif not c.isalpha() or not hit:
            out.append(c)
        elif kind == "swap":
            if i + 1 < len(chars) and chars[i + 1].isalpha():
                out += [chars[i + 1], c]
                i += 1
            else:
                out.append(c)
        elif kind == "delete":
            pass
        elif kind == "keyboard":
            options = NEIGHBOURS.get(c.lower())
            replacement = rng.choice(options) if options else c
            out.append(replacement.upper() if c.isupper() else replacement)
        elif kind == "case":
            out.append(c.lower() if c.isupper() else c.upper())
        else:
            raise ValueError(f"unknown noise {kind!r}; the noises are {NOISES}")
        i += 1
    return "".join(out)


NOISES = ("swap", "delete", "insert", "keyboard", "case")


def noisy_rows(rows: Rows, kind: str, intensity: float, task: str) -> Rows:
    texts = []
    for index, pair in enumerate(rows.texts):
        rng = random.Random(f"{kind}|{intensity}|{task}|{index}")
        texts.append(tuple(noisy(text, kind, intensity, rng) for text in pair))
    return Rows(texts, rows.labels)


def condition_name(kind: str, intensity: float) -> str:
    return f"{kind}-{intensity:g}"


def ood_sentences(source, count: int) -> list[str]:
    """Sentences of the held-out book (20-200 characters), evenly spaced, lowercased as SST-2's text is."""
    from sharedbert.data.text import corpus_files, read_corpus_text

    path = next(p for p in corpus_files(source) if p.name == HELD_OUT_FILE)
    text = normalise(read_corpus_text(path, ENCODINGS.get(HELD_OUT_FILE)))
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if 20 <= len(s) <= 200]
    step = max(1, len(sentences) // count)
    return [s.lower() for s in sentences[::step][:count]]


# --------------------------------------------------------------------------------------------------------------------
# Fine-tuning
# --------------------------------------------------------------------------------------------------------------------

def finetune_steps(recipe: Recipe, train_rows: int) -> int:
    """The recipe's fine-tuning steps, or fewer where `finetune_max_epochs` passes over the training rows end first."""
    if recipe.finetune_max_epochs is None:
        return recipe.finetune_steps
    capped = math.ceil(recipe.finetune_max_epochs * train_rows / recipe.finetune_batch)
    return max(1, min(recipe.finetune_steps, capped))


def finetune_task(task: str, cell: "Cell", vocabulary: Vocabulary, train: Rows, dev: Rows, run_dir: Path,
                  precision: str, device: str, extra: dict | None = None) -> dict:
    """Fine-tune the cell's pretrained encoder on one task with Trainer, save the model, score it on `dev` clean and
    under every declared noise (and `extra` row sets). A task already finished is read back."""
    import torch
    from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments, set_seed

    from sharedbert.atomic import atomic_directory, atomic_write_text

    folder = run_dir / "finetuned" / task
    if (folder / "scores.json").exists():
        return json.loads((folder / "scores.json").read_text())
    recipe = cell.recipe
    set_seed(cell.seed)
    regression = task == "stsb"
    model = AutoModelForSequenceClassification.from_pretrained(
        run_dir / "pretrained", num_labels=1 if regression else 2, hidden_dropout_prob=recipe.dropout,
        attention_probs_dropout_prob=recipe.dropout)
    if regression:
        train = Rows(train.texts, [float(v) for v in train.labels])
    steps = finetune_steps(recipe, len(train))
    arguments = TrainingArguments(
        output_dir=str(run_dir / "finetuning" / task), max_steps=steps,
        per_device_train_batch_size=recipe.finetune_batch, learning_rate=recipe.finetune_lr,
        warmup_steps=recipe.finetune_warmup, weight_decay=recipe.finetune_weight_decay, lr_scheduler_type="linear",
        seed=cell.seed, data_seed=cell.seed, bf16=precision == "bf16", use_cpu=device == "cpu", save_strategy="no",
        logging_steps=max(1, steps // 10), report_to=[], disable_tqdm=True,
        dataloader_num_workers=0)
    trainer = Trainer(model=model, args=arguments, train_dataset=Encoded(train, vocabulary, recipe.context),
                      data_collator=collate_classification)
    started, cpu_started = time.perf_counter(), time.process_time()
    trainer.train()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    model = trainer.model
    started, cpu_started = time.perf_counter(), time.process_time()
    limit = recipe.eval_limit
    dev = Rows(dev.texts[:limit], dev.labels[:limit]) if limit else dev
    scored = {"clean": dev}
    for kind in recipe.noise_types:
        for intensity in recipe.noise_intensities:
            scored[condition_name(kind, intensity)] = noisy_rows(dev, kind, intensity, task)
    scores = {}
    for name, rows in scored.items():
        predictions = predict(model, Encoded(rows, vocabulary, recipe.context), precision, device, regression)
        scores[name] = task_metrics(task, predictions, rows.labels)
    record = {"task": task, "dev": scores, "dev_rows": len(dev), "train_rows": len(train), "steps": steps,
              "train_seconds": seconds, "train_cpu_seconds": cpu_seconds,
              "train_losses": [{"step": e["step"], "loss": e["loss"]}
                                                         for e in trainer.state.log_history if "loss" in e]}
    for name, rows in (extra or {}).items():  # label-free row sets: predictions kept
        record.setdefault("unlabelled", {})[name] = predict(model, Encoded(rows, vocabulary, recipe.context),
                                                            precision, device, regression)
    record["eval_seconds"] = time.perf_counter() - started
    record["eval_cpu_seconds"] = time.process_time() - cpu_started
    with atomic_directory(folder) as out:
        model.save_pretrained(out)
        (out / "char_vocabulary.json").write_text(json.dumps(vocabulary.to_json(), indent=1))
        atomic_write_text(out / "scores.json", json.dumps(record, indent=1) + "\n")
    shutil.rmtree(run_dir / "finetuning" / task, ignore_errors=True)
    return record


def holdout_split(rows: Rows, seed: int = 0, fraction: float = 0.1) -> tuple[Rows, Rows]:
    """The pilot's split of the training rows: a fixed 10% scores, the rest trains (the dev sets are never read)."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    cut = max(1, int(len(rows) * fraction))
    pick = lambda ix: Rows([rows.texts[i] for i in ix], [rows.labels[i] for i in ix])  # noqa: E731
    return pick(order[cut:]), pick(order[:cut])


# --------------------------------------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------------------------------------

PILOT_OVERRIDES = {"pretrain_iters": "i", "pretrain_batch": "b", "pretrain_dropout": "d", "eval_limit": "e"}  # pilot-only options -> their tag in the cell's name


@dataclasses.dataclass
class Cell:
    arm: str
    seed: int
    recipe_name: str
    recipe: Recipe
    precision: str
    overrides: dict = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        tags = "".join(f"-{PILOT_OVERRIDES[key]}{value}" for key, value in self.overrides.items())
        return f"{self.recipe_name}{tags}-{self.arm}-seed{self.seed}"


def make_cell(arm: str, seed: int, recipe_name: str, precision: str = "auto", overrides: dict | None = None) -> Cell:
    if arm not in ARMS:
        raise SystemExit(f"Unknown arm {arm!r}; the arms are {list(ARMS)} (ARMS in {Path(__file__).name}).")
    overrides = {key: value for key, value in (overrides or {}).items() if value is not None}
    recipe = dataclasses.replace(RECIPES[recipe_name], **overrides)
    if "pretrain_iters" in overrides:
        recipe = dataclasses.replace(recipe, eval_interval=min(recipe.eval_interval, recipe.pretrain_iters),
                                     warmup_iters=min(recipe.warmup_iters, recipe.pretrain_iters // 2))
    return Cell(arm, seed, recipe_name, recipe, precision, overrides)


def machine() -> dict:
    import torch
    import transformers

    from sharedbert.precision import cpu_name

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "experiments/downstream", "sharedbert"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu_name() or platform.processor() or platform.machine(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__, "transformers": transformers.__version__, "git_commit": commit or None,
            "uncommitted_changes": bool(dirty), "torch_threads": torch.get_num_threads()}


def identity(cell: Cell, corpus_sha256: str, pilot: bool = False) -> dict:
    return {"pilot": pilot, "arm": cell.arm, "seed": cell.seed, "recipe": cell.recipe_name,
            "hyperparameters": dataclasses.asdict(cell.recipe), "corpus_sha256": corpus_sha256}


def configuration_differences(stored: dict, wanted: dict) -> list[str]:
    """The identity keys (and hyper-parameters) in which a finished cell's file differs from the cell asked for. A
    hyper-parameter the file lacks was added to Recipe after it was written and counts at its default, so that the
    first study's cells stay finished."""
    defaults = {f.name: f.default for f in dataclasses.fields(Recipe) if f.default is not dataclasses.MISSING}
    as_json = lambda value: json.loads(json.dumps(value))  # noqa: E731  (tuples are stored as lists)
    differing = sorted(k for k, v in wanted.items() if k != "hyperparameters" and stored.get(k) != as_json(v))
    stored_hyperparameters = stored.get("hyperparameters") or {}
    for key, value in wanted["hyperparameters"].items():
        if as_json(stored_hyperparameters.get(key, defaults.get(key))) != as_json(value):
            differing.append(f"hyperparameters.{key}")
    return differing


@contextlib.contextmanager
def claim(work_dir: Path, name: str):
    from sharedbert.atomic import file_lock

    work_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(work_dir / f"{name}.lock", blocking=False) as ours:
        yield ours


def load_tasks(glue_dir: Path, pilot: bool) -> dict:
    """Each task's training rows and the rows it is scored on: the dev set, or (pilot) a split of the training rows."""
    tasks = {}
    for task in TASKS:
        train = read_glue(glue_dir, task, "train")
        if pilot:
            train, scored = holdout_split(train)
        else:
            scored = read_glue(glue_dir, task, "dev")
        tasks[task] = (train, scored)
    return tasks


def run_cell(cell: Cell, corpus_source, glue_dir: Path, results_dir: Path, work_dir: Path, force: bool = False,
             pilot: bool = False, corpus: Corpus | None = None) -> dict | None:
    from sharedbert.atomic import atomic_write_text

    result_path = results_dir / f"{cell.name}.json"
    corpus = corpus or load_corpus(corpus_source, cell.recipe)
    wanted = identity(cell, corpus.sha256, pilot)
    if result_path.exists() and not force:
        stored = json.loads(result_path.read_text())
        differing = configuration_differences(stored, wanted)
        if differing:
            raise SystemExit(f"{result_path} holds a finished cell of another configuration ({differing} differ): "
                             "--force replaces it, or use another --results-dir.")
        print(f"{cell.name}: finished already ({result_path}), skipped; --force re-runs it", flush=True)
        return None
    with claim(work_dir, cell.name) as mine:
        if not mine:
            print(f"{cell.name}: being run by another process, skipped", flush=True)
            return None
        run_dir = work_dir / cell.name
        if force and run_dir.exists():
            shutil.rmtree(run_dir)
        started, where = time.perf_counter(), machine()
        precision, device = precision_and_device(cell.precision)
        print(f"{cell.name}: pretraining ({precision}, {device})", flush=True)
        pretraining = pretrain(cell.arm, cell.seed, cell.recipe, corpus, run_dir, precision, device)
        print(f"{cell.name}: validation loss {pretraining['validation_loss']:.3f}, "
              f"{pretraining['below_context_free_null']:.3f} below the context-free null", flush=True)
        tasks = load_tasks(glue_dir, pilot)
        book = ood_sentences(corpus_source, cell.recipe.ood_sentences)
        ood = Rows([(sentence,) for sentence in book], [0] * len(book))  # unlabelled: the labels are placeholders
        finetuned = {}
        for task, (train, scored) in tasks.items():
            extra = {}
            if task == "sst2":
                extra = {"held_out_book": ood, **{f"held_out_book:{condition_name(k, i)}": noisy_rows(ood, k, i, "ood")
                                                  for k in cell.recipe.noise_types
                                                  for i in cell.recipe.noise_intensities}}
            record = finetune_task(task, cell, corpus.vocabulary, train, scored, run_dir, precision, device, extra)
            record["baseline"] = baseline(task, train, Rows(scored.texts[:cell.recipe.eval_limit],
                                                            scored.labels[:cell.recipe.eval_limit]))
            finetuned[task] = record
            print(f"{cell.name}: {task} {record['dev']['clean']['score']:.1f} (baseline "
                  f"{record['baseline']['score']:.1f}), {record['train_seconds']:.0f} s + "
                  f"{record['eval_seconds']:.0f} s", flush=True)
        result = {**wanted, "name": cell.name, "scored_on": "train split" if pilot else "dev",
                  "pretraining": pretraining, "tasks": finetuned, "vocab_size": corpus.vocabulary.size,
                  "corpus_files": corpus.files, "held_out_file": HELD_OUT_FILE, "device": device,
                  "precision": precision, "wall_seconds_this_process": time.perf_counter() - started, **where}
        results_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(result_path, json.dumps(result, indent=1) + "\n")
    print(f"{cell.name}: done in {result['wall_seconds_this_process']:.0f} s -> {result_path}", flush=True)
    return result


# --------------------------------------------------------------------------------------------------------------------
# evaluate --cell NAME --tsv FILE
# --------------------------------------------------------------------------------------------------------------------

class TsvError(SystemExit):
    pass


def read_sentiment_tsv(path: Path) -> Rows:
    """A two-column TSV: sentence, label (0 negative / 1 positive); a first row whose label is not 0/1 is a header."""
    path = Path(path)
    if not path.is_file():
        raise TsvError(f"{path}: no such file.")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[:error.start].count(b"\n") + 1
        raise TsvError(f"{path}, line {line}: not UTF-8 text (byte {error.start}).") from None
    texts, labels = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise TsvError(f"{path}, line {number}: {len(fields)} tab-separated column(s); expected 2 (sentence, "
                           "label).")
        sentence, label = fields[0].strip(), fields[1].strip()
        if label not in ("0", "1"):
            if number == 1 and not texts:
                continue  # a header row
            raise TsvError(f"{path}, line {number}, column 2: label {label!r} is not 0 (negative) or 1 (positive).")
        if not sentence:
            raise TsvError(f"{path}, line {number}, column 1: the sentence is empty.")
        texts.append((sentence,))
        labels.append(int(label))
    if not texts:
        raise TsvError(f"{path}: no labelled rows (sentence<TAB>0 or 1).")
    return Rows(texts, labels)


def evaluate_tsv(cell_name: str, tsv: Path, work_dir: Path, precision: str = "auto") -> dict:
    from transformers import AutoModelForSequenceClassification

    folder = Path(work_dir) / cell_name / "finetuned" / "sst2"
    if not (folder / "scores.json").exists():
        raise SystemExit(f"{folder}: no fine-tuned SST-2 model of cell {cell_name!r}; run its cell first "
                         f"(study.py cell --arm ARM --seed N; the cell is named RECIPE-ARM-seedN).")
    rows = read_sentiment_tsv(tsv)
    vocabulary = Vocabulary.from_json(json.loads((folder / "char_vocabulary.json").read_text()))
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    precision, device = precision_and_device(precision)
    model.to(device)
    context = model.config.max_position_embeddings
    predictions = predict(model, Encoded(rows, vocabulary, context), precision, device, regression=False)
    metrics = task_metrics("sst2", predictions, rows.labels)
    return {"cell": cell_name, "tsv": str(tsv), "rows": len(rows), "accuracy": metrics["accuracy"],
            "predicted_positive": sum(predictions), "labelled_positive": sum(rows.labels), "precision": precision}


# --------------------------------------------------------------------------------------------------------------------
# The report: verdicts from the cells' results files (README.md, "Verdict rule")
# --------------------------------------------------------------------------------------------------------------------

SUPPORTED, CONTRADICTED, OPEN = "supported", "contradicted", "left open"
# Until every declared cell has landed a claim is PENDING (README, "Verdicts": written only when every arm has its
# five seeds); what the cells so far would give is kept beside it as its provisional verdict.
PENDING = "pending"


def read_cells(results_dir: Path, recipe: str) -> list[dict]:
    cells = []
    for path in sorted(Path(results_dir).glob("*.json")):
        cell = json.loads(path.read_text())
        if cell.get("recipe") == recipe and not cell.get("pilot"):
            cells.append(cell)
    return cells


def by_arm_seed(cells: list[dict], value) -> dict:
    """{arm: {seed: value(cell)}} (a value of None is left out)."""
    table: dict = {}
    for cell in cells:
        v = value(cell)
        if v is not None:
            table.setdefault(cell["arm"], {})[cell["seed"]] = v
    return table


def mean_of(values) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def judged(a: dict, b: dict | None, margin: float, higher_is_better: bool = True) -> dict:
    from sharedbert.verdicts import paired_comparison

    return paired_comparison(a, b, margin=margin, higher_is_better=higher_is_better).as_dict()


def claim_verdict(comparison: dict, wanted: tuple[str, ...]) -> str:
    """SUPPORTED if the comparison's verdict is one the claim allows, CONTRADICTED if it is decided otherwise."""
    from sharedbert.verdicts import LEFT_OPEN

    if comparison["verdict"] == LEFT_OPEN:
        return OPEN
    return SUPPORTED if comparison["verdict"] in wanted else CONTRADICTED


# What the cells of one comparison must share (the README's method): a machine without native bf16 runs `auto` in
# fp32, and the CPU's name alone does not tell two such machines apart, so the precision is checked as well.
CONDITIONS = ("git_commit", "precision", "device", "cpu", "gpu")


def check_conditions(cells: list[dict], conditions: tuple[str, ...] = CONDITIONS) -> None:
    """Refuse to judge cells that differ in commit, precision, device, CPU or GPU, naming the differing fields."""
    differing = {key: sorted({str(c.get(key)) for c in cells}) for key in conditions}
    differing = {key: values for key, values in differing.items() if len(values) > 1}
    if differing:
        raise SystemExit(f"the cells of one report must share {', '.join(conditions)}; these differ: {differing}. "
                         "Run the odd cells again where the others ran, or move them out of the results folder.")


def summarise(cells: list[dict], declared: list[tuple[str, int]] | None = None,
              shared_conditions: tuple[str, ...] = CONDITIONS) -> dict:
    """Every table and verdict of the report, from finished cells of one recipe (refused if they differ in the
    conditions a comparison shares). With `declared`, the (arm, seed) cells the study declared: while any of them is
    missing, every claim is pending (`hold_claims`)."""
    from sharedbert.verdicts import AHEAD, ON_PAR

    check_conditions(cells, shared_conditions)

    arms = sorted({c["arm"] for c in cells}, key=lambda a: list(ARMS).index(a) if a in ARMS else len(ARMS))
    conditions = sorted({name for c in cells for name in c["tasks"]["sst2"]["dev"] if name != "clean"})
    scores = {task: by_arm_seed(cells, lambda c, t=task: c["tasks"][t]["dev"]["clean"]["score"]) for task in TASKS}
    baselines = {task: mean_of(c["tasks"][task]["baseline"]["score"] for c in cells) for task in TASKS}
    learns = {arm: {c["seed"]: c["pretraining"]["learns"] for c in cells if c["arm"] == arm} for arm in arms}

    # A task is informative if some arm beats the baseline by the task's margin (95% t interval, by seed).
    informative, against_baseline = [], {}
    for task in TASKS:
        against_baseline[task] = {arm: judged({s: v - baselines[task] for s, v in scores[task].get(arm, {}).items()},
                                              None, MARGINS[task]) for arm in arms}
        if any(c["verdict"] == AHEAD for c in against_baseline[task].values()):
            informative.append(task)

    def average(cell, condition="clean", tasks=None):
        tasks = informative if tasks is None else tasks
        return mean_of(cell["tasks"][t]["dev"][condition]["score"] for t in tasks) if tasks else None

    glue = by_arm_seed(cells, average)
    glue_all = by_arm_seed(cells, lambda c: average(c, tasks=TASKS))
    comparisons = {}
    for arm in arms:
        if arm == "standard":
            continue
        comparisons[arm] = {task: judged(scores[task].get(arm, {}), scores[task].get("standard", {}), MARGINS[task])
                            for task in TASKS}
        comparisons[arm]["average"] = judged(glue.get(arm, {}), glue.get("standard", {}), MARGINS["average"])

    drops = {name: by_arm_seed(cells, lambda c, n=name: None if not informative else
                               average(c) - average(c, n)) for name in conditions}
    mean_drop = by_arm_seed(cells, lambda c: None if not informative or not conditions else
                            mean_of(average(c) - average(c, n) for n in conditions))
    noise = {arm: {"mean_drop": judged(mean_drop.get(arm, {}), mean_drop.get("standard", {}), MARGINS["average"],
                                       higher_is_better=False),
                   **{name: judged(drops[name].get(arm, {}), drops[name].get("standard", {}), MARGINS["average"],
                                   higher_is_better=False) for name in conditions}}
             for arm in arms if arm != "standard"}

    def consistency(cell):  # held-out-book sentences: share of predictions a noise leaves unchanged (label-free)
        unlabelled = cell["tasks"]["sst2"].get("unlabelled", {})
        clean = unlabelled.get("held_out_book")
        names = [n for n in unlabelled if n.startswith("held_out_book:")]
        if not clean or not names:
            return None
        return 100 * mean_of(mean_of(float(a == b) for a, b in zip(clean, unlabelled[n])) for n in names)

    ood_consistency = by_arm_seed(cells, consistency)
    book_gap = by_arm_seed(cells, lambda c: c["pretraining"]["held_out_book_loss"] - c["pretraining"]["validation_loss"])

    claims = {}
    enough = len(informative) >= 2
    for other, paper in PAPER.items():
        key = f"shared vs {other}"
        if not enough:
            claims[key] = {"paper": paper, "verdict": OPEN,
                           "why": "uninformative at this scale (fewer than two informative tasks)"}
            continue
        if "shared" not in glue or other not in glue:
            claims[key] = {"paper": paper, "verdict": OPEN, "why": "cells missing"}
            continue
        comparison = judged(glue["shared"], glue[other], MARGINS["average"])
        wanted = (ON_PAR, AHEAD) if other == "standard" else (AHEAD,)
        verdict = claim_verdict(comparison, wanted)
        why = ""
        if not all(learns.get("shared", {}).values()) or not all(learns.get(other, {}).values()):
            verdict, why = OPEN, "an arm did not learn in pretraining on some seed"
        claims[key] = {"paper": paper, "measured": comparison, "verdict": verdict, "why": why}
    if "shared" in noise and enough:
        claims["noise"] = {"measured": noise["shared"]["mean_drop"],
                           "verdict": claim_verdict(noise["shared"]["mean_drop"], (AHEAD,)), "why": ""}
    else:
        claims["noise"] = {"verdict": OPEN, "why": "uninformative at this scale" if not enough else "cells missing"}
    claims["out_of_domain"] = {"verdict": OPEN, "why": "no labelled out-of-domain sentiment data in the shared data; "
                               "label-free views only (prediction consistency under noise on the held-out book, "
                               "MLM loss on it)"}
    provenance = {key: sorted({str(c.get(key)) for c in cells}) for key in ("git_commit", "precision", "device", "cpu")}
    missing = []
    if declared is not None:
        landed = {(c["arm"], c["seed"]) for c in cells}
        missing = [f"{arm}-seed{seed}" for arm, seed in declared if (arm, seed) not in landed]
        if missing:
            hold_claims(claims, f"{len(declared) - len(missing)} of {len(declared)} declared cells have landed")
    return {"declared_cells": None if declared is None else len(declared), "missing_cells": missing, "arms": arms,
            "tasks": list(TASKS), "margins": MARGINS, "baselines": baselines, "informative": informative,
            "uninformative": [t for t in TASKS if t not in informative], "against_baseline": against_baseline,
            "scores": scores, "glue_average_informative": glue, "glue_average_all_five": glue_all,
            "learns": learns, "comparisons_to_standard": comparisons, "noise_conditions": conditions,
            "noise_drop": drops, "noise_comparisons_to_standard": noise, "held_out_book_consistency": ood_consistency,
            "held_out_book_minus_validation_loss": book_gap, "claims": claims, "paper": PAPER,
            "provenance": provenance, "cells": len(cells)}


def hold_claims(claims: dict, landed: str) -> None:
    """Make every claim pending, keeping what the cells so far give as its provisional verdict and reason."""
    for claim in claims.values():
        claim["provisional_verdict"], claim["verdict"] = claim["verdict"], PENDING
        claim["why"] = landed + (f"; provisionally {claim['provisional_verdict']}" +
                                 (f": {claim['why']}" if claim.get("why") else ""))


def summary_markdown(summary: dict) -> str:
    def cell(values: dict) -> str:
        m = mean_of(values.values())
        return "" if m is None else f"{m:.1f} ({len(values)})"

    lines = [f"# Downstream study: summary of {summary['cells']} cells", "",
             f"Informative tasks: {', '.join(summary['informative']) or 'none'}; uninformative at this scale: "
             f"{', '.join(summary['uninformative']) or 'none'}. Provenance: {summary['provenance']}.", "",
             *([f"**Partial: {summary['declared_cells'] - len(summary['missing_cells'])} of "
                f"{summary['declared_cells']} declared cells have landed.** Every word below is provisional and "
                "every claim pending until all have.", ""] if summary.get("missing_cells") else []),
             "| arm | " + " | ".join(summary["tasks"]) + " | average (informative) | learns |",
             "|---|" + "---|" * (len(summary["tasks"]) + 2)]
    for arm in summary["arms"]:
        lines.append(f"| `{arm}` | " + " | ".join(cell(summary["scores"][t].get(arm, {})) for t in summary["tasks"])
                     + f" | {cell(summary['glue_average_informative'].get(arm, {}))} | "
                     + f"{sum(summary['learns'][arm].values())}/{len(summary['learns'][arm])} |")
    lines.append("| baseline | " + " | ".join(f"{summary['baselines'][t]:.1f}" for t in summary["tasks"]) + " | | |")
    lines += ["", "Paired comparisons (95% t, by seed) to `standard`: mean difference, interval, verdict.", "",
              "| arm | " + " | ".join([*summary["tasks"], "average"]) + " | noise: mean drop |",
              "|---|" + "---|" * (len(summary["tasks"]) + 2)]
    def word(c):
        return "n/a" if c.get("mean") is None else f"{c['mean']:+.2f} {c['verdict']}"

    for arm, row in summary["comparisons_to_standard"].items():
        lines.append(f"| `{arm}` | " + " | ".join(word(row[t]) for t in [*summary["tasks"], "average"]) + " | "
                     + word(summary["noise_comparisons_to_standard"][arm]["mean_drop"]) + " |")
    lines += ["", "## The paper's claims", ""]
    for name, claim in summary["claims"].items():
        measured = claim.get("measured") or {}
        mean = measured.get("mean")
        lines.append(f"- {name}: **{claim['verdict']}**" + (f" (paper {claim['paper']:+.2f})" if "paper" in claim
                                                              else "")
                     + (f", measured {mean:+.2f}, interval {interval_text(measured['interval'])}" if mean is not None
                        else "")
                     + (f"; {claim['why']}" if claim.get("why") else ""))
    for arm, added in summary.get("added_arms", {}).items():
        rows, learns = added["against_standard"], added["learns"]
        partial = "" if added["seeds"] == list(DECLARED_SEEDS) else "**Partial: every word is provisional.** "
        lines += ["", f"## Added arm `{arm}` (a comparison of its own, at {', '.join(added['git_commit'])})", "",
                  f"{partial}Seeds {added['seeds']}, learns {sum(learns.values())}/{len(learns)}; informative tasks "
                  f"with `standard`: {', '.join(added['informative']) or 'none'}. Against `standard`, paired by seed: "
                  + "; ".join(f"{t} {word(rows[t])}" for t in [*summary["tasks"], "average"] if t in rows)
                  + (f"; noise, mean drop {word(added['noise_against_standard']['mean_drop'])}"
                     if added["noise_against_standard"] else "") + "."]
    return "\n".join(lines) + "\n"


def combine_grids(summaries: dict[str, dict]) -> dict:
    """The claims of one study run as several grids, each on its own machine (shakespeare/README.md, "A third grid",
    the rule for any number of grids): never pooled. A claim takes the verdict every complete grid gives it;
    complete grids that differ leave it open, with each one's verdict quoted; while no grid is complete it is
    pending. `summaries`: {grid name: its `write_report` summary}."""
    grids = {name: {"landed": s["declared_cells"] - len(s["missing_cells"]), "declared": s["declared_cells"],
                    "complete": not s["missing_cells"], "provenance": s["provenance"]}
             for name, s in summaries.items()}
    complete = [name for name, grid in grids.items() if grid["complete"]]
    claims = {}
    for key in dict.fromkeys(k for s in summaries.values() for k in s["claims"]):
        by_grid = {name: s["claims"][key]["verdict"] for name, s in summaries.items() if key in s["claims"]}
        judging = [name for name in complete if name in by_grid]
        verdicts = {by_grid[name] for name in judging}
        if not verdicts:
            verdict, why = PENDING, "no grid is complete"
        elif len(verdicts) == 1:
            verdict, why = verdicts.pop(), "the verdict of " + " and ".join(f"the {name} grid" for name in judging)
        else:
            verdict, why = OPEN, "the complete grids differ"
        claims[key] = {"verdict": verdict, "why": why, "by_grid": by_grid}
    return {"grids": grids, "claims": claims}


def combined_markdown(combined: dict) -> str:
    lines = ["# Downstream study: the claims over its grids", "",
             "Each grid is its own comparison, never pooled with another (shakespeare/README.md, \"A third grid\").",
             "", "| grid | cells landed | precision | CPU |", "|---|---|---|---|"]
    for name, grid in combined["grids"].items():
        status = "complete" if grid["complete"] else "under way"
        lines.append(f"| {name} | {grid['landed']} of {grid['declared']} ({status}) | "
                     f"{', '.join(grid['provenance']['precision'])} | {', '.join(grid['provenance']['cpu'])} |")
    lines += ["", "| claim | verdict | why | " + " | ".join(combined["grids"]) + " |",
              "|---|---|---|" + "---|" * len(combined["grids"])]
    for key, claim in combined["claims"].items():
        lines.append(f"| {key} | **{claim['verdict']}** | {claim['why']} | "
                     + " | ".join(claim["by_grid"].get(name, "") for name in combined["grids"]) + " |")
    return "\n".join(lines) + "\n"


def interval_text(interval) -> str:
    """A 95% interval as the report prints it: [low, high] to two decimals, "none" with fewer than two paired seeds."""
    return "none (fewer than two paired seeds)" if interval is None else f"[{interval[0]:+.2f}, {interval[1]:+.2f}]"


def noise_curves(cells: list[dict], tasks: list[str]) -> dict:
    """{arm: {noise type: [(intensity, drop)]}}: the drop is the mean over `tasks` of the clean dev score minus the
    noisy one, averaged over the arm's seeds; intensity 0 is the clean score itself (drop 0)."""
    curves: dict = {}
    for name in sorted({n for c in cells for n in c["tasks"][tasks[0]]["dev"] if n != "clean"}):
        kind, intensity = name.rsplit("-", 1)
        drops = by_arm_seed(cells, lambda c, n=name: mean_of(
            c["tasks"][t]["dev"]["clean"]["score"] - c["tasks"][t]["dev"][n]["score"] for t in tasks))
        for arm, by_seed in drops.items():
            curves.setdefault(arm, {}).setdefault(kind, [(0.0, 0.0)]).append((float(intensity),
                                                                              mean_of(by_seed.values())))
    return {arm: {kind: sorted(points) for kind, points in kinds.items()} for arm, kinds in curves.items()}


def pretraining_curves(cells: list[dict]) -> dict:
    """{arm: [(iteration, validation loss averaged over the arm's seeds)]}, at the iterations every seed recorded."""
    curves = {}
    for arm in dict.fromkeys(c["arm"] for c in cells):
        recorded = [{p["iteration"]: p["loss"] for p in c["pretraining"].get("curve", [])}
                    for c in cells if c["arm"] == arm]
        common = sorted(set.intersection(*(set(r) for r in recorded))) if recorded else []
        if common:
            curves[arm] = [(i, mean_of(r[i] for r in recorded)) for i in common]
    return curves


def plot_report(summary: dict, cells: list[dict], path: Path) -> None:
    """Pretraining curves against the context-free null, each task's clean score above its baseline, the held-out
    book's loss gap, and the score each noise type takes off at each intensity: one arm a colour, means over seeds."""
    import io

    import matplotlib

    from sharedbert.atomic import atomic_write_bytes

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = summary["arms"]
    colour = {arm: f"C{i}" for i, arm in enumerate(arms)}
    tasks = summary["informative"] or list(summary["tasks"])
    noise = noise_curves(cells, tasks)
    kinds = sorted({kind for curves in noise.values() for kind in curves})
    figure, axes = plt.subplots(2, max(3, len(kinds)), figsize=(5 * max(3, len(kinds)), 8.5), squeeze=False)
    axis = axes[0][0]
    pretraining = pretraining_curves(cells)
    for arm in (a for a in arms if a in pretraining):
        axis.plot(*zip(*pretraining[arm]), marker=".", color=colour[arm], label=arm)
    nulls = [c["pretraining"]["nulls"]["validation"]["context_free"] for c in cells
             if "nulls" in c["pretraining"]]
    if nulls:
        axis.axhline(mean_of(nulls), color="grey", linestyle="--", label="context-free null")
    axis.set(xlabel="pretraining iteration", ylabel="MLM validation loss (nats)", title="Pretraining")
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize=7)
    axis = axes[0][1]
    width = 0.8 / len(arms)
    for k, arm in enumerate(arms):
        means = [mean_of(summary["scores"][t].get(arm, {}).values()) for t in summary["tasks"]]
        above = [0.0 if m is None else m - summary["baselines"][t] for m, t in zip(means, summary["tasks"])]
        axis.bar([i + k * width for i in range(len(summary["tasks"]))], above, width, color=colour[arm], label=arm)
    axis.axhline(0, color="black", linewidth=0.8)
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(summary["tasks"]))], summary["tasks"])
    axis.set(ylabel="clean dev score minus the task's baseline", title="GLUE, clean (baseline: majority/constant)")
    axis.legend(fontsize=7)
    axis = axes[0][2]
    gaps = summary["held_out_book_minus_validation_loss"]
    axis.bar(range(len(arms)), [mean_of(gaps.get(arm, {}).values()) or 0.0 for arm in arms],
             color=[colour[a] for a in arms])
    axis.set_xticks(range(len(arms)), arms, rotation=30, fontsize=8)
    axis.set(ylabel="held-out book MLM loss minus validation loss",
             title="Out of domain, label-free: the held-out book")
    for column, kind in enumerate(kinds):
        axis = axes[1][column]
        for arm in (a for a in arms if kind in noise.get(a, {})):
            axis.plot(*zip(*noise[arm][kind]), marker="o", color=colour[arm], label=arm)
        axis.set(xlabel=f"{kind}: share of characters changed", title=f"Noise: {kind}",
                 ylabel=f"score lost, mean of {', '.join(tasks)}")
    for extra in range(len(kinds), axes.shape[1]):
        axes[1][extra].axis("off")
    landed = (f"partial, {summary['declared_cells'] - len(summary['missing_cells'])} of {summary['declared_cells']} "
              "declared cells" if summary.get("missing_cells") else f"{summary['cells']} cells")
    figure.suptitle(f"Downstream study ({landed}); means over each arm's seeds")
    figure.tight_layout()
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=110)
    plt.close(figure)
    atomic_write_bytes(path, png.getvalue())


def added_arm_comparisons(added: list[dict], cells: list[dict]) -> dict:
    """Each added arm against `standard`, paired by seed: a comparison of its own beside the declared ones. Its cells
    ran at the commit that added the arm, so they share every condition with `standard`'s but the commit (refused
    otherwise); the tasks and noises are judged as in the declared report, the claims are not (they are the
    declared arms')."""
    comparisons = {}
    standard = [c for c in cells if c["arm"] == "standard"]
    for arm in sorted({c["arm"] for c in added}):
        ours = [c for c in added if c["arm"] == arm]
        paired = summarise(ours + standard, shared_conditions=tuple(k for k in CONDITIONS if k != "git_commit"))
        comparisons[arm] = {"config": ADDED_ARMS[arm], "seeds": sorted(c["seed"] for c in ours),
                            "git_commit": sorted({str(c.get("git_commit")) for c in ours}),
                            "learns": paired["learns"].get(arm, {}), "informative": paired["informative"],
                            "against_standard": paired["comparisons_to_standard"].get(arm, {}),
                            "noise_against_standard": paired["noise_comparisons_to_standard"].get(arm, {})}
    return comparisons


def write_report(results_dir: Path, recipe: str, out_dir: Path) -> dict:
    from sharedbert.atomic import atomic_write_text

    cells = read_cells(results_dir, recipe)
    if not cells:
        raise SystemExit(f"no finished cells of recipe {recipe!r} in {results_dir}: nothing to report.")
    added = [c for c in cells if c["arm"] in ADDED_ARMS]
    cells = [c for c in cells if c["arm"] not in ADDED_ARMS]
    summary = summarise(cells, declared=[(arm, seed) for seed in DECLARED_SEEDS for arm in DEFAULT_ARMS])
    summary["added_arms"] = added_arm_comparisons(added, cells)
    atomic_write_text(out_dir / f"summary-{recipe}.json", json.dumps(summary, indent=1) + "\n")
    atomic_write_text(out_dir / f"summary-{recipe}.md", summary_markdown(summary))
    plot_report(summary, cells, out_dir / f"summary-{recipe}.png")
    return summary


def write_combined(grid_args: list[str], recipe: str, out_dir: Path) -> dict:
    """`grids`: read each NAME=SUMMARY.json, combine their claims, write grids-RECIPE.{json,md}."""
    from sharedbert.atomic import atomic_write_text

    summaries = {}
    for text in grid_args:
        name, sep, path = text.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--grid {text!r}: expected NAME=SUMMARY.json, e.g. "
                             "bf16=experiments/downstream/results/bf16/summary-shakespeare.json.")
        if name in summaries:
            raise SystemExit(f"--grid {text!r}: the name {name!r} is given twice; give each grid its own name.")
        if not Path(path).is_file():
            raise SystemExit(f"--grid {text!r}: {path} is not a file; `study.py report` writes a grid's summary.")
        summaries[name] = json.loads(Path(path).read_text())
    combined = combine_grids(summaries)
    atomic_write_text(out_dir / f"grids-{recipe}.json", json.dumps(combined, indent=1) + "\n")
    atomic_write_text(out_dir / f"grids-{recipe}.md", combined_markdown(combined))
    return combined


# --------------------------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------------------------

def default_data(sub: str) -> Path:
    from sharedbert.data.location import SHARED_DATA_PLACES, shared_data_dir

    found = shared_data_dir(sub)
    if found is None:
        raise SystemExit(f"{sub} not found in {SHARED_DATA_PLACES}: pass --corpus / --glue-dir.")
    return found / sub


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_commands = []
    for name, text in (("cell", "pretrain, fine-tune and evaluate one cell"),
                       ("grid", "run the missing cells of --arms x --seeds, seed by seed"),
                       ("pilot", "one cell scored on a 10% split of each task's training rows (results/pilot)")):
        sub = commands.add_parser(name, help=text)
        run_commands.append(sub)
        if name == "grid":
            sub.add_argument("--arms", nargs="+", default=list(DEFAULT_ARMS))
            sub.add_argument("--seeds", nargs="+", type=int, default=list(DECLARED_SEEDS))
        else:
            sub.add_argument("--arm", required=True)
            sub.add_argument("--seed", type=int, default=1)
        sub.add_argument("--recipe", choices=list(RECIPES), default="cpu")
        sub.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
        sub.add_argument("--threads", type=int, help="torch threads (one cell per core: 1)")
        sub.add_argument("--corpus", type=Path, help="raw-text folder (default: the recipe's files of the shared "
                         "data, or all of its mlm-text)")
        sub.add_argument("--glue-dir", type=Path, help="GLUE folder (default: the shared data's glue)")
        sub.add_argument("--results-dir", type=Path)
        sub.add_argument("--work-dir", type=Path, default=WORK_DIR)
        sub.add_argument("--force", action="store_true", help="re-run a finished cell from scratch")
        if name == "pilot":
            sub.add_argument("--pretrain-iters", type=int, help="pilot only: fewer pretraining iterations (timing)")
            sub.add_argument("--pretrain-batch", type=int, help="pilot only: another pretraining batch size")
            sub.add_argument("--pretrain-dropout", type=float, help="pilot only: another pretraining dropout")
            sub.add_argument("--eval-limit", type=int, help="pilot only: score at most N rows per task")
    evaluate = commands.add_parser("evaluate", help="a finished cell's SST-2 model on a TSV (sentence, label)")
    evaluate.add_argument("--cell", required=True)
    evaluate.add_argument("--tsv", type=Path, required=True)
    evaluate.add_argument("--work-dir", type=Path, default=WORK_DIR)
    evaluate.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    report = commands.add_parser("report", help="results/summary-RECIPE.{json,md,png} from the finished cells")
    report.add_argument("--recipe", choices=list(RECIPES), default="cpu")
    report.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    report.add_argument("--out-dir", type=Path, default=HERE / "results")
    grids = commands.add_parser("grids", help="results/grids-RECIPE.{json,md}: the claims over a study's grids, "
                                "each a `report` summary (NAME=SUMMARY.json)")
    grids.add_argument("--recipe", choices=list(RECIPES), default="shakespeare")
    grids.add_argument("--grid", action="append", required=True, metavar="NAME=SUMMARY.json")
    grids.add_argument("--out-dir", type=Path, default=HERE / "results")
    describe = commands.add_parser("describe", help="each arm's parameters (meta-device builds) as JSON")
    describe.add_argument("--recipe", choices=list(RECIPES), default="cpu")
    describe.add_argument("--vocab-size", type=int, default=100)
    args = parser.parse_args(argv)

    import sharedbert  # noqa: F401  (registers the Auto classes)
    from transformers.utils import logging as transformers_logging

    # A classifier built from an MLM folder lists its new head: expected. Put back afterwards, so that a caller in the
    # same process (the test suite runs main() in-process) keeps its own verbosity.
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        return run_command(args)
    finally:
        transformers_logging.set_verbosity(verbosity)


def run_command(args) -> int:
    """`main`'s work once the arguments are parsed and transformers is quiet."""
    if args.command == "evaluate":
        print(json.dumps(evaluate_tsv(args.cell, args.tsv, args.work_dir, args.precision), indent=1))
        return 0
    if args.command == "report":
        summary = write_report(args.results_dir, args.recipe, args.out_dir)
        print(summary_markdown(summary))
        return 0
    if args.command == "grids":
        print(combined_markdown(write_combined(args.grid, args.recipe, args.out_dir)))
        return 0
    if args.command == "describe":
        recipe = RECIPES[args.recipe]
        print(json.dumps({arm: {"parameters": parameter_count(arm, recipe, args.vocab_size)} for arm in ARMS},
                         indent=1))
        return 0
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    pilot = args.command == "pilot"
    results_dir = args.results_dir or (PILOT_DIR if pilot else RESULTS_DIR)
    work_dir = args.work_dir / "pilot" if pilot else args.work_dir  # a pilot's models never stand in for a cell's
    plan = ([(arm, seed) for seed in args.seeds for arm in args.arms] if args.command == "grid"
            else [(args.arm, args.seed)])
    overrides = {key: getattr(args, key, None) for key in PILOT_OVERRIDES}
    cells = [make_cell(arm, seed, args.recipe, args.precision, overrides) for arm, seed in plan]
    recipe = cells[0].recipe
    corpus_source = args.corpus or ([default_data(path) for path in recipe.corpus] if recipe.corpus
                                    else default_data("mlm-text"))
    glue_dir = args.glue_dir or default_data("glue")
    corpus = load_corpus(corpus_source, recipe)
    for cell in cells:
        run_cell(cell, corpus_source, glue_dir, results_dir, work_dir, args.force, pilot, corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
