"""Sequence-to-sequence fine-tuning on your own source/target pairs (`sharedbert finetune --target-column ...`).

Starts from a seq2seq checkpoint (`SharedBertForConditionalGeneration`), or warm-starts one from a BERT or SharedBert
encoder (Rothe et al. 2020; `sharedbert.conversion.bert.warm_start_seq2seq`), with what encoder and decoder share chosen by
`share_encoder_decoder_layers` / `share_encoder_decoder_embeddings` (BERTShare shares both) and cross-attention by
`cross_attention_type` (default: the package's, see `DEFAULT_CROSS_ATTENTION_TYPES`). Trains with transformers'
`Seq2SeqTrainer`, evaluates by generating (`predict_with_generate`) and scoring chrF and BLEU with sacrebleu, keeps the
best chrF, resumes after a kill or Ctrl-C, and saves the model, tokenizer, generation settings and eval_results.json.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
from transformers import (
    AutoModelForSeq2SeqLM,
    DataCollatorForSeq2Seq,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    set_seed,
)

from ..conversion import warm_start_seq2seq
from ..parameter_counts import count_model_parameters
from .checkpointing import RunCheckpoints, is_main_process
from ..data.pairs import read_pairs
from ..configuration_sharedbert import CROSS_ATTENTION_TYPES, DEFAULT_ATTENTION_TYPE
from .arguments import DataArguments, JobTrainingArguments, ModelArguments
from ..loading import from_pretrained
from ..model_files import is_seq2seq_checkpoint
from .models import default_base_model, load_tokenizer, model_type_of, resolve_source
from ..precision import describe_precision, resolve_precision
from .trainer import KeepBestCallback, ResumableTrainer, check_output_dir, output_folder, save_run, training_arguments

logger = logging.getLogger(__name__)


@dataclass
class Seq2SeqModelArguments(ModelArguments):
    """The model part of seq2seq fine-tuning: `ModelArguments` and what a warm-started model shares."""

    share_encoder_decoder_layers: bool = field(default=False, metadata={
        "help": "Seq2seq warm start: the decoder runs the encoder's layers (T5 / BERTShare)."})
    share_encoder_decoder_embeddings: bool = field(default=False, metadata={
        "help": "Seq2seq warm start: one embedding table for encoder, decoder and output (tied three ways)."})
    cross_attention_type: str | None = field(default=None, metadata={
        "help": "Seq2seq warm start: cross-attention's type (default: the package's default for the attention type).",
        "choices": CROSS_ATTENTION_TYPES})


@dataclass
class Seq2SeqDataArguments(DataArguments):
    """The data part of seq2seq fine-tuning: `DataArguments`' files and their source and target columns."""

    source_column: str | None = field(default=None, metadata={
        "help": "Seq2seq: the source column of --train-file / --validation-file."})
    target_column: str | None = field(default=None, metadata={
        "help": "Seq2seq: the target column; naming it fine-tunes a seq2seq model (a seq2seq checkpoint, or one "
        "warm-started from --model's encoder) and scores chrF and BLEU."})


@dataclass
class Seq2SeqFinetuneArguments(Seq2SeqModelArguments, Seq2SeqDataArguments, JobTrainingArguments,
                               Seq2SeqTrainingArguments):
    """Every option of seq2seq fine-tuning (`finetune` with `source_column` and `target_column`; `sharedbert finetune
    --target-column ...`): a model part and a data part on transformers' `Seq2SeqTrainingArguments` (through
    `JobTrainingArguments`, the package's defaults and checkpoint options). `generation_max_length` (default:
    `max_length`) and `generation_num_beams` (default 1: greedy) are Seq2SeqTrainingArguments' own."""

    no_group_by_length: bool = field(default=False, metadata={"help": "Plain random batches.", "group": "training"})
    save: bool = field(default=True, metadata={"cli": False, "help": "False: keep nothing (a baseline run)."})

    # The heading of the flags only seq2seq has in `sharedbert finetune --help` (HfArgumentParser's group name).
    _argument_group_name = "sequence to sequence (your own source/target pairs: --source-column and --target-column)"
    training_flags: ClassVar[dict] = {
        **JobTrainingArguments.training_flags,
        "output_dir": {**JobTrainingArguments.training_flags["output_dir"],
                       "help": "Where the model, tokenizer and eval_results.json go (default: runs/finetune-NAME, "
                       "NAME the training file's)."},
        "generation_max_length": {"help": "Seq2seq: the longest output generated when evaluating (default: "
                                  "--max-length).", "group": "training"},
        "generation_num_beams": {"help": "Seq2seq: beams when evaluating (default 1: greedy).", "group": "training"},
    }
    signature_training_fields: ClassVar[tuple] = (*JobTrainingArguments.signature_training_fields,
                                                  "generation_max_length", "generation_num_beams")

    def __post_init__(self):
        self.check_data()
        if not (self.source_column and self.target_column and self.train_file):
            raise ValueError("Seq2seq fine-tuning needs --source-column and --target-column together, with "
                             "--train-file and --validation-file holding those columns.")
        if self.generation_num_beams is None:
            self.generation_num_beams = 1  # greedy, whatever a starting checkpoint's generation config says
        if self.generation_num_beams < 1:
            raise ValueError(f"--generation-num-beams must be at least 1, got {self.generation_num_beams}.")
        super().__post_init__()

    def resolved_output_dir(self) -> Path:
        return Path(self.output_dir) if self.output_dir else Path("runs") / f"finetune-{Path(self.train_file).stem}"


class Seq2SeqFinetuneTrainer(ResumableTrainer, Seq2SeqTrainer):
    """Seq2SeqTrainer's generation with the package's resumable, pickle-free checkpoints and in-order predictions."""


def load_seq2seq(args, tokenizer):
    """The model to fine-tune and a sentence saying where it came from: a seq2seq checkpoint as it is, or one
    warm-started from an encoder checkpoint (a BERT is converted to `attention_type`, shared unless `no_convert`)."""
    source = resolve_source(str(args.model)) if args.model else default_base_model()
    if is_seq2seq_checkpoint(source):
        model = from_pretrained(AutoModelForSeq2SeqLM, source, args.trust_remote_code)
        return model, f"seq2seq model {source}"
    sharing = {name: getattr(args, name) for name in ("share_encoder_decoder_layers",
                                                       "share_encoder_decoder_embeddings", "cross_attention_type")}
    sharing = {name: value for name, value in sharing.items() if value not in (None, False)}
    conversion = {}
    if model_type_of(source) == "bert":
        conversion["attention_type"] = "standard" if args.no_convert else (args.attention_type or DEFAULT_ATTENTION_TYPE)
    if conversion.get("attention_type", "standard") != "standard":
        # As for classifiers, the conversion's error is trained away at the task's expense: in the seq2seq study a
        # calibrated unhealed start (this one is not even calibrated) scored 3.6 chrF below the healed one on the seed
        # both ran, and BERTShare beat every shared-attention arm.
        logger.warning("converting %s to %s attention now, unhealed: a seq2seq model warm-started from it learns "
                       "less than one from a healed conversion. Heal it first (`sharedbert convert SRC OUT --heal`, "
                       "docs/conversion.md) and pass --model OUT; for quality at half the weights keep BERT's "
                       "attention and share it (BERTShare: --no-convert --share-encoder-decoder-layers "
                       "--share-encoder-decoder-embeddings, docs/generation.md)", source, conversion["attention_type"])
    model = warm_start_seq2seq(source, tokenizer, **conversion, **sharing)
    described = ", ".join(f"{k}={v}" for k, v in {**conversion, **sharing}.items()) or "nothing shared"
    return model, f"seq2seq model warm-started from {source} ({described})"


def _tokenized(pairs, tokenizer, max_length: int):
    """input_ids/attention_mask of the sources; labels: the target's ids after [CLS], ending in [SEP] (the decoder
    starts from [CLS], `decoder_start_token_id`)."""
    from datasets import Dataset

    sources = tokenizer([s for s, _ in pairs], truncation=True, max_length=max_length)
    targets = tokenizer([t for _, t in pairs], truncation=True, max_length=max_length)["input_ids"]
    return Dataset.from_dict({"input_ids": sources["input_ids"], "attention_mask": sources["attention_mask"],
                              "labels": [ids[1:] for ids in targets]})


def chrf_and_bleu(tokenizer):
    """`compute_metrics` for generated predictions: sacrebleu's corpus chrF and BLEU against the references, both
    after the tokenizer's round trip (so only the model's errors count)."""
    import sacrebleu  # only the seq2seq metrics need it

    def compute(prediction):
        generated = np.where(prediction.predictions >= 0, prediction.predictions, tokenizer.pad_token_id)
        references = np.where(prediction.label_ids >= 0, prediction.label_ids, tokenizer.pad_token_id)
        hypotheses = [t.strip() for t in tokenizer.batch_decode(generated, skip_special_tokens=True)]
        targets = [t.strip() for t in tokenizer.batch_decode(references, skip_special_tokens=True)]
        return {"chrf": sacrebleu.corpus_chrf(hypotheses, [targets]).score,
                "bleu": sacrebleu.corpus_bleu(hypotheses, [targets]).score}

    return compute


def finetune_seq2seq(args: Seq2SeqFinetuneArguments) -> dict:
    """`finetune` for source/target pairs. Returns the eval_results.json contents."""
    started = time.time()
    train_pairs = read_pairs(args.train_file, args.source_column, args.target_column)
    eval_pairs = read_pairs(args.validation_file, args.source_column, args.target_column)
    if args.max_train_samples is not None and args.max_train_samples < len(train_pairs):
        train_pairs = random.Random(args.seed).sample(train_pairs, args.max_train_samples)
    eval_pairs = eval_pairs[: args.max_eval_samples] if args.max_eval_samples else eval_pairs
    logger.info("data: %d training / %d validation pairs", len(train_pairs), len(eval_pairs))
    output_dir = args.resolved_output_dir()
    if args.save and is_main_process():
        check_output_dir(output_dir, args.overwrite, args)
    checkpoints = (RunCheckpoints(output_dir, args.signature(), args.checkpoint_dir, args.checkpoint_steps,
                                  args.checkpoint_minutes, resume=not args.no_resume) if args.save else None)
    set_seed(args.seed)
    tokenizer = load_tokenizer(resolve_source(str(args.model)) if args.model else default_base_model(),
                               args.tokenizer, trust_remote_code=args.trust_remote_code)
    model, described = load_seq2seq(args, tokenizer)
    max_generated = args.generation_max_length or args.max_length
    model.generation_config.max_length = max_generated
    model.generation_config.num_beams = args.generation_num_beams
    logger.info("model: %s; %s parameters", described, f"{count_model_parameters(model):,}")
    precision = resolve_precision(args.precision)
    logger.info(describe_precision(args.precision))
    keep_best = KeepBestCallback("chrf")
    with output_folder(output_dir if args.save and is_main_process() else None) as workdir:
        training = training_arguments(
            workdir, num_train_examples=len(train_pairs), arguments=args, group_by_length=not args.no_group_by_length,
            precision=precision, predict_with_generate=True, generation_max_length=max_generated,
        )
        trainer = Seq2SeqFinetuneTrainer(
            model=model, args=training, train_dataset=_tokenized(train_pairs, tokenizer, args.max_length),
            eval_dataset=_tokenized(eval_pairs, tokenizer, args.max_length), processing_class=tokenizer,
            data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
            compute_metrics=chrf_and_bleu(tokenizer), callbacks=[keep_best] + ([checkpoints.callback] if checkpoints
                                                                                else []),
            **(checkpoints.trainer_kwargs() if checkpoints else {}),
        )
        resume_from = checkpoints.resume_from if checkpoints else None
        if resume_from is not None:
            logger.info("resuming from %s", resume_from)
        train_started = time.time()
        trainer.train(resume_from_checkpoint=resume_from and str(resume_from))
        if checkpoints:
            checkpoints.raise_if_interrupted()
        if trainer.state.global_step not in {e["step"] for e in trainer.state.log_history if "eval_chrf" in e}:
            trainer.evaluate()
        keep_best.restore(trainer.model)
        best = keep_best.reported_metrics
        result = {
            "task": "seq2seq", "split": "validation",
            "metrics": {"chrf": best["eval_chrf"], "bleu": best["eval_bleu"]},
            "model": str(args.model or default_base_model()), "description": described,
            "attention_type": getattr(model.config, "attention_type", None),
            "cross_attention_type": getattr(model.config, "effective_cross_attention_type", None),
            "parameters": count_model_parameters(model), "train_samples": len(train_pairs),
            "eval_samples": len(eval_pairs), "best_step": keep_best.best_step,
            "total_steps": trainer.state.global_step, "learning_rate": args.learning_rate, "seed": args.seed,
            "precision": precision, "generation_num_beams": args.generation_num_beams,
            "train_seconds": time.time() - train_started, "seconds": time.time() - started,
            "output_dir": str(output_dir) if args.save else None,
        }
        if args.save and trainer.is_world_process_zero():
            save_run(trainer, tokenizer, workdir, "eval_results.json", result)
            trainer.model.generation_config.save_pretrained(str(workdir))
    if checkpoints:
        checkpoints.discard()
    return result


__all__ = ["Seq2SeqDataArguments", "Seq2SeqFinetuneArguments", "Seq2SeqModelArguments", "chrf_and_bleu",
           "finetune_seq2seq", "load_seq2seq"]
