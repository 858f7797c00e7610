"""`sharedbert pretrain`: masked-language-model pretraining from raw text with `Trainer` and
`DataCollatorForLanguageModeling`.

The corpus is text files, folders (their .txt/.raw/.text files) or glob patterns, decoded tolerantly (CRLF, Latin-1),
or a `datasets` dataset with a text column. By default lines are packed into blocks of exactly --block-size tokens
with a [SEP] between documents (each file, or also each blank line with --documents blank-line); --line-by-line makes
each line one example. The architecture is a preset (bert-tiny ... bert-large, minilm-l6) or a JSON config, with any
attention type, cross-layer sharing and tied or untied embeddings. The tokenizer is either trained here
(--train-vocab N: a new WordPiece vocabulary from the corpus) or reused (--tokenizer PATH; default the
bert-base-uncased vocabulary of all-MiniLM-L6-v2). Saves a loadable SharedBertForMaskedLM, its tokenizer and
pretrain_results.json (held-out loss and perplexity), atomically (`sharedbert.training.pretrain`). By default the
vocabulary projection runs only at the masked positions while training, and bf16 autocast is used where the hardware
computes bf16 natively (docs/pretraining-speed.md).
"""

import argparse

from ..configuration_sharedbert import ATTENTION_TYPES, LAYER_SHARING_MODES, SHARING_ORDERS
from .common import add_checkpoint_arguments, add_precision_argument, call_library, options_of


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
    model.add_argument("--dense-prediction", action="store_true",
                       help="Compute vocabulary logits at every position while training (default: only at the masked "
                       "positions, the same loss for a fraction of the cost; inference is dense either way).")
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
    add_precision_argument(train)
    train.add_argument("--logging-steps", type=int,
                       help="Log the loss every N steps (default: about 10 times per run).")
    add_checkpoint_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..training import pretrain

    result, code = call_library("pretrain", pretrain, **options_of(args))
    if code:
        return code
    if result["eval_loss"] is not None:
        print(f"\nheld-out MLM loss {result['eval_loss']:.4f} (perplexity {result['perplexity']:.1f})")
    speed = f" ({result['tokens_per_second']:,.0f} tokens/s, {result['precision']})" if result["tokens_per_second"] \
        else ""
    print(f"{result['steps']} steps in {result['train_seconds']:.0f} s{speed}; saved to {result['output_dir']}")
    return 0
