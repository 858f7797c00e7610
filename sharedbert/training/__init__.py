"""Training SharedBert: the jobs behind `sharedbert pretrain`, `finetune`, `evaluate`, `convert` and `demo`, as
functions, and the pieces they are built from.

    from sharedbert.training import pretrain, finetune, evaluate

    pretrain(corpus=["../shared/data/mlm-text"], config="bert-mini", output_dir="runs/mlm", max_steps=200)
    finetune(task="sst2", model="runs/mlm", output_dir="runs/sst2")
    evaluate(model="runs/sst2", task="sst2")

One module per job:

* `pretraining.pretrain`: masked-LM pretraining from raw text;
* `finetuning.finetune`: a sequence classifier on a GLUE task or your own files;
* `evaluation.evaluate`: scores or predictions of a saved classifier;
* `conversion.convert_checkpoint`: a BERT checkpoint converted (and healed) into a saved SharedBert folder;
* `healing.heal`: a converted SharedBert healed by distillation from the BERT it came from (`HealConfig`);
* `checkpoint_build.build_minilm_checkpoint`: the Hub-ready sharedbert-all-MiniLM-L6-v2 folder (convert, heal,
  measure, stage), `sharedbert build-minilm`;
* `demo.run_demo`: a healed conversion fine-tuned and compared with BERT, and Hub staging, in a few minutes;
* `trainer`: the `Trainer` set-up (`training_arguments`, `KeepBestCallback`, `ResumableTrainer`);
* `checkpointing`: the one checkpoint module (weights, optimizer, scheduler, RNG and progress as safetensors + JSON,
  for Trainer runs and healing alike; `RunCheckpoints`), and Ctrl-C as "save and stop" (`sigint_stops`,
  `TrainingInterrupted`);
* `models`: the base model (the installed all-MiniLM-L6-v2) and loading classifiers and tokenizers;
* `data`: GLUE / CSV / JSON tasks checked before training, metrics, and raw text for MLM (`corpus_files`,
  `shared_data_dir`);
* `vocab`: a new WordPiece vocabulary (named model sizes are `sharedbert.presets`);
* `precision`: bf16 autocast where the hardware computes bf16 natively, fp32 elsewhere (`resolve_precision`).

Names are imported on first use, so `import sharedbert.training` (or `sharedbert.training.healing`, which uses
`checkpointing` and `data`) does not load `transformers.Trainer` and its training dependencies.
"""

from __future__ import annotations

import importlib

# public name -> the module of this package that defines it
_EXPORTS = {
    "pretrain": "pretraining",
    "finetune": "finetuning",
    "evaluate": "evaluation",
    "convert_checkpoint": "conversion",
    "build_minilm_checkpoint": "checkpoint_build",
    "run_demo": "demo",
    "heal": "healing",
    "HealConfig": "healing",
    "TextInMemory": "healing",
    "BatchSeededCollator": "trainer",
    "CheckpointCallback": "checkpointing",
    "EpochSeededSampler": "trainer",
    "KeepBestCallback": "trainer",
    "ResumableTrainer": "trainer",
    "RunCheckpoints": "checkpointing",
    "StepTimer": "trainer",
    "checkpoint_precision": "checkpointing",
    "TrainingInterrupted": "checkpointing",
    "atomic_write_json": "trainer",
    "check_output_dir": "trainer",
    "is_main_process": "checkpointing",
    "latest_checkpoint": "checkpointing",
    "output_folder": "trainer",
    "save_model": "trainer",
    "training_arguments": "trainer",
    "sigint_stops": "checkpointing",
    "HUB_BASE_MODEL": "models",
    "default_base_model": "models",
    "load_classifier": "models",
    "load_tokenizer": "models",
    "resolve_source": "models",
    "DataError": "data",
    "corpus_files": "data",
    "find_glue_dir": "data",
    "load_task": "data",
    "shared_data_dir": "data",
    "train_wordpiece": "vocab",
    "describe_precision": "precision",
    "native_bf16": "precision",
    "resolve_precision": "precision",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
