"""`sharedbert pretrain`: masked-language-model pretraining from raw text with `Trainer` and
`DataCollatorForLanguageModeling`.

    sharedbert pretrain --corpus ../shared/data/mlm-text --config bert-mini --max-steps 1000 --output-dir runs/mlm
    sharedbert pretrain --dataset wikitext --dataset-config wikitext-2-raw-v1 --train-vocab 8000

The corpus is text files, folders (their .txt/.raw/.text files) or glob patterns, decoded tolerantly (CRLF, Latin-1),
or a `datasets` dataset with a text column. By default lines are packed into blocks of exactly --block-size tokens
with a [SEP] between documents (each file, or also each blank line with --documents blank-line); --line-by-line makes
each line one example. The architecture is a preset or a JSON config, with any attention type, cross-layer sharing
and tied or untied embeddings. The tokenizer is either trained here (--train-vocab N: a new WordPiece vocabulary from
the corpus) or reused (--tokenizer PATH; default the bert-base-uncased vocabulary of all-MiniLM-L6-v2). Saves a
loadable SharedBertForMaskedLM, its tokenizer and pretrain_results.json (held-out loss and perplexity), atomically.
A run stopped by Ctrl-C or a kill resumes when the same command runs again. By default the vocabulary projection runs
only at the masked positions while training, and bf16 autocast is used where the hardware computes bf16 natively
(docs/pretraining-speed.md). The work is `sharedbert.training.pretrain`; the options are its `PretrainArguments`.
"""

from .common import HelpFormatter, add_command, arguments_from, call_library, show_library_log


def add_parser(subparsers):
    from ..training.pretraining import PretrainArguments

    parser = add_command(subparsers, "pretrain", [PretrainArguments], description=__doc__,
                         help="pretrain with masked LM on raw text files or a datasets dataset",
                         formatter_class=HelpFormatter)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..training.checkpointing import is_main_process
    from ..training.pretraining import PretrainArguments, pretrain

    with show_library_log(is_main_process()):
        result, code = call_library("pretrain", lambda: pretrain(arguments_from(args, PretrainArguments)))
    if code or not is_main_process():
        return code
    if result["eval_loss"] is not None:
        print(f"\nheld-out MLM loss {result['eval_loss']:.4f} (perplexity {result['perplexity']:.1f})")
    speed = (f" ({result['tokens_per_second']:,.0f} tokens/s, {result['precision']})" if result["tokens_per_second"]
             else "")
    print(f"{result['steps']} steps in {result['train_seconds']:.0f} s{speed}; saved to {result['output_dir']}")
    return 0
