"""Masked-language-model pretraining from raw text with `Trainer` and `DataCollatorForLanguageModeling`
(`sharedbert pretrain`).

The corpus is text files, folders (their .txt/.raw/.text files) or glob patterns, decoded tolerantly (CRLF, Latin-1),
or a `datasets` dataset with a text column. By default lines are packed into blocks of exactly `block_size` tokens
with a [SEP] between documents (each file, or also each blank line with `documents="blank-line"`); `line_by_line`
makes each line one example. The architecture is a preset (bert-tiny ... bert-large, minilm-l6) or a JSON config,
with any attention type, cross-layer sharing and tied or untied embeddings. The tokenizer is either trained here
(`train_vocab=N`: a new WordPiece vocabulary from the corpus) or reused (`tokenizer`; default the bert-base-uncased
vocabulary of all-MiniLM-L6-v2). Saves a loadable SharedBertForMaskedLM, its tokenizer and pretrain_results.json
(held-out loss and perplexity), atomically.

Speed (docs/pretraining-speed.md): packed blocks hold no padding; the vocabulary projection runs only at the masked
positions while training (`sparse_prediction`, on unless `dense_prediction`; the saved model predicts densely at
inference); `precision="auto"` trains under bf16 autocast where the hardware computes bf16 natively, fp32 elsewhere.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from transformers import DataCollatorForLanguageModeling, set_seed

from ..configuration_sharedbert import SharedBertConfig
from ..modeling_sharedbert import SharedBertForMaskedLM
from ..params import count_model_parameters
from . import data as data_module
from .models import default_base_model, load_tokenizer
from .precision import describe_precision, resolve_precision
from ..presets import config_values
from .checkpointing import RunCheckpoints, checkpoint_precision, is_main_process
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

def pretrain(
    corpus=None,
    dataset: str | None = None,
    dataset_config: str | None = None,
    dataset_split: str = "train",
    text_column: str = "text",
    block_size: int = 128,
    line_by_line: bool = False,
    documents: str = "file",
    mlm_probability: float = 0.15,
    config: str = "bert-mini",
    attention_type: str | None = None,
    layer_sharing: str | None = None,
    num_unique_layers: int | None = None,
    sharing_order: str | None = None,
    no_tie_embeddings: bool = False,
    dense_prediction: bool = False,
    train_vocab: int | None = None,
    tokenizer: str | None = None,
    output_dir="runs/pretrain",
    overwrite: bool = False,
    max_steps: int = 1000,
    batch_size: int = 32,
    learning_rate: float = 5e-4,
    warmup: float = 0.1,
    weight_decay: float = 0.01,
    eval_fraction: float = 0.02,
    seed: int = 42,
    precision: str = "auto",
    evaluations: int = 0,
    logging_steps: int | None = None,
    checkpoint_dir=None,
    checkpoint_minutes: float | None = 10.0,
    checkpoint_steps: int | None = None,
    no_resume: bool = False,
) -> dict:
    """Pretrain and save; returns the pretrain_results.json contents.

    Checkpoints go to `checkpoint_dir` (default OUTPUT-checkpoints) and a rerun with the same settings resumes from
    the newest; Ctrl-C saves one and raises `TrainingInterrupted`. They are deleted once the output is saved.

    `precision` ("auto", "bf16", "fp32") is resolved on the machine that runs (`precision.resolve_precision`) and may
    differ from the checkpoint's when a run is resumed elsewhere: the weights and AdamW state are fp32 either way, so
    training continues, in the new precision (said in the log and in the results' `resumed_from_precision`)."""
    # Everything that shapes the trajectory (taken first, while the locals are only the arguments): a checkpoint is
    # only resumed by a run with the same values.
    signature = {key: value for key, value in locals().items() if key not in _NOT_IN_SIGNATURE}
    started = time.time()
    if (corpus is None) == (dataset is None):
        raise ValueError("Give exactly one corpus: --corpus FILES/FOLDERS or --dataset NAME.")
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"--mlm-probability must be in (0, 1), got {mlm_probability}.")
    if not 0.0 <= eval_fraction < 0.5:
        raise ValueError(f"--eval-fraction must be in [0, 0.5), got {eval_fraction}.")
    if max_steps < 1:
        raise ValueError(f"--max-steps must be positive, got {max_steps}.")
    chosen_precision = resolve_precision(precision)
    if is_main_process():
        check_output_dir(output_dir, overwrite)

    # The architecture first: a bad config should fail before any text is read.
    values = config_values(config)
    for key, value in (("attention_type", attention_type), ("layer_sharing", layer_sharing),
                       ("num_unique_layers", num_unique_layers), ("sharing_order", sharing_order)):
        if value is not None:
            values[key] = value
    if layer_sharing is not None and num_unique_layers is None and "num_unique_layers" in values:
        values.pop("num_unique_layers")  # let the config derive it from the new sharing mode
    if no_tie_embeddings:
        values["tie_word_embeddings"] = False
    # Logits (and the loss) only where tokens are masked while training: the same loss, a fraction of the head's cost.
    values["sparse_prediction"] = not dense_prediction
    values.setdefault("attention_type", "shared")
    values["max_position_embeddings"] = max(values.get("max_position_embeddings", 512), block_size)
    SharedBertConfig(**values)  # validates
    checkpoints = RunCheckpoints(output_dir, signature, checkpoint_dir, checkpoint_steps, checkpoint_minutes,
                                 resume=not no_resume)

    # Text.
    if corpus is not None:
        files = data_module.corpus_files(corpus)
        units = data_module.corpus_units(files, documents=documents)
        source = [str(f) for f in files]
    else:
        units = data_module.corpus_units_from_dataset(dataset, dataset_config, dataset_split, text_column)
        source = [f"{dataset}" + (f"/{dataset_config}" if dataset_config else "") + f" ({dataset_split})"]
    print(f"corpus: {len(source)} source(s), {len(units['text']):,} non-empty lines, "
          f"{max(units['doc']) + 1:,} documents")

    # Tokenizer.
    if train_vocab is not None and checkpoints.resume_from is not None:
        tok = load_tokenizer(checkpoints.resume_from)  # the vocabulary this run trained before it was stopped
        print(f"tokenizer: the WordPiece vocabulary of {len(tok):,} entries trained before the restart")
    elif train_vocab is not None:
        tok = train_wordpiece(units["text"], vocab_size=train_vocab, model_max_length=values["max_position_embeddings"])
        print(f"tokenizer: new WordPiece vocabulary of {len(tok):,} entries")
    else:
        tok = load_tokenizer(tokenizer or default_base_model())
        print(f"tokenizer: {tokenizer or default_base_model()} ({len(tok):,} entries)")

    examples = data_module.mlm_dataset(units, tok, block_size=block_size, line_by_line=line_by_line)
    n_eval = min(1000, int(len(examples) * eval_fraction)) if eval_fraction > 0 else 0
    if n_eval > 0 and len(examples) - n_eval >= 1:
        split = examples.train_test_split(test_size=n_eval, seed=seed)
        train_set, eval_set = split["train"], split["test"]
    else:
        train_set, eval_set = examples, None
    print(f"examples: {len(train_set):,} training, {len(eval_set) if eval_set is not None else 0:,} held out "
          f"({'line by line' if line_by_line else f'packed blocks of {block_size} tokens'})")

    set_seed(seed)
    values.update(vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    model_config = SharedBertConfig(**values)
    model = SharedBertForMaskedLM(model_config)
    print(f"model: SharedBertForMaskedLM ({config}, attention_type={model_config.attention_type}, "
          f"layer_sharing={model_config.layer_sharing}, tied embeddings={model_config.tie_word_embeddings}), "
          f"{count_model_parameters(model):,} parameters; MLM logits "
          f"{'at masked positions only' if model_config.sparse_prediction else 'at every position'} while training")
    print(describe_precision(precision))
    resumed_precision = checkpoint_precision(checkpoints.resume_from) if checkpoints.resume_from else None
    if resumed_precision not in (None, chosen_precision):
        print(f"note: the checkpoint trained in {resumed_precision}; continuing in {chosen_precision} (fp32 weights "
              "and optimizer state either way, so the run goes on, but not bit for bit as it would have)")

    # Masks seeded per batch: a run resumed from a checkpoint masks every batch exactly as an uninterrupted one.
    masking = DataCollatorForLanguageModeling(tok, mlm=True, mlm_probability=mlm_probability)
    collator = BatchSeededCollator(masking, seed)
    with output_folder(output_dir if is_main_process() else None) as workdir:
        args = training_arguments(
            workdir, batch_size=batch_size, learning_rate=learning_rate, max_steps=max_steps, warmup=warmup,
            weight_decay=weight_decay, evaluations=evaluations if eval_set is not None else 0,
            group_by_length=line_by_line, seed=seed, logging_steps=logging_steps, precision=chosen_precision,
        )
        timer = StepTimer()
        trainer = ResumableTrainer(model=model, args=args, train_dataset=train_set, eval_dataset=eval_set,
                                   processing_class=tok, data_collator=collator,
                                   callbacks=[checkpoints.callback, timer], **checkpoints.trainer_kwargs())
        if checkpoints.resume_from is not None:
            print(f"resuming from {checkpoints.resume_from}")
        train_started = time.time()
        output = trainer.train(resume_from_checkpoint=checkpoints.resume_from and str(checkpoints.resume_from))
        train_seconds = time.time() - train_started
        checkpoints.raise_if_interrupted()  # before anything is saved: the output folder is not created
        eval_loss = trainer.evaluate()["eval_loss"] if eval_set is not None else None
        # Real tokens per optimizer step: packed blocks are all block_size long (no padding); lines are not.
        tokens_per_example = (block_size if not line_by_line
                              else sum(len(ids) for ids in train_set["input_ids"]) / len(train_set))
        tokens_per_step = tokens_per_example * batch_size * args.world_size
        steps = timer.summary()
        result = {
            "corpus": source,
            "config": config,
            "attention_type": model_config.attention_type,
            "layer_sharing": model_config.layer_sharing,
            "num_unique_layers": model_config.num_unique_layers,
            "tie_word_embeddings": model_config.tie_word_embeddings,
            "parameters": count_model_parameters(trainer.model),
            "vocab_size": len(tok),
            "trained_vocab": train_vocab is not None,
            "block_size": block_size,
            "line_by_line": line_by_line,
            "precision": chosen_precision,
            "precision_setting": precision,
            "resumed_from_precision": resumed_precision,
            "sparse_prediction": model_config.sparse_prediction,
            "train_examples": len(train_set),
            "eval_examples": len(eval_set) if eval_set is not None else 0,
            "steps": trainer.state.global_step,
            "batch_size": batch_size * args.world_size,
            "learning_rate": learning_rate,
            "train_loss": output.training_loss,
            "eval_loss": eval_loss,
            "perplexity": math.exp(min(eval_loss, 50.0)) if eval_loss is not None else None,
            "train_seconds": train_seconds,
            # Steady state (StepTimer), start-up excluded: the median time between optimizer steps, or the mean
            # where batches differ in length (line by line).
            "tokens_per_step": tokens_per_step,
            "step_seconds": steps,
            "tokens_per_second": tokens_per_step / steps["mean" if line_by_line else "median"] if steps["n"] else None,
            "seconds": time.time() - started,
            "output_dir": str(Path(output_dir)),
        }
        if trainer.is_world_process_zero():
            save_run(trainer, tok, workdir, "pretrain_results.json", result)
    checkpoints.discard()
    return result


# Options that do not change what is trained (where things go, how often to checkpoint).
# `precision` neither: it changes the arithmetic, not what is trained, and a checkpoint may be resumed on a machine
# that resolves "auto" otherwise (see `pretrain`).
_NOT_IN_SIGNATURE = {"output_dir", "overwrite", "logging_steps", "checkpoint_dir", "checkpoint_minutes",
                     "checkpoint_steps", "no_resume", "precision"}


__all__ = ["pretrain"]
