"""Pretraining throughput: the package's `pretrain` against a plain transformers `BertForMaskedLM` + `Trainer` loop of
identical dimensions, and the share of each speed lever, measured side by side in one process.

    python benchmarks/pretrain_bench.py            # the replication study's size (about 8 minutes on 2 busy cores)
    python benchmarks/pretrain_bench.py --quick    # tiny dims, a smoke run (under a minute)

Size: the replication study's model (experiments/replication/replicate.py): 4 layers, hidden 128, 4 heads, FFN 512,
sequence 128, a WordPiece vocabulary of 8,192 entries trained on the study's corpus (../shared/data/mlm-text), batch 32,
AdamW.

Runs, each a real training run of `--steps` optimizer steps on the same packed blocks of a sample of that corpus
(every `--sample-every`-th line, so lines are as long as the study's):

* `baseline`: transformers' `BertForMaskedLM` (SDPA, tied embeddings, fp32, logits at every position) trained by a
  plain `Trainer` with `DataCollatorForLanguageModeling`: no tricks;
* `standard-dense-fp32`: the package's `sharedbert.training.pretrain` with standard attention (BERT's Wq, Wk, Wv), as
  before the levers: `dense_prediction=True`, `precision="fp32"`;
* `standard-sparse-fp32`: + sparse prediction (vocabulary logits only at the ~15% masked positions);
* `standard-sparse-bf16`: + bf16 autocast. Where the CPU has no native bf16 (no avx512_bf16 / amx_bf16) it is
  emulated and many times slower; it is still measured, with `--bf16-steps` and `--bf16-rounds` (fewer), to show it;
* `standard-sparse-lines`: sparse, fp32, but line by line (one line per example, padded to the batch's longest)
  instead of packed blocks: what packing saves, in real (non-padding) tokens/s;
* `shared-sparse-fp32`: the paper's shared attention with the levers (the study's other arm).

The package's default is `precision="auto"`, which is bf16 exactly where it is native: the headline "package
default" is standard-sparse-bf16 on such a machine and standard-sparse-fp32 elsewhere.

Method: after a warm-up, rounds alternate over the runs (the starting run rotating every round), so background load
drifts over all alike. A run's throughput is its steady state: real tokens per step over the median time between
optimizer steps (`StepTimer`; start-up and the first step excluded; the mean for line-by-line batches, which differ in
length). Figures are medians over rounds, and ratios are ratios of medians. A lever's share is its ratio as a
fraction of the total gain on a log scale (the shares of levers that multiply add up to 1).

Writes `benchmarks/results/pretrain_bench.json` (`--out` changes the prefix) and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent

FULL = dict(model=dict(num_hidden_layers=4, hidden_size=128, num_attention_heads=4, intermediate_size=512),
            block_size=128, vocab_size=8192, batch_size=32, steps=6, rounds=3, bf16_steps=3, bf16_rounds=1,
            sample_every=10)
QUICK = dict(model=dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64),
             block_size=32, vocab_size=400, batch_size=8, steps=4, rounds=2, bf16_steps=3, bf16_rounds=1,
             sample_every=1, corpus="gutenberg-nltk/blake-poems.txt")

# name -> what the run is (the package's runs are `pretrain` keyword arguments)
RUNS: dict[str, dict] = {
    "baseline": dict(label="transformers BertForMaskedLM + Trainer (fp32, dense)"),
    "standard-dense-fp32": dict(label="sharedbert pretrain, standard attention, fp32, dense",
                                pretrain=dict(attention_type="standard", precision="fp32", dense_prediction=True)),
    "standard-sparse-fp32": dict(label="  + sparse prediction",
                                 pretrain=dict(attention_type="standard", precision="fp32")),
    "standard-sparse-bf16": dict(label="  + bf16 autocast", pretrain=dict(attention_type="standard", precision="bf16")),
    "standard-sparse-lines": dict(label="  sparse, fp32, line by line (no packing)",
                                  pretrain=dict(attention_type="standard", precision="fp32", line_by_line=True)),
    "shared-sparse-fp32": dict(label="sharedbert pretrain, shared attention, fp32, sparse",
                               pretrain=dict(attention_type="shared", precision="fp32")),
}
# lever -> (without, with): its ratio is tokens/s with over without
LEVERS = {
    "package overhead (same model, no levers)": ("baseline", "standard-dense-fp32"),
    "sparse prediction": ("standard-dense-fp32", "standard-sparse-fp32"),
    "bf16 autocast": ("standard-sparse-fp32", "standard-sparse-bf16"),
    "packing (vs line by line, real tokens)": ("standard-sparse-lines", "standard-sparse-fp32"),
    "shared attention (vs standard)": ("standard-sparse-fp32", "shared-sparse-fp32"),
}


# ----------------------------------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------------------------------


def corpus_sample(data_dir: Path, recipe: dict, folder: Path) -> tuple[Path, Path]:
    """The study's vocabulary (trained on the whole corpus) and a text file of every `sample_every`-th line of it."""
    from sharedbert import data
    from sharedbert.training import train_wordpiece

    text = data_dir / "mlm-text"
    source = [str(text / recipe["corpus"])] if recipe.get("corpus") else [str(text)]
    units = data.corpus_units(data.corpus_files(source), encoding="cp1252")  # mlm-text's two Latin-1 books, as before
    tokenizer = train_wordpiece(units["text"], vocab_size=recipe["vocab_size"], model_max_length=recipe["block_size"])
    tokenizer.save_pretrained(str(folder / "tokenizer"))
    sample = folder / "sample.txt"
    sample.write_text("\n".join(units["text"][:: recipe["sample_every"]]) + "\n", encoding="utf-8")
    return sample, folder / "tokenizer"


# ----------------------------------------------------------------------------------------------------------------------
# The runs
# ----------------------------------------------------------------------------------------------------------------------


def run_baseline(recipe: dict, sample: Path, tokenizer_dir: Path, steps: int, folder: Path) -> dict:
    """A plain transformers loop: BertForMaskedLM trained by Trainer on the same packed blocks."""
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForMaskedLM,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainingArguments,
        set_seed,
    )

    from sharedbert import data
    from sharedbert.training import StepTimer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    blocks = data.mlm_dataset(data.corpus_units([sample]), tokenizer, block_size=recipe["block_size"])
    set_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                       max_position_embeddings=512, **recipe["model"]))
    args = TrainingArguments(output_dir=str(folder / "baseline"), per_device_train_batch_size=recipe["batch_size"],
                             max_steps=steps, learning_rate=1e-3, warmup_steps=0.1, weight_decay=0.01,
                             save_strategy="no", logging_steps=steps, report_to="none", disable_tqdm=True,
                             use_cpu=True, dataloader_num_workers=0, seed=0)
    timer = StepTimer()
    Trainer(model=model, args=args, train_dataset=blocks, data_collator=DataCollatorForLanguageModeling(tokenizer),
            callbacks=[timer]).train()
    tokens_per_step = recipe["batch_size"] * recipe["block_size"]
    return {"tokens_per_second": tokens_per_step / timer.summary()["median"], "step_seconds": timer.summary()}


def run_package(recipe: dict, sample: Path, tokenizer_dir: Path, steps: int, folder: Path, options: dict) -> dict:
    """`sharedbert.training.pretrain`, as `sharedbert pretrain` runs it."""
    from sharedbert.training import pretrain

    config = folder / "config.json"
    if not config.is_file():
        config.write_text(json.dumps(recipe["model"]))
    result = pretrain(corpus=[str(sample)], config=str(config), tokenizer=str(tokenizer_dir),
                      block_size=recipe["block_size"], batch_size=recipe["batch_size"], max_steps=steps,
                      learning_rate=1e-3, eval_fraction=0.0, seed=0, logging_steps=steps, output_dir=folder / "package",
                      overwrite=True, checkpoint_minutes=None, checkpoint_dir=folder / "package-checkpoints", **options)
    return {key: result[key] for key in ("tokens_per_second", "step_seconds", "tokens_per_step", "precision",
                                         "sparse_prediction", "parameters")}


def run_once(name: str, recipe: dict, sample: Path, tokenizer_dir: Path, steps: int, folder: Path) -> dict:
    # The runs' own logs and progress bars would bury the table (an error still propagates).
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if name == "baseline":
            return run_baseline(recipe, sample, tokenizer_dir, steps, folder)
        return run_package(recipe, sample, tokenizer_dir, steps, folder, RUNS[name]["pretrain"])


# ----------------------------------------------------------------------------------------------------------------------
# Measurement and report
# ----------------------------------------------------------------------------------------------------------------------


def measure(recipe: dict, names: list[str], sample: Path, tokenizer_dir: Path, native: bool, log=print) -> dict:
    """Rounds alternating over `names`; per run the list of its per-round results."""
    samples: dict[str, list[dict]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="pretrain-bench-") as scratch:
        folder = Path(scratch)
        log("warm-up ...")
        run_once("baseline", recipe, sample, tokenizer_dir, 3, folder)
        run_once("standard-sparse-fp32", recipe, sample, tokenizer_dir, 3, folder)
        for round_ in range(recipe["rounds"]):
            order = names[round_ % len(names):] + names[: round_ % len(names)]
            for name in order:
                emulated_bf16 = name.endswith("bf16") and not native
                if emulated_bf16 and round_ >= recipe["bf16_rounds"]:
                    continue
                steps = recipe["bf16_steps"] if emulated_bf16 else recipe["steps"]
                started = time.time()
                result = run_once(name, recipe, sample, tokenizer_dir, steps, folder)
                result["round"], result["wall_seconds"] = round_, time.time() - started
                samples[name].append(result)
                log(f"round {round_ + 1}/{recipe['rounds']} {name:24s} {result['tokens_per_second']:9,.0f} tokens/s "
                    f"({steps} steps, {result['wall_seconds']:.0f} s)")
    return samples


def summarise(samples: dict[str, list[dict]], native: bool) -> dict:
    rows = {}
    for name, results in samples.items():
        if not results:
            continue
        speeds = [r["tokens_per_second"] for r in results]
        rows[name] = {"label": RUNS[name]["label"], "tokens_per_second": statistics.median(speeds),
                      "per_round": speeds, "rounds": len(speeds),
                      "median_step_seconds": statistics.median(r["step_seconds"]["median"] for r in results)}
        if "tokens_per_step" in results[0]:
            rows[name]["tokens_per_step"] = results[0]["tokens_per_step"]
    base = rows["baseline"]["tokens_per_second"]
    for row in rows.values():
        row["vs_baseline"] = row["tokens_per_second"] / base
    default = "standard-sparse-bf16" if native else "standard-sparse-fp32"
    total = rows[default]["vs_baseline"] if default in rows else None
    levers = {}
    for lever, (without, with_) in LEVERS.items():
        if without in rows and with_ in rows:
            ratio = rows[with_]["tokens_per_second"] / rows[without]["tokens_per_second"]
            counted = lever.startswith(("package", "sparse")) or (lever.startswith("bf16") and native)
            levers[lever] = {"ratio": ratio, "in_default": counted,
                             "share_of_gain": (math.log(ratio) / math.log(total)
                                               if counted and total and abs(math.log(total)) > 1e-9 else None)}
    return {"rows": rows, "levers": levers, "package_default": default, "package_default_vs_baseline": total}


def render(summary: dict, meta: dict) -> str:
    lines = [f"Pretraining throughput, {meta['dims']} ({meta['threads']} threads, {meta['cpu']}; native bf16: "
             f"{'yes' if meta['native_bf16'] else 'no, bf16 is emulated here'})", "",
             f"{'run':58s} {'tokens/s':>10s} {'vs baseline':>12s} {'rounds':>7s}", "-" * 90]
    for name, row in summary["rows"].items():
        lines.append(f"{row['label']:58s} {row['tokens_per_second']:10,.0f} {row['vs_baseline']:11.2f}x "
                     f"{row['rounds']:7d}")
    lines += ["", f"{'lever':46s} {'ratio':>7s}  share of the package default's gain", "-" * 90]
    for lever, entry in summary["levers"].items():
        share = f"{entry['share_of_gain']:.0%}" if entry["share_of_gain"] is not None else "–"
        if lever.startswith("bf16") and not meta["native_bf16"]:
            share = "not native here: auto uses fp32"
        elif lever.startswith("packing"):
            share = "none: the baseline packs too (as run_mlm.py's group_texts)"
        elif lever.startswith("shared"):
            share = "none: the architecture under study, not a lever"
        lines.append(f"{lever:46s} {entry['ratio']:6.2f}x  {share}")
    total = summary["package_default_vs_baseline"]
    if total is not None:
        lines += ["", f"package default ({summary['package_default']}) vs the plain transformers loop: {total:.2f}x"]
    return "\n".join(lines)


@contextlib.contextmanager
def quiet_process(threads: int):
    """torch's threads, transformers' verbosity and datasets' progress bars set for the run and put back after it, so
    that `main` called in a process that goes on (as the test calls it) leaves that process as it found it."""
    import transformers

    from sharedbert.threads import torch_threads

    verbosity_before = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        import datasets
    except ImportError:
        datasets = None
    bars_before = datasets is not None and datasets.is_progress_bar_enabled()
    if datasets is not None:
        datasets.disable_progress_bars()
    try:
        with torch_threads(threads):
            yield
    finally:
        transformers.logging.set_verbosity(verbosity_before)
        if bars_before:
            datasets.enable_progress_bars()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/pretrain_bench.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Tiny dims and few steps (a smoke run).")
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS),
                        help="Which runs (baseline is always included).")
    parser.add_argument("--rounds", type=int, help="Alternating rounds (default 3; --quick 2).")
    parser.add_argument("--steps", type=int, help="Optimizer steps per run and round (default 6).")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2).")
    parser.add_argument("--data-dir", help="Holds mlm-text/ (default: the shared data folder).")
    parser.add_argument("--out", default=str(BENCHMARKS / "results" / "pretrain_bench"),
                        help="Output prefix (default benchmarks/results/pretrain_bench).")
    parser.add_argument("--silent", action="store_true", help="Print only the table.")
    args = parser.parse_args(argv)

    import torch
    import transformers

    from sharedbert.atomic import atomic_write_text
    from sharedbert.precision import cpu_name
    from sharedbert import data
    from sharedbert.training import native_bf16

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TQDM_DISABLE", "1")
    for name, value in (("--rounds", args.rounds), ("--steps", args.steps), ("--threads", args.threads)):
        if value is not None and value < (3 if name == "--steps" else 1):
            print(f"pretrain_bench.py: error: {name} must be at least {3 if name == '--steps' else 1}, got {value}.",
                  file=sys.stderr)
            return 2
    data_dir = Path(args.data_dir) if args.data_dir else data.shared_data_dir()
    if data_dir is None or not (data_dir / "mlm-text").is_dir():
        print("pretrain_bench.py: error: no mlm-text/ corpus found; pass --data-dir, the folder holding mlm-text/.",
              file=sys.stderr)
        return 2
    recipe = dict(QUICK if args.quick else FULL)
    recipe.update({key: value for key, value in (("rounds", args.rounds), ("steps", args.steps)) if value})
    with quiet_process(args.threads):
        log = (lambda *a, **k: None) if args.silent else (lambda *a, **k: print(*a, **k, flush=True))
        native = native_bf16()
        names = ["baseline"] + [name for name in RUNS if name in args.runs and name != "baseline"]

        started = time.time()
        with tempfile.TemporaryDirectory(prefix="pretrain-bench-inputs-") as inputs:
            log("training the vocabulary and sampling the corpus ...")
            sample, tokenizer_dir = corpus_sample(data_dir, recipe, Path(inputs))
            samples = measure(recipe, names, sample, tokenizer_dir, native, log)
        summary = summarise(samples, native)
        m = recipe["model"]
        meta = {
            "command": "python benchmarks/pretrain_bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "dims": f"{m['num_hidden_layers']} layers, hidden {m['hidden_size']}, FFN {m['intermediate_size']}, "
                    f"sequence {recipe['block_size']}, vocabulary {recipe['vocab_size']:,}, "
                    f"batch {recipe['batch_size']}",
            "recipe": recipe,
            "threads": args.threads,
            "cpu": platform.processor() or platform.machine(),
            "native_bf16": native,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "load_average": os.getloadavg(),
            "seconds": time.time() - started,
        }
        if cpu := cpu_name():
            meta["cpu"] = cpu
        table = render(summary, meta)
        out = Path(args.out)
        atomic_write_text(out.with_suffix(".json"), json.dumps({"meta": meta, **summary, "samples": samples}, indent=2,
                                                               default=float) + "\n")
        print(table)
        print(f"\n{meta['seconds']:.0f} s; saved {out.with_suffix('.json')}")
        return 0


__all__ = ["FULL", "LEVERS", "QUICK", "RUNS", "main", "render", "summarise"]


if __name__ == "__main__":
    sys.exit(main())
