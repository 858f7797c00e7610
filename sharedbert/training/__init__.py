"""Training SharedBert: the jobs behind `sharedbert pretrain`, `finetune` and `evaluate`, and healing, as functions,
and the pieces they are built from. The recipes that combine them with conversion and publishing (`sharedbert
convert`, `build-minilm`, `demo`) are `sharedbert.recipes`; `sharedbert generate` is `sharedbert.generation`.

    from sharedbert.training import FinetuneArguments, evaluate, finetune, pretrain

    pretrain(corpus=["../shared/data/mlm-text"], encoding="cp1252", config="bert-mini", output_dir="runs/mlm",
             max_steps=200)
    finetune(FinetuneArguments(task="sst2", model="runs/mlm", output_dir="runs/sst2"))
    evaluate(model="runs/sst2", task="sst2")

Each job takes one arguments dataclass, as `TrainingArguments` does (or its fields as keywords), which holds every
option, its default and its help; the command line makes its flags from it:

* `pretraining.pretrain` (`PretrainArguments`): masked-LM pretraining from raw text;
* `finetuning.finetune` (`FinetuneArguments`): a sequence classifier on a GLUE task or your own files, or with
  `Seq2SeqFinetuneArguments` (`seq2seq_finetuning`) a seq2seq model on source/target pairs;
* `evaluation.evaluate` (`EvaluateArguments`): scores or predictions of a saved classifier;
* `healing.heal` (`healing_arguments.HealConfig`, whose defaults are the published recipe): a converted SharedBert
  healed by distillation from the BERT it came from;

The pieces:

* `arguments`: the parts every training job's arguments are built from, on transformers' `TrainingArguments`
  (`JobTrainingArguments`, with the package's defaults and checkpoint options);
* `trainer`: the `Trainer` set-up (`training_arguments`, `KeepBestCallback`, `ResumableTrainer`);
* `distillation`: distillation in `Trainer.compute_loss` (`DistillationTrainer`), with fine-tuning's logit term and
  healing's `Distiller`;
* `checkpointing`: where a Trainer run's checkpoints go and which one it resumes (`RunCheckpoints`; Trainer's own
  checkpoint files, for every job and healing alike), and Ctrl-C as "save and stop" (`sigint_stops`,
  `TrainingInterrupted`);
* `models`: the base model (the installed all-MiniLM-L6-v2) and loading classifiers, BERT encoders and tokenizers;
* `data`: GLUE / CSV / JSON tasks checked before training, metrics, and raw text (`corpus_files`, `shared_data_dir`);
* `vocab`: a new WordPiece vocabulary (named model sizes are `sharedbert.model_sizes`);
* re-exported from `sharedbert.precision` (below the jobs, as export uses it too): bf16 autocast where the hardware
  computes bf16 natively, fp32 elsewhere (`resolve_precision`).

The library logs (`logging.getLogger("sharedbert")`); the command line shows the log. Names are imported on first
use, so `import sharedbert.training` does not load `transformers.Trainer` and its training dependencies.
"""

from __future__ import annotations

from ..lazy_exports import lazy_exports

# public name -> the module of this package that defines it
_EXPORTS = {
    "pretrain": "pretraining",
    "PretrainArguments": "pretraining",
    "finetune": "finetuning",
    "FinetuneArguments": "finetuning",
    "Seq2SeqFinetuneArguments": "seq2seq_finetuning",
    "JobTrainingArguments": "arguments",
    "evaluate": "evaluation",
    "EvaluateArguments": "evaluation",
    "heal": "healing",
    "HealConfig": "healing_arguments",
    "TextInMemory": "..data",
    "BatchSeededCollator": "trainer",
    "DistillationTrainer": "distillation",
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
    "DataError": "..data",
    "corpus_files": "..data",
    "find_glue_dir": "..data",
    "load_task": "..data",
    "shared_data_dir": "..data",
    "train_wordpiece": "vocab",
    "describe_precision": "..precision",
    "native_bf16": "..precision",
    "resolve_precision": "..precision",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
