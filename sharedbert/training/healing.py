"""Heal a converted SharedBert by distillation from the BERT it was converted from.

The teacher (the original BERT encoder) and the student (the SharedBert from `convert.from_bert`) read the same raw
text; the student learns to reproduce, layer by layer, the teacher's hidden states and attention-sublayer outputs, plus
the direction of the mean-pooled final embedding (what a sentence-embedding model is used for). Everything outside the
attention projections starts as an exact copy, so the student starts close and a few minutes of CPU go a long way.

Healing runs its own loop (no Trainer: two models, one loss) with `checkpointing`'s checkpoints: one folder, `latest/`,
whose state file `trainer_state.json` records the step, the elapsed training seconds, the data positions, the corpus
fingerprint and the settings (`heal_config`). `heal(..., resume=True)` continues from it exactly, and refuses one made
on other text or with other settings. Ctrl-C (SIGINT) finishes the current step, saves a checkpoint and returns.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..atomic import atomic_directory
from ..sentence_embeddings import pooling_of
from .checkpointing import (
    read_state,
    restore_optimizer,
    restore_rng,
    restore_weights,
    sigint_stops,
    writing_checkpoint,
)
from ..hub.card import HealingSummary, write_conversion_card
from .data import TextInMemory, TextPieces
from ..precision import PRECISIONS, describe_precision, resolve_precision

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "latest"
STATE_FILE = "trainer_state.json"


def _option(default, help: str, **metadata):
    """A HealConfig field: its default, and its help for `sharedbert convert --heal`'s flag."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, **metadata})
    return field(default=default, metadata={"help": help, **metadata})


@dataclass
class HealConfig:
    """The settings of a healing run, all JSON-serialisable and saved in every checkpoint. The defaults are the
    recipe of the published sharedbert-all-MiniLM-L6-v2 (`build_minilm.heal_recipe` gives it its budget and
    threads); `sharedbert convert --heal` makes its healing flags from these fields."""

    max_steps: int | None = _option(None, "Stop after this many optimizer steps; the learning rate anneals over them.",
                                    aliases=["--steps"])
    max_minutes: float | None = _option(None, "Stop after this many minutes of training (whichever budget comes "
                                        "first); alone, the learning rate anneals over the minutes.",
                                        aliases=["--minutes"])
    batch_size: int = _option(16, "Text pieces per step.")
    max_length: int = _option(512, "Tokens per piece (longer ones are cut); at most the model's position table.")
    # Pieces of a random length in [min_words, max_words] words: short sentences and paragraphs, like the sentences an
    # embedding model is used on.
    min_words: int = _option(6, "Shortest piece, in words.")
    max_words: int = _option(40, "Longest piece, in words.")
    # Long batches, so that every position the model is used at is healed (positions past the short pieces' tokens
    # otherwise keep the unhealed fit).
    long_fraction: float = _option(0.25, "Share of the steps that read long pieces, so every position is healed.")
    long_min_words: int = _option(100, "Shortest long piece, in words.")
    long_max_words: int = _option(400, "Longest long piece, in words.")
    long_batch_size: int | None = _option(None, "Long pieces per step (default: about as many padded tokens as a "
                                          "short batch, at least 1).")
    precision: str = _option("auto", "bf16 autocast or fp32; auto: bf16 only where the CPU (or GPU) computes bf16 "
                             "natively.", choices=PRECISIONS)
    learning_rate: float = _option(3e-4, "Peak learning rate (AdamW).", aliases=["--lr"])
    weight_decay: float = _option(0.01, "AdamW weight decay.")
    warmup_steps: int = _option(30, "Linear warm-up steps.")
    decay: bool = _option(True, "Anneal the learning rate linearly to 0 over the budget (steps, else minutes).")
    hidden_weight: float = _option(1.0, "Weight of the relative MSE of every layer's output.")
    attention_weight: float = _option(1.0, "Weight of the relative MSE of every attention sublayer's output.")
    embedding_weight: float = _option(1.0, "Weight of 1 - cosine of the pooled sentence embeddings.")
    # Relational: semantic similarity scores (STS-B) read how sentences relate, not where each lies.
    similarity_weight: float = _option(0.0, "Weight of the squared difference between the student's and the "
                                       "teacher's in-batch cosine-similarity matrices of the pooled embeddings.")
    train_embeddings: bool = _option(False, "Train the embeddings too (they are copied exactly, so frozen by "
                                     "default).")
    checkpoint_minutes: float = _option(5.0, "Save a resumable checkpoint after this many minutes of training.")
    checkpoint_steps: int | None = _option(None, "Also save one every N steps.")
    snapshot_minutes: list[float] = _option([], "Also save full model folders at these training minutes (for a "
                                            "healing curve).")
    seed: int = _option(0, "Piece lengths, data order, long steps and torch's generators.")
    # The command's --threads sets torch's threads for the whole job (conversion and calibration too).
    threads: int | None = _option(None, "torch.set_num_threads for the run (None: leave as is).", cli=False)
    progress: bool = _option(True, "Show a progress bar.")

    def __post_init__(self):
        if self.max_steps is None and self.max_minutes is None:
            raise ValueError("Healing needs a budget: set max_steps (--steps N) or max_minutes (--minutes N).")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}.")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ValueError(f"max_minutes must be > 0, got {self.max_minutes}.")
        if not 1 <= self.min_words <= self.max_words:
            raise ValueError(f"Need 1 <= min_words <= max_words, got {self.min_words}, {self.max_words}.")
        if not 0.0 <= self.long_fraction <= 1.0:
            raise ValueError(f"long_fraction must be in [0, 1], got {self.long_fraction}.")
        if self.long_fraction > 0 and not 1 <= self.long_min_words <= self.long_max_words:
            raise ValueError(f"Need 1 <= long_min_words <= long_max_words, got {self.long_min_words}, "
                             f"{self.long_max_words}.")
        if self.long_batch_size is not None and self.long_batch_size < 1:
            raise ValueError(f"long_batch_size must be >= 1 (or None), got {self.long_batch_size}.")
        if self.max_length < 8:
            raise ValueError(f"max_length must be >= 8 tokens, got {self.max_length}.")
        for name in ("hidden_weight", "attention_weight", "embedding_weight", "similarity_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}.")
        resolve_precision(self.precision)  # names the allowed values on a bad one

    def resolved_long_batch_size(self) -> int:
        """Pieces per long batch: about as many padded tokens as a short batch (each batch is padded to its longest
        piece, so batch_size × max_words words against long_max_words per long piece), at least one piece."""
        if self.long_batch_size is not None:
            return self.long_batch_size
        return max(1, round(self.batch_size * self.max_words / self.long_max_words))

    def is_long_step(self, step: int) -> bool:
        """Whether optimizer step `step` reads long pieces: drawn from (seed, step), so a resumed run repeats it."""
        if self.long_fraction <= 0:
            return False
        return random.Random(self.seed * 1_000_003 + 7 * step + 1).random() < self.long_fraction


@dataclass
class HealResult:
    steps: int
    elapsed_seconds: float
    first_loss: float | None
    last_loss: float | None  # mean loss of the last few steps
    interrupted: bool
    losses: list[float]
    precision: str  # what `config.precision` resolved to on this machine ("auto" differs between CPUs)


# ------------------------------------------------------------------------------------------------------------ loss
class _Recorder:
    """Collects the outputs of the given modules in call order (a module reused across depths records each call)."""

    def __init__(self, modules):
        self.outputs = []
        self.handles = [m.register_forward_hook(self._hook) for m in modules]

    def _hook(self, module, args, output):
        self.outputs.append(output[0] if isinstance(output, tuple) else output)

    def pop(self):
        out, self.outputs = self.outputs, []
        return out

    def remove(self):
        for handle in self.handles:
            handle.remove()


def _relative_mse(student, teacher, mask):
    """Σ‖s − t‖² / Σ‖t‖² over real tokens: every layer counts alike whatever its scale."""
    mask = mask.unsqueeze(-1).to(student.dtype)
    return ((student - teacher).pow(2) * mask).sum() / (teacher.pow(2) * mask).sum().clamp_min(1e-12)


def _similarity_gap(student, teacher):
    """Mean squared difference of the in-batch cosine-similarity matrices (zero for a batch of one)."""
    student, teacher = (torch.nn.functional.normalize(x.float(), dim=-1) for x in (student, teacher))
    return (student @ student.T - teacher @ teacher.T).pow(2).mean()


class Distiller:
    """Computes the distillation loss of a student encoder against a teacher encoder on one tokenised batch."""

    def __init__(self, student, teacher, config: HealConfig, pooling=None):
        self.student = getattr(student, "base_model", student)
        self.teacher = getattr(teacher, "base_model", teacher)
        self.config = config
        # The sentence-transformers Pooling the model is used with (mean pooling unless the caller passes another).
        self.pooling = pooling if pooling is not None else pooling_of(hidden_size=self.teacher.config.hidden_size)
        self.student_attention = _Recorder(self.student.encoder.attention)
        self.teacher_attention = _Recorder([layer.attention for layer in self.teacher.encoder.layer])

    def loss(self, batch) -> tuple[torch.Tensor, dict]:
        mask = batch["attention_mask"]
        with torch.no_grad():
            teacher_out = self.teacher(**batch, output_hidden_states=True)
        teacher_att = self.teacher_attention.pop()
        student_out = self.student(**batch, output_hidden_states=True)
        student_att = self.student_attention.pop()
        t_hidden, s_hidden = teacher_out.hidden_states[1:], student_out.hidden_states[1:]
        if len(t_hidden) != len(s_hidden) or len(teacher_att) != len(student_att):
            raise ValueError(
                f"Teacher and student differ in depth ({len(t_hidden)} vs {len(s_hidden)} layers): heal a model "
                "converted from this teacher."
            )
        parts = {}
        parts["hidden"] = sum(_relative_mse(s, t, mask) for s, t in zip(s_hidden, t_hidden)) / len(t_hidden)
        parts["attention"] = sum(_relative_mse(s, t, mask) for s, t in zip(student_att, teacher_att)) / len(teacher_att)
        t_pooled = self.pool(teacher_out.last_hidden_state, mask)
        s_pooled = self.pool(student_out.last_hidden_state, mask)
        cosine = torch.nn.functional.cosine_similarity(s_pooled, t_pooled, dim=-1)
        self.last_cosines = cosine.detach()  # per sequence, for reports (build_minilm.length_agreement)
        parts["embedding"] = (1 - cosine).mean()
        parts["similarity"] = _similarity_gap(s_pooled, t_pooled)
        c = self.config
        total = (c.hidden_weight * parts["hidden"] + c.attention_weight * parts["attention"]
                 + c.embedding_weight * parts["embedding"] + c.similarity_weight * parts["similarity"])
        return total, {k: float(v.detach()) for k, v in parts.items()}

    def pool(self, token_embeddings, attention_mask):
        return self.pooling({"token_embeddings": token_embeddings, "attention_mask": attention_mask})[
            "sentence_embedding"]

    def close(self):
        self.student_attention.remove()
        self.teacher_attention.remove()


# ------------------------------------------------------------------------------------------------------------ heal
def _position_limit(*models) -> int:
    """The longest input every model takes: the smallest position table."""
    return min(m.config.max_position_embeddings for m in models)


def _lr_lambda(config: HealConfig):
    def factor(step):
        if step < config.warmup_steps:
            return (step + 1) / (config.warmup_steps + 1)
        if config.decay and config.max_steps is not None:
            remaining = config.max_steps - step
            return max(0.0, remaining / max(1, config.max_steps - config.warmup_steps))
        return 1.0

    return factor


# Settings that change how a run is carried out, not what it computes: a resumed run may differ in these.
RUNTIME_SETTINGS = ("threads", "progress", "checkpoint_minutes", "checkpoint_steps", "snapshot_minutes")


def changed_settings(saved: dict, config: HealConfig) -> list[str]:
    """The settings of `config` that differ from a checkpoint's `saved` ones and would change what a resumed run
    computes, as "name saved -> new" (settings the checkpoint predates are not compared)."""
    current = asdict(config)
    free = set(RUNTIME_SETTINGS)
    if saved.get("max_steps") is not None and saved.get("max_steps") == current["max_steps"]:
        free.add("max_minutes")  # the schedule runs over the steps; a time limit only stops the run sooner
    return [f"{name} {saved[name]!r} -> {value!r}" for name, value in current.items()
            if name in saved and name not in free and saved[name] != value]


def has_checkpoint(checkpoint_dir) -> bool:
    """Whether `checkpoint_dir` holds a resumable healing checkpoint (`heal(..., resume=True)` would continue it)."""
    return (Path(checkpoint_dir) / CHECKPOINT_NAME / STATE_FILE).is_file()


def heal(student, teacher, tokenizer, corpus, checkpoint_dir, config: HealConfig, resume: bool = True, on_step=None,
         stop_after_steps: int | None = None, pooling=None) -> HealResult:
    """Distil `teacher` into `student` on the text files in `corpus`, in place. Returns a `HealResult`.

    Args:
        student: the converted SharedBert (any head; its encoder is trained).
        teacher: the original BERT (any head; its encoder is read, never changed).
        tokenizer: the teacher's tokenizer.
        corpus: text file(s) or folder(s), or a `TextInMemory`.
        checkpoint_dir: where `latest/` (resumable state) and `minute-XX/` snapshots go.
        config: budget and hyper-parameters.
        resume: continue from `checkpoint_dir/latest` when it exists.
        on_step: optional callback(step, loss) after every optimizer step.
        stop_after_steps: end this call after that many steps (checkpoint saved, budget and schedule unchanged), to
            heal in several sessions; `HealResult.interrupted` is then True.
        pooling: the sentence-transformers Pooling module whose embeddings the student should match (default: mean
            pooling; `sharedbert.sentence_embeddings.pooling_of(folder)` reads a sentence-transformers model's own).
    """
    if config.threads:
        torch.set_num_threads(config.threads)
    run = _HealingRun(student, teacher, tokenizer, corpus, Path(checkpoint_dir), config)
    if resume and has_checkpoint(checkpoint_dir):
        run.restore()
    distiller = Distiller(student, teacher, config, pooling=pooling)
    try:
        return run.train(distiller, on_step, stop_after_steps)
    finally:
        distiller.close()
        for p in student.parameters():
            p.requires_grad_(True)


class _HealingRun:
    """One healing run: the data, the optimizer and the progress that `checkpointing` saves and restores."""

    def __init__(self, student, teacher, tokenizer, corpus, checkpoint_dir: Path, config: HealConfig):
        self.student, self.tokenizer, self.config = student, tokenizer, config
        self.pieces = TextPieces(corpus, config.min_words, config.max_words, config.seed)
        # The long pieces cut the same text another way (another seed), for the steps that heal the far positions.
        self.long_pieces = (TextPieces(corpus, config.long_min_words, config.long_max_words, config.seed + 1)
                            if config.long_fraction > 0 else None)
        self.long_batch_size = config.resolved_long_batch_size()
        self.max_length = min(config.max_length, _position_limit(student, teacher))
        self.precision = resolve_precision(config.precision)
        logger.info(describe_precision(config.precision))
        self.checkpoint_dir, self.latest = checkpoint_dir, checkpoint_dir / CHECKPOINT_NAME
        teacher.eval()
        for p in teacher.parameters():
            p.requires_grad_(False)
        # Dropout off: the student should match the deterministic teacher; the tiny budget leaves no room for noise.
        student.eval()
        self.params = _trained_parameters(student, config)
        decay = [p for p in self.params if p.ndim >= 2]
        no_decay = [p for p in self.params if p.ndim < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=config.learning_rate,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _lr_lambda(config))
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        self.step, self.elapsed, self.position, self.long_position = 0, 0.0, 0, 0
        self.losses, self.snapshots_done = [], []

    def progress(self) -> dict:
        """What a checkpoint records beside the optimizer, scheduler and RNG states."""
        return dict(step=self.step, elapsed_seconds=self.elapsed, position=self.position,
                    long_position=self.long_position, corpus=self.pieces.fingerprint, losses=self.losses,
                    snapshots_done=self.snapshots_done, heal_config=asdict(self.config))

    def save(self) -> None:
        with writing_checkpoint(self.latest, self.student, self.optimizer, self.scheduler, self.progress(),
                                STATE_FILE):
            pass

    def restore(self) -> None:
        """Continue from `latest/`, refusing one made on other text or with other settings."""
        state = read_state(self.latest, STATE_FILE)
        if state["corpus"] != self.pieces.fingerprint:
            raise ValueError(
                f"{self.latest} was trained on another corpus ({state['corpus']} vs {self.pieces.fingerprint}); use "
                "the same --corpus to resume, or a new output folder to start afresh."
            )
        changed = changed_settings(state.get("heal_config", {}), self.config)
        if changed:
            raise ValueError(
                f"{self.latest} was healed with other settings ({'; '.join(changed)}): resuming would mix two "
                "recipes. Resume with the same options, or start afresh (convert: --no-resume; build-minilm: a new "
                "--work-dir)."
            )
        restore_weights(self.latest, self.student, "the student")
        restore_optimizer(self.latest, state, self.optimizer, self.scheduler)
        restore_rng(self.latest, state)
        self.step, self.elapsed, self.position = state["step"], state["elapsed_seconds"], state["position"]
        self.long_position = state.get("long_position", 0)  # absent in checkpoints written before long batches
        self.losses, self.snapshots_done = state["losses"], state["snapshots_done"]
        logger.info("Resumed from %s at step %d (%.1f training minutes).", self.latest, self.step, self.elapsed / 60)

    def train(self, distiller, on_step, stop_after_steps) -> HealResult:
        config = self.config
        budget_seconds = config.max_minutes * 60 if config.max_minutes is not None else math.inf
        budget_steps = config.max_steps if config.max_steps is not None else math.inf
        session_end = self.step + stop_after_steps if stop_after_steps is not None else math.inf
        last_checkpoint, flag = (self.step, self.elapsed), {"stop": False}
        bar = self._progress_bar(budget_seconds)
        try:
            with sigint_stops(flag):
                while self.step < budget_steps and self.elapsed < budget_seconds and not flag["stop"]:
                    parts = self._train_step(distiller, budget_seconds)
                    if on_step is not None:
                        on_step(self.step, self.losses[-1])
                    if self.step >= session_end and self.step < budget_steps and self.elapsed < budget_seconds:
                        flag["stop"] = True
                    if bar is not None:
                        bar.update(1 if config.max_steps is not None else round(self.elapsed) - bar.n)
                        bar.set_postfix(loss=f"{self.losses[-1]:.4f}", hid=f"{parts['hidden']:.4f}",
                                        cos=f"{parts['embedding']:.4f}", sim=f"{parts['similarity']:.5f}")
                    self._snapshots()
                    due_time = self.elapsed - last_checkpoint[1] >= config.checkpoint_minutes * 60
                    due_steps = (config.checkpoint_steps is not None
                                 and self.step - last_checkpoint[0] >= config.checkpoint_steps)
                    if due_time or due_steps:
                        self.save()
                        last_checkpoint = (self.step, self.elapsed)
                self.save()
        finally:
            if bar is not None:
                bar.close()
        tail = self.losses[-10:]
        return HealResult(steps=self.step, elapsed_seconds=self.elapsed,
                          first_loss=self.losses[0] if self.losses else None,
                          last_loss=sum(tail) / len(tail) if tail else None, interrupted=flag["stop"],
                          losses=self.losses, precision=self.precision)

    def _train_step(self, distiller, budget_seconds: float) -> dict:
        """One optimizer step on the next batch (a long one on the steps `HealConfig.is_long_step` draws); returns
        the loss's parts."""
        config = self.config
        started = time.perf_counter()
        long_step = self.long_pieces is not None and config.is_long_step(self.step)
        if long_step:
            texts = self.long_pieces.batch(self.long_position, self.long_batch_size)
        else:
            texts = self.pieces.batch(self.position, config.batch_size)
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        batch = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bf16"):
            loss, parts = distiller.loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.optimizer.step()
        self.scheduler.step()
        if config.decay and config.max_steps is None:
            # A time budget: anneal by the share of it used (the step count it will reach is unknown). LambdaLR sets
            # every lr afresh on each step, so this scaling does not compound.
            for group in self.optimizer.param_groups:
                group["lr"] *= max(0.0, 1.0 - self.elapsed / budget_seconds)
        self.step += 1
        if long_step:
            self.long_position += self.long_batch_size
        else:
            self.position += config.batch_size
        self.losses.append(round(float(loss.detach()), 6))
        self.elapsed += time.perf_counter() - started
        return parts

    def _snapshots(self) -> None:
        """Full model folders at the training minutes `HealConfig.snapshot_minutes` names (for a healing curve)."""
        for minute in self.config.snapshot_minutes:
            if minute not in self.snapshots_done and self.elapsed >= minute * 60:
                with atomic_directory(self.checkpoint_dir / f"minute-{minute:g}") as tmp:
                    self.student.save_pretrained(tmp)
                    self.tokenizer.save_pretrained(tmp)
                    (tmp / "heal_progress.json").write_text(json.dumps(
                        {"step": self.step, "elapsed_seconds": self.elapsed, "loss": self.losses[-1]}))
                self.snapshots_done.append(minute)

    def _progress_bar(self, budget_seconds: float):
        if not self.config.progress:
            return None
        from tqdm.auto import tqdm

        if self.config.max_steps is not None:
            return tqdm(total=self.config.max_steps, initial=self.step, desc="healing", unit="step")
        return tqdm(total=round(budget_seconds), initial=round(self.elapsed), desc="healing", unit="s")


def _trained_parameters(student, config: HealConfig) -> list:
    """The student's parameters healing trains (its encoder's, embeddings only when asked, never the pooler), the
    only ones left requiring gradients."""
    base = getattr(student, "base_model", student)
    params = [p for name, p in base.named_parameters()
              if (config.train_embeddings or not name.startswith("embeddings.")) and not name.startswith("pooler.")]
    for p in student.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    return params


def write_model_card(folder, source: str, attention_type: str, layer_sharing: str, result: HealResult | None,
                     config: HealConfig | None, corpus=None, fit_report=None, calibration_sentences=None):
    """A short README.md noting the base model, the conversion and the healing run (written by sharedbert.hub.card)."""
    healing = None
    if result is not None and config is not None:
        healing = HealingSummary(
            corpus=[str(c) for c in ([corpus] if isinstance(corpus, (str, Path, TextInMemory)) else corpus or [])],
            steps=result.steps, batch_size=config.batch_size,
            minutes=result.elapsed_seconds / 60, first_loss=result.first_loss, last_loss=result.last_loss,
        )
    retained_energy = [fit.retained_energy for fit in fit_report or []]
    write_conversion_card(folder, source, attention_type, layer_sharing, retained_energy=retained_energy,
                          healing=healing, calibration_sentences=calibration_sentences)
