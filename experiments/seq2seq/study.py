"""Sequence-to-sequence study: BERT2BERT against SharedBert2SharedBert and the fully shared SharedBert seq2seq model,
all warm-started from all-MiniLM-L6-v2 (Rothe et al. 2020), on sentence denoising.

The task (BART's text infilling, at the word level): a sentence from ../shared/data/mlm-text with about 30% of its
words removed in spans (Poisson lengths, mean 3), each span replaced by one [MASK]; the model writes the original
sentence. Source and target share all-MiniLM-L6-v2's vocabulary, so three-way embedding tying applies. The sentences
are split once (a fixed seed, independent of the model seed) into training and held-out test sentences.

Variants (one recipe for all; `VARIANTS` defines each, README.md says why each is there):
* ``bert2bert``: transformers' own `EncoderDecoderModel.from_encoder_decoder_pretrained(minilm, minilm)`;
* ``bertshare``: Rothe et al.'s BERTShare / T5's sharing, standard attention throughout: a
  `SharedBertForConditionalGeneration` with `attention_type="standard"` (BERT's weights, copied exactly), every layer
  weight shared between encoder and decoder but cross-attention, the embeddings tied three ways;
* ``shared2shared``, ``shared-all``, ``shared-all-standard-cross``: shared-projection attention converted from the same
  checkpoint and calibrated on 512 training sentences, with shared cross-attention (nothing shared between the
  sides, or everything as in ``bertshare``), and ``shared-all`` with standard cross-attention;
* ``shared2shared-healed``, ``shared-all-healed``: the same two sharing settings from the healed conversion
  (`--healed`, the `sharedbert build-minilm` model) with ``shared_kv`` cross-attention;
  ``shared-all-healed-standard-cross``, ``shared2shared-healed-standard-cross``: the two with standard
  cross-attention (the package's default).

Scores on the held-out sentences: chrF and BLEU (sacrebleu) and exact match, with greedy decoding through
`Seq2SeqTrainer.predict(predict_with_generate=True)`. Both sides are compared after the tokenizer's round trip
(lower-cased, WordPiece-detokenised), so only the model's errors count. Speed is measured separately, side by side in
one process (`--speed`): training tokens/s and generation tokens/s of the models alternating round-robin,
beside the FLOP bound of a decoding step.

    python experiments/seq2seq/study.py --quick                   # tiny budget, a minute (the test runs it)
    python experiments/seq2seq/study.py --threads 1 --healed DIR &  # one process per core: they share out the cells;
    python experiments/seq2seq/study.py --threads 1 --healed DIR    # re-run to resume
    python experiments/seq2seq/study.py --speed --threads 2 --healed DIR   # the side-by-side speed run
    python experiments/seq2seq/study.py --report-only

Every (variant, seed) result is merged into results/recipe-NAME.json (one file per `--recipe`) under a file lock as
it finishes; a process takes a cell by locking its file in results/claims/ (released when the process ends, even
killed), so a re-run skips finished cells and cells another process is training, and refuses to mix in another
recipe. The table is written to results/recipe-NAME.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
FULLY_SHARED = {"share_encoder_decoder_layers": True, "share_encoder_decoder_embeddings": True}
# How each variant starts ("warm_start") and its seq2seq settings. "bert2bert": transformers' EncoderDecoderModel;
# "exact": SharedBert with standard attention, BERT's weights copied; "calibrated": shared attention converted and
# calibrated on the recipe's `calibration_sentences`; "healed": the healed conversion given by --healed. Every
# SharedBert variant names its cross-attention type, so that a change of the package's default changes no arm.
VARIANTS = {
    "bert2bert": {"warm_start": "bert2bert"},
    "bertshare": {"warm_start": "exact", **FULLY_SHARED, "cross_attention_type": "standard"},
    "shared2shared": {"warm_start": "calibrated", "cross_attention_type": "shared"},
    "shared-all": {"warm_start": "calibrated", **FULLY_SHARED, "cross_attention_type": "shared"},
    "shared-all-standard-cross": {"warm_start": "calibrated", **FULLY_SHARED, "cross_attention_type": "standard"},
    "shared2shared-healed": {"warm_start": "healed", "cross_attention_type": "shared_kv"},
    "shared-all-healed": {"warm_start": "healed", **FULLY_SHARED, "cross_attention_type": "shared_kv"},
    # The third study: the healed start with standard cross-attention, against `shared-all-healed`.
    "shared-all-healed-standard-cross": {"warm_start": "healed", **FULLY_SHARED, "cross_attention_type": "standard"},
    # The fourth study: SharedBert2SharedBert with the default cross-attention since the third study.
    "shared2shared-healed-standard-cross": {"warm_start": "healed", "cross_attention_type": "standard"},
}
BASELINE = "bert2bert"


@dataclass(frozen=True)
class Recipe:
    # Cross-attention starts untrained (as in BERT2BERT) and learns to copy from the source only after some hundreds
    # of steps: with 500 steps of 32 at lr 1e-4 every model wrote the same fluent sentence whatever the source
    # (chrF ~10, loss ~5.2). A pilot (SharedBert2SharedBert, batch 16, lr 3e-4) had training loss 5.5 at step 200,
    # 4.8 at 500, 3.4 at 1000, 2.8 at 1500 (chrF 47.7 on 96 test sentences): copying emerges between steps 600 and
    # 1000. Hence one epoch of 1,800 steps of 16.
    train_sentences: int = 28_800  # one epoch of 1,800 steps of 16 (the corpus gives 30,013 usable sentences)
    test_sentences: int = 500
    steps: int = 1_800
    batch_size: int = 16
    learning_rate: float = 3e-4
    warmup: float = 0.05
    max_length: int = 48  # the sentences have 6-30 words
    mask_ratio: float = 0.3
    span_mean: float = 3.0
    precision: str = "auto"  # bf16 autocast where the hardware has native bf16 (sharedbert.precision)
    # Batches of similar length (transformers' LengthGroupedSampler): random batches padded to their longest sentence
    # spent ~1.5x the time per step here (2.5-3.3 s against 0.8-2.0 s at 2 threads, measured side by side).
    sampling: str = "group_by_length"
    # The "calibrated" variants start from the conversion calibrated on this many training sentences (0: none).
    calibration_sentences: int = 512
    # transformers' `lr_scheduler_type` after the warm-up. (Added with the second recipe: results files written
    # before it have no such key, and their recipe decayed linearly.)
    lr_scheduler: str = "linear"


# The recipes, by the name `--recipe` takes; each writes its own results file. "1800" is the first recipe;
# "5400-constant" the longer one, declared in README.md before its first cell ran (three passes over the training
# sentences at a constant learning rate after the warm-up, as in the one pilot that learned to copy).
RECIPES = {"1800": Recipe(), "5400-constant": Recipe(steps=5_400, lr_scheduler="constant_with_warmup")}
QUICK = Recipe(train_sentences=256, test_sentences=16, steps=6, batch_size=8, max_length=32, calibration_sentences=16)


def same_recipe(stored: dict, recipe: Recipe) -> bool:
    """Whether a results file's recipe is `recipe`; keys it lacks were added later and have their defaults."""
    return {**asdict(Recipe()), **stored} == asdict(recipe)


# ---------------------------------------------------------------------------------------------------------- data
def read_sentences(corpus_dir: Path, min_words: int = 6, max_words: int = 30) -> list[str]:
    """Sentences of `min_words`..`max_words` words from every text file under `corpus_dir`, deduplicated, in a
    stable order (files sorted, sentences in file order)."""
    from sharedbert.data import corpus_files, read_text

    seen, sentences = set(), []
    for text in map(read_text, corpus_files([corpus_dir])):
        text = re.sub(r"\s+", " ", text.replace("@-@", "-").replace(" @,@ ", ",").replace(" @.@ ", "."))
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", text):
            sentence = sentence.strip()
            words = sentence.split()
            if min_words <= len(words) <= max_words and sentence not in seen and not sentence.startswith("="):
                seen.add(sentence)
                sentences.append(sentence)
    return sentences


def corrupt(sentence: str, rng: random.Random, mask_ratio: float, span_mean: float, mask: str = "[MASK]") -> str:
    """Remove about `mask_ratio` of the words in spans of Poisson(`span_mean`) length (at least 1), each span
    replaced by one `mask` token (BART's text infilling)."""
    words = sentence.split()
    budget = max(1, round(mask_ratio * len(words)))
    masked = [False] * len(words)
    while budget > 0:
        length = min(budget, max(1, _poisson(rng, span_mean)))
        start = rng.randrange(0, max(1, len(words) - length + 1))
        for i in range(start, min(len(words), start + length)):
            if not masked[i]:
                masked[i] = True
                budget -= 1
    out = []
    for word, hidden in zip(words, masked):
        if not hidden:
            out.append(word)
        elif not out or out[-1] != mask:
            out.append(mask)
    return " ".join(out)


def _poisson(rng: random.Random, mean: float) -> int:
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def make_pairs(sentences: list[str], recipe: Recipe) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train, test) lists of (corrupted, original), split and corrupted with a fixed seed of their own."""
    rng = random.Random(20261123)
    order = sentences[:]
    rng.shuffle(order)
    needed = recipe.test_sentences + recipe.train_sentences
    if len(order) < recipe.test_sentences + 10:
        raise SystemExit(f"The corpus gave {len(order)} usable sentences, too few for {recipe.test_sentences} test "
                         "sentences.")
    test, train = order[: recipe.test_sentences], order[recipe.test_sentences:needed]
    pair = lambda s: (corrupt(s, rng, recipe.mask_ratio, recipe.span_mean), s)  # noqa: E731
    return [pair(s) for s in train], [pair(s) for s in test]


def tokenize_pairs(tokenizer, pairs, max_length):
    from datasets import Dataset

    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    encoded = tokenizer(sources, truncation=True, max_length=max_length)
    # The decoder starts from [CLS] (decoder_start_token_id): labels are the target without it, ending in [SEP].
    labels = [ids[1:] for ids in tokenizer(targets, truncation=True, max_length=max_length)["input_ids"]]
    return Dataset.from_dict({"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"],
                              "labels": labels})


def normalise(tokenizer, texts: list[str]) -> list[str]:
    """What the tokenizer can reproduce of a text (lower case, WordPiece spacing)."""
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]


# -------------------------------------------------------------------------------------------------------- models
def build_model(variant: str, source: str, tokenizer, calibration_texts: list[str] | None = None,
                healed: str | None = None):
    """A warm-started model of `variant` (`VARIANTS`), with generation settings for [CLS]...[SEP]. `source` is the
    BERT; "calibrated" variants are calibrated on `calibration_texts` when given (`sharedbert.conversion.calibration`: closed
    form, no gradient steps); "healed" variants start from the SharedBert checkpoint `healed`."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")
    settings = dict(VARIANTS[variant])
    warm_start = settings.pop("warm_start")
    if warm_start == "bert2bert":
        from transformers import EncoderDecoderModel

        model = EncoderDecoderModel.from_encoder_decoder_pretrained(source, source)
    else:
        from sharedbert.conversion.bert import from_bert, warm_start_seq2seq

        if warm_start == "exact":
            model = warm_start_seq2seq(source, tokenizer, attention_type="standard", **settings)
        elif warm_start == "healed":
            if healed is None:
                raise SystemExit(f"{variant} starts from the healed conversion: pass --healed DIR (the healed model "
                                 "`sharedbert build-minilm` writes, WORK-DIR/healed).")
            model = warm_start_seq2seq(healed, tokenizer, **settings)
        else:
            from transformers import BertModel

            from sharedbert.conversion.calibration import calibrate, calibration_batches

            converted = from_bert(source, attention_type="shared", fit_method="invariant")
            if calibration_texts:
                calibrate(converted, BertModel.from_pretrained(source),
                          calibration_batches(tokenizer, calibration_texts))
            model = warm_start_seq2seq(converted, tokenizer, **settings)
    for config in (model.config, model.generation_config):
        config.decoder_start_token_id = tokenizer.cls_token_id
        config.bos_token_id = tokenizer.cls_token_id
        config.eos_token_id = tokenizer.sep_token_id
        config.pad_token_id = tokenizer.pad_token_id
    return model


def healed_identity(healed: str) -> dict:
    """What names the healed warm start: its folder, the sha256 of its weights, and its build record when present."""
    import hashlib

    folder = Path(healed)
    digest = hashlib.sha256()
    with open(folder / "model.safetensors", "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    # Relative to the repository: committed results hold no machine's absolute paths.
    identity = {"path": os.path.relpath(folder.resolve(), Path(__file__).resolve().parents[2]),
                "sha256": digest.hexdigest()}
    for name in ("sharedbert_provenance.json", "eval_results.json"):  # written beside it by build-minilm
        if (folder / name).is_file():
            identity[name.removesuffix(".json")] = json.loads((folder / name).read_text())
    return identity


def decoder_step_flops(self_attention: str, hidden: int, ffn: int, layers: int, vocab: int, source_len: float,
                       target_len: float) -> float:
    """Multiply-adds of one cached decoding step for one sequence: per layer the self-attention projections (4·d²
    standard Q, K, V, O; 2·d² shared Ws, O), cross-attention's query and output projections (2·d² for every type; its
    keys and values are cached), attention over the cache, the feed-forward (2·d·ffn); then the LM head's transform
    (d²) and vocabulary projection (d·V)."""
    self_projections = (2 if self_attention == "shared" else 4) * hidden * hidden
    cross_projections = 2 * hidden * hidden
    attention = 2 * hidden * (target_len / 2 + source_len)
    per_layer = self_projections + cross_projections + attention + 2 * hidden * ffn
    return layers * per_layer + hidden * hidden + hidden * vocab


# ----------------------------------------------------------------------------------------------------- the study
def run_cell(variant: str, seed: int, recipe: Recipe, source: str, work_dir: Path, threads: int,
             checkpoint_minutes: float | None = 5.0, checkpoint_steps: int | None = None,
             healed: str | None = None) -> dict:
    import sacrebleu
    import torch
    from transformers import AutoTokenizer, DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

    from sharedbert.parameter_counts import count_model_parameters
    from sharedbert.training import resolve_precision
    from sharedbert.training import ResumableTrainer, RunCheckpoints

    class StudyTrainer(ResumableTrainer, Seq2SeqTrainer):
        """Seq2SeqTrainer's generation with the package's resumable checkpoints."""

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(source)
    train_pairs, test_pairs = make_pairs(read_sentences(corpus_dir()), recipe)
    # Generation in batches of similar length wastes less on padding; corpus scores do not depend on the order.
    test_pairs = sorted(test_pairs, key=lambda pair: len(pair[0]))
    train_set = tokenize_pairs(tokenizer, train_pairs, recipe.max_length)
    test_set = tokenize_pairs(tokenizer, test_pairs, recipe.max_length)
    # Calibration reads the clean training sentences (the targets): text of the task, none of the test set.
    model = build_model(variant, source, tokenizer, [target for _, target in train_pairs[: recipe.calibration_sentences]],
                        healed=healed)
    arguments = Seq2SeqTrainingArguments(
        output_dir=str(work_dir / f"{variant}-seed{seed}" / "trainer"), max_steps=recipe.steps,
        per_device_train_batch_size=recipe.batch_size, per_device_eval_batch_size=64,
        learning_rate=recipe.learning_rate, warmup_steps=recipe.warmup, weight_decay=0.01, seed=seed,
        lr_scheduler_type=recipe.lr_scheduler,
        train_sampling_strategy=recipe.sampling,
        bf16=resolve_precision(recipe.precision) == "bf16", use_cpu=True, save_strategy="no", report_to=[],
        logging_steps=max(1, recipe.steps // 10),
        predict_with_generate=True, generation_max_length=recipe.max_length, generation_num_beams=1,
        disable_tqdm=True, dataloader_num_workers=0,
    )
    # Checkpoints every few minutes (the package's pickle-free ones), so a cell killed at the end of a sitting
    # continues where it stopped; the signature refuses a checkpoint of another recipe, variant or seed.
    cell_dir = work_dir / f"{variant}-seed{seed}"
    checkpoints = RunCheckpoints(cell_dir / "model", {"variant": variant, "seed": seed, "recipe": asdict(recipe)},
                                 checkpoint_dir=cell_dir / "checkpoints", every_minutes=checkpoint_minutes,
                                 every_steps=checkpoint_steps)
    trainer = StudyTrainer(model=model, args=arguments, train_dataset=train_set,
                           data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
                           processing_class=tokenizer, callbacks=[checkpoints.callback], **checkpoints.trainer_kwargs())
    resumed = checkpoints.resume_from is not None
    if resumed:
        print(f"{variant}/seed{seed}: resuming from {checkpoints.resume_from}", flush=True)
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(checkpoints.resume_from) if resumed else None)
    train_seconds = time.perf_counter() - started
    checkpoints.raise_if_interrupted()
    tokens = sum(len(row["input_ids"]) + len(row["labels"]) for row in train_set.select(range(
        min(len(train_set), recipe.steps * recipe.batch_size))))
    prediction = trainer.predict(test_set)
    generated = prediction.predictions
    generated = [[int(t) for t in row if t >= 0] for row in generated]
    hypotheses = [text.strip() for text in tokenizer.batch_decode(generated, skip_special_tokens=True)]
    references = normalise(tokenizer, [target for _, target in test_pairs])
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    checkpoints.discard()  # scored: the caller merges the result next
    return {
        "variant": variant, "seed": seed, "parameters": count_model_parameters(model),
        "chrf": sacrebleu.corpus_chrf(hypotheses, [references]).score,
        "bleu": sacrebleu.corpus_bleu(hypotheses, [references]).score,
        "exact_match": 100.0 * sum(h == r for h, r in zip(hypotheses, references)) / len(references),
        "final_train_loss": losses[-1] if losses else None,
        "train_losses": losses,  # one per logging interval (a tenth of the steps)
        # This process's share only when the cell resumed a checkpoint (then no rate is given).
        "train_tokens_per_second_unshared_machine": None if resumed else tokens / train_seconds,
        "train_minutes": train_seconds / 60,
        "resumed": resumed,
        "precision": resolve_precision(recipe.precision),
        "examples": [{"source": s, "reference": r, "output": h}
                     for (s, _), r, h in list(zip(test_pairs, references, hypotheses))[:5]],
        **({"healed_warm_start": healed_identity(healed)} if VARIANTS[variant]["warm_start"] == "healed" else {}),
    }


def corpus_dir() -> Path:
    from sharedbert.training import shared_data_dir

    data = shared_data_dir("mlm-text")
    if data is None:
        raise SystemExit("The raw text (shared/data/mlm-text) was not found beside the repository or here.")
    return data / "mlm-text"


def measure_speed(recipe: Recipe, source: str, threads: int, rounds: int, variants: list[str],
                  healed: str | None = None) -> dict:
    """Training-step and generation tokens/s of `variants` (the first is the baseline), alternating round-robin in
    this process."""
    import torch
    from transformers import AutoTokenizer, DataCollatorForSeq2Seq

    from sharedbert.training import resolve_precision

    bf16 = resolve_precision(recipe.precision) == "bf16"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(source)
    train_pairs, test_pairs = make_pairs(read_sentences(corpus_dir()), Recipe(train_sentences=512, test_sentences=64))
    models = {variant: build_model(variant, source, tokenizer, healed=healed) for variant in variants}
    baseline = variants[0]
    collator = DataCollatorForSeq2Seq(tokenizer, model=models[baseline], label_pad_token_id=-100)
    rows = [dict(row) for row in tokenize_pairs(tokenizer, train_pairs[: recipe.batch_size], recipe.max_length)]
    batch = collator(rows)
    train_tokens = int((batch["attention_mask"].sum() + (batch["labels"] >= 0).sum()))
    sources = tokenizer([s for s, _ in test_pairs], padding=True, truncation=True, max_length=recipe.max_length,
                        return_tensors="pt")
    optimizers = {v: torch.optim.AdamW(m.parameters(), lr=1e-5) for v, m in models.items()}
    times = {v: {"train": [], "generate": []} for v in variants}
    generated_tokens = {}
    for round_index in range(rounds + 1):  # round 0 warms up
        for variant, model in models.items():
            model.train()
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(**batch).loss
            loss.backward()
            optimizers[variant].step()
            optimizers[variant].zero_grad()
            train_time = time.perf_counter() - start
            model.eval()
            start = time.perf_counter()
            with torch.inference_mode():
                output = model.generate(**sources, max_new_tokens=recipe.max_length, num_beams=1,
                                        min_new_tokens=recipe.max_length // 2)
            generate_time = time.perf_counter() - start
            generated_tokens[variant] = int(output.shape[0] * (output.shape[1] - 1))
            if round_index:
                times[variant]["train"].append(train_time)
                times[variant]["generate"].append(generate_time)
    source_len = float(sources["attention_mask"].sum(1).float().mean())
    flops = {}
    for variant, model in models.items():
        config = model.config.decoder if variant == "bert2bert" else model.config
        flops[variant] = decoder_step_flops(getattr(config, "attention_type", "standard"), config.hidden_size,
                                            config.intermediate_size, config.num_hidden_layers, config.vocab_size,
                                            source_len, recipe.max_length)
    from sharedbert.parameter_counts import count_model_parameters

    result = {"threads": threads, "rounds": rounds, "bf16_training": bf16, "batch_size": recipe.batch_size,
              "max_length": recipe.max_length, "variants": {}}
    for variant in variants:
        train_median = statistics.median(times[variant]["train"])
        generate_median = statistics.median(times[variant]["generate"])
        result["variants"][variant] = {
            "parameters": count_model_parameters(models[variant]),
            "train_tokens_per_second": train_tokens / train_median,
            "generation_tokens_per_second": generated_tokens[variant] / generate_median,
            "train_ratio": statistics.median(times[baseline]["train"]) / train_median,
            "generation_ratio": statistics.median(times[baseline]["generate"]) / generate_median,
            "generation_flop_bound": flops[baseline] / flops[variant],
        }
    return result


# --------------------------------------------------------------------------------------------------- bookkeeping
def results_path(output: Path) -> Path:
    return output.with_suffix(".json")


def load_results(output: Path) -> dict:
    path = results_path(output)
    return json.loads(path.read_text()) if path.is_file() else {}


def merge_result(output: Path, recipe: Recipe, key: str, value) -> None:
    from sharedbert.atomic import atomic_write_text, file_lock

    with file_lock(results_path(output).with_suffix(".lock")):
        data = load_results(output)
        if key == "speed":  # recipe-independent but for the batch, which the entry records itself
            data["speed"] = value
            atomic_write_text(results_path(output), json.dumps(data, indent=1) + "\n")
            return
        if data.get("cells") and not same_recipe(data.get("recipe", {}), recipe):
            raise SystemExit(f"{results_path(output)} holds results of another recipe ({data['recipe']}); "
                             "use another --recipe or --output-dir.")
        data["recipe"] = asdict(recipe)
        data.setdefault("cells", {})
        data["cells"][key] = value
        atomic_write_text(results_path(output), json.dumps(data, indent=1) + "\n")


@contextlib.contextmanager
def claim(output: Path, key: str):
    """Yield whether this process holds the cell `key`: a non-blocking flock on a file of its own, so any number of
    processes started with the same arguments share out the cells, and a killed process's cells are free again."""
    from sharedbert.atomic import file_lock

    claims = output.parent / "claims"
    claims.mkdir(exist_ok=True)
    with file_lock(claims / (key.replace("/", "-") + ".lock"), blocking=False) as ours:
        yield ours


def _mean_sd(values) -> str:
    if not values:
        return "–"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}" if len(values) > 1 else f"{values[0]:.1f}"


def paired(cells: dict, variant: str, against: str, metric: str = "chrf") -> tuple[float, float | None, int] | None:
    """Mean and standard error of `variant` − `against` in `metric` over the seeds both have, and their number."""
    base = {c["seed"]: c[metric] for c in cells.values() if c["variant"] == against}
    diffs = [c[metric] - base[c["seed"]] for c in cells.values() if c["variant"] == variant and c["seed"] in base]
    if not diffs:
        return None
    error = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else None
    return statistics.mean(diffs), error, len(diffs)


def warm_start_lines(cells: dict) -> list[str]:
    """Which healed warm start each `-healed` cell trained from: a rebuilt warm start follows the same recipe but is
    not the same weights, so the report names every one by its sha256, STS-B and healing steps."""
    starts: dict[str, dict] = {}
    for key, cell in sorted(cells.items()):
        identity = cell.get("healed_warm_start")
        if identity:
            start = starts.setdefault(identity["sha256"], {"identity": identity, "cells": []})
            start["cells"].append(key)
    if not starts:
        return []
    lines = ["", "Healed warm starts (the sha256 of the weights each cell started from):", ""]
    for sha, start in starts.items():
        identity = start["identity"]
        provenance = identity.get("sharedbert_provenance", {})
        stsb = next((r["metrics"].get("spearmanr") for r in identity.get("eval_results", [])
                     if r.get("task") == "STS-B"), None)
        described = [f"`{sha[:8]}…`", f"STS-B {stsb:.4f}" if stsb is not None else "STS-B not recorded"]
        if "healing steps" in provenance:
            described.append(f"{provenance['healing steps']:,} healing steps")
        lines.append(f"- {', '.join(described)}: {', '.join(start['cells'])}")
    return lines


def report(output: Path) -> str:
    data = load_results(output)
    cells = data.get("cells", {})
    lines = ["# Sequence-to-sequence study: sentence denoising, warm-started from all-MiniLM-L6-v2", ""]
    if "recipe" in data:
        lines += [f"Recipe: {data['recipe']}", ""]
    # The last logged training loss says whether a model learned to copy from its source: source-blind models
    # plateau near 5 (they write fluent text unrelated to the source), copying ones fall to about 2.
    lines += ["| variant | warm start | cross-attention | parameters | × BERT2BERT | chrF | BLEU | exact match | "
              "final training loss | seeds |", "|---|---|---|---|---|---|---|---|---|---|"]
    by_variant = {v: sorted((c for c in cells.values() if c["variant"] == v), key=lambda c: c["seed"])
                  for v in VARIANTS}
    base_params = by_variant[BASELINE][0]["parameters"] if by_variant[BASELINE] else None
    for variant, rows in by_variant.items():
        if not rows:
            continue
        params = rows[0]["parameters"]
        lines.append(
            f"| {variant} | {VARIANTS[variant]['warm_start']} | {VARIANTS[variant].get('cross_attention_type', '–')} "
            f"| {params:,} | {params / base_params:.3f} |" if base_params else f"| {variant} | {params:,} | – |")
        lines[-1] += (f" {_mean_sd([r['chrf'] for r in rows])} | {_mean_sd([r['bleu'] for r in rows])} | "
                      f"{_mean_sd([r['exact_match'] for r in rows])} | "
                      f"{_mean_sd([r['final_train_loss'] for r in rows if r.get('final_train_loss') is not None])} | "
                      f"{', '.join(str(r['seed']) for r in rows)} |")
    for against in (BASELINE, "bertshare"):
        differences = [(v, paired(cells, v, against)) for v in VARIANTS if v != against]
        differences = [(v, d) for v, d in differences if d is not None]
        if differences:
            lines += ["", f"Paired chrF differences against {against} (same seeds; mean ± standard error):"]
            for variant, (mean, error, n) in differences:
                spread = f" ± {error:.2f}" if error is not None else " (one seed: no spread yet)"
                lines.append(f"- {variant}: {mean:+.2f}{spread} (n={n})")
    lines += warm_start_lines(cells)
    speed = data.get("speed")
    if speed:
        lines += ["", f"Speed, side by side in one process ({speed['threads']} threads, {speed['rounds']} rounds, "
                      f"training batches of {speed.get('batch_size', 32)} in "
                      f"{'bf16 autocast' if speed['bf16_training'] else 'fp32'}):", "",
                  "| variant | training tokens/s | × first | generation tokens/s | × first | FLOP bound | "
                  "share of bound |", "|---|---|---|---|---|---|---|"]
        for variant, row in speed["variants"].items():
            lines.append(f"| {variant} | {row['train_tokens_per_second']:,.0f} | {row['train_ratio']:.3f} | "
                         f"{row['generation_tokens_per_second']:,.0f} | {row['generation_ratio']:.3f} | "
                         f"{row['generation_flop_bound']:.3f} | "
                         f"{100 * row['generation_ratio'] / row['generation_flop_bound']:.0f}% |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--recipe", choices=list(RECIPES), default="1800")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="the BERT both sides start from")
    parser.add_argument("--healed", help="the healed SharedBert the 'healed' variants start from")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work-dir", type=Path, default=Path("runs/seq2seq"))
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for the test); results go to --output-dir")
    parser.add_argument("--speed", action="store_true",
                        help="measure speed side by side instead of the study (the first variant is the baseline)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the speed measurement")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--checkpoint-minutes", type=float, default=5.0,
                        help="save a resumable checkpoint of the cell in training this often (work dir)")
    parser.add_argument("--checkpoint-steps", type=int, default=None, help="also every N steps")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import sharedbert  # noqa: F401  (registers the Auto classes)
    from sharedbert.training import resolve_source

    recipe = QUICK if args.quick else RECIPES[args.recipe]
    output = args.output_dir / ("recipe-quick" if args.quick else f"recipe-{args.recipe}")
    work_dir = args.work_dir / output.name
    source = resolve_source(args.model)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    if args.speed:
        merge_result(output, recipe, "speed",
                     measure_speed(recipe, source, args.threads, args.rounds, args.variants, args.healed))
    elif not args.report_only:
        existing = load_results(output)
        if existing.get("cells") and not same_recipe(existing.get("recipe", {}), recipe):  # refuse now, not later
            raise SystemExit(f"{results_path(output)} holds results of another recipe ({existing['recipe']}).")
        for seed in args.seeds:
            for variant in args.variants:
                key = f"{variant}/seed{seed}"
                with claim(output, key) as mine:
                    if not mine:
                        print(f"{key}: being trained by another process, skipped", flush=True)
                        continue
                    if key in load_results(output).get("cells", {}):
                        print(f"{key}: done, skipped")
                        continue
                    print(f"{key}: training", flush=True)
                    cell = run_cell(variant, seed, recipe, source, work_dir, args.threads,
                                    args.checkpoint_minutes, args.checkpoint_steps, healed=args.healed)
                    merge_result(output, recipe, key, cell)
                    print(f"{key}: chrF {cell['chrf']:.1f}, exact match {cell['exact_match']:.1f}%", flush=True)
    from sharedbert.atomic import atomic_write_text

    text = report(output)
    atomic_write_text(output.with_suffix(".md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
