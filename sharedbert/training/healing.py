"""Heal a converted SharedBert by distillation from the BERT it was converted from.

The teacher (the original BERT encoder) and the student (the SharedBert from `convert.from_bert`) read the same raw
text; the student learns to reproduce, layer by layer, the teacher's hidden states and attention-sublayer outputs, plus
the direction of the mean-pooled final embedding (what a sentence-embedding model is used for). Everything outside the
attention projections starts as an exact copy, so the student starts close and a few minutes of CPU go a long way.

Training state lives in a checkpoint folder (`latest/`), written atomically and without pickle:
`model.safetensors` + `config.json` (the student), `optimizer.safetensors` (AdamW moments), `rng.safetensors` (torch's
RNG state) and `trainer_state.json` (step, elapsed training seconds, data position, scheduler, optimizer
hyper-parameters, Python and NumPy RNG states, the corpus fingerprint). `heal(..., resume=True)` continues from it
exactly.
Ctrl-C (SIGINT) finishes the current step, saves a checkpoint and returns.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model, save_file

from ..atomic import atomic_directory
from ..embeddings import pooling_of
from .checkpointing import (
    optimizer_from_files,
    optimizer_to_files,
    rng_from_files,
    rng_to_files,
    sigint_stops,
)
from ..hub.card import HealingSummary, write_conversion_card
from .data import corpus_files
from .precision import describe_precision, resolve_precision

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "latest"
STATE_FILE = "trainer_state.json"


@dataclass
class HealConfig:
    """Hyper-parameters of a healing run (all JSON-serialisable; saved in every checkpoint)."""

    max_steps: int | None = None  # stop after this many optimizer steps ...
    max_minutes: float | None = None  # ... or after this much training time (whichever comes first)
    batch_size: int = 32
    max_length: int = 512  # tokens per sequence (longer pieces are truncated); at most the model's position table
    min_words: int = 6  # text pieces have a random length in [min_words, max_words] words: short sentences and
    max_words: int = 64  # paragraphs, like the sentences an embedding model is used on
    # Long batches, so that every position the model is used at is healed (positions past the short pieces' ~100
    # tokens otherwise keep the unhealed fit): this share of the steps reads pieces of [long_min_words,
    # long_max_words] words (about 130-512 tokens), `long_batch_size` of them (None: about as many padded tokens as
    # a short batch, at least 1).
    long_fraction: float = 0.25
    long_min_words: int = 100
    long_max_words: int = 400
    long_batch_size: int | None = None
    precision: str = "auto"  # "auto" (bf16 autocast only where the CPU/GPU computes bf16 natively), "bf16", "fp32"
    learning_rate: float = 2e-4
    weight_decay: float = 0.01
    warmup_steps: int = 30
    decay: bool = True  # decay the learning rate linearly to 0 over the budget (steps, else training minutes)
    hidden_weight: float = 1.0  # relative MSE of every layer's output
    attention_weight: float = 1.0  # relative MSE of every attention sublayer's output
    embedding_weight: float = 1.0  # 1 - cosine of the mean-pooled final embeddings
    # Relational: the squared difference between the student's and the teacher's in-batch cosine-similarity matrices
    # of the pooled embeddings. Semantic similarity scores (STS-B) read how sentences relate, not where each lies.
    similarity_weight: float = 0.0
    train_embeddings: bool = False  # embeddings are copied exactly; leave them frozen by default
    checkpoint_minutes: float = 5.0  # save `latest/` this often (training time) ...
    checkpoint_steps: int | None = None  # ... or this often in steps
    snapshot_minutes: list[float] = field(default_factory=list)  # save full model folders at these training minutes
    seed: int = 0
    threads: int | None = None  # torch.set_num_threads (None: leave as is)
    progress: bool = True

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


# ----------------------------------------------------------------------------------------------------------- corpus
@dataclass(frozen=True)
class TextInMemory:
    """A corpus held in memory rather than in files, such as a task's training sentences (labels unused): pass it
    wherever a corpus goes (`heal`, `convert_checkpoint`). `name` says what it is in reports and model cards."""

    name: str
    texts: tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "texts", tuple(self.texts))
        if not all(isinstance(text, str) for text in self.texts):
            raise TypeError(f"TextInMemory {self.name!r} holds something other than strings; pass a sequence of texts.")

    def __str__(self):
        return self.name

    def digest(self) -> str:
        digest = hashlib.sha256()
        for text in self.texts:
            digest.update(text.encode("utf-8") + b"\0")
        return digest.hexdigest()


class TextPieces:
    """Raw text cut into pieces of random word length, in a reproducible shuffled order.

    The corpus is text files or folders (`corpus_files`), or a `TextInMemory`. Files are decoded as UTF-8 with
    undecodable bytes replaced (some Gutenberg files are Latin-1) and split on any whitespace (so CRLF files are fine).
    Piece lengths come from `seed`, so the same corpus and seed always give the same pieces; epoch e visits them in the
    permutation drawn from (seed, e).
    """

    def __init__(self, paths, min_words: int, max_words: int, seed: int):
        digest = hashlib.sha256()
        if isinstance(paths, TextInMemory):
            self.files = []
            words = " ".join(paths.texts).split()
            digest.update(f"{paths.name}:{paths.digest()};".encode())
            described = paths.name
        else:
            self.files = corpus_files(paths)
            words = []
            for path in self.files:
                words.extend(path.read_bytes().decode("utf-8", errors="replace").split())
                digest.update(f"{path.name}:{path.stat().st_size};".encode())
            described = ", ".join(str(p) for p in self.files[:3]) + (" ..." if len(self.files) > 3 else "")
        if len(words) < min_words:
            raise ValueError(
                f"The corpus ({described}) holds {len(words)} words; healing needs real text (at least {min_words} "
                "words, ideally megabytes)."
            )
        rng = random.Random(seed)
        self.pieces = []
        start = 0
        while start < len(words):
            length = rng.randint(min_words, max_words)
            self.pieces.append(" ".join(words[start : start + length]))
            start += length
        self.seed = seed
        self.fingerprint = f"{digest.hexdigest()[:16]}:{len(self.pieces)}"

    def __len__(self):
        return len(self.pieces)

    def batch(self, position: int, batch_size: int) -> list[str]:
        """The batch starting at global `position` (counting pieces over epochs)."""
        out = []
        for p in range(position, position + batch_size):
            epoch, index = divmod(p, len(self.pieces))
            out.append(self.pieces[self._order(epoch)[index]])
        return out

    def _order(self, epoch: int):
        if getattr(self, "_cached_epoch", None) != epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._cached_order = torch.randperm(len(self.pieces), generator=generator).tolist()
            self._cached_epoch = epoch
        return self._cached_order


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
        self.last_cosines = cosine.detach()  # per sequence, for reports (checkpoint_build.length_agreement)
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


# ----------------------------------------------------------------------------------------------------- checkpoints
def save_checkpoint(folder, student, optimizer, scheduler, state: dict):
    """Write a resumable checkpoint atomically (no pickle: safetensors + JSON)."""
    with atomic_directory(folder) as tmp:
        student.save_pretrained(tmp)
        tensors, optimizer_meta = optimizer_to_files(optimizer)
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        rng_tensors, rng_meta = rng_to_files()
        save_file(rng_tensors, str(tmp / "rng.safetensors"))
        full = dict(state, optimizer=optimizer_meta, scheduler=scheduler.state_dict(), rng=rng_meta)
        (tmp / STATE_FILE).write_text(json.dumps(full, indent=1))


def load_checkpoint(folder, student, optimizer, scheduler) -> dict:
    """Restore student weights, optimizer, scheduler and RNGs from `folder`; return the trainer state."""
    folder = Path(folder)
    state = json.loads((folder / STATE_FILE).read_text())
    try:  # safetensors' loader, as for the Trainer checkpoints: strict, yet a tied copy need not be in the file
        load_model(student, str(folder / "model.safetensors"))
    except RuntimeError as error:  # it lists every key: keep the start, on one line
        detail = " ".join(str(error).split())
        raise ValueError(
            f"Checkpoint {folder} does not match the student ({detail[:300]}{' ...' if len(detail) > 300 else ''}); "
            "resume with the same conversion options or start afresh (--no-resume / a new output folder)."
        ) from error
    optimizer.load_state_dict(optimizer_from_files(load_file(str(folder / "optimizer.safetensors")),
                                                   state.pop("optimizer")))
    scheduler.load_state_dict(state.pop("scheduler"))
    rng_from_files(load_file(str(folder / "rng.safetensors")), state.pop("rng"))
    return state


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


def heal(
    student,
    teacher,
    tokenizer,
    corpus,
    checkpoint_dir,
    config: HealConfig,
    resume: bool = True,
    on_snapshot=None,
    on_step=None,
    stop_after_steps: int | None = None,
    pooling=None,
) -> HealResult:
    """Distil `teacher` into `student` on the text files in `corpus`, in place. Returns a `HealResult`.

    Args:
        student: the converted SharedBert (any head; its encoder is trained).
        teacher: the original BERT (any head; its encoder is read, never changed).
        tokenizer: the teacher's tokenizer.
        corpus: text file(s) or folder(s), or a `TextInMemory`.
        checkpoint_dir: where `latest/` (resumable state) and `minute-XX/` snapshots go.
        config: budget and hyper-parameters.
        resume: continue from `checkpoint_dir/latest` when it exists.
        on_snapshot: optional callback(folder, minutes) after each snapshot folder is written.
        on_step: optional callback(step, loss) after every optimizer step.
        stop_after_steps: end this call after that many steps (checkpoint saved, budget and schedule unchanged), to
            heal in several sessions; `HealResult.interrupted` is then True.
        pooling: the sentence-transformers Pooling module whose embeddings the student should match (default: mean
            pooling; `sharedbert.embeddings.pooling_of(folder)` reads a sentence-transformers model's own).
    """
    if config.threads:
        torch.set_num_threads(config.threads)
    pieces = TextPieces(corpus, config.min_words, config.max_words, config.seed)
    # The long pieces cut the same text another way (another seed), for the steps that heal the far positions.
    long_pieces = (TextPieces(corpus, config.long_min_words, config.long_max_words, config.seed + 1)
                   if config.long_fraction > 0 else None)
    long_batch_size = config.resolved_long_batch_size()
    max_length = min(config.max_length, _position_limit(student, teacher))
    precision = resolve_precision(config.precision)
    logger.info(describe_precision(config.precision))
    checkpoint_dir = Path(checkpoint_dir)
    latest = checkpoint_dir / CHECKPOINT_NAME

    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    # Dropout off: the student should match the deterministic teacher; the tiny budget leaves no room for noise.
    student.eval()
    base = getattr(student, "base_model", student)
    params = [
        p for name, p in base.named_parameters()
        if (config.train_embeddings or not name.startswith("embeddings.")) and not name.startswith("pooler.")
    ]
    for p in student.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(config))

    torch.manual_seed(config.seed)
    random.seed(config.seed)
    step, elapsed, position, long_position, losses, snapshots_done = 0, 0.0, 0, 0, [], []
    if resume and has_checkpoint(checkpoint_dir):
        state = load_checkpoint(latest, student, optimizer, scheduler)
        if state["corpus"] != pieces.fingerprint:
            raise ValueError(
                f"{latest} was trained on another corpus ({state['corpus']} vs {pieces.fingerprint}); use the same "
                "--corpus to resume, or a new output folder to start afresh."
            )
        changed = changed_settings(state.get("heal_config", {}), config)
        if changed:
            raise ValueError(
                f"{latest} was healed with other settings ({'; '.join(changed)}): resuming would mix two recipes. "
                "Resume with the same options, or start afresh (convert: --no-resume; build-minilm: a new --work-dir)."
            )
        step, elapsed, position = state["step"], state["elapsed_seconds"], state["position"]
        long_position = state.get("long_position", 0)  # absent in checkpoints written before long batches
        losses, snapshots_done = state["losses"], state["snapshots_done"]
        logger.info("Resumed from %s at step %d (%.1f training minutes).", latest, step, elapsed / 60)

    distiller = Distiller(student, teacher, config, pooling=pooling)
    budget_seconds = config.max_minutes * 60 if config.max_minutes is not None else math.inf
    budget_steps = config.max_steps if config.max_steps is not None else math.inf
    first_loss = losses[0] if losses else None
    last_checkpoint = (step, elapsed)
    flag = {"stop": False}
    session_end = step + stop_after_steps if stop_after_steps is not None else math.inf

    def state_dict():
        return dict(
            step=step, elapsed_seconds=elapsed, position=position, long_position=long_position,
            corpus=pieces.fingerprint, losses=losses,
            snapshots_done=snapshots_done, heal_config=asdict(config),
        )

    bar = None
    if config.progress:
        from tqdm.auto import tqdm

        if config.max_steps is not None:
            bar = tqdm(total=config.max_steps, initial=step, desc="healing", unit="step")
        else:
            bar = tqdm(total=round(budget_seconds), initial=round(elapsed), desc="healing", unit="s")
    try:
        with sigint_stops(flag):
            while step < budget_steps and elapsed < budget_seconds and not flag["stop"]:
                started = time.perf_counter()
                long_step = long_pieces is not None and config.is_long_step(step)
                if long_step:
                    texts = long_pieces.batch(long_position, long_batch_size)
                else:
                    texts = pieces.batch(position, config.batch_size)
                batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
                batch = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                    loss, parts = distiller.loss(batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimizer.step()
                scheduler.step()
                if config.decay and config.max_steps is None:
                    # A time budget: anneal by the share of it used (the step count it will reach is unknown).
                    # LambdaLR sets every lr afresh on each step, so this scaling does not compound.
                    for group in optimizer.param_groups:
                        group["lr"] *= max(0.0, 1.0 - elapsed / budget_seconds)
                step += 1
                if long_step:
                    long_position += long_batch_size
                else:
                    position += config.batch_size
                losses.append(round(float(loss.detach()), 6))
                if first_loss is None:
                    first_loss = losses[0]
                took = time.perf_counter() - started
                elapsed += took
                if on_step is not None:
                    on_step(step, losses[-1])
                if step >= session_end and step < budget_steps and elapsed < budget_seconds:
                    flag["stop"] = True
                if bar is not None:
                    bar.update(1 if config.max_steps is not None else round(elapsed) - bar.n)
                    bar.set_postfix(loss=f"{losses[-1]:.4f}", hid=f"{parts['hidden']:.4f}",
                                    cos=f"{parts['embedding']:.4f}", sim=f"{parts['similarity']:.5f}")
                for minute in config.snapshot_minutes:
                    if minute not in snapshots_done and elapsed >= minute * 60:
                        folder = checkpoint_dir / f"minute-{minute:g}"
                        with atomic_directory(folder) as tmp:
                            student.save_pretrained(tmp)
                            tokenizer.save_pretrained(tmp)
                            (tmp / "heal_progress.json").write_text(
                                json.dumps({"step": step, "elapsed_seconds": elapsed, "loss": losses[-1]})
                            )
                        snapshots_done.append(minute)
                        if on_snapshot is not None:
                            on_snapshot(folder, minute)
                due_time = elapsed - last_checkpoint[1] >= config.checkpoint_minutes * 60
                due_steps = config.checkpoint_steps is not None and step - last_checkpoint[0] >= config.checkpoint_steps
                if due_time or due_steps:
                    save_checkpoint(latest, student, optimizer, scheduler, state_dict())
                    last_checkpoint = (step, elapsed)
            save_checkpoint(latest, student, optimizer, scheduler, state_dict())
    finally:
        distiller.close()
        if bar is not None:
            bar.close()
        for p in student.parameters():
            p.requires_grad_(True)
    tail = losses[-10:]
    return HealResult(
        steps=step,
        elapsed_seconds=elapsed,
        first_loss=first_loss,
        last_loss=sum(tail) / len(tail) if tail else None,
        interrupted=flag["stop"],
        losses=losses,
        precision=precision,
    )


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
