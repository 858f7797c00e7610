"""Replicate the paper's comparison at small scale: standard vs shared vs symmetric vs pairwise attention, plus
shared attention with all layers shared (ALBERT) and with attention-only sharing.

Every variant gets the same dimensions, vocabulary, token budget and recipe. For each (variant, seed) the study runs,
with the library's functions (`sharedbert.training.pretrain`, `finetune`, `evaluate`):

1. `pretrain`: masked-LM pretraining on the raw text corpus (loss curve, tokens/s, held-out MLM loss);
2. `finetune` on SST-2, MRPC, RTE, CoLA and STS-B with one fixed recipe, scored on GLUE dev;
3. robustness: the fine-tuned SST-2 model is scored with `evaluate` on SST-2 dev and on a copy of it with seeded
   character-level typos (the same noisy copy for every variant); the accuracy drop is recorded.

Resumable: each (variant, seed, stage) result is written atomically into the results JSON the moment it finishes, and
a re-run skips every finished cell (models live in --work-dir; results refuse to mix with a different recipe).
`--quick` shrinks everything (tiny model, one small text file, a few steps, a few examples) to run in minutes for CI.

Usage (from the repository root):

    python experiments/replication/replicate.py --quick          # minutes; tiny sizes (CI)
    python experiments/replication/replicate.py                  # the full study (hours); re-run to resume
    python experiments/replication/replicate.py --report-only    # rewrite replication.md / .png from the JSON

Vocabulary: one WordPiece vocabulary is trained on the pretraining corpus once per study (8,192 entries by default)
and shared by every cell. With bert-base-uncased's 30,522 entries the embedding matrix would hold ~7.8M of a bert-mini's
~11M parameters and the MLM softmax would dominate the step time, drowning the attention differences under study; a
corpus vocabulary also gives every entry a chance to be trained within the small token budget.

Outputs (under --output-dir, default results/ beside this script): replication.json (settings + every finished cell +
aggregates), replication.md (mean ± standard error per task over the finished seeds, GLUE-style average, parameters,
tokens/s, final MLM loss and its distance to a unigram model, pretraining precision, the published figures beside,
and verdicts on the claims computed from the numbers) and
replication_mlm_loss.png, replication_score_vs_params.png.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

from sharedbert import SharedBertConfig
from sharedbert.atomic import atomic_directory, atomic_write_bytes, atomic_write_text, file_lock
from sharedbert import data as data_module
from sharedbert.training import evaluate, finetune, pretrain, train_wordpiece

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]

# name -> pretraining overrides. "shared" is the paper's attention with no cross-layer sharing.
VARIANTS: dict[str, dict] = {
    "standard": {"attention_type": "standard"},
    "shared": {"attention_type": "shared"},
    "symmetric": {"attention_type": "symmetric"},
    "pairwise": {"attention_type": "pairwise"},
    "shared-all-layers": {"attention_type": "shared", "layer_sharing": "all"},
    "shared-attention-layers": {"attention_type": "shared", "layer_sharing": "attention"},
}
TASKS = ("sst2", "mrpc", "rte", "cola", "stsb")
TASK_LABELS = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "cola": "CoLA", "stsb": "STS-B"}

# Published figures (GLUE dev/test averages over their full task sets, at BERT-base scale; only the differences and
# orderings are comparable with a 5-task run at this scale).
PAPER_SHARED_GAIN = {"standard": 0.38, "symmetric": 5.81, "pairwise": 1.06}  # arXiv 2412.00359, GLUE avg points
PAPER_SPEEDUP = (0.15, 0.20)  # arXiv 2412.00359: 15-20% faster training than standard
COURTOIS_GLUE = {"standard": 78.74, "symmetric": 74.82, "pairwise": 79.36}  # Courtois et al. 2024, GLUE dev average

# The study's recipe: full and --quick. Everything that changes results is in here (and hashed into the JSON).
# Sized so the 18 (variant, seed) cells fit a few hours on 2 cores (one study process per core): hidden 128 rather
# than 256 halves the step time, which buys more pretraining tokens (400 steps of 32 x 128 = 1.6M per model) and a
# fine-tuning recipe long enough to move every variant off the majority class (why: README.md beside this script).
FULL = dict(
    model=dict(num_hidden_layers=4, hidden_size=128, num_attention_heads=4, intermediate_size=512),
    block_size=128,
    vocab_size=8192,
    corpus=None,  # None: the whole mlm-text folder
    # The speed levers (docs/pretraining-speed.md): logits only at masked positions, bf16 where it is native. "auto" is
    # the policy; each cell records the precision its machine resolved it to.
    pretrain=dict(max_steps=400, batch_size=32, learning_rate=1e-3, warmup=0.1, weight_decay=0.01, precision="auto",
                  dense_prediction=False),
    finetune=dict(max_train_samples=2000, max_eval_samples=None, epochs=3.0, batch_size=32, learning_rate=3e-4,
                  warmup=0.1, weight_decay=0.01, max_length=128, precision="auto"),
    noise_rate=0.03,
    noise_seed=1234,
    eval_samples=None,
)
QUICK = dict(
    model=dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64),
    block_size=32,
    vocab_size=400,
    corpus="gutenberg-nltk/blake-poems.txt",
    pretrain=dict(max_steps=3, batch_size=8, learning_rate=1e-3, warmup=0.0, weight_decay=0.01, precision="auto",
                  dense_prediction=False),
    finetune=dict(max_train_samples=24, max_eval_samples=48, epochs=1.0, batch_size=8, learning_rate=1e-4,
                  warmup=0.0, weight_decay=0.01, max_length=32, precision="auto"),
    noise_rate=0.03,
    noise_seed=1234,
    eval_samples=48,
)


# ----------------------------------------------------------------------------------------------------------------------
# Character-level noise
# ----------------------------------------------------------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def add_typos(text: str, rate: float, rng: random.Random) -> str:
    """Each letter, with probability `rate`, suffers one typo: deletion, swap with the next character, substitution
    or insertion of a random letter (equally likely). Other characters are left alone; never returns empty text."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char.isalpha() and rng.random() < rate:
            kind = rng.randrange(4)
            if kind == 0:  # deletion
                pass
            elif kind == 1 and i + 1 < len(text):  # swap with the next character
                out.extend((text[i + 1], char))
                i += 1
            elif kind == 2:  # substitution
                out.append(rng.choice(_LETTERS))
            else:  # insertion (also a swap at the last character)
                out.extend((char, rng.choice(_LETTERS)))
        else:
            out.append(char)
        i += 1
    noisy = "".join(out)
    return noisy if noisy.strip() else text


def write_noisy_sst2(glue_dir: Path, target_root: Path, rate: float, seed: int) -> Path:
    """A GLUE-layout folder whose SST-2/dev.tsv is SST-2 dev with typos (labels and layout untouched). Returns the
    root, usable as `data_dir` by `evaluate`."""
    source = Path(glue_dir) / "SST-2" / "dev.tsv"
    lines = source.read_text(encoding="utf-8").split("\n")
    rng = random.Random(seed)
    out = [lines[0]]
    for line in lines[1:]:
        if not line.strip():
            out.append(line)
            continue
        sentence, label = line.rsplit("\t", 1)
        core = sentence.rstrip()
        out.append(add_typos(core, rate, rng) + sentence[len(core):] + "\t" + label)
    atomic_write_text(Path(target_root) / "SST-2" / "dev.tsv", "\n".join(out))
    return Path(target_root)


# ----------------------------------------------------------------------------------------------------------------------
# The study
# ----------------------------------------------------------------------------------------------------------------------


def recipe_of(args) -> dict:
    recipe = json.loads(json.dumps(QUICK if args.quick else FULL))
    if args.pretrain_steps is not None and args.pretrain_tokens is not None:
        raise ValueError("Give --pretrain-steps or --pretrain-tokens, not both.")
    if args.pretrain_steps is not None:
        recipe["pretrain"]["max_steps"] = args.pretrain_steps
    if args.pretrain_tokens is not None:
        if args.pretrain_tokens < 1:
            raise ValueError(f"--pretrain-tokens must be positive, got {args.pretrain_tokens}.")
        # Whole steps of batch x block tokens, at least the budget asked for.
        per_step = recipe["pretrain"]["batch_size"] * recipe["block_size"]
        recipe["pretrain"]["max_steps"] = math.ceil(args.pretrain_tokens / per_step)
    if args.finetune_samples is not None:
        recipe["finetune"]["max_train_samples"] = args.finetune_samples
    return recipe


def _token_counts(sequences: list[list[int]], size: int):
    """How often each id of a vocabulary of `size` occurs in `sequences`."""
    import torch

    return torch.bincount(torch.tensor([i for ids in sequences for i in ids], dtype=torch.long), minlength=size)


def recipe_hash(recipe: dict) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def corpus_tokenizer(folder: Path, corpus: list[str], vocab_size: int, block_size: int) -> Path:
    """A WordPiece vocabulary trained on `corpus` into `folder`, once: training is deterministic, and studies that
    share a work dir wait on a lock rather than train it twice."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(folder.with_name(f".{folder.name}.lock")):
        if not (folder / "tokenizer_config.json").is_file():
            units = data_module.corpus_units(data_module.corpus_files(corpus))
            tok = train_wordpiece(units["text"], vocab_size=vocab_size, model_max_length=block_size)
            with atomic_directory(folder) as tmp:
                tok.save_pretrained(str(tmp))
    return folder


def cell_key(variant: str, seed: int, stage: str) -> str:
    return f"{variant}/seed{seed}/{stage}"


def study_plan(variants, seeds, tasks) -> dict:
    """The cells a study process was asked for: every variant × seed × (pretraining, each task, the typo test)."""
    tasks = [t for t in TASKS if t in tasks]
    stages = 1 + len(tasks) + ("sst2" in tasks)
    variants, seeds = [v for v in VARIANTS if v in variants], sorted(set(seeds))
    return {"variant_names": variants, "seed_list": seeds, "task_list": tasks, "variants": len(variants),
            "seeds": len(seeds), "stages": stages, "cells": len(variants) * len(seeds) * stages}


def merge_plans(stored: dict | None, mine: dict | None) -> dict | None:
    """One process per core (or per seed, or per sitting) each plans part of the study: the study is their union.
    A plan written before plans were mergeable (counts only) gives way to this process's."""
    if not stored or "variant_names" not in stored or not mine:
        return mine or stored
    return study_plan(set(stored["variant_names"]) | set(mine["variant_names"]),
                      set(stored["seed_list"]) | set(mine["seed_list"]),
                      set(stored["task_list"]) | set(mine["task_list"]))


class Study:
    """Runs the missing cells and keeps replication.json up to date after each one."""

    def __init__(self, args):
        self.args = args
        self.recipe = recipe_of(args)
        self.hash = recipe_hash(self.recipe)
        self.output_dir = Path(args.output_dir)
        self.work_dir = Path(args.work_dir)
        if args.data_dir is None:
            raise ValueError(f"No shared data folder found (looked for {data_module.SHARED_DATA_PLACES}): pass "
                             "--data-dir, the folder holding glue/ and mlm-text/.")
        self.data_dir = Path(args.data_dir)
        self.glue_dir = self.data_dir / "glue"
        self.json_path = self.output_dir / "replication.json"
        self.executed: list[str] = []  # cells computed by this run (the resume test reads it)
        for needed in (self.glue_dir / "SST-2" / "dev.tsv", self.data_dir / "mlm-text"):
            if not needed.exists():
                raise ValueError(f"{needed} not found: --data-dir must hold glue/ (GLUE TSVs) and mlm-text/.")
        self.results = self._load()

    # -- persistence
    def _load(self) -> dict:
        if self.json_path.is_file():
            data = json.loads(self.json_path.read_text(encoding="utf-8"))
            # --report-only renders whatever the JSON holds, under its own recipe (the report reads it from there).
            if data.get("recipe_hash") != self.hash and not getattr(self.args, "report_only", False):
                raise ValueError(
                    f"{self.json_path} holds results of a different recipe ({data.get('recipe_hash')} vs "
                    f"{self.hash}, e.g. --quick vs full or other step counts); mixing them would be meaningless. "
                    "Use another --output-dir, or delete that file to start over."
                )
            return data
        return {"recipe": self.recipe, "recipe_hash": self.hash, "cells": {}}

    def save(self) -> None:
        """Merge this run's cells into the JSON on disk and rewrite it, under a lock: several studies may share one
        output folder (e.g. one process per core, each with its own --variants or --seeds)."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.json_path.with_name(self.json_path.name + ".lock")):
            on_disk = self._load()
            self.results["cells"] = {**on_disk["cells"], **self.results["cells"]}
            if "unigram_baseline" in on_disk:
                self.results.setdefault("unigram_baseline", on_disk["unigram_baseline"])
            if not getattr(self.args, "report_only", False):
                self.results["plan"] = merge_plans(on_disk.get("plan"), self.results.get("plan"))
            self.results["aggregate"] = aggregate(self.results)
            self.results["updated"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            atomic_write_text(self.json_path, json.dumps(self.results, indent=2) + "\n")

    def done(self, key: str) -> bool:
        return key in self.results["cells"]

    def record(self, key: str, value: dict) -> None:
        value["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self.results["cells"][key] = value
        self.executed.append(key)
        self.save()
        print(f"[replicate] finished {key}", flush=True)

    # -- shared inputs
    def corpus(self) -> list[str]:
        text = self.data_dir / "mlm-text"
        return [str(text / self.recipe["corpus"])] if self.recipe["corpus"] else [str(text)]

    @property
    def tokenizer_folder(self) -> Path:
        return self.work_dir / f"tokenizer-{self.hash}"

    def tokenizer_dir(self) -> Path:
        """The study's WordPiece vocabulary, trained once on the corpus (deterministic) and reused by every cell."""
        return corpus_tokenizer(self.tokenizer_folder, self.corpus(), self.recipe["vocab_size"],
                                self.recipe["block_size"])

    def unigram_baseline(self) -> dict:
        """The MLM loss of a model that knows only token frequencies: the entropy (nats) of the corpus's tokens under
        the study's vocabulary. A pretrained model near it has not learned to use context yet. Computed once."""
        if "unigram_baseline" in self.results:
            return self.results["unigram_baseline"]
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(self.tokenizer_dir()))
        units = data_module.corpus_units(data_module.corpus_files(self.corpus()))
        ids = tokenizer(units["text"], add_special_tokens=False, verbose=False)["input_ids"]
        counts = _token_counts(ids, len(tokenizer))
        p = counts[counts > 0].double() / counts.sum()
        baseline = {"mlm_loss": float(-(p * p.log()).sum()), "tokens": int(counts.sum()),
                    "distinct_tokens": int((counts > 0).sum())}
        self.results["unigram_baseline"] = baseline
        return baseline

    def noisy_glue(self) -> Path:
        root = self.work_dir / f"noisy-glue-{self.recipe['noise_rate']}-{self.recipe['noise_seed']}"
        if not (root / "SST-2" / "dev.tsv").is_file():
            write_noisy_sst2(self.glue_dir, root, self.recipe["noise_rate"], self.recipe["noise_seed"])
        return root

    def model_dir(self, variant: str, seed: int, stage: str) -> Path:
        return self.work_dir / self.hash / variant / f"seed{seed}" / stage

    # -- stages
    def run_pretrain(self, variant: str, seed: int) -> None:
        key = cell_key(variant, seed, "pretrain")
        out = self.model_dir(variant, seed, "pretrain")
        if self.done(key):
            return
        recipe, p = self.recipe, self.recipe["pretrain"]
        config_file = self.work_dir / self.hash / "config.json"
        if not config_file.is_file():
            values = dict(recipe["model"], max_position_embeddings=max(512, recipe["block_size"]))
            SharedBertConfig(**values)  # validates
            atomic_write_text(config_file, json.dumps(values, indent=2) + "\n")
        load_before = os.getloadavg()[0]
        cpu_before = time.process_time()
        result = pretrain(
            corpus=self.corpus(), block_size=recipe["block_size"], config=str(config_file),
            tokenizer=str(self.tokenizer_dir()), output_dir=out, overwrite=True, seed=seed, **VARIANTS[variant], **p,
        )
        log = json.loads((out / "trainer_log.json").read_text(encoding="utf-8"))
        tokens = result["steps"] * result["batch_size"] * recipe["block_size"]
        self.record(key, {
            "parameters": result["parameters"],
            "attention_type": result["attention_type"],
            "layer_sharing": result["layer_sharing"],
            "steps": result["steps"],
            "tokens": tokens,
            "train_seconds": result["train_seconds"],
            "tokens_per_second": tokens / result["train_seconds"],
            "steady_tokens_per_second": result["tokens_per_second"],  # median step time, start-up excluded
            "precision": result["precision"],  # what "auto" resolved to on the machine that ran this cell
            "resumed_from_precision": result["resumed_from_precision"],
            "sparse_prediction": result["sparse_prediction"],
            "process_cpu_seconds": time.process_time() - cpu_before,  # includes tokenising the corpus
            "load_average": [load_before, os.getloadavg()[0]],
            "train_loss": result["train_loss"],
            "final_mlm_loss": result["eval_loss"],
            "loss_curve": [[entry["step"], entry["loss"]] for entry in log if "loss" in entry],
        })

    def run_finetune(self, variant: str, seed: int, task: str) -> None:
        key = cell_key(variant, seed, f"finetune-{task}")
        if self.done(key):
            return
        pretrained = self.model_dir(variant, seed, "pretrain")
        self._require(pretrained, variant, seed, "pretrain")
        f = dict(self.recipe["finetune"])
        result = finetune(
            task=task, model=str(pretrained), data_dir=str(self.glue_dir),
            output_dir=self.model_dir(variant, seed, f"finetune-{task}"), overwrite=True,
            evaluations=0,  # the score is the final model's, no selection on dev
            seed=seed, save=task == "sst2", **f,
        )
        metrics = result["metrics"]
        self.record(key, {
            "metrics": metrics,
            "score": 100.0 * statistics.fmean(metrics.values()),  # GLUE convention: the mean of the task's metrics
            "train_samples": result["train_samples"],
            "eval_samples": result["eval_samples"],
            "parameters": result["parameters"],
            "train_seconds": result["train_seconds"],
        })

    def run_robustness(self, variant: str, seed: int) -> None:
        key = cell_key(variant, seed, "robustness")
        if self.done(key):
            return
        model = self.model_dir(variant, seed, "finetune-sst2")
        self._require(model, variant, seed, "finetune-sst2")
        n = self.recipe["eval_samples"]
        clean = evaluate(model=str(model), task="sst2", data_dir=str(self.glue_dir), max_eval_samples=n)
        noisy = evaluate(model=str(model), task="sst2", data_dir=str(self.noisy_glue()), max_eval_samples=n)
        clean_acc, noisy_acc = clean["metrics"]["accuracy"], noisy["metrics"]["accuracy"]
        self.record(key, {
            "clean_accuracy": clean_acc,
            "noisy_accuracy": noisy_acc,
            "drop": 100.0 * (clean_acc - noisy_acc),
            "noise_rate": self.recipe["noise_rate"],
            "eval_samples": clean["eval_samples"],
        })

    def _require(self, folder: Path, variant: str, seed: int, stage: str) -> None:
        if not (folder / "config.json").is_file():
            raise ValueError(
                f"{folder} is missing, but a later stage of {variant} seed {seed} needs it. The results JSON says "
                f"'{stage}' finished, so its model was deleted from --work-dir: restore {self.work_dir}, or remove "
                f"the '{cell_key(variant, seed, stage)}' entry from {self.json_path} to redo it."
            )
        if not self.done(cell_key(variant, seed, stage)):
            raise ValueError(f"{stage} of {variant} seed {seed} has not finished.")

    def run(self) -> dict:
        started = time.time()
        self.save()
        # Seed-major order: an interrupted study still holds every variant at the first seeds.
        for seed in self.args.seeds:
            for variant in self.args.variants:
                if self.args.max_minutes and time.time() - started > 60 * self.args.max_minutes:
                    print(f"[replicate] --max-minutes {self.args.max_minutes} reached; stopping (re-run to resume)")
                    return self.results
                self.run_pretrain(variant, seed)
                for task in self.args.tasks:
                    self.run_finetune(variant, seed, task)
                if "sst2" in self.args.tasks:
                    self.run_robustness(variant, seed)
        return self.results


# ----------------------------------------------------------------------------------------------------------------------
# Aggregation and the report
# ----------------------------------------------------------------------------------------------------------------------


def _mean_std(values: list[float]) -> dict:
    return {
        "mean": statistics.fmean(values) if values else None,
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "se": statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None,
        "n": len(values),
        "values": values,
    }


def aggregate(results: dict) -> dict:
    """Per variant: mean/std/n over seeds of each task score, the GLUE-style average (only over seeds where every
    task finished), parameters, tokens/s, final MLM loss and the robustness drop."""
    cells = results["cells"]
    per_variant: dict[str, dict] = {}
    variants = sorted({key.split("/")[0] for key in cells}, key=lambda v: list(VARIANTS).index(v)
                      if v in VARIANTS else len(VARIANTS))
    for variant in variants:
        seeds = sorted({int(key.split("/")[1][4:]) for key in cells if key.startswith(variant + "/")})

        def get(seed, stage):
            return cells.get(cell_key(variant, seed, stage))

        entry = {"seeds": seeds, "tasks": {}}
        for task in TASKS:
            entry["tasks"][task] = _mean_std([get(s, f"finetune-{task}")["score"] for s in seeds
                                              if get(s, f"finetune-{task}")])
        averages = [statistics.fmean(get(s, f"finetune-{t}")["score"] for t in TASKS) for s in seeds
                    if all(get(s, f"finetune-{t}") for t in TASKS)]
        entry["glue_average"] = _mean_std(averages)
        pre = [get(s, "pretrain") for s in seeds if get(s, "pretrain")]
        entry["parameters"] = pre[0]["parameters"] if pre else None
        # Steady throughput (median step time) where the cell has it: wall-clock tokens/s also counts pauses,
        # restarts between sittings and start-up, which say nothing about the variant.
        entry["tokens_per_second"] = _mean_std([p.get("steady_tokens_per_second", p["tokens_per_second"]) for p in pre])
        entry["precision"] = sorted({p.get("precision", "fp32") for p in pre})
        entry["final_mlm_loss"] = _mean_std([p["final_mlm_loss"] for p in pre if p["final_mlm_loss"] is not None])
        entry["robustness_drop"] = _mean_std([get(s, "robustness")["drop"] for s in seeds if get(s, "robustness")])
        entry["noisy_accuracy"] = _mean_std([100 * get(s, "robustness")["noisy_accuracy"] for s in seeds
                                             if get(s, "robustness")])
        per_variant[variant] = entry
    return per_variant


def compare(a: dict, b: dict, higher_is_better: bool = True) -> dict:
    """Difference of means a - b with its standard error (Welch). verdict: 'supported' when the difference favours
    a by more than two standard errors, 'contradicted' when it favours b by as much, 'within noise' otherwise, and
    'not judged' with fewer than two seeds on either side."""
    if not a or not b or a["n"] < 2 or b["n"] < 2:
        return {"diff": None if not a or not b or a["mean"] is None or b["mean"] is None else a["mean"] - b["mean"],
                "se": None, "verdict": "not judged (fewer than 2 seeds on a side)",
                "n": (a["n"] if a else 0, b["n"] if b else 0)}
    diff = a["mean"] - b["mean"]
    se = math.sqrt(a["std"] ** 2 / a["n"] + b["std"] ** 2 / b["n"])
    signed = diff if higher_is_better else -diff
    if signed > 2 * se:
        verdict = "supported"
    elif signed < -2 * se:
        verdict = "contradicted"
    else:
        verdict = "within noise (not supported)"
    return {"diff": diff, "se": se, "verdict": verdict, "n": (a["n"], b["n"])}


def claims(agg: dict) -> list[dict]:
    """Each published claim with what this run's numbers say about it."""
    out = []

    def field(variant, name):
        return agg.get(variant, {}).get(name)

    for other, gain in PAPER_SHARED_GAIN.items():
        c = compare(field("shared", "glue_average"), field(other, "glue_average"))
        out.append(dict(claim=f"shared beats {other} on the GLUE average", published=f"+{gain:.2f} (2412.00359)",
                        measure="GLUE-style average, points", **c))
    for better, worse in (("pairwise", "standard"), ("standard", "symmetric")):
        c = compare(field(better, "glue_average"), field(worse, "glue_average"))
        pub = COURTOIS_GLUE[better] - COURTOIS_GLUE[worse]
        out.append(dict(claim=f"{better} beats {worse} on the GLUE average", published=f"{pub:+.2f} (Courtois 2024)",
                        measure="GLUE-style average, points", **c))
    speed_a, speed_b = field("shared", "tokens_per_second"), field("standard", "tokens_per_second")
    c = compare(speed_a, speed_b)
    if c["diff"] is not None and speed_b and speed_b["mean"]:
        c["ratio"] = speed_a["mean"] / speed_b["mean"]
        if c["verdict"] == "supported" and c["ratio"] < 1 + PAPER_SPEEDUP[0]:
            c["verdict"] = f"faster, but by less than {PAPER_SPEEDUP[0]:.0%} (not supported as stated)"
    out.append(dict(claim="shared trains 15-20% faster than standard", published="+15-20% (2412.00359)",
                    measure="pretraining tokens/s", **c))
    c = compare(field("shared", "final_mlm_loss"), field("standard", "final_mlm_loss"), higher_is_better=False)
    # A parity claim: only a gap beyond two standard errors against shared says something.
    c["verdict"] = {"supported": "shared better (on par or better: consistent)",
                    "contradicted": "contradicted (shared worse)"}.get(c["verdict"], c["verdict"])
    if c["verdict"].startswith("within noise"):
        c["verdict"] = "within noise (consistent with on par)"
    out.append(dict(claim="shared pretrains on par with standard", published="on par (2412.00359)",
                    measure="held-out MLM loss, nats (lower is better)", **c))
    for other in ("standard", "symmetric", "pairwise"):
        c = compare(field("shared", "robustness_drop"), field(other, "robustness_drop"), higher_is_better=False)
        out.append(dict(claim=f"shared is more robust to typos than {other}", published="better on noisy data "
                        "(2412.00359)", measure="SST-2 accuracy drop under typos, points (lower is better)", **c))
    c = compare(field("shared", "glue_average"), field("shared-all-layers", "glue_average"))
    out.append(dict(claim="sharing all layers costs accuracy", published="costs accuracy (ALBERT)",
                    measure="GLUE avg: no sharing - all layers shared", **c))
    all_cost = compare(field("shared", "glue_average"), field("shared-all-layers", "glue_average"))
    att_cost = compare(field("shared", "glue_average"), field("shared-attention-layers", "glue_average"))
    c = compare(field("shared-attention-layers", "glue_average"), field("shared-all-layers", "glue_average"))
    out.append(dict(claim="sharing attention only costs less than sharing all layers",
                    published="small cost (ALBERT)", measure="GLUE avg: attention-only shared - all shared",
                    attention_only_cost=att_cost["diff"], all_layers_cost=all_cost["diff"], **c))
    return out


def _fmt(stat: dict | None, digits: int = 1) -> str:
    """mean ± standard error of the mean over seeds, with n."""
    if not stat or stat["mean"] is None:
        return "–"
    text = f"{stat['mean']:.{digits}f}"
    if stat["se"] is not None:
        text += f" ± {stat['se']:.{digits}f}"
    return text + f" (n={stat['n']})"


def render_markdown(results: dict, command: str = "") -> str:
    agg, recipe, cells = results["aggregate"], results["recipe"], results["cells"]
    variants = list(agg)
    expected = results.get("plan")
    lines = ["# Small-scale replication: shared vs standard, symmetric, pairwise attention; layer sharing", ""]
    done = len(cells)
    status = f"Finished cells: **{done}**"
    if expected:
        status += (f" of {expected['cells']} planned ({expected['variants']} variants × {expected['seeds']} seeds × "
                   f"{expected['stages']} stages)")
        if done < expected["cells"]:
            status += ": **a partial study**, not the full one"
    lines.append(status + ". Every mean below is over the seeds that finished, shown as (n=…); a GLUE average needs "
                 "all five tasks of a seed.")
    lines.append("")
    m = recipe["model"]
    p, f = recipe["pretrain"], recipe["finetune"]
    budget = p["max_steps"] * p["batch_size"] * recipe["block_size"]
    lines += [
        f"Recipe (hash `{results['recipe_hash']}`): {m['num_hidden_layers']} layers, hidden {m['hidden_size']}, "
        f"{m['num_attention_heads']} heads, intermediate {m['intermediate_size']}, sequence {recipe['block_size']}, "
        f"WordPiece vocabulary of {recipe['vocab_size']} trained on the corpus. Pretraining: {p['max_steps']} steps × "
        f"{p['batch_size']} × {recipe['block_size']} tokens = {budget:,} tokens, lr {p['learning_rate']}, "
        f"warm-up {p['warmup']}. Fine-tuning: {f['max_train_samples']} training examples per task, "
        f"{f['epochs']} epochs, batch {f['batch_size']}, lr {f['learning_rate']}, final model "
        f"scored on GLUE dev" + (f" (first {f['max_eval_samples']} examples)" if f['max_eval_samples'] else "") +
        f". Typos: each letter of SST-2 dev altered with probability {recipe['noise_rate']} (seed "
        f"{recipe['noise_seed']}).",
        "",
    ]
    if command:
        lines += [f"Command: `{command}`", ""]
    header = ["variant", "params"] + [TASK_LABELS[t] for t in TASKS] + ["GLUE avg", "SST-2 typo drop",
                                                                        "tokens/s", "final MLM loss"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for v in variants:
        e = agg[v]
        row = [v, f"{e['parameters']:,}" if e["parameters"] else "–"]
        row += [_fmt(e["tasks"][t]) for t in TASKS]
        row += [_fmt(e["glue_average"]), _fmt(e["robustness_drop"]), _fmt(e["tokens_per_second"], 0),
                _fmt(e["final_mlm_loss"], 3)]
        lines.append("| " + " | ".join(row) + " |")
    precisions = {v: agg[v].get("precision") for v in variants if agg[v].get("precision")}
    mixed = len({p for ps in precisions.values() for p in ps}) > 1
    lines += ["", "Each entry is the mean ± standard error over seeds, (n=…). Scores ×100: SST-2 and RTE accuracy, "
              "MRPC mean of F1 and accuracy, CoLA Matthews correlation, STS-B mean of Pearson and Spearman (GLUE's "
              "convention); GLUE avg is their mean. Tokens/s is pretraining throughput per process (the median step "
              "where the cell recorded it, else wall-clock) on a machine shared with other jobs (load averages are in "
              "the JSON), so speed differences are noisy.", ""]
    if precisions:
        lines += ["Pretraining precision: " + ("; ".join(f"{v}: {', '.join(p)}" for v, p in precisions.items())
                                                if mixed else f"{next(iter(precisions.values()))[0]} in every cell")
                  + (" (mixed: seeds ran on machines that resolved `auto` differently)" if mixed else "") + ".", ""]
    baseline = results.get("unigram_baseline")
    if baseline:
        lines += [f"A unigram model (token frequencies alone, no context) of the pretraining corpus scores an MLM loss "
                  f"of {baseline['mlm_loss']:.3f} nats ({baseline['tokens']:,} tokens, "
                  f"{baseline['distinct_tokens']:,} distinct): a final MLM loss near it means the model has barely "
                  "begun to use context."]
        below = [f"{v} {baseline['mlm_loss'] - agg[v]['final_mlm_loss']['mean']:.2f}" for v in variants
                 if agg[v]["final_mlm_loss"]["mean"] is not None]
        if below:
            lines[-1] += " Nats below it (mean over seeds): " + ", ".join(below) + "."
        lines.append("")
    lines += ["## Published figures", "",
              "| source | standard | symmetric | pairwise | shared |", "|---|---|---|---|---|",
              f"| Courtois et al. 2024, GLUE dev avg (BERT-base) | {COURTOIS_GLUE['standard']} | "
              f"{COURTOIS_GLUE['symmetric']} | {COURTOIS_GLUE['pairwise']} | – |",
              "| arXiv 2412.00359, shared's gain on GLUE avg | +0.38 over | +5.81 over | +1.06 over | "
              "15–20% faster training |",
              "| this run, GLUE avg | " + " | ".join(_fmt(agg.get(v, {}).get("glue_average"))
                                                  for v in ("standard", "symmetric", "pairwise", "shared")) + " |",
              ""]
    lines += ["## Claims against this run", "",
              "Verdict rule: *supported* when the difference of means favours the claim by more than two standard "
              "errors (Welch), *contradicted* when it goes the other way by as much, *within noise* otherwise; "
              "nothing is judged with fewer than two seeds per side.", "",
              "| claim | published | this run (difference ± s.e.) | seeds | verdict |", "|---|---|---|---|---|"]
    for c in claims(agg):
        diff = "–" if c["diff"] is None else f"{c['diff']:+.2f}" + ("" if c["se"] is None else f" ± {c['se']:.2f}")
        if c.get("ratio"):
            diff += f" (ratio {c['ratio']:.2f})"
        lines.append(f"| {c['claim']} ({c['measure']}) | {c['published']} | {diff} | {c['n'][0]} vs {c['n'][1]} | "
                     f"{c['verdict']} |")
    supported = [c["claim"] for c in claims(agg) if c["verdict"] == "supported"]
    contradicted = [c["claim"] for c in claims(agg) if c["verdict"] == "contradicted"]
    unjudged = [c["claim"] for c in claims(agg) if c["verdict"].startswith("not judged")]
    consistent = [c["claim"] for c in claims(agg) if "consistent" in c["verdict"]]  # parity claims
    others = [c["claim"] for c in claims(agg) if c["claim"] not in supported + contradicted + unjudged + consistent]
    parts = [f"supports {', '.join(supported)}" if supported else
             "supports none of the claims" if len(unjudged) < len(claims(agg)) else "cannot judge any claim yet"]
    if contradicted:
        parts.append(f"contradicts {', '.join(contradicted)}")
    if consistent:
        parts.append(f"is consistent with {', '.join(consistent)} (no difference beyond noise)")
    if others:
        parts.append(f"does not support (difference within noise or below the stated size) {', '.join(others)}")
    if unjudged:
        parts.append(f"has too few finished seeds to judge {', '.join(unjudged)}")
    lines += ["", "In plain words, this run " + "; it ".join(parts) + ".", ""]
    return "\n".join(lines) + "\n"


def write_plots(results: dict, output_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import io

    cells, agg = results["cells"], results["aggregate"]
    written = []

    def save(fig, name):
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        path = output_dir / name
        atomic_write_bytes(path, buffer.getvalue())
        written.append(path)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, variant in enumerate(agg):
        first = True
        for key, cell in sorted(cells.items()):
            if key.startswith(variant + "/") and key.endswith("/pretrain") and cell["loss_curve"]:
                steps, losses = zip(*cell["loss_curve"])
                ax.plot(steps, losses, color=colours[i % len(colours)], alpha=0.8, lw=1.2,
                        label=f"{variant} (n={agg[variant]['tokens_per_second']['n']})" if first else None)
                first = False
    baseline = results.get("unigram_baseline")
    if baseline:
        ax.axhline(baseline["mlm_loss"], color="grey", ls="--", lw=1,
                   label=f"unigram model ({baseline['mlm_loss']:.2f}, no context)")
    ax.set_xlabel("pretraining step")
    ax.set_ylabel("MLM training loss")
    ax.set_title("MLM loss per variant (one line per seed)")
    ax.legend(fontsize=8)
    save(fig, "replication_mlm_loss.png")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (variant, e) in enumerate(agg.items()):
        g = e["glue_average"]
        if e["parameters"] and g["mean"] is not None:
            ax.errorbar(e["parameters"] / 1e6, g["mean"], yerr=g["std"] or 0, fmt="o", capsize=4,
                        color=colours[i % len(colours)], label=f"{variant} (n={g['n']})")
    ax.set_xlabel("parameters (millions, MLM model)")
    ax.set_ylabel("GLUE-style average (5 tasks, dev)")
    ax.set_title("Score vs parameters (mean ± standard deviation over seeds)")
    ax.legend(fontsize=8)
    save(fig, "replication_score_vs_params.png")
    return written


# ----------------------------------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="Tiny sizes and a few steps (minutes; for CI).")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="Default 0 1 2.")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--output-dir", default=str(HERE / "results"),
                        help="Where replication.json/.md/.png go (default: results/ beside this script).")
    parser.add_argument("--work-dir", default=str(REPO_ROOT / "runs" / "replicate"),
                        help="Models and the shared tokenizer (default runs/replicate; keep it to resume).")
    parser.add_argument("--data-dir", default=data_module.shared_data_dir(), help="Holds glue/ and mlm-text/ "
                        "(default: the shared data folder, ../shared/data beside the repository).")
    parser.add_argument("--pretrain-steps", type=int, help="Override the recipe's pretraining steps.")
    parser.add_argument("--pretrain-tokens", type=int, metavar="N",
                        help="Pretraining budget in tokens per model (rounded up to whole steps of batch x sequence), "
                        "e.g. 25000000; instead of --pretrain-steps.")
    parser.add_argument("--finetune-samples", type=int, help="Override the recipe's training examples per task.")
    parser.add_argument("--max-minutes", type=float, help="Start no new (variant, seed) after this many minutes.")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's).")
    parser.add_argument("--report-only", action="store_true", help="Rewrite the report and plots from the JSON.")


def run(args) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        import datasets

        datasets.disable_progress_bars()
    except ImportError:
        pass
    try:
        study = Study(args)
        # A study run adds its cells to the plan on disk (save merges); --report-only states the whole plan.
        study.results["plan"] = study_plan(args.variants, args.seeds, args.tasks)
        if not args.report_only:
            study.run()
        same_recipe = study.results.get("recipe_hash") == study.hash
        if same_recipe and (study.tokenizer_folder / "tokenizer_config.json").is_file():
            study.unigram_baseline()  # needs the study's vocabulary, which a bare --report-only may not have
        study.save()
    except (ValueError, OSError) as error:  # DataError is a ValueError
        print(f"replicate.py: error: {error}", file=sys.stderr)
        return 2

    command = getattr(args, "command_line", "")
    atomic_write_text(study.output_dir / "replication.md", render_markdown(study.results, command))
    write_plots(study.results, study.output_dir)
    args.executed = study.executed  # for callers (the tests) that want to know what ran
    print(f"[replicate] {len(study.executed)} cell(s) computed this run, {len(study.results['cells'])} finished in "
          f"total; report: {study.output_dir / 'replication.md'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python experiments/replication/replicate.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    args.command_line = ("python experiments/replication/replicate.py "
                         + " ".join(sys.argv[1:] if argv is None else argv))
    return run(args)


__all__ = ["FULL", "VARIANTS", "TASKS", "add_typos", "aggregate", "build_parser", "claims", "compare",
           "corpus_tokenizer", "main", "render_markdown", "run"]


if __name__ == "__main__":
    sys.exit(main())
