"""A healing run's settings: `HealConfig`, on transformers' `TrainingArguments`, composed of four parts (the budget and
schedule, the text read, the loss, how the run is carried out), and `changed_settings`, which of them a resumed run
may not change. `healing.heal` runs them; `sharedbert convert --heal` makes its flags from them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, fields

from transformers import TrainingArguments

from ..precision import PRECISIONS, resolve_precision


def _option(default, help: str, **metadata):
    """A HealConfig field: its default, and its help for `sharedbert convert --heal`'s flag."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, **metadata})
    return field(default=default, metadata={"help": help, **metadata})


@dataclass
class HealScheduleConfig:
    """A healing run's budget (steps and/or training minutes), optimizer and learning-rate schedule, precision, and
    what it trains."""

    max_steps: int | None = _option(None, "Stop after this many optimizer steps; the learning rate anneals over them.",
                                    aliases=["--steps"])
    max_minutes: float | None = _option(None, "Stop after this many minutes of training (whichever budget comes "
                                        "first); alone, the learning rate anneals over the minutes.",
                                        aliases=["--minutes"])
    precision: str = _option("auto", "bf16 autocast or fp32; auto: bf16 only where the CPU (or GPU) computes bf16 "
                             "natively.", choices=PRECISIONS)
    learning_rate: float = _option(3e-4, "Peak learning rate (AdamW).", aliases=["--lr"])
    weight_decay: float = _option(0.01, "AdamW weight decay.")
    warmup_steps: int = _option(30, "Linear warm-up steps.")
    decay: bool = _option(True, "Anneal the learning rate linearly to 0 over the budget (steps, else minutes).")
    train_embeddings: bool = _option(False, "Train the embeddings too (they are copied exactly, so frozen by "
                                     "default).")

    def validate_schedule(self) -> None:
        if self.max_steps is None and self.max_minutes is None:
            raise ValueError("Healing needs a budget: set max_steps (--steps N) or max_minutes (--minutes N).")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}.")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ValueError(f"max_minutes must be > 0, got {self.max_minutes}.")
        resolve_precision(self.precision)  # names the allowed values on a bad one


@dataclass
class HealDataConfig:
    """The text a healing run reads: short pieces, long ones on some steps, and the seed that draws them."""

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
    seed: int = _option(0, "Piece lengths, data order, long steps and torch's generators.")

    def validate_data(self) -> None:
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
class HealLossConfig:
    """The weights of the distillation loss's parts (`distillation.Distiller`)."""

    hidden_weight: float = _option(1.0, "Weight of the relative MSE of every layer's output.")
    attention_weight: float = _option(1.0, "Weight of the relative MSE of every attention sublayer's output.")
    embedding_weight: float = _option(1.0, "Weight of 1 - cosine of the pooled sentence embeddings.")
    # Relational: semantic similarity scores (STS-B) read how sentences relate, not where each lies.
    similarity_weight: float = _option(0.0, "Weight of the squared difference between the student's and the "
                                       "teacher's in-batch cosine-similarity matrices of the pooled embeddings.")

    def validate_loss(self) -> None:
        for name in ("hidden_weight", "attention_weight", "embedding_weight", "similarity_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}.")


@dataclass
class HealRuntimeConfig:
    """How a healing run is carried out, not what it computes: checkpoints, snapshots, threads and progress. A resumed
    run may change these (`changed_settings` does not compare them)."""

    checkpoint_minutes: float = _option(5.0, "Save a resumable checkpoint after this many minutes of training.")
    checkpoint_steps: int | None = _option(None, "Also save one every N steps.")
    snapshot_minutes: list[float] = _option([], "Also save full model folders at these training minutes (for a "
                                            "healing curve).")
    # The command's --threads sets torch's threads for the whole job (conversion and calibration too).
    threads: int | None = _option(None, "torch.set_num_threads for the run (None: leave as is).", cli=False)
    progress: bool = _option(True, "Show a progress bar.")


@dataclass
class HealConfig(HealRuntimeConfig, HealLossConfig, HealDataConfig, HealScheduleConfig, TrainingArguments):
    """A healing run's settings on transformers' `TrainingArguments`, which the Trainer takes (`heal` sets the run's
    output folder, batching, logging and saving). Healing's own (`heal_settings()`, saved in every checkpoint): the
    budget and schedule, the text read, the loss and how the run is carried out. Five are TrainingArguments' fields at
    healing's defaults and meanings: `max_steps` (None: no step budget, not -1), `seed` (0, not 42), `warmup_steps`
    (whole steps), `learning_rate`, `weight_decay`. The optimizer and schedule are healing's (AdamW without decay on
    vectors such as dq/dk/dv; warm-up, then linear decay over the steps or minutes), given to the Trainer. The
    defaults are the published sharedbert-all-MiniLM-L6-v2's recipe (`build_minilm.heal_recipe`); `sharedbert convert
    --heal` makes its flags from healing's own fields. Bad settings are refused, naming the field."""

    # The heading of its flags in `sharedbert convert --help` (HfArgumentParser's group name).
    _argument_group_name = "healing (distillation from the original model; with --heal)"

    def __post_init__(self):
        self.validate_schedule()
        self.validate_data()
        self.validate_loss()
        super().__post_init__()  # TrainingArguments' own checks

    def heal_settings(self) -> dict:
        """Healing's own settings (not TrainingArguments' other fields), as checkpoints and reports record them."""
        parts = (HealScheduleConfig, HealDataConfig, HealLossConfig, HealRuntimeConfig)
        return {f.name: getattr(self, f.name) for part in parts for f in fields(part)}


# Settings that change how a run is carried out, not what it computes: a resumed run may differ in these.
RUNTIME_SETTINGS = tuple(f.name for f in fields(HealRuntimeConfig))


def changed_settings(saved: dict, config: HealConfig) -> list[str]:
    """The settings of `config` that differ from a checkpoint's `saved` ones and would change what a resumed run
    computes, as "name saved -> new" (settings the checkpoint predates are not compared)."""
    current = config.heal_settings()
    free = set(RUNTIME_SETTINGS)
    if saved.get("max_steps") is not None and saved.get("max_steps") == current["max_steps"]:
        free.add("max_minutes")  # the schedule runs over the steps; a time limit only stops the run sooner
    return [f"{name} {saved[name]!r} -> {value!r}" for name, value in current.items()
            if name in saved and name not in free and saved[name] != value]
