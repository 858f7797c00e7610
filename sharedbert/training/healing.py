"""Heal a converted SharedBert by distillation from the BERT it was converted from.

The teacher (the original BERT encoder) and the student (the SharedBert from `convert.from_bert`) read the same raw
text; the student learns to reproduce, layer by layer, the teacher's hidden states and attention-sublayer outputs, plus
the direction of the mean-pooled final embedding (what a sentence-embedding model is used for). Everything outside the
attention projections starts as an exact copy, so the student starts close and a few minutes of CPU go a long way.

Healing is a `distillation.DistillationTrainer` whose term is `distillation.Distiller`: one step's batch is one item
of `HealingBatches` (short pieces, or long ones on the steps `HealConfig.is_long_step` draws), the learning rate a
`LambdaLR` given to the Trainer, and `HealingCallback` stops at the budget (steps or training minutes, or
`stop_after_steps` for this call), writes snapshots and shows progress. Checkpoints are the Trainer's own
(`checkpoint_dir/checkpoint-STEP`, see `trainer.ResumableTrainer`); their Trainer state records the corpus fingerprint
and the settings (`heal_config`, in the `RunRecord`) and the training seconds (`HealingClock`). `heal(...,
resume=True)` continues from the newest exactly, and refuses one made on other text or with other settings; the
`latest/` checkpoint of the loop healing ran before it ran on Trainer is first rewritten as a Trainer checkpoint.
Ctrl-C (SIGINT) finishes the current step, saves a checkpoint and returns.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm
from transformers import TrainerCallback, TrainerState
from transformers.trainer_callback import PrinterCallback

from ..atomic import atomic_directory
from .checkpointing import (CHECKPOINT_PREFIX, MODEL_FILE, OPTIMIZER_FILE, RNG_FILE, RUN_STATE_FILE, CheckpointCallback,
                            SavedStateCallback, read_run_record, read_state, read_trainer_state, resume_point,
                            saved_callback_state, upgrade_checkpoint)
from .distillation import DistillationTrainer, Distiller
# Healing's settings were defined in this module until they moved to healing_arguments: users' imports (and the
# pickled TrainingArguments a Trainer checkpoint holds) still find them here.
from .healing_arguments import (RUNTIME_SETTINGS, HealConfig, HealDataConfig, HealLossConfig, HealRuntimeConfig,
                                HealScheduleConfig, changed_settings)
from ..conversion.card import HealingSummary, write_conversion_card
from ..data import TextInMemory, TextPieces
from ..precision import describe_precision, resolve_precision
from ..threads import restores_torch_threads

logger = logging.getLogger(__name__)

# The one folder of a healing run written by sharedbert before healing ran on Trainer; resuming rewrites it as a
# Trainer checkpoint (`_continue_legacy`).
LEGACY_CHECKPOINT = "latest"
# A time budget alone: the step count it reaches is unknown, so the Trainer is given this many and stopped by the clock.
UNBOUNDED_STEPS = 10**9


@dataclass
class HealResult:
    steps: int
    elapsed_seconds: float
    first_loss: float | None
    last_loss: float | None  # mean loss of the last few steps
    interrupted: bool
    losses: list[float]
    precision: str  # what `config.precision` resolved to on this machine ("auto" differs between CPUs)


# ------------------------------------------------------------------------------------------------------------ data
class HealingBatches(torch.utils.data.Dataset):
    """Item `step` is the list of texts optimizer step `step` reads: `batch_size` short pieces, or on the steps
    `HealConfig.is_long_step` draws `resolved_long_batch_size()` long pieces (the same text cut another way), each
    stream read on from where its last batch stopped. A function of the step alone, so a resumed run, which skips the
    steps done, reads what an uninterrupted one would."""

    def __init__(self, corpus, config: HealConfig, steps: int):
        self.config, self.steps = config, steps
        self.pieces = TextPieces(corpus, config.min_words, config.max_words, config.seed)
        self.long_pieces = (TextPieces(corpus, config.long_min_words, config.long_max_words, config.seed + 1)
                            if config.long_fraction > 0 else None)
        self.long_batch_size = config.resolved_long_batch_size()
        self._long_steps_before = [0]  # [s]: how many of steps 0..s-1 were long (grown as steps are read)

    def __len__(self) -> int:
        return self.steps

    def positions(self, step: int) -> tuple[int, int]:
        """(short, long) pieces read before `step`."""
        while len(self._long_steps_before) <= step:
            done = len(self._long_steps_before) - 1
            is_long = self.long_pieces is not None and self.config.is_long_step(done)
            self._long_steps_before.append(self._long_steps_before[-1] + is_long)
        long_steps = self._long_steps_before[step]
        return (step - long_steps) * self.config.batch_size, long_steps * self.long_batch_size

    def __getitem__(self, step: int) -> list[str]:
        position, long_position = self.positions(step)
        if self.long_pieces is not None and self.config.is_long_step(step):
            return self.long_pieces.batch(long_position, self.long_batch_size)
        return self.pieces.batch(position, self.config.batch_size)


class TokenizeTexts:
    """The Trainer's collator: one item (a step's texts) into the encoder's inputs, cut at `max_length` tokens."""

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer, self.max_length = tokenizer, max_length

    def __call__(self, items: list[list[str]]) -> dict:
        (texts,) = items
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        return {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}


# ------------------------------------------------------------------------------------------------------------ loop
class HealingClock(SavedStateCallback):
    """Training seconds, each step's summed by `HealingCallback` (start-up, skipping, checkpoints not counted)."""

    def __init__(self, elapsed: float = 0.0):
        self.elapsed = elapsed

    def attributes(self) -> dict:
        return {"elapsed": self.elapsed}


def _lr_lambda(config: HealConfig, clock: HealingClock):
    """Linear warm-up, then linear decay to 0 over the step budget; with a time budget alone, decay by the share of
    it used (`clock`), the step count it will reach being unknown."""
    budget_seconds = config.max_minutes * 60 if config.max_minutes is not None else None

    def factor(step):
        if step < config.warmup_steps:
            return (step + 1) / (config.warmup_steps + 1)
        if config.decay and config.max_steps is not None:
            remaining = config.max_steps - step
            return max(0.0, remaining / max(1, config.max_steps - config.warmup_steps))
        if config.decay and budget_seconds is not None:
            return max(0.0, 1.0 - clock.elapsed / budget_seconds)
        return 1.0

    return factor


class HealingCallback(TrainerCallback):
    """Times every step (`clock`), calls `on_step(step, loss)`, stops at the budget (steps or training minutes) or
    after `stop_after_steps` of this call (`interrupted`), asks for a checkpoint when training stops, writes the
    `snapshot_minutes` model folders and shows a progress bar."""

    def __init__(self, trainer, config: HealConfig, clock: HealingClock, stop_after_steps, on_step):
        self.trainer, self.config, self.clock = trainer, config, clock
        self.budget_seconds = config.max_minutes * 60 if config.max_minutes is not None else math.inf
        self.stop_after_steps, self.on_step = stop_after_steps, on_step
        self.interrupted, self.session_end, self.bar, self._started = False, math.inf, None, 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        if self.stop_after_steps is not None:
            self.session_end = state.global_step + self.stop_after_steps
        if self.config.progress:
            if self.config.max_steps is not None:
                self.bar = tqdm(total=self.config.max_steps, initial=state.global_step, desc="healing", unit="step")
            else:
                self.bar = tqdm(total=round(self.budget_seconds), initial=round(self.clock.elapsed), desc="healing",
                                unit="s")

    def on_step_begin(self, args, state, control, **kwargs):
        self._started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.clock.elapsed += time.perf_counter() - self._started
        step, loss = state.global_step, self.trainer.last_loss
        if self.on_step is not None:
            self.on_step(step, loss)
        finished = step >= state.max_steps or self.clock.elapsed >= self.budget_seconds
        if not finished and step >= self.session_end:
            self.interrupted = True
        if finished or self.interrupted:
            control.should_training_stop = control.should_save = True
        self._snapshots(step, loss)
        if self.bar is not None:
            parts = self.trainer.distillation.parts
            self.bar.update(1 if self.config.max_steps is not None else round(self.clock.elapsed) - self.bar.n)
            self.bar.set_postfix(loss=f"{loss:.4f}", hid=f"{parts['hidden']:.4f}", cos=f"{parts['embedding']:.4f}",
                                 sim=f"{parts['similarity']:.5f}")

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()

    def _snapshots(self, step: int, loss: float) -> None:
        """Full model folders at the training minutes `HealConfig.snapshot_minutes` names (for a healing curve); a
        folder already there (written before a resume) is kept."""
        for minute in self.config.snapshot_minutes:
            folder = Path(self.trainer.checkpoint_dir) / f"minute-{minute:g}"
            if self.clock.elapsed >= minute * 60 and not folder.exists():
                with atomic_directory(folder) as tmp:
                    self.trainer.model.save_pretrained(tmp)
                    self.trainer.processing_class.save_pretrained(tmp)
                    (tmp / "heal_progress.json").write_text(json.dumps(
                        {"step": step, "elapsed_seconds": self.clock.elapsed, "loss": loss}))


class HealingTrainer(DistillationTrainer):
    """The `DistillationTrainer` of a healing run: the student runs without dropout (it should match the
    deterministic teacher; the tiny budget leaves no room for noise), every step's loss is logged with the training
    seconds so far; each checkpoint records the corpus and the settings (`record=`, the `RunRecord`'s)."""

    def __init__(self, *args, clock: HealingClock, **kwargs):
        super().__init__(*args, **kwargs)
        self.clock, self.last_loss = clock, None
        self.add_callback(clock)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        model.eval()  # Trainer's training_step has just called model.train()
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        self.last_loss = round(float((loss[0] if return_outputs else loss).detach()), 6)
        return loss

    def autocast_smart_context_manager(self, cache_enabled=True):
        """bf16 autocast around the whole loss, teacher included (accelerate's covers only the student's forward)."""
        return torch.autocast(self.args.device.type, dtype=torch.bfloat16, enabled=self.args.bf16,
                              cache_enabled=cache_enabled)

    def log(self, logs: dict, start_time=None) -> None:
        if "loss" in logs:
            logs["elapsed_seconds"] = self.clock.elapsed
        super().log(logs, start_time)


# ------------------------------------------------------------------------------------------------------------ heal
def _position_limit(*models) -> int:
    """The longest input every model takes: the smallest position table."""
    return min(m.config.max_position_embeddings for m in models)


def has_checkpoint(checkpoint_dir) -> bool:
    """Whether `checkpoint_dir` holds a healing checkpoint (`heal(..., resume=True)` continues it, or refuses it
    naming the reason)."""
    folder = Path(checkpoint_dir)
    return (folder / LEGACY_CHECKPOINT).is_dir() or any(folder.glob(f"{CHECKPOINT_PREFIX}*"))


def _resume_point(checkpoint_dir: Path, batches: HealingBatches, config: HealConfig, resume: bool) -> Path | None:
    """The checkpoint to continue (None: start afresh), after checking it was healed on this text with this recipe
    (one of the loop healing ran before Trainer is first rewritten as a Trainer checkpoint). Without `resume`, the
    old checkpoints are deleted (the folder's other files are kept)."""
    legacy = checkpoint_dir / LEGACY_CHECKPOINT
    if not resume:
        shutil.rmtree(legacy, ignore_errors=True)
        for old in checkpoint_dir.glob(f"{CHECKPOINT_PREFIX}*"):
            shutil.rmtree(old, ignore_errors=True)
        return None
    if legacy.is_dir():
        if not any(checkpoint_dir.glob(f"{CHECKPOINT_PREFIX}*")):  # else a run has gone on from it already
            _continue_legacy(legacy, batches, config)
        shutil.rmtree(legacy)
    latest = resume_point(checkpoint_dir, {}, resume=True)
    if latest is not None:
        record = read_run_record(latest)["record"]
        _check_recipe(latest, record.get("corpus"), record.get("heal_config", {}), batches.pieces.fingerprint, config)
    return latest


def _check_recipe(folder: Path, corpus: str | None, saved_config: dict, corpus_fingerprint: str,
                  config: HealConfig) -> None:
    """Refuse a checkpoint healed on other text or by another recipe."""
    if corpus != corpus_fingerprint:
        raise ValueError(
            f"{folder} was trained on another corpus ({corpus} vs {corpus_fingerprint}); use the same --corpus to "
            "resume, or a new output folder to start afresh."
        )
    changed = changed_settings(saved_config, config)
    if changed:
        raise ValueError(
            f"{folder} was healed with other settings ({'; '.join(changed)}): resuming would mix two recipes. Resume "
            "with the same options, or start afresh (convert: --no-resume; build-minilm: a new --work-dir)."
        )


def _continue_legacy(legacy: Path, batches: HealingBatches, config: HealConfig) -> None:
    """Rewrite the checkpoint of the loop healing ran before it ran on Trainer (one `latest/` folder, whose
    `trainer_state.json` held the step, the training seconds, the data positions, every loss, the corpus and the
    settings beside `checkpointing`'s weights, optimizer and RNG files) as the Trainer checkpoint it amounts to. The
    data of a step is a function of the step in both, so the run goes on exactly; one whose positions do not follow
    from its step (written before long batches) is refused."""
    state = read_state(legacy, "trainer_state.json")
    _check_recipe(legacy, state["corpus"], state.get("heal_config", {}), batches.pieces.fingerprint, config)
    step = state["step"]
    if batches.positions(step) != (state["position"], state.get("long_position", 0)):
        raise ValueError(
            f"{legacy} was healed by an earlier sharedbert with other batches (written before long batches), which "
            "this version cannot continue exactly. Start afresh: --no-resume (convert) or a new --work-dir "
            "(build-minilm)."
        )
    log = [{"loss": loss, "step": index + 1} for index, loss in enumerate(state["losses"])]
    if log:
        log[-1]["elapsed_seconds"] = state["elapsed_seconds"]
    with atomic_directory(legacy.parent / f"{CHECKPOINT_PREFIX}{step}") as tmp:
        for name in (MODEL_FILE, "config.json", OPTIMIZER_FILE):
            shutil.copy2(legacy / name, tmp / name)
        rng_tensors, rng = load_file(str(legacy / RNG_FILE)), state["rng"]
        if isinstance(rng, dict):  # one process's, saved before every run kept a list
            rng_tensors, rng = {"0.torch": rng_tensors["torch"]}, [rng]
        save_file(rng_tensors, str(tmp / RNG_FILE))
        (tmp / RUN_STATE_FILE).write_text(json.dumps({
            "run_signature": {}, "corpus": state["corpus"], "heal_config": state.get("heal_config", {}),
            "optimizer": state["optimizer"], "scheduler": state["scheduler"], "rng": rng}), encoding="utf-8")
        TrainerState(global_step=step, logging_steps=1, train_batch_size=1,
                     log_history=log).save_to_json(str(tmp / "trainer_state.json"))
        upgrade_checkpoint(tmp)
    logger.info("Rewrote %s, a healing checkpoint of an earlier sharedbert, as %s-%d.", legacy, CHECKPOINT_PREFIX, step)


def _saved_progress(checkpoint: Path | None) -> tuple[int, float]:
    """(optimizer steps, training seconds: its `HealingClock`'s, else its log's) a checkpoint had reached."""
    if checkpoint is None:
        return 0, 0.0
    state = read_trainer_state(checkpoint)
    clock = saved_callback_state(checkpoint, HealingClock.__name__)
    if clock is not None:
        return state["global_step"], clock["attributes"]["elapsed"]
    elapsed = [entry["elapsed_seconds"] for entry in state["log_history"] if "elapsed_seconds" in entry]
    return state["global_step"], elapsed[-1] if elapsed else 0.0


def _optimizer(student, config: HealConfig):
    """AdamW over the parameters healing trains (no decay on biases and norms), with `_lr_lambda`'s schedule."""
    params = _trained_parameters(student, config)
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate,
    )


def _training_arguments(checkpoint_dir: Path, config: HealConfig, steps: int, precision: str) -> HealConfig:
    """`config` as the Trainer's arguments: `steps` steps of one text batch each, in order; the loss logged every step;
    a checkpoint every `checkpoint_steps` (the minutes, Ctrl-C and the budget's end ask for one through callbacks)."""
    return dataclasses.replace(
        config, output_dir=str(checkpoint_dir), max_steps=steps, per_device_train_batch_size=1,
        train_sampling_strategy="sequential", logging_strategy="steps", logging_steps=1,
        save_strategy="steps" if config.checkpoint_steps else "no", save_steps=config.checkpoint_steps or 500,
        eval_strategy="no", disable_tqdm=True, dataloader_num_workers=0, use_cpu=not torch.cuda.is_available(),
        bf16=precision == "bf16",
    )


@restores_torch_threads
def heal(student, teacher, tokenizer, corpus, checkpoint_dir, config: HealConfig, resume: bool = True, on_step=None,
         stop_after_steps: int | None = None, pooling=None) -> HealResult:
    """Distil `teacher` into `student` on the text files in `corpus`, in place. Returns a `HealResult`.

    Args:
        student: the converted SharedBert (any head; its encoder is trained).
        teacher: the original BERT (any head; its encoder is read, never changed).
        tokenizer: the teacher's tokenizer.
        corpus: text file(s) or folder(s), or a `TextInMemory`.
        checkpoint_dir: where the `checkpoint-STEP/` folders (resumable state) and `minute-XX/` snapshots go.
        config: budget and hyper-parameters.
        resume: continue from the newest checkpoint in `checkpoint_dir` when there is one (False: delete them).
        on_step: optional callback(step, loss) after every optimizer step.
        stop_after_steps: end this call after that many steps (checkpoint saved, budget and schedule unchanged), to
            heal in several sessions; `HealResult.interrupted` is then True.
        pooling: the sentence-transformers Pooling module whose embeddings the student should match (default: mean
            pooling; `sharedbert.sentence_embeddings.pooling_of(folder)` reads a sentence-transformers model's own).
    """
    if config.threads:
        torch.set_num_threads(config.threads)
    checkpoint_dir = Path(checkpoint_dir)
    batches = HealingBatches(corpus, config, config.max_steps or UNBOUNDED_STEPS)
    resume_from = _resume_point(checkpoint_dir, batches, config, resume)
    saved_steps, saved_seconds = _saved_progress(resume_from)
    if config.max_minutes is not None and saved_seconds >= config.max_minutes * 60:
        batches.steps = saved_steps  # the time budget is spent: load the checkpoint, train no further
    steps = len(batches)
    precision = resolve_precision(config.precision)
    logger.info(describe_precision(config.precision))
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    clock = HealingClock(saved_seconds)
    optimizer = _optimizer(student, config)
    distiller = Distiller(student, teacher, config, pooling=pooling)
    checkpoints = CheckpointCallback(every_minutes=config.checkpoint_minutes)
    trainer = HealingTrainer(
        model=student, args=_training_arguments(checkpoint_dir, config, steps, precision), train_dataset=batches,
        data_collator=TokenizeTexts(tokenizer, min(config.max_length, _position_limit(student, teacher))),
        processing_class=tokenizer, optimizers=(optimizer, torch.optim.lr_scheduler.LambdaLR(
            optimizer, _lr_lambda(config, clock))),
        callbacks=[checkpoints], checkpoint_dir=checkpoint_dir, distillation=distiller, clock=clock,
        record={"corpus": batches.pieces.fingerprint, "heal_config": config.heal_settings()},
    )
    healing = HealingCallback(trainer, config, clock, stop_after_steps, on_step)
    trainer.add_callback(healing)
    trainer.remove_callback(PrinterCallback)  # disable_tqdm's: it would print every step's log
    if resume_from is not None:
        logger.info("Resuming from %s at step %d (%.1f training minutes).", resume_from, saved_steps,
                    saved_seconds / 60)
    try:
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from is not None else None)
    finally:
        distiller.close()
        for p in student.parameters():
            p.requires_grad_(True)
    losses = [round(entry["loss"], 6) for entry in trainer.state.log_history if "loss" in entry]
    tail = losses[-10:]
    return HealResult(steps=trainer.state.global_step, elapsed_seconds=clock.elapsed,
                      first_loss=losses[0] if losses else None, last_loss=sum(tail) / len(tail) if tail else None,
                      interrupted=healing.interrupted or checkpoints.interrupted_at is not None, losses=losses,
                      precision=precision)


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
                     config: HealConfig | None, corpus=None, fit_report=None, calibration_sentences=None, sharing=None):
    """A short README.md noting the base model, the conversion and the healing run (written by sharedbert.conversion.card)."""
    healing = None
    if result is not None and config is not None:
        healing = HealingSummary(
            corpus=[str(c) for c in ([corpus] if isinstance(corpus, (str, Path, TextInMemory)) else corpus or [])],
            steps=result.steps, batch_size=config.batch_size,
            minutes=result.elapsed_seconds / 60, first_loss=result.first_loss, last_loss=result.last_loss,
        )
    retained_energy = [fit.retained_energy for fit in fit_report or []]
    write_conversion_card(folder, source, attention_type, layer_sharing, retained_energy=retained_energy,
                          healing=healing, calibration_sentences=calibration_sentences, sharing=sharing)
