"""Scoring a saved sequence classifier on a task's validation file, or writing its predictions for an unlabelled
test file (`sharedbert evaluate`). The results have the shape of fine-tuning's eval_results.json."""

from __future__ import annotations

import time

from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from ..atomic import atomic_write_text
from . import data as data_module
from .models import load_tokenizer
from .trainer import PredictingTrainer, atomic_write_json, output_folder, training_arguments


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
    results_path: str | None = None,
) -> dict:
    """Score `model` (a fine-tuned SharedBert or BERT folder, or Hub id) on `split` of a GLUE task (`task` with
    `data_dir` or `dataset`) or of your own `file`; returns the results (metrics, sizes, sources).

    `split="test"` computes no metrics; `predictions_path` writes one prediction per example (TSV: index, prediction)
    and `results_path` the returned results as JSON, both atomically. Raises DataError/ValueError on bad input."""
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

    with output_folder() as workdir:  # the Trainer needs a folder; nothing is kept
        args = training_arguments(workdir, eval_batch_size=batch_size, evaluations=0)
        trainer = PredictingTrainer(model=classifier, args=args, processing_class=tok,
                                    data_collator=DataCollatorWithPadding(tok))
        output = trainer.predict(eval_set if labelled else eval_set.remove_columns("label"))
    predictions = data_module.predictions_from_logits(spec, output.predictions)
    metrics = data_module.compute_metrics(spec, predictions, eval_set["label"]) if labelled else {}
    if predictions_path:
        lines = ["index\tprediction"] + [
            f"{i}\t{float(p):.3f}" if spec.is_regression else f"{i}\t{model_labels[int(p)]}"
            for i, p in enumerate(predictions)
        ]
        atomic_write_text(predictions_path, "\n".join(lines) + "\n")
    result = {
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
    if results_path:
        atomic_write_json(results_path, result)
    return result


__all__ = ["evaluate"]
