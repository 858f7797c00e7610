"""Masked-language-model pretraining from raw text with `Trainer` and `DataCollatorForLanguageModeling`
(`sharedbert pretrain`).

The corpus is text files, folders (their .txt/.raw/.text files) or glob patterns, decoded in the encoding a file's
byte-order mark names, else as UTF-8, else as `encoding` (a file that is none of these is refused; CRLF becomes LF),
or a `datasets` dataset with a text column. By default lines are packed into blocks of exactly `block_size` tokens
with a [SEP] between documents (each file, or also each blank line with `documents="blank-line"`); `line_by_line`
makes each line one example. The architecture is a preset (bert-tiny ... bert-large, minilm-l6) or a JSON config,
with any attention type, cross-layer sharing and tied or untied embeddings. The tokenizer is either trained here
(`train_vocab=N`: a new WordPiece vocabulary from the corpus) or reused (`tokenizer`; default the bert-base-uncased
vocabulary of all-MiniLM-L6-v2). Saves a loadable SharedBertForMaskedLM, its tokenizer and pretrain_results.json
(held-out loss and perplexity), atomically. `PretrainArguments` holds every option, its default and its help;
`sharedbert pretrain` makes its flags from it.

Speed (docs/pretraining-speed.md): packed blocks hold no padding; the vocabulary projection runs only at the masked
positions while training (`sparse_prediction`, on unless `dense_prediction`; the saved model predicts densely at
inference); `precision="auto"` trains under bf16 autocast where the hardware computes bf16 natively, fp32 elsewhere.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from transformers import DataCollatorForLanguageModeling, set_seed

from ..configuration_sharedbert import (
    ATTENTION_TYPES,
    DEFAULT_ATTENTION_TYPE,
    LAYER_SHARING_MODES,
    SHARING_ORDERS,
    SharedBertConfig,
)
from ..modeling_sharedbert import SharedBertForMaskedLM
from ..parameter_counts import count_model_parameters
from ..model_sizes import PRESETS, config_values
from .. import data as data_module
from .arguments import JobTrainingArguments, training_flag, renamed
from .checkpointing import RunCheckpoints, checkpoint_precision, is_main_process
from .models import default_base_model, load_tokenizer
from ..precision import describe_precision, resolve_precision
from ..remote_code import trust_remote_code_option
from ..sharing_presets import SHARING_FIELDS, SHARING_PRESETS, apply_sharing_preset
from .trainer import (
    BatchSeededCollator,
    ResumableTrainer,
    StepTimer,
    check_output_dir,
    output_folder,
    save_run,
    training_arguments,
)
from .vocab import train_wordpiece

logger = logging.getLogger(__name__)


def _option(default, help: str, **metadata):
    return field(default=default, metadata={"help": help, **metadata})


@dataclass
class PretrainDataArguments:
    """The data part of pretraining: the corpus (one of files or a dataset) and how it becomes examples."""

    corpus: list[str] | None = _option(None, "Text files, folders or glob patterns.")
    dataset: str | None = _option(None, "A datasets name (Hub id or local loader), e.g. wikitext.")
    dataset_config: str | None = _option(None, "The dataset's configuration, e.g. wikitext-2-raw-v1.")
    dataset_split: str = _option("train", "With --dataset: the split.")
    text_column: str = _option("text", "With --dataset: the text column.")
    encoding: str | None = _option(None, "The encoding of corpus files that are not UTF-8 and have no byte-order mark "
                                   "(e.g. cp1252 for old Latin-1 texts); without it such a file is refused.",
                                   metavar="NAME")
    block_size: int = _option(128, "Tokens per example.")
    line_by_line: bool = _option(False, "One example per non-empty line, not packed.")
    documents: str = _option("file", "Where a new document starts when packing: each file, or also each blank line.",
                             choices=("file", "blank-line"))
    mlm_probability: float = _option(0.15, "Share of tokens masked.")
    eval_fraction: float = _option(0.02, "Share of the examples held out to measure loss and perplexity (at most "
                                   "1,000 examples).")


@dataclass
class PretrainModelArguments:
    """The model part of pretraining: the architecture and the tokenizer."""

    config: str = _option("bert-mini", f"Preset ({', '.join(PRESETS)}) or a config JSON file.")
    attention_type: str | None = _option(None, f"Default: the config's, else {DEFAULT_ATTENTION_TYPE}.",
                                         choices=ATTENTION_TYPES)
    layer_sharing: str | None = _option(None, "Cross-layer sharing (default: the config's, else none).",
                                        choices=LAYER_SHARING_MODES)
    num_unique_layers: int | None = _option(None, "Distinct layer sets with layer sharing (default 1).")
    sharing_order: str | None = _option(None, "How layers map onto the sets (default sequence).",
                                        choices=SHARING_ORDERS)
    num_key_value_heads: int | None = _option(None, "standard attention: grouped-query attention with this many "
                                              "key/value heads (1: multi-query; default: the config's, else one per "
                                              "head).")
    query_rank: int | None = _option(None, "standard attention: a rank-r query (default: the config's, else the full "
                                     "query projection).")
    query_latent_norm: bool = _option(False, "With a rank-r query: RMS-normalise its rank-r code before the "
                                      "up-projection, as multi-head latent attention does (default: the config's).")
    sharing_preset: str | None = _option(None, "A named way to share (sharedbert.sharing_presets; docs/model.md): "
                                         "sets the attention type and every sharing option above, over the config's; "
                                         "those options may then only repeat the preset's values.",
                                         choices=tuple(SHARING_PRESETS))
    no_tie_embeddings: bool = _option(False, "Give the MLM decoder its own matrix.")
    dense_prediction: bool = _option(False, "Compute vocabulary logits at every position while training (default: "
                                     "only at the masked positions, the same loss for a fraction of the cost; "
                                     "inference is dense either way).")
    train_vocab: int | None = _option(None, "Train a new WordPiece vocabulary of N entries.", metavar="N")
    tokenizer: str | None = _option(None, "Reuse this tokenizer (default: all-MiniLM-L6-v2's, bert-base-uncased).")
    trust_remote_code: bool = trust_remote_code_option()


@dataclass
class PretrainArguments(PretrainModelArguments, PretrainDataArguments, JobTrainingArguments):
    """Every option of `pretrain` / `sharedbert pretrain`, with its default and help: a model part and a data part on
    transformers' `TrainingArguments` (through `JobTrainingArguments`: the package's defaults, checkpoint options),
    which the Trainer takes once `trainer.training_arguments` has finished it for the run."""

    # Pretraining's own defaults for TrainingArguments' and JobTrainingArguments' fields.
    output_dir: str | None = _option("runs/pretrain", "Where the model, tokenizer and pretrain_results.json go.")
    max_steps: int = _option(1000, "Optimizer steps.")
    learning_rate: float = _option(5e-4, "Peak learning rate.")
    warmup_steps: float = _option(0.1, "Warm-up as a fraction of the steps.")
    evaluations: int = _option(0, "Evaluations of the held-out loss during training (0: only at the end).",
                               group="training")

    training_flags: ClassVar[dict] = {
        **{name: flag for name, flag in JobTrainingArguments.training_flags.items() if name != "num_train_epochs"},
        "output_dir": training_flag("Where the model, tokenizer and pretrain_results.json go."),
        "max_steps": training_flag("Optimizer steps."),
        "seed": training_flag("Initialisation, held-out split, batch order and masking."),
    }
    signature_training_fields: ClassVar[tuple] = tuple(
        name for name in JobTrainingArguments.signature_training_fields if name != "num_train_epochs")
    added_to_signature: ClassVar[frozenset] = frozenset({"query_latent_norm"})

    def __post_init__(self):
        apply_sharing_preset(self)
        if (self.corpus is None) == (self.dataset is None):
            raise ValueError("Give exactly one corpus: --corpus FILES/FOLDERS or --dataset NAME.")
        if self.train_vocab is not None and self.tokenizer is not None:
            raise ValueError("Give --train-vocab (a new vocabulary) or --tokenizer (an existing one), not both.")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"--mlm-probability must be in (0, 1), got {self.mlm_probability}.")
        if not 0.0 <= self.eval_fraction < 0.5:
            raise ValueError(f"--eval-fraction must be in [0, 0.5), got {self.eval_fraction}.")
        if self.max_steps < 1:
            raise ValueError(f"--max-steps must be positive, got {self.max_steps}.")
        if self.encoding is not None:
            data_module.check_encoding_name(self.encoding)
        super().__post_init__()


def pretrain(arguments: PretrainArguments | None = None, /, **fields) -> dict:
    """Pretrain and save; returns the pretrain_results.json contents.

    Takes a `PretrainArguments`, or its fields as keywords (`pretrain(corpus=[...], max_steps=200)`), or both
    (keywords replace fields). Checkpoints go to `checkpoint_dir` (default OUTPUT-checkpoints) and a rerun with the
    same settings resumes from the newest; Ctrl-C saves one and raises `TrainingInterrupted`. They are deleted once
    the output is saved.

    `precision` ("auto", "bf16", "fp32") is resolved on the machine that runs (`precision.resolve_precision`) and may
    differ from the checkpoint's when a run is resumed elsewhere: the weights and AdamW state are fp32 either way, so
    training continues, in the new precision (said in the log and in the results' `resumed_from_precision`)."""
    fields = renamed(fields)
    args = replace(arguments, **fields) if arguments is not None else PretrainArguments(**fields)
    started = time.time()
    if is_main_process():
        check_output_dir(args.output_dir, args.overwrite, args)
    values = _model_values(args)  # the architecture first: a bad config fails before any text is read
    checkpoints = RunCheckpoints(args.output_dir, args.signature(), args.checkpoint_dir, args.checkpoint_steps,
                                 args.checkpoint_minutes, resume=not args.no_resume)
    units, source = _read_text(args)
    tokenizer = _tokenizer(args, units, values, checkpoints.resume_from)
    train_set, eval_set = _examples(args, units, tokenizer)
    set_seed(args.seed)
    values.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    model = SharedBertForMaskedLM(SharedBertConfig(**values))
    _describe(args, model)
    precision = resolve_precision(args.precision)
    resumed_precision = checkpoint_precision(checkpoints.resume_from) if checkpoints.resume_from else None
    if resumed_precision not in (None, precision):
        logger.warning("note: the checkpoint trained in %s; continuing in %s (fp32 weights and optimizer state either "
                       "way, so the run goes on, but not bit for bit as it would have)", resumed_precision, precision)
    # Masks seeded per batch: a run resumed from a checkpoint masks every batch exactly as an uninterrupted one.
    masking = DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=args.mlm_probability)
    with output_folder(args.output_dir if is_main_process() else None) as workdir:
        training = training_arguments(
            workdir, evaluations=args.evaluations if eval_set is not None else 0, group_by_length=args.line_by_line,
            precision=precision, arguments=args,
        )
        timer = StepTimer()
        trainer = ResumableTrainer(model=model, args=training, train_dataset=train_set, eval_dataset=eval_set,
                                   processing_class=tokenizer, data_collator=BatchSeededCollator(masking, args.seed),
                                   callbacks=[checkpoints.callback, timer], **checkpoints.trainer_kwargs())
        if checkpoints.resume_from is not None:
            logger.info("resuming from %s", checkpoints.resume_from)
        train_started = time.time()
        output = trainer.train(resume_from_checkpoint=checkpoints.resume_from and str(checkpoints.resume_from))
        train_seconds = time.time() - train_started
        checkpoints.raise_if_interrupted()  # before anything is saved: the output folder is not created
        eval_loss = trainer.evaluate()["eval_loss"] if eval_set is not None else None
        result = _result(args, trainer, tokenizer, train_set, eval_set, timer, source,
                         dict(train_loss=output.training_loss, eval_loss=eval_loss, train_seconds=train_seconds,
                              precision=precision, resumed_from_precision=resumed_precision))
        result["seconds"] = time.time() - started
        if trainer.is_world_process_zero():
            save_run(trainer, tokenizer, workdir, "pretrain_results.json", result)
    checkpoints.discard()
    return result


def _model_values(args: PretrainArguments) -> dict:
    """The SharedBertConfig fields of the model to build (its vocabulary aside), checked."""
    values = config_values(args.config)
    for key in SHARING_FIELDS:
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    if args.layer_sharing is not None and args.num_unique_layers is None and "num_unique_layers" in values:
        values.pop("num_unique_layers")  # let the config derive it from the new sharing mode
    if args.sharing_preset is not None:  # the whole description: its None values replace the config's too
        values.update({key: getattr(args, key) for key in SHARING_FIELDS})
        values["query_latent_norm"] = args.query_latent_norm  # a preset's query is unnormalised unless asked
    elif args.query_latent_norm:
        values["query_latent_norm"] = True
    if args.no_tie_embeddings:
        values["tie_word_embeddings"] = False
    # Logits (and the loss) only where tokens are masked while training: the same loss, a fraction of the head's cost.
    values["sparse_prediction"] = not args.dense_prediction
    values.setdefault("attention_type", DEFAULT_ATTENTION_TYPE)
    values["max_position_embeddings"] = max(values.get("max_position_embeddings", 512), args.block_size)
    SharedBertConfig(**values)  # validates
    return values


def _read_text(args: PretrainArguments) -> tuple[dict, list[str]]:
    """The corpus as units (`text`, `doc`), and a description of its sources."""
    if args.corpus is not None:
        files = data_module.corpus_files(args.corpus)
        units = data_module.corpus_units(files, documents=args.documents, encoding=args.encoding)
        source = [str(f) for f in files]
    else:
        units = data_module.corpus_units_from_dataset(args.dataset, args.dataset_config, args.dataset_split,
                                                      args.text_column)
        source = [f"{args.dataset}" + (f"/{args.dataset_config}" if args.dataset_config else "")
                  + f" ({args.dataset_split})"]
    logger.info("corpus: %d source(s), %s non-empty lines, %s documents", len(source), f"{len(units['text']):,}",
                f"{max(units['doc']) + 1:,}")
    return units, source


def _tokenizer(args: PretrainArguments, units: dict, values: dict, resume_from):
    if args.train_vocab is not None and resume_from is not None:
        tokenizer = load_tokenizer(resume_from)  # the vocabulary this run trained before it was stopped
        logger.info("tokenizer: the WordPiece vocabulary of %s entries trained before the restart",
                    f"{len(tokenizer):,}")
    elif args.train_vocab is not None:
        tokenizer = train_wordpiece(units["text"], vocab_size=args.train_vocab,
                                    model_max_length=values["max_position_embeddings"])
        logger.info("tokenizer: new WordPiece vocabulary of %s entries", f"{len(tokenizer):,}")
    else:
        tokenizer = load_tokenizer(args.tokenizer or default_base_model(), trust_remote_code=args.trust_remote_code)
        logger.info("tokenizer: %s (%s entries)", args.tokenizer or default_base_model(), f"{len(tokenizer):,}")
    return tokenizer


def _examples(args: PretrainArguments, units: dict, tokenizer):
    """(training set, held-out set or None)."""
    examples = data_module.mlm_dataset(units, tokenizer, block_size=args.block_size, line_by_line=args.line_by_line)
    n_eval = min(1000, int(len(examples) * args.eval_fraction)) if args.eval_fraction > 0 else 0
    if n_eval > 0 and len(examples) - n_eval >= 1:
        split = examples.train_test_split(test_size=n_eval, seed=args.seed)
        train_set, eval_set = split["train"], split["test"]
    else:
        train_set, eval_set = examples, None
    logger.info("examples: %s training, %s held out (%s)", f"{len(train_set):,}",
                f"{len(eval_set) if eval_set is not None else 0:,}",
                "line by line" if args.line_by_line else f"packed blocks of {args.block_size} tokens")
    return train_set, eval_set


def _describe(args: PretrainArguments, model) -> None:
    config = model.config
    logger.info("model: SharedBertForMaskedLM (%s, attention_type=%s, layer_sharing=%s, tied embeddings=%s), %s "
                "parameters; MLM logits %s while training", args.config, config.attention_type, config.layer_sharing,
                config.tie_word_embeddings, f"{count_model_parameters(model):,}",
                "at masked positions only" if config.sparse_prediction else "at every position")
    logger.info(describe_precision(args.precision))


def _result(args: PretrainArguments, trainer, tokenizer, train_set, eval_set, timer, source, measured: dict) -> dict:
    config = trainer.model.config
    # Real tokens per optimizer step: packed blocks are all block_size long (no padding); lines are not.
    tokens_per_example = (args.block_size if not args.line_by_line
                          else sum(len(ids) for ids in train_set["input_ids"]) / len(train_set))
    tokens_per_step = tokens_per_example * args.per_device_train_batch_size * trainer.args.world_size
    steps = timer.summary()
    eval_loss = measured["eval_loss"]
    return {
        "corpus": source,
        "config": args.config,
        "attention_type": config.attention_type,
        "layer_sharing": config.layer_sharing,
        "num_unique_layers": config.num_unique_layers,
        "tie_word_embeddings": config.tie_word_embeddings,
        "parameters": count_model_parameters(trainer.model),
        "vocab_size": len(tokenizer),
        "trained_vocab": args.train_vocab is not None,
        "block_size": args.block_size,
        "line_by_line": args.line_by_line,
        "precision": measured["precision"],
        "precision_setting": args.precision,
        "resumed_from_precision": measured["resumed_from_precision"],
        "sparse_prediction": config.sparse_prediction,
        "train_examples": len(train_set),
        "eval_examples": len(eval_set) if eval_set is not None else 0,
        "steps": trainer.state.global_step,
        "batch_size": args.per_device_train_batch_size * trainer.args.world_size,
        "learning_rate": args.learning_rate,
        "train_loss": measured["train_loss"],
        "eval_loss": eval_loss,
        "perplexity": math.exp(min(eval_loss, 50.0)) if eval_loss is not None else None,
        "train_seconds": measured["train_seconds"],
        # Steady state (StepTimer), start-up excluded: the median time between optimizer steps, or the mean where
        # batches differ in length (line by line).
        "tokens_per_step": tokens_per_step,
        "step_seconds": steps,
        "tokens_per_second": (tokens_per_step / steps["mean" if args.line_by_line else "median"]
                              if steps["n"] else None),
        "output_dir": str(Path(args.output_dir)),
    }


__all__ = ["PretrainArguments", "PretrainDataArguments", "PretrainModelArguments", "pretrain"]
