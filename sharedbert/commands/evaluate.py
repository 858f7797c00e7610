"""`sharedbert evaluate`: score a saved sequence classifier on a task's validation file, or write its predictions for
an unlabelled test file. Prints the metrics as JSON (the same shape as fine-tuning's eval_results.json)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from .finetune import add_data_arguments


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "evaluate",
        help="Evaluate a saved classifier on a GLUE task or your own file; metrics as JSON.",
        description=__doc__,
    )
    parser.add_argument("--model", required=True, help="A fine-tuned model folder (SharedBert or BERT) or Hub id.")
    add_data_arguments(parser)
    parser.add_argument("--split", choices=("validation", "dev", "test", "train"), default="validation",
                        help="Which GLUE file to use (default validation = dev.tsv; test writes predictions).")
    parser.add_argument("--file", help="Your own labelled file to evaluate on (instead of a GLUE task).")
    parser.add_argument("--max-eval-samples", type=int, help="Only the first N examples.")
    parser.add_argument("--batch-size", type=int, default=64, help="Default 64.")
    parser.add_argument("--output", help="Also write the results JSON here.")
    parser.add_argument("--predictions", help="Write one prediction per example to this TSV (index, prediction).")
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..data import DataError

    if args.train_file or args.validation_file:
        print("sharedbert evaluate: error: use --file for your own data.", file=sys.stderr)
        return 2
    try:
        result = evaluate(
            model=args.model, task=args.task, data_dir=args.data_dir, dataset=args.dataset, file=args.file,
            text_columns=args.text_columns, label_column=args.label_column, regression=args.regression,
            split=args.split, max_length=args.max_length, max_eval_samples=args.max_eval_samples,
            batch_size=args.batch_size, predictions_path=args.predictions, cache_dir=args.cache_dir,
        )
    except (DataError, ValueError, OSError) as error:
        print(f"sharedbert evaluate: error: {error}", file=sys.stderr)
        return 2
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        from ..training import atomic_write_json

        atomic_write_json(args.output, result)
    return 0


def evaluate(
    model,
    task: str | None = None,
    data_dir=None,
    dataset: str | None = None,
    file: str | None = None,
    text_columns=None,
    label_column: str | None = None,
    regression: bool = False,
    split: str = "validation",
    max_length: int = 128,
    max_eval_samples: int | None = None,
    batch_size: int = 64,
    predictions_path: str | None = None,
    cache_dir: str | None = None,
) -> dict:
    import tempfile

    from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer

    from .. import data as data_module
    from ..training import atomic_write_text, load_tokenizer, training_arguments

    started = time.time()
    split = "validation" if split == "dev" else split
    try:
        classifier = AutoModelForSequenceClassification.from_pretrained(str(model), trust_remote_code=True)
    except Exception as error:
        raise ValueError(f"Cannot load a sequence classifier from {model}: {error}") from error
    config = classifier.config
    model_labels = tuple(config.id2label[i] for i in range(config.num_labels))

    if file:
        labels = None if regression else model_labels
        task_data = data_module.load_task(task=task, files={split: file}, text_columns=text_columns,
                                          label_column=label_column, regression=regression, labels=labels,
                                          cache_dir=cache_dir)
    else:
        task_data = data_module.load_task(task=task, data_dir=data_dir, dataset=dataset, splits=(split,),
                                          cache_dir=cache_dir)
    spec = task_data.spec
    if config.num_labels != spec.num_labels:
        raise ValueError(
            f"{model} predicts {config.num_labels} label(s) {list(model_labels)} but task {spec.name} has "
            f"{spec.num_labels}: evaluate a model fine-tuned on this task."
        )
    eval_raw = task_data.datasets[split]
    if max_eval_samples is not None and max_eval_samples < len(eval_raw):
        eval_raw = eval_raw.select(range(max_eval_samples))
    tok = load_tokenizer(model)
    max_length = min(max_length, config.max_position_embeddings)  # a small model cannot read further
    eval_set = data_module.tokenize(eval_raw, tok, max_length)
    labelled = split != "test"

    with tempfile.TemporaryDirectory(prefix="sharedbert-eval-") as workdir:
        args = training_arguments(workdir, eval_batch_size=batch_size, evaluations=0)
        trainer = Trainer(model=classifier, args=args, processing_class=tok, data_collator=DataCollatorWithPadding(tok))
        output = trainer.predict(eval_set if labelled else eval_set.remove_columns("label"))
    predictions = data_module.predictions_from_logits(spec, output.predictions)
    metrics = data_module.compute_metrics(spec, predictions, eval_set["label"]) if labelled else {}
    if predictions_path:
        lines = ["index\tprediction"] + [
            f"{i}\t{float(p):.3f}" if spec.is_regression else f"{i}\t{model_labels[int(p)]}"
            for i, p in enumerate(predictions)
        ]
        atomic_write_text(predictions_path, "\n".join(lines) + "\n")
    return {
        "task": spec.name,
        "dataset": spec.dataset_name,
        "split": split,
        "metrics": metrics,
        "model": str(model),
        "eval_samples": len(eval_set),
        "data_source": task_data.source,
        "predictions": str(predictions_path) if predictions_path else None,
        "seconds": time.time() - started,
    }
