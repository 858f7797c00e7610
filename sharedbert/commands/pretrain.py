"""`sharedbert pretrain`: masked-language-model pretraining from raw text with `Trainer` and
`DataCollatorForLanguageModeling`.

The corpus is text files, folders (their .txt/.raw/.text files) or glob patterns, decoded tolerantly (CRLF, Latin-1),
or a `datasets` dataset with a text column. By default lines are packed into blocks of exactly --block-size tokens
with a [SEP] between documents (each file, or also each blank line with --documents blank-line); --line-by-line makes
each line one example. The architecture is a preset (bert-tiny ... bert-large, minilm-l6) or a JSON config, with any
attention type, cross-layer sharing and tied or untied embeddings. The tokenizer is either trained here
(--train-vocab N: a new WordPiece vocabulary from the corpus) or reused (--tokenizer PATH; default the
bert-base-uncased vocabulary of all-MiniLM-L6-v2). Saves a loadable SharedBertForMaskedLM, its tokenizer and
pretrain_results.json (held-out loss and perplexity), atomically.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from ..configuration_sharedbert import ATTENTION_TYPES, LAYER_SHARING_MODES, SHARING_ORDERS
from ..training import add_checkpoint_arguments


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "pretrain",
        help="Masked-LM pretraining from raw text files or a datasets dataset.",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_argument_group("corpus (one of)")
    source.add_argument("--corpus", nargs="+", metavar="PATH", help="Text files, folders or glob patterns.")
    source.add_argument("--dataset", help="A datasets name (Hub id or local loader), e.g. wikitext.")
    source.add_argument("--dataset-config", help="The dataset's configuration, e.g. wikitext-2-raw-v1.")
    source.add_argument("--dataset-split", default="train", help="With --dataset (default train).")
    source.add_argument("--text-column", default="text", help="With --dataset (default text).")
    text = parser.add_argument_group("examples")
    text.add_argument("--block-size", type=int, default=128, help="Tokens per example (default 128).")
    text.add_argument("--line-by-line", action="store_true", help="One example per non-empty line, not packed.")
    text.add_argument("--documents", choices=("file", "blank-line"), default="file",
                      help="Where a new document starts when packing: each file (default) or also each blank line.")
    text.add_argument("--mlm-probability", type=float, default=0.15, help="Share of tokens masked (default 0.15).")
    model = parser.add_argument_group("model")
    model.add_argument("--config", default="bert-mini", help="Preset (bert-tiny, bert-mini, bert-small, bert-medium, "
                       "bert-base, bert-large, minilm-l6) or a config JSON file (default bert-mini).")
    model.add_argument("--attention-type", choices=ATTENTION_TYPES, help="Default: the config's, else shared.")
    model.add_argument("--layer-sharing", choices=LAYER_SHARING_MODES, help="Cross-layer sharing (default none).")
    model.add_argument("--num-unique-layers", type=int, help="Distinct layer sets with --layer-sharing (default 1).")
    model.add_argument("--sharing-order", choices=SHARING_ORDERS,
                       help="How layers map onto the sets (default sequence).")
    model.add_argument("--no-tie-embeddings", action="store_true", help="Give the MLM decoder its own matrix.")
    vocab = model.add_mutually_exclusive_group()
    vocab.add_argument("--train-vocab", type=int, metavar="N", help="Train a new WordPiece vocabulary of N entries.")
    vocab.add_argument("--tokenizer", help="Reuse this tokenizer (default: all-MiniLM-L6-v2's, bert-base-uncased).")
    train = parser.add_argument_group("training")
    train.add_argument("--output-dir", default="runs/pretrain", help="Default runs/pretrain.")
    train.add_argument("--overwrite", action="store_true", help="Replace a non-empty --output-dir.")
    train.add_argument("--max-steps", type=int, default=1000, help="Optimizer steps (default 1000).")
    train.add_argument("--batch-size", type=int, default=32, help="Examples per process per step (default 32).")
    train.add_argument("--learning-rate", type=float, default=5e-4, help="Peak learning rate (default 5e-4).")
    train.add_argument("--warmup", type=float, default=0.1, help="Warm-up as a fraction of the steps (default 0.1).")
    train.add_argument("--weight-decay", type=float, default=0.01, help="Default 0.01.")
    train.add_argument("--eval-fraction", type=float, default=0.02,
                       help="Share of the examples held out to measure loss and perplexity (at most 1,000).")
    train.add_argument("--seed", type=int, default=42, help="Default 42.")
    train.add_argument("--logging-steps", type=int,
                       help="Log the loss every N steps (default: about 10 times per run).")
    add_checkpoint_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..training import run_command

    result, code = run_command("pretrain", pretrain, args)
    if code:
        return code
    if result["eval_loss"] is not None:
        print(f"\nheld-out MLM loss {result['eval_loss']:.4f} (perplexity {result['perplexity']:.1f})")
    print(f"{result['steps']} steps in {result['train_seconds']:.0f} s; saved to {result['output_dir']}")
    return 0


def corpus_units_from_dataset(name, config=None, split="train", text_column="text") -> dict:
    """Units (`text`, `doc`) from a datasets dataset: every row is a document; empty rows are skipped."""
    import datasets

    try:
        dataset = datasets.load_dataset(name, config, split=split)
    except Exception as error:
        raise ValueError(f"Cannot load dataset {name!r} ({config}, split {split}): {error}") from error
    if text_column not in dataset.column_names:
        raise ValueError(f"Dataset {name!r} has no column {text_column!r}; its columns are {dataset.column_names}. "
                         "Pass --text-column.")
    texts, docs = [], []
    for doc, text in enumerate(dataset[text_column]):
        if isinstance(text, str) and text.strip():
            texts.append(text.strip())
            docs.append(doc)
    if not texts:
        raise ValueError(f"Dataset {name!r} has no text in column {text_column!r}.")
    return {"text": texts, "doc": docs}


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
    evaluations: int = 0,
    logging_steps: int | None = None,
    checkpoint_dir=None,
    checkpoint_minutes: float | None = 10.0,
    checkpoint_steps: int | None = None,
    no_resume: bool = False,
) -> dict:
    """Pretrain and save; returns the pretrain_results.json contents.

    Checkpoints go to `checkpoint_dir` (default OUTPUT-checkpoints) and a rerun with the same settings resumes from
    the newest; Ctrl-C saves one and raises `TrainingInterrupted`. They are deleted once the output is saved."""
    # Everything that shapes the trajectory (taken first, while the locals are only the arguments): a checkpoint is
    # only resumed by a run with the same values.
    signature = {key: value for key, value in locals().items() if key not in _NOT_IN_SIGNATURE}
    from transformers import DataCollatorForLanguageModeling, set_seed

    from .. import SharedBertConfig, SharedBertForMaskedLM
    from .. import data as data_module
    from ..presets import config_values
    from ..training import (
        BatchSeededCollator,
        ResumableTrainer,
        RunCheckpoints,
        atomic_write_json,
        check_output_dir,
        count_parameters,
        is_main_process,
        load_tokenizer,
        save_model,
        training_arguments,
    )
    from .finetune import _workdir, default_base_model

    started = time.time()
    if (corpus is None) == (dataset is None):
        raise ValueError("Give exactly one corpus: --corpus FILES/FOLDERS or --dataset NAME.")
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"--mlm-probability must be in (0, 1), got {mlm_probability}.")
    if not 0.0 <= eval_fraction < 0.5:
        raise ValueError(f"--eval-fraction must be in [0, 0.5), got {eval_fraction}.")
    if max_steps < 1:
        raise ValueError(f"--max-steps must be positive, got {max_steps}.")
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
        units = corpus_units_from_dataset(dataset, dataset_config, dataset_split, text_column)
        source = [f"{dataset}" + (f"/{dataset_config}" if dataset_config else "") + f" ({dataset_split})"]
    print(f"corpus: {len(source)} source(s), {len(units['text']):,} non-empty lines, "
          f"{max(units['doc']) + 1:,} documents")

    # Tokenizer.
    if train_vocab is not None and checkpoints.resume_from is not None:
        tok = load_tokenizer(checkpoints.resume_from)  # the vocabulary this run trained before it was stopped
        print(f"tokenizer: the WordPiece vocabulary of {len(tok):,} entries trained before the restart")
    elif train_vocab is not None:
        from ..vocab import train_wordpiece

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
          f"{count_parameters(model):,} parameters")

    # Masks seeded per batch: a run resumed from a checkpoint masks every batch exactly as an uninterrupted one.
    masking = DataCollatorForLanguageModeling(tok, mlm=True, mlm_probability=mlm_probability)
    collator = BatchSeededCollator(masking, seed)
    with _workdir(output_dir if is_main_process() else None) as workdir:
        args = training_arguments(
            workdir, batch_size=batch_size, learning_rate=learning_rate, max_steps=max_steps, warmup=warmup,
            weight_decay=weight_decay, evaluations=evaluations if eval_set is not None else 0,
            group_by_length=line_by_line, seed=seed, logging_steps=logging_steps,
        )
        trainer = ResumableTrainer(model=model, args=args, train_dataset=train_set, eval_dataset=eval_set,
                                   processing_class=tok, data_collator=collator, callbacks=[checkpoints.callback],
                                   **checkpoints.trainer_kwargs())
        if checkpoints.resume_from is not None:
            print(f"resuming from {checkpoints.resume_from}")
        train_started = time.time()
        output = trainer.train(resume_from_checkpoint=checkpoints.resume_from and str(checkpoints.resume_from))
        train_seconds = time.time() - train_started
        checkpoints.raise_if_interrupted()  # before anything is saved: the output folder is not created
        eval_loss = trainer.evaluate()["eval_loss"] if eval_set is not None else None
        result = {
            "corpus": source,
            "config": config,
            "attention_type": model_config.attention_type,
            "layer_sharing": model_config.layer_sharing,
            "num_unique_layers": model_config.num_unique_layers,
            "tie_word_embeddings": model_config.tie_word_embeddings,
            "parameters": count_parameters(trainer.model),
            "vocab_size": len(tok),
            "trained_vocab": train_vocab is not None,
            "block_size": block_size,
            "line_by_line": line_by_line,
            "train_examples": len(train_set),
            "eval_examples": len(eval_set) if eval_set is not None else 0,
            "steps": trainer.state.global_step,
            "batch_size": batch_size * args.world_size,
            "learning_rate": learning_rate,
            "train_loss": output.training_loss,
            "eval_loss": eval_loss,
            "perplexity": math.exp(min(eval_loss, 50.0)) if eval_loss is not None else None,
            "train_seconds": train_seconds,
            "seconds": time.time() - started,
            "output_dir": str(Path(output_dir)),
        }
        if trainer.is_world_process_zero():
            save_model(trainer.model, tok, workdir)
            atomic_write_json(workdir / "pretrain_results.json", result)
            atomic_write_json(workdir / "trainer_log.json", trainer.state.log_history)
    checkpoints.discard()
    return result


# Options that do not change what is trained (where things go, how often to checkpoint).
_NOT_IN_SIGNATURE = {"output_dir", "overwrite", "logging_steps", "checkpoint_dir", "checkpoint_minutes",
                     "checkpoint_steps", "no_resume"}
