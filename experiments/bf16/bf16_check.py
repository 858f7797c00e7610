"""Does bf16 autocast pretrain the same model as fp32? Short pretraining runs of the replication study's model, paired
by seed, in both precisions: the bf16 run's loss should differ from its fp32 twin (same seed: same initial weights,
batches and masks) by less than fp32 runs of different seeds differ from each other.

    python experiments/bf16/bf16_check.py --threads 1                    # 150 steps; fp32 seeds 0 1 2, bf16 0 1
    python experiments/bf16/bf16_check.py --threads 1 --precisions bf16  # one process per core: split by precision
    python experiments/bf16/bf16_check.py --report-only                  # rewrite the report from the JSON
    python experiments/bf16/bf16_check.py --quick                        # tiny sizes, a smoke run

The model, vocabulary, corpus and optimizer are the replication study's (`FULL` in
experiments/replication/replicate.py, copied here as `RECIPES` so that this check stands alone: 4 layers, hidden 128,
8,192 WordPiece entries trained on ../shared/data/mlm-text, batch 32 x 128, AdamW at 1e-3, sparse prediction). The
runs are short (150 steps by default, through warm-up and the steepest part of the loss curve): where the CPU has no
native bf16, bf16 is emulated and many times slower (README.md beside this script). Each run is
`sharedbert.training.pretrain` with `precision="fp32"` or `precision="bf16"` (forced; emulated or native, the
arithmetic is the same: bf16 operands, fp32 accumulation, fp32 master weights).

Compared, per seed pair and across fp32 seeds:
* the held-out MLM loss at the end (and at `--evaluations` points during training, if asked: each costs minutes
  under emulated bf16);
* the training loss, logged every `--logging-steps` steps (each value the mean over those steps).

Verdict: bf16 tracks fp32 when the mean |bf16 - fp32| of the final held-out loss over the paired seeds is below the
standard deviation of the fp32 seeds' final held-out loss, and the same holds for the training loss averaged over the
second half of the run. Resumable: each run is recorded the moment it ends, and a rerun skips it (a run cut short
resumes from its last checkpoint in the work dir).

Writes results/bf16_check.{json,md,png} beside this script (`--output-dir` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from sharedbert import SharedBertConfig
from sharedbert.atomic import atomic_directory, atomic_write_bytes, atomic_write_text, file_lock
from sharedbert import data as data_module
from sharedbert.training import pretrain, train_wordpiece

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]


# The replication study's model, vocabulary, corpus and optimizer (`FULL` and `QUICK` in
# experiments/replication/replicate.py, whose results/replication.json records FULL as its "recipe"), without its
# precision and step count: this check sets both. tests/experiments/test_bf16_check.py checks the copies agree.
RECIPES = {
    "full": dict(model=dict(num_hidden_layers=4, hidden_size=128, num_attention_heads=4, intermediate_size=512),
                 block_size=128, vocab_size=8192, corpus=None,  # None: the whole mlm-text folder
                 pretrain=dict(batch_size=32, learning_rate=1e-3, warmup=0.1, weight_decay=0.01,
                               dense_prediction=False)),
    "quick": dict(model=dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64),
                  block_size=32, vocab_size=400, corpus="gutenberg-nltk/blake-poems.txt",
                  pretrain=dict(batch_size=8, learning_rate=1e-3, warmup=0.0, weight_decay=0.01,
                                dense_prediction=False)),
}


def recipe_of(args) -> dict:
    base = RECIPES["quick" if args.quick else "full"]
    max_steps = args.steps if args.steps is not None else (6 if args.quick else 150)
    return dict(model=dict(base["model"]), block_size=base["block_size"], vocab_size=base["vocab_size"],
                corpus=base["corpus"], pretrain={"max_steps": max_steps, **base["pretrain"]},
                evaluations=args.evaluations if args.evaluations is not None else (2 if args.quick else 0),
                logging_steps=args.logging_steps or (1 if args.quick else 10))


def corpus_tokenizer(folder: Path, corpus: list[str], vocab_size: int, block_size: int) -> Path:
    """A WordPiece vocabulary trained on `corpus` into `folder`, once (as the replication study trains its own):
    training is deterministic, and processes that share a work dir wait on a lock rather than train it twice."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(folder.with_name(f".{folder.name}.lock")):
        if not (folder / "tokenizer_config.json").is_file():
            units = data_module.corpus_units(data_module.corpus_files(corpus))
            tok = train_wordpiece(units["text"], vocab_size=vocab_size, model_max_length=block_size)
            with atomic_directory(folder) as tmp:
                tok.save_pretrained(str(tmp))
    return folder


def run_key(precision: str, seed: int) -> str:
    return f"{precision}/seed{seed}"


class Check:
    def __init__(self, args):
        self.args = args
        self.recipe = recipe_of(args)
        self.output_dir = Path(args.output_dir)
        self.work_dir = Path(args.work_dir)
        self.json_path = self.output_dir / "bf16_check.json"
        if args.data_dir is None or not (Path(args.data_dir) / "mlm-text").is_dir():
            raise ValueError(f"No mlm-text/ under --data-dir ({args.data_dir}): pass the shared data folder, which "
                             "holds mlm-text/.")
        self.data_dir = Path(args.data_dir)

    def corpus(self) -> list[str]:
        text = self.data_dir / "mlm-text"
        return [str(text / self.recipe["corpus"])] if self.recipe["corpus"] else [str(text)]

    def load(self) -> dict:
        if not self.json_path.is_file():
            return {"recipe": self.recipe, "runs": {}}
        data = json.loads(self.json_path.read_text(encoding="utf-8"))
        if data["recipe"] != self.recipe and not self.args.report_only:
            raise ValueError(f"{self.json_path} holds runs of another recipe; use another --output-dir, or delete it "
                             "to start over.")
        return data

    def record(self, key: str, value: dict) -> None:
        """Merge one run into the JSON under a lock: one process per core may share the file."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.json_path.with_name(self.json_path.name + ".lock")):
            data = self.load()
            data["runs"][key] = value
            atomic_write_text(self.json_path, json.dumps(data, indent=2) + "\n")
        print(f"[bf16_check] finished {key}", flush=True)

    def run_one(self, precision: str, seed: int) -> None:
        recipe = self.recipe
        tokenizer = corpus_tokenizer(self.work_dir / "tokenizer", self.corpus(),
                                                         recipe["vocab_size"], recipe["block_size"])
        config_file = self.work_dir / "config.json"
        if not config_file.is_file():
            values = dict(recipe["model"], max_position_embeddings=max(512, recipe["block_size"]))
            SharedBertConfig(**values)  # validates
            atomic_write_text(config_file, json.dumps(values, indent=2) + "\n")
        out = self.work_dir / precision / f"seed{seed}"
        result = pretrain(corpus=self.corpus(), block_size=recipe["block_size"], config=str(config_file),
                          tokenizer=str(tokenizer), output_dir=out, overwrite=True, seed=seed, precision=precision,
                          attention_type="standard", evaluations=recipe["evaluations"],
                          logging_steps=recipe["logging_steps"], **recipe["pretrain"])
        log = json.loads((out / "trainer_log.json").read_text(encoding="utf-8"))
        self.record(run_key(precision, seed), {
            "precision": result["precision"],
            "resumed_from_precision": result["resumed_from_precision"],
            "steps": result["steps"],
            "final_eval_loss": result["eval_loss"],
            "train_curve": [[entry["step"], entry["loss"]] for entry in log if "loss" in entry],
            # The last scheduled evaluation and the final one fall on the same step: keep one per step.
            "eval_curve": sorted({entry["step"]: entry["eval_loss"] for entry in log if "eval_loss" in entry}.items()),
            "tokens_per_second": result["tokens_per_second"],
            "train_seconds": result["train_seconds"],
            "load_average": os.getloadavg()[0],
            "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        })

    def run(self) -> None:
        for precision in self.args.precisions:
            seeds = self.args.seeds if self.args.seeds else ([0, 1, 2] if precision == "fp32" else [0, 1])
            for seed in seeds:
                if run_key(precision, seed) in self.load()["runs"]:
                    continue
                print(f"[bf16_check] {precision}, seed {seed}", flush=True)
                self.run_one(precision, seed)


def _second_half_mean(curve: list[list[float]], steps: int) -> float:
    return statistics.fmean(loss for step, loss in curve if step > steps / 2)


def summarise(data: dict) -> dict:
    """Paired differences (bf16 - fp32, same seed) against the fp32 seeds' spread, for the final held-out loss and the
    second half's mean training loss."""
    runs = data["runs"]
    steps = data["recipe"]["pretrain"]["max_steps"]
    fp32 = {int(key.split("seed")[1]): run for key, run in runs.items() if key.startswith("fp32/")}
    bf16 = {int(key.split("seed")[1]): run for key, run in runs.items() if key.startswith("bf16/")}
    summary = {"fp32_seeds": sorted(fp32), "bf16_seeds": sorted(bf16), "measures": {}}
    measures = {
        "final held-out MLM loss": lambda run: run["final_eval_loss"],
        "training loss, mean over the second half": lambda run: _second_half_mean(run["train_curve"], steps),
    }
    for name, value in measures.items():
        pairs = [value(bf16[seed]) - value(fp32[seed]) for seed in sorted(set(fp32) & set(bf16))]
        spread = statistics.stdev([value(run) for run in fp32.values()]) if len(fp32) >= 2 else None
        mean_abs = statistics.fmean(abs(d) for d in pairs) if pairs else None
        summary["measures"][name] = {
            "fp32": {seed: value(run) for seed, run in sorted(fp32.items())},
            "bf16": {seed: value(run) for seed, run in sorted(bf16.items())},
            "paired_differences": pairs,
            "mean_abs_paired_difference": mean_abs,
            "fp32_seed_sd": spread,
            "tracks": None if mean_abs is None or spread is None else mean_abs < spread,
        }
    verdicts = [m["tracks"] for m in summary["measures"].values()]
    summary["verdict"] = None if None in verdicts else all(verdicts)
    speeds = {p: [run["tokens_per_second"] for key, run in runs.items() if key.startswith(p + "/")]
              for p in ("fp32", "bf16")}
    summary["median_tokens_per_second"] = {p: statistics.median(v) for p, v in speeds.items() if v}
    return summary


def render(data: dict, summary: dict, command: str = "") -> str:
    recipe = data["recipe"]
    model = recipe["model"]
    lines = [
        "# bf16 autocast against fp32 in pretraining",
        "",
        f"The replication study's model ({model['num_hidden_layers']} layers, hidden {model['hidden_size']}, "
        f"vocabulary {recipe['vocab_size']:,}), standard attention, {recipe['pretrain']['max_steps']} steps of "
        f"{recipe['pretrain']['batch_size']} x {recipe['block_size']} tokens, sparse prediction. bf16 runs use the "
        "same seeds as fp32 runs (same initial weights, batches and masks).",
        "",
    ]
    if command:
        lines += [f"Command: `{command}`", ""]
    lines += ["| measure | fp32 by seed | bf16 by seed | bf16 - fp32, paired | mean abs paired | fp32 seed sd | "
              "bf16 within noise |", "|---|---|---|---|---|---|---|"]
    for name, m in summary["measures"].items():
        def by_seed(values):
            return ", ".join(f"s{seed} {v:.4f}" for seed, v in values.items()) or "-"
        fmt = (lambda v: "-" if v is None else f"{v:.4f}")
        tracks = {None: "-", True: "yes", False: "**no**"}[m["tracks"]]
        pairs = ", ".join(f"{d:+.4f}" for d in m["paired_differences"]) or "-"
        lines.append(f"| {name} | {by_seed(m['fp32'])} | {by_seed(m['bf16'])} | {pairs} | "
                     f"{fmt(m['mean_abs_paired_difference'])} | {fmt(m['fp32_seed_sd'])} | {tracks} |")
    lines.append("")
    verdict = summary["verdict"]
    if verdict is None:
        lines.append("Verdict: not yet (needs at least two fp32 seeds and one bf16 run of a seed fp32 also ran).")
    else:
        lines.append("Verdict: bf16 " + ("tracks fp32 within seed-to-seed noise on both measures." if verdict else
                                         "does **not** track fp32 within seed-to-seed noise on every measure."))
    runs = data["runs"]
    precisions = sorted({run["precision"] for run in runs.values()})
    speed = summary["median_tokens_per_second"]
    if "fp32" in speed and "bf16" in speed:
        lines += ["", f"Median steady tokens/s over the runs: fp32 {speed['fp32']:,.0f}, bf16 {speed['bf16']:,.0f} "
                  f"(×{speed['bf16'] / speed['fp32']:.2f}; runs at different times, so only a rough ratio: "
                  "benchmarks/pretrain_bench.py measures speed side by side)."]
    lines += ["", f"Precisions that ran: {', '.join(precisions)}. Held-out loss during training (step: loss):", ""]
    for key in sorted(runs):
        curve = ", ".join(f"{step}: {loss:.3f}" for step, loss in runs[key]["eval_curve"])
        lines.append(f"- {key}: {curve}")
    lines += ["", "![training loss](bf16_check.png)", ""]
    return "\n".join(lines)


def write_plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for key, run in sorted(data["runs"].items()):
        precision, seed = key.split("/seed")
        steps, losses = zip(*run["train_curve"])
        ax.plot(steps, losses, linestyle="-" if precision == "fp32" else "--", color=colours[int(seed) % 10],
                label=f"{precision}, seed {seed}")
    ax.set_xlabel("step")
    ax.set_ylabel("training MLM loss")
    ax.set_title("bf16 autocast (dashed) against fp32 (solid), same seed same colour")
    ax.legend(fontsize=8)
    fig.tight_layout()
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python experiments/bf16/bf16_check.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Tiny sizes and a few steps (for CI).")
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], default=["fp32", "bf16"])
    parser.add_argument("--seeds", nargs="+", type=int,
                        help="Seeds for every precision (default: 0 1 2 for fp32, 0 1 for bf16).")
    parser.add_argument("--steps", type=int, help="Pretraining steps per run (default 150).")
    parser.add_argument("--evaluations", type=int, help="Held-out evaluations during each run, besides the final one "
                        "(default 0).")
    parser.add_argument("--logging-steps", type=int, help="Training loss logged every N steps (default 10).")
    parser.add_argument("--output-dir", default=str(HERE / "results"))
    parser.add_argument("--work-dir", default=str(REPO_ROOT / "runs" / "bf16-check"),
                        help="Models, checkpoints and the vocabulary (keep it to resume).")
    parser.add_argument("--data-dir", default=data_module.shared_data_dir(), help="Holds mlm-text/ (default: the "
                        "shared data folder beside the repository).")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's).")
    parser.add_argument("--report-only", action="store_true", help="Rewrite the report and plot from the JSON.")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        check = Check(args)
        if not args.report_only:
            check.run()
        data = check.load()
    except (ValueError, OSError) as error:
        print(f"bf16_check.py: error: {error}", file=sys.stderr)
        return 2
    if not data["runs"]:
        print("bf16_check.py: no runs recorded yet.", file=sys.stderr)
        return 2
    with file_lock(check.json_path.with_name(check.json_path.name + ".lock")):
        data = check.load()  # another process may have recorded a run meanwhile
        summary = summarise(data)
        atomic_write_text(check.json_path, json.dumps(dict(data, summary=summary), indent=2) + "\n")
    command = "python experiments/bf16/bf16_check.py " + " ".join(sys.argv[1:] if argv is None else argv)
    report = render(data, summary, command)
    atomic_write_text(check.output_dir / "bf16_check.md", report + "\n")
    write_plot(data, check.output_dir / "bf16_check.png")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
