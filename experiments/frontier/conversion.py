"""The frontier's shipping builds (conversion/README.md is their report): all-MiniLM-L6-v2 converted with the sharing
of the frontier's best configuration at <= 35% (the `albert-attention` preset) and with the paper's form
(`shared-projection`), healed on `shared`'s step budget, three seeds each, scored on STS-B dev beside the original.

    python experiments/frontier/conversion.py build --seeds 1 2 3 [--commit]   # conversion/results/builds/P-seedS.json
    python experiments/frontier/conversion.py report                          # conversion/results/summary.{json,md}

From a worktree at a fixed commit, `--results-dir ../main/experiments/frontier/conversion/results` writes the files
into the main checkout, and `--commit` commits them there (only those files, whatever else its index holds).

`build` runs seed-major (every preset's seed 1, then seed 2, ...) `sharedbert convert all-MiniLM-L6-v2
runs/frontier-convert/seedS/P --sharing-preset P --heal --steps 2860 --threads 1 --seed S` for each build without a
results file, scores it and writes its file; a killed run resumes (a finished build is not healed again, a half-healed
one resumes from its checkpoint). `report` judges what has landed by the README's rule, the verdicts published only
once every declared seed of both presets has landed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
RESULTS = HERE / "conversion" / "results"
RUNS = REPO_ROOT / "runs" / "frontier-convert"

# As conversion/README.md declares them.
PRESETS = ("shared-projection", "albert-attention")  # the baseline first: each seed's pair is complete sooner
BASELINE, SHIPPED = PRESETS
DECLARED_SEEDS = (1, 2, 3)
HEAL_STEPS = 2860  # `shared`'s conversion budget in the transfer and directed-attention studies
MARGIN = 0.0  # as the directed-attention study's repeated builds: any difference the interval shows is a verdict
SOURCE = "all-MiniLM-L6-v2"


def build_folder(runs_dir: Path, preset: str, seed: int) -> Path:
    return Path(runs_dir) / f"seed{seed}" / preset


def convert_arguments(preset: str, seed: int, out: Path, threads: int = 1) -> list[str]:
    return ["convert", SOURCE, str(out), "--sharing-preset", preset, "--heal", "--steps", str(HEAL_STEPS),
            "--threads", str(threads), "--seed", str(seed)]


def healing_finished(folder: Path) -> bool:
    report = Path(folder) / "conversion_report.json"
    if not report.is_file():
        return False
    heal = json.loads(report.read_text()).get("heal") or {}
    return bool(heal) and not heal.get("interrupted") and heal.get("steps") == HEAL_STEPS


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True).stdout.strip()


def score(model_folder: str, sts: Path) -> float:
    from sharedbert import sentence_embeddings

    return sentence_embeddings.sts_spearman(sentence_embeddings.load(model_folder), sts)


def measure(folder: Path, sts: Path) -> dict:
    """One finished build: how it shares (read back from the saved model), its healing, parameters and STS-B."""
    from sharedbert import sentence_embeddings
    from sharedbert.parameter_counts import count_model_parameters
    from sharedbert.precision import cpu_name

    report = json.loads((folder / "conversion_report.json").read_text())
    heal = report["heal"]
    model = sentence_embeddings.load(folder)
    config = model[0].auto_model.config
    return {"sharing_preset": report.get("sharing_preset"), "attention_type": config.attention_type,
            "layer_sharing": config.layer_sharing, "num_unique_layers": config.num_unique_layers,
            "parameters": count_model_parameters(model[0].auto_model), "heal_steps": heal["steps"],
            "heal_minutes": round(heal["elapsed_seconds"] / 60, 1), "heal_precision": heal.get("precision"),
            "cpu": cpu_name(), "sts_b": sentence_embeddings.sts_spearman(model, sts)}


def run_builds(seeds, *, runs_dir: Path = RUNS, results_dir: Path = RESULTS, sts: Path, threads: int = 1,
               convert=None, measure_build=None, on_landed=None) -> list[Path]:
    """Every planned build without a results file, converted and healed where it has not finished, measured and
    written to results_dir/builds/P-seedS.json. Stops (SystemExit) at a build that fails, so a rerun resumes there."""
    from sharedbert.atomic import atomic_write_text
    from sharedbert.sharing_presets import sharing_preset

    convert = convert or (lambda arguments: subprocess.run([sys.executable, "-m", "sharedbert", *arguments],
                                                           cwd=REPO_ROOT).returncode)
    measure_build = measure_build or (lambda folder: measure(folder, sts))
    written = []
    for seed in seeds:
        for preset in PRESETS:
            target = Path(results_dir) / "builds" / f"{preset}-seed{seed}.json"
            if target.is_file():
                continue
            folder = build_folder(runs_dir, preset, seed)
            arguments = convert_arguments(preset, seed, folder, threads)
            started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            if not healing_finished(folder):
                folder.parent.mkdir(parents=True, exist_ok=True)
                code = convert(arguments)
                if code != 0 or not healing_finished(folder):
                    raise SystemExit(f"{preset} seed {seed}: `sharedbert {' '.join(arguments)}` exited {code} without "
                                     "a finished healing; run the same command again to resume it.")
            build = measure_build(folder)
            wanted = {key: sharing_preset(preset)[key] for key in ("attention_type", "layer_sharing")}
            if build["sharing_preset"] != preset or {k: build[k] for k in wanted} != wanted:
                raise SystemExit(f"{folder} does not hold the preset {preset} ({build}): remove it and build again.")
            shown = ["runs/" + Path(a).relative_to(Path(runs_dir).parent).as_posix() if a == str(folder) else a
                     for a in arguments]  # the folder as a user types it, never this machine's absolute path
            record = {"preset": preset, "seed": seed, "command": "sharedbert " + " ".join(shown), "started": started,
                      "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "commit": _git("rev-parse", "HEAD"), "package_tree": _git("rev-parse", "HEAD:sharedbert"),
                      "package_modified": bool(_git("status", "--porcelain", "--", "sharedbert")), **build}
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(target, json.dumps(record, indent=1) + "\n")
            print(f"{preset} seed {seed}: STS-B {build['sts_b']:.4f} -> {target}", flush=True)
            written.append(target)
            if on_landed is not None:
                on_landed(target)
    return written


def load_builds(results_dir: Path = RESULTS) -> dict[str, dict[int, dict]]:
    builds: dict[str, dict[int, dict]] = {}
    for path in sorted((Path(results_dir) / "builds").glob("*-seed*.json")):
        record = json.loads(path.read_text())
        builds.setdefault(record["preset"], {})[int(record["seed"])] = record
    return builds


def summarise(builds: dict[str, dict[int, dict]], original: float | None) -> dict:
    """Each preset's STS-B per seed with its mean and 95% t interval; `albert-attention` against `shared-projection`
    paired by seed, and each preset against the original; a verdict only when every declared seed of both presets
    has landed, at one commit, precision and CPU."""
    from sharedbert.verdicts import paired_comparison

    declared = list(DECLARED_SEEDS)
    complete = all(sorted(builds.get(p, {})) == declared for p in PRESETS)
    conditions = {(b["commit"], b["heal_precision"], b["cpu"], b["heal_steps"]) for p in builds for b in builds[p].values()}
    if len(conditions) > 1:
        raise SystemExit(f"the builds differ in commit, precision, CPU or healing steps: {sorted(conditions)}; one "
                         "comparison shares all four.")

    def judged(comparison) -> dict:
        return {**comparison.as_dict(), "verdict": comparison.verdict if complete else "pending",
                "provisional_verdict": comparison.verdict}

    sts = {p: {s: b["sts_b"] for s, b in sorted(builds.get(p, {}).items())} for p in PRESETS}

    def preset_row(preset: str) -> dict:
        row = {"seeds": list(sts[preset]), "sts_b": list(sts[preset].values()),
               "parameters": next(iter(builds[preset].values()))["parameters"] if builds.get(preset) else None}
        if sts[preset]:
            estimate = paired_comparison(sts[preset], margin=MARGIN, higher_is_better=True)
            row.update(mean=estimate.mean, interval=list(estimate.interval) if estimate.interval else None)
        return row

    summary = {"declared_seeds": declared, "presets": list(PRESETS), "margin": MARGIN, "heal_steps": HEAL_STEPS,
               "complete": complete, "conditions": [list(c) for c in conditions], "original_sts_b": original,
               "builds": {p: preset_row(p) for p in PRESETS},
               "shipped_against_baseline": judged(paired_comparison(sts[SHIPPED], sts[BASELINE], margin=MARGIN,
                                                                    higher_is_better=True)),
               "against_original": {}}
    if original is not None:
        for preset in PRESETS:
            summary["against_original"][preset] = judged(paired_comparison(
                sts[preset], {s: original for s in sts[preset]}, margin=MARGIN, higher_is_better=True))
    return summary


def _interval(row: dict) -> str:
    if row.get("mean") is None:
        return "—"
    if not row.get("interval"):
        return f"{row['mean']:+.4f} (n = {row['n']})"
    return f"{row['mean']:+.4f} [{row['interval'][0]:+.4f}, {row['interval'][1]:+.4f}]"


def markdown(summary: dict) -> str:
    lines = ["# The frontier's shipping builds", "",
             "Written by `python experiments/frontier/conversion.py report` from [builds/](builds/); declared in "
             "[../README.md](../README.md). STS-B dev Spearman of all-MiniLM-L6-v2 converted with each preset and "
             f"healed {summary['heal_steps']:,} steps; the original scores "
             + (f"{summary['original_sts_b']:.4f}." if summary["original_sts_b"] is not None else "(not measured)."),
             "", "| preset | parameters | STS-B per seed | mean | − original (95% t) | verdict |", "|---|---|---|---|---|---|"]
    for preset in summary["presets"]:
        row, against = summary["builds"][preset], summary["against_original"].get(preset, {})
        values = " / ".join(f"{v:.4f}" for v in row["sts_b"]) or "none yet"
        parameters = f"{row['parameters']:,}" if row["parameters"] else "—"
        mean = f"{row['mean']:.4f}" if "mean" in row else "—"
        lines.append(f"| `{preset}` | {parameters} | {values} | {mean} | {_interval(against)} | "
                     f"{against.get('verdict', '—')} |")
    shipped = summary["shipped_against_baseline"]
    lines += ["", f"`{SHIPPED}` − `{BASELINE}`, paired by seed: {_interval(shipped)}, {shipped['verdict']} "
              f"(margin {summary['margin']:g}; \"pending\" until every declared seed of both has landed)."]
    return "\n".join(lines)


def write_report(results_dir: Path = RESULTS, original: float | None = None) -> tuple[Path, Path]:
    from sharedbert.atomic import atomic_write_text

    json_path, md_path = Path(results_dir) / "summary.json", Path(results_dir) / "summary.md"
    if original is None and json_path.is_file():
        original = json.loads(json_path.read_text()).get("original_sts_b")
    summary = summarise(load_builds(results_dir), original)
    atomic_write_text(json_path, json.dumps(summary, indent=1) + "\n")
    atomic_write_text(md_path, markdown(summary) + "\n")
    return json_path, md_path


def commit(paths: list[Path], message: str) -> None:
    """`git add` and `git commit -- paths` in the checkout that holds the files (the main one when --results-dir
    points there from a worktree)."""
    paths = [Path(p).resolve() for p in paths]
    checkout = Path(subprocess.run(["git", "-C", str(paths[0].parent), "rev-parse", "--show-toplevel"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    names = [str(p.relative_to(checkout)) for p in paths]
    subprocess.run(["git", "-C", str(checkout), "add", "--", *names], check=True)
    subprocess.run(["git", "-C", str(checkout), "commit", "-q", "-m", message, "--", *names], check=True)


def _sts_file() -> Path:
    from sharedbert.data.location import shared_data_dir

    root = shared_data_dir("glue/STS-B/dev.tsv")
    if root is None:
        raise SystemExit("GLUE's STS-B/dev.tsv was not found in a shared data folder: set SHAREDBERT_DATA.")
    return root / "glue" / "STS-B" / "dev.tsv"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="Convert, heal and score the builds that have not landed (resumable).")
    build.add_argument("--seeds", type=int, nargs="+", default=list(DECLARED_SEEDS))
    build.add_argument("--threads", type=int, default=1)
    build.add_argument("--commit", action="store_true", help="Commit each build's file and the report as it lands.")
    report = commands.add_parser("report", help="summary.json and summary.md from the builds that have landed.")
    for command in (build, report):
        command.add_argument("--results-dir", type=Path, default=RESULTS, help="Where builds/ and the summary go.")
    args = parser.parse_args(argv)
    import torch

    from sharedbert.training.models import resolve_source

    sts = _sts_file()
    torch.set_num_threads(getattr(args, "threads", 1))
    original = score(resolve_source(SOURCE), sts)  # deterministic: scored again with each report
    if args.command == "report":
        print("\n".join(map(str, write_report(args.results_dir, original=original))))
        return 0

    def landed(path: Path) -> None:
        json_path, md_path = write_report(args.results_dir, original=original)
        record = json.loads(path.read_text())
        if args.commit:
            commit([path, json_path, md_path], f"frontier shipping builds: {record['preset']} seed {record['seed']} "
                   f"landed (STS-B {record['sts_b']:.4f}, healed {record['heal_minutes']} min, "
                   f"{record['heal_precision']}, {record['cpu']})")

    run_builds(args.seeds, results_dir=args.results_dir, sts=sts, threads=args.threads, on_landed=landed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
