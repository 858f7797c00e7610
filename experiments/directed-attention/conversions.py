"""The directed-attention study's conversion arm: all-MiniLM-L6-v2 converted to each attention type and healed on the
transfer study's budget, then STS-B dev Spearman of each build, by the rule its README declares.

    sharedbert convert all-MiniLM-L6-v2 runs/directed-convert/T --attention-type T --heal --steps 2860 --threads 1
    python experiments/directed-attention/conversions.py --builds runs/directed-convert   # results/conversions.*

`--builds` holds one folder per type, named as the type (`shared`, `shared_lowrank_query`, ...). The goal "reaches at
least shared's STS-B" is met for T when T's STS-B >= shared's as printed to 4 decimals. Builds of one comparison must
share the healing's precision and the CPU that healed them (both recorded); the rule does not judge builds that differ.

The repeated builds (declared in the README's "Repeated builds"): three seeds per type, each compared with `shared`
paired by seed by `sharedbert.verdicts` (95% t interval, no margin).

    python experiments/directed-attention/conversions.py build --seeds 1 2 3 [--commit]   # results/repeated-builds/
    python experiments/directed-attention/conversions.py report            # results/repeated-builds.json and .md

`build` runs, seed-major (every type's seed 1, then seed 2, ...), `sharedbert convert all-MiniLM-L6-v2
runs/directed-convert-seeds/seedS/T --attention-type T --heal --steps 2860 --threads 1 --seed S` for every (type,
seed) without a results file, measures STS-B as above and writes results/repeated-builds/T-seedS.json; a killed run
resumes where it stopped (a finished build is not healed again, a half-healed one resumes from its checkpoint).
`--commit` commits each results file, with the regenerated report, as it lands. `report` aggregates what has landed:
each type's mean STS-B with its 95% t interval and each comparison's paired differences, interval and verdict, the
verdict published only once every declared seed of both types has landed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
BASELINE = "shared"

# The repeated builds, as the README's "Repeated builds" declares them.
TYPES = ("shared", "shared_lowrank_query", "shared_head_query", "shared_kv")  # shared first: each seed's baseline
DECLARED_SEEDS = (1, 2, 3)
HEAL_STEPS = 2860
MARGIN = 0.0  # the arm's rule has no margin (nor has the transfer evaluation of its builds)
REPEATED_DIR = HERE / "results" / "repeated-builds"
REPEATED_RUNS = REPO_ROOT / "runs" / "directed-convert-seeds"


def judge(builds: dict[str, dict]) -> dict[str, str]:
    """{type: verdict} against `shared`'s STS-B, for every type but `shared` (see the module doc)."""
    if BASELINE not in builds:
        return {kind: "not judged: no shared build" for kind in builds}
    baseline = builds[BASELINE]
    verdicts = {}
    for kind, build in builds.items():
        if kind == BASELINE:
            continue
        if (build["heal_precision"], build["cpu"]) != (baseline["heal_precision"], baseline["cpu"]):
            verdicts[kind] = "not judged: healed at another precision or on another CPU"
        elif build["heal_steps"] != baseline["heal_steps"]:
            verdicts[kind] = "not judged: healed for another number of steps"
        elif round(build["sts_b"], 4) >= round(baseline["sts_b"], 4):
            verdicts[kind] = "reaches shared's STS-B"
        else:
            verdicts[kind] = "below shared's STS-B"
    return verdicts


def measure(folder: Path, sts_tsv: Path) -> dict:
    """One build: its attention type, healing (steps, minutes, precision, CPU), parameters and STS-B dev Spearman."""
    from sharedbert import sentence_embeddings
    from sharedbert.parameter_counts import count_model_parameters
    from sharedbert.precision import cpu_name

    report = json.loads((folder / "conversion_report.json").read_text())
    heal = report.get("heal") or {}
    if not heal or heal.get("interrupted"):
        raise SystemExit(f"{folder}: the healing did not finish (conversion_report.json's 'heal' is {heal}); run the "
                         "same `sharedbert convert` command again to resume it.")
    sentence_model = sentence_embeddings.load(folder)
    model = sentence_model[0].auto_model  # the SharedBertModel inside: loaded once, for STS-B and the counts
    return {
        "attention_type": model.config.attention_type,
        "attention_rank": getattr(model.config, "attention_rank", None),
        "parameters": count_model_parameters(model),
        "heal_steps": heal["steps"], "heal_minutes": round(heal["elapsed_seconds"] / 60, 1),
        "heal_precision": heal.get("precision"), "heal_first_loss": heal.get("first_loss"),
        "heal_last_loss": heal.get("last_loss"),
        "cpu": cpu_name() or platform.processor() or platform.machine(), "retained_energy": report.get("retained_energy"),
        "sts_b": sentence_embeddings.sts_spearman(sentence_model, sts_tsv),
    }


def markdown(builds: dict[str, dict], verdicts: dict[str, str]) -> str:
    lines = ["# Directed attention: all-MiniLM-L6-v2 converted per type", "",
             "Written by `python experiments/directed-attention/conversions.py`; STS-B dev Spearman (cosine, "
             "sentence-transformers' EmbeddingSimilarityEvaluator) of each build, healed by `sharedbert convert "
             "... --heal --steps 2860 --threads 1`.", "",
             "| type | parameters | healing | STS-B | to `shared` | verdict |", "|---|---|---|---|---|---|"]
    baseline = builds.get(BASELINE, {}).get("sts_b")
    for kind, build in builds.items():
        to_shared = f"{build['sts_b'] - baseline:+.4f}" if baseline is not None and kind != BASELINE else ""
        lines.append(f"| `{kind}` | {build['parameters']:,} | {build['heal_steps']:,} steps, "
                     f"{build['heal_minutes']} min, {build['heal_precision']}, {build['cpu']} "
                     f"| {build['sts_b']:.4f} | {to_shared} | {verdicts.get(kind, '')} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- repeated builds
def build_plan(seeds, types=TYPES) -> list[tuple[int, str]]:
    """(seed, type) in the order the builds run: seed-major, so partial results stay balanced across types."""
    return [(int(seed), kind) for seed in seeds for kind in types]


def result_path(results_dir: Path, kind: str, seed: int) -> Path:
    return Path(results_dir) / f"{kind}-seed{seed}.json"


def build_folder(runs_dir: Path, kind: str, seed: int) -> Path:
    return Path(runs_dir) / f"seed{seed}" / kind


def convert_arguments(kind: str, seed: int, out: Path, steps: int = HEAL_STEPS, threads: int = 1) -> list[str]:
    """`sharedbert convert`'s arguments for one build: the arm's recipe with the seed."""
    return ["convert", "all-MiniLM-L6-v2", str(out), "--attention-type", kind, "--heal", "--steps", str(steps),
            "--threads", str(threads), "--seed", str(seed)]


def healing_finished(folder: Path, steps: int) -> bool:
    """Whether `folder` holds a build whose healing ran its `steps` to the end."""
    report = Path(folder) / "conversion_report.json"
    if not report.is_file():
        return False
    heal = json.loads(report.read_text()).get("heal") or {}
    return bool(heal) and not heal.get("interrupted") and heal.get("steps") == steps


def recorded_heal_seed(folder: Path) -> int | None:
    """The healing seed the build's last checkpoint records (its trainer state's run record), None without one."""
    checkpoints = sorted(Path(f"{folder}-checkpoints").glob("checkpoint-*/trainer_state.json"),
                         key=lambda path: int(path.parent.name.rsplit("-", 1)[1]))
    if not checkpoints:
        return None
    state = json.loads(checkpoints[-1].read_text())
    record = (state.get("stateful_callbacks", {}).get("RunRecord", {}).get("args", {}).get("record", {}))
    return record.get("heal_config", {}).get("seed")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True).stdout.strip()


def code_version() -> dict:
    """The commit the build's code comes from and whether the package differs from it."""
    return {"commit": _git("rev-parse", "HEAD"), "package_tree": _git("rev-parse", "HEAD:sharedbert"),
            "package_modified": bool(_git("status", "--porcelain", "--", "sharedbert"))}


def run_convert(arguments: list[str]) -> int:
    """`sharedbert convert` in a child process that imports this checkout's package (run from its root)."""
    print("$ sharedbert " + " ".join(arguments), flush=True)
    return subprocess.run([sys.executable, "-m", "sharedbert", *arguments], cwd=REPO_ROOT).returncode


def run_builds(seeds, types=TYPES, *, runs_dir: Path = REPEATED_RUNS, results_dir: Path = REPEATED_DIR,
               sts: Path | None = None, steps: int = HEAL_STEPS, threads: int = 1, convert=run_convert,
               measure_build=None, on_landed=None) -> list[Path]:
    """Every planned build without a results file: converted and healed (skipped where a finished build is there),
    measured and written to results_dir/T-seedS.json; `on_landed(path)` after each. Returns the files written.
    Stops (SystemExit) at a build that fails, so a rerun resumes there."""
    measure_build = measure_build or (lambda folder: measure(folder, sts))
    written = []
    for seed, kind in build_plan(seeds, types):
        target = result_path(results_dir, kind, seed)
        if target.is_file():
            print(f"{kind} seed {seed}: landed already ({target.name})", flush=True)
            continue
        folder = build_folder(runs_dir, kind, seed)
        arguments = convert_arguments(kind, seed, folder, steps, threads)
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        version = code_version()
        if not healing_finished(folder, steps):
            folder.parent.mkdir(parents=True, exist_ok=True)
            code = convert(arguments)
            if code != 0 or not healing_finished(folder, steps):
                raise SystemExit(f"{kind} seed {seed}: `sharedbert {' '.join(arguments)}` exited {code} without a "
                                 "finished healing; run the same command again to resume it.")
        recorded = recorded_heal_seed(folder)
        if recorded is not None and recorded != seed:
            raise SystemExit(f"{folder} healed with seed {recorded}, not {seed}: remove it and build it again.")
        build = measure_build(folder)
        if build["attention_type"] != kind:
            raise SystemExit(f"{folder} holds attention_type={build['attention_type']}, not {kind}.")
        # The build folder as the user would type it: a path under the runs folder, never this machine's absolute one.
        shown = [f"runs/{Path(runs_dir).name}/{Path(a).relative_to(runs_dir).as_posix()}"
                 if Path(a).is_absolute() and Path(a).is_relative_to(runs_dir) else a for a in arguments]
        record = {"type": kind, "seed": seed, "command": "sharedbert " + " ".join(shown),
                  "recorded_heal_seed": recorded, "started": started,
                  "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  **version, **build}
        from sharedbert.atomic import atomic_write_text

        atomic_write_text(target, json.dumps(record, indent=1) + "\n")
        print(f"{kind} seed {seed}: STS-B {build['sts_b']:.4f} -> {target}", flush=True)
        written.append(target)
        if on_landed is not None:
            on_landed(target)
    return written


def load_records(results_dir: Path = REPEATED_DIR) -> dict[str, dict[int, dict]]:
    """{type: {seed: record}} from the per-build results files."""
    records: dict[str, dict[int, dict]] = {}
    for path in sorted(Path(results_dir).glob("*-seed*.json")):
        record = json.loads(path.read_text())
        records.setdefault(record["type"], {})[int(record["seed"])] = record
    return records


def _mean_interval(values: dict[int, float]) -> dict:
    from sharedbert.verdicts import paired_comparison

    comparison = paired_comparison(values, margin=MARGIN, higher_is_better=True)
    return {"seeds": sorted(values), "values": [values[s] for s in sorted(values)], "n": comparison.n,
            "mean": comparison.mean, "standard_error": comparison.standard_error,
            "interval": list(comparison.interval) if comparison.interval else None}


def goal(verdict: str) -> str:
    """The declared restatement of "reaches at least shared's STS-B" from the paired verdict (margin 0)."""
    from sharedbert.verdicts import AHEAD, ON_PAR, TRAILS

    return {AHEAD: "reached", ON_PAR: "reached", TRAILS: "not reached"}.get(verdict, "left open")


def aggregate(records: dict[str, dict[int, dict]], declared_seeds=DECLARED_SEEDS) -> dict:
    """Each type's mean STS-B with its 95% t interval; each type against `shared`, paired by seed (pairs that differ
    in healing steps, precision or CPU left out and named), its verdict final only when every declared seed of both
    types has landed, none was left out and every pair was healed under one condition."""
    from sharedbert.verdicts import paired_comparison

    declared = sorted(int(s) for s in declared_seeds)
    summary = {"declared_seeds": declared, "types": TYPES, "baseline": BASELINE, "margin": MARGIN,
               "landed": {kind: sorted(records.get(kind, {})) for kind in TYPES},
               "builds_landed": sum(len(records.get(kind, {})) for kind in TYPES),
               "builds_declared": len(declared) * len(TYPES),
               "sts_b": {kind: _mean_interval({s: r["sts_b"] for s, r in records[kind].items()})
                         for kind in TYPES if records.get(kind)},
               "comparisons": {}}
    baseline = records.get(BASELINE, {})
    for kind in TYPES[1:]:
        builds = records.get(kind, {})
        paired = sorted(set(builds) & set(baseline))
        left_out = {s: "healed for another number of steps, at another precision or on another CPU" for s in paired
                    if (builds[s]["heal_steps"], builds[s]["heal_precision"], builds[s]["cpu"])
                    != (baseline[s]["heal_steps"], baseline[s]["heal_precision"], baseline[s]["cpu"])}
        seeds = [s for s in paired if s not in left_out]
        comparison = paired_comparison({s: builds[s]["sts_b"] for s in seeds},
                                       {s: baseline[s]["sts_b"] for s in seeds},
                                       margin=MARGIN, higher_is_better=True)
        # Pairs healed alike within each seed may still differ from seed to seed (a machine without native bf16
        # heals in fp32 under the same CPU name): one comparison's pairs must share one condition.
        conditions = sorted({(baseline[s]["heal_steps"], baseline[s]["heal_precision"], baseline[s]["cpu"])
                             for s in seeds})
        final = not left_out and len(conditions) <= 1 and all(s in seeds for s in declared)
        summary["comparisons"][kind] = {
            **comparison.as_dict(), "left_out": {str(s): why for s, why in left_out.items()},
            "conditions": [list(c) for c in conditions], "final": final,
            "verdict": comparison.verdict if final else "pending", "provisional_verdict": comparison.verdict,
            "goal": goal(comparison.verdict) if final else "pending"}
    return summary


def _interval_text(interval) -> str:
    return f"[{interval[0]:+.4f}, {interval[1]:+.4f}]" if interval else "—"


def report_markdown(summary: dict) -> str:
    seeds = summary["declared_seeds"]
    lines = ["# Directed attention: repeated builds per type", "",
             "Written by `python experiments/directed-attention/conversions.py report` from the per-build files in "
             "[repeated-builds/](repeated-builds/); declared in the study's README (\"Repeated builds\"). STS-B dev "
             "Spearman of all-MiniLM-L6-v2 converted to each type and healed 2,860 steps "
             "(`sharedbert convert ... --heal --steps 2860 --threads 1 --seed S`).", "",
             f"Landed: {summary['builds_landed']} of {summary['builds_declared']} builds (seeds "
             f"{', '.join(map(str, seeds))} of each type).", "",
             "| type | seeds landed | STS-B per seed | mean | 95% t interval |", "|---|---|---|---|---|"]
    for kind in summary["types"]:
        row = summary["sts_b"].get(kind)
        if row is None:
            lines.append(f"| `{kind}` | none | | | |")
            continue
        values = " / ".join(f"{v:.4f}" for v in row["values"])
        lines.append(f"| `{kind}` | {', '.join(map(str, row['seeds']))} | {values} | {row['mean']:.4f} | "
                     f"{_interval_text(row['interval'])} |")
    lines += ["", f"Each type against `{summary['baseline']}`, paired by seed: d = STS-B(type) − STS-B(shared), the "
              f"95% Student-t interval of its mean (`sharedbert.verdicts`, margin {summary['margin']:g}). The verdict is "
              "given once every declared seed of both types has landed; until then \"pending\".", "",
              "| type | paired seeds | d per seed | mean d | 95% t interval | verdict | reaches shared's STS-B |",
              "|---|---|---|---|---|---|---|"]
    for kind, row in summary["comparisons"].items():
        differences = " / ".join(f"{d:+.4f}" for d in row["differences"]) or "—"
        mean = f"{row['mean']:+.4f}" if row["mean"] is not None else "—"
        lines.append(f"| `{kind}` | {', '.join(map(str, row['seeds'])) or 'none'} | {differences} | {mean} | "
                     f"{_interval_text(row['interval'])} | {row['verdict']} | {row['goal']} |")
        for seed, why in row["left_out"].items():
            lines.append(f"|  | seed {seed} left out: {why} | | | | | |")
    return "\n".join(lines)


def write_report(results_dir: Path = REPEATED_DIR, output_dir: Path = HERE / "results") -> tuple[Path, Path, str]:
    from sharedbert.atomic import atomic_write_text

    summary = aggregate(load_records(results_dir))
    text = report_markdown(summary)
    json_path, md_path = Path(output_dir) / "repeated-builds.json", Path(output_dir) / "repeated-builds.md"
    atomic_write_text(json_path, json.dumps(summary, indent=1) + "\n")
    atomic_write_text(md_path, text + "\n")
    return json_path, md_path, text


def commit(paths: list[Path], message: str, attempts: int = 10) -> bool:
    """`git add` then `git commit -- paths` (only these paths, whatever else the shared index holds), retried while
    another process holds the index lock."""
    paths = [Path(p).resolve() for p in paths]
    repository = Path(subprocess.run(["git", "-C", str(paths[0].parent), "rev-parse", "--show-toplevel"],
                                     capture_output=True, text=True).stdout.strip())  # the files' own checkout
    names = [str(p.relative_to(repository)) for p in paths]
    for attempt in range(attempts):
        added = subprocess.run(["git", "-C", str(repository), "add", "--", *names], capture_output=True, text=True)
        done = added.returncode == 0 and subprocess.run(
            ["git", "-C", str(repository), "commit", "-q", "-m", message, "--", *names],
            capture_output=True, text=True).returncode == 0
        if done:
            return True
        time.sleep(20)
    print(f"warning: could not commit {names}; commit them by hand", flush=True)
    return False


def _sts_file(sts: Path | None) -> Path:
    if sts is not None:
        return sts
    from sharedbert.data.location import shared_data_dir

    root = shared_data_dir("glue/STS-B/dev.tsv")
    if root is None:
        raise SystemExit("GLUE's STS-B/dev.tsv was not found in a shared data folder: pass --sts FILE.")
    return root / "glue" / "STS-B" / "dev.tsv"


def build_main(argv) -> int:
    parser = argparse.ArgumentParser(prog="conversions.py build", description="The repeated builds, seed-major; "
                                     "resumable (see the module doc).")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--types", nargs="+", default=list(TYPES), choices=TYPES)
    parser.add_argument("--runs-dir", type=Path, default=REPEATED_RUNS, help="Where the build folders go.")
    parser.add_argument("--results-dir", type=Path, default=REPEATED_DIR, help="One results file per build.")
    parser.add_argument("--sts", type=Path, default=None, help="GLUE STS-B dev.tsv (default: the shared data's).")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, for the builds and the measuring.")
    parser.add_argument("--commit", action="store_true", help="Commit each results file and the report (beside "
                        "--results-dir) as it lands, in the checkout that holds them.")
    parser.add_argument("--dry-run", action="store_true", help="Print the plan and what has landed; build nothing.")
    args = parser.parse_args(argv)
    if args.dry_run:
        for seed, kind in build_plan(args.seeds, args.types):
            landed = result_path(args.results_dir, kind, seed).is_file()
            folder = build_folder(args.runs_dir, kind, seed)
            print(f"{'landed ' if landed else 'to run '} sharedbert "
                  + " ".join(convert_arguments(kind, seed, folder, threads=args.threads)))
        return 0
    import torch

    import sharedbert

    package = Path(sharedbert.__file__).resolve().parent
    if package != REPO_ROOT / "sharedbert":  # the commit each results file records is this checkout's
        raise SystemExit(f"sharedbert is imported from {package}, not from this checkout ({REPO_ROOT}): run with "
                         f"PYTHONPATH={REPO_ROOT}.")
    torch.set_num_threads(args.threads)
    sts = _sts_file(args.sts)

    def landed(path: Path) -> None:
        if not args.commit:
            return
        json_path, md_path, _ = write_report(args.results_dir, args.results_dir.parent)
        record = json.loads(path.read_text())
        summary = json.loads(json_path.read_text())
        commit([path, json_path, md_path],
               f"directed-attention repeated builds: {record['type']} seed {record['seed']} landed (STS-B "
               f"{record['sts_b']:.4f}, healed {record['heal_minutes']} min, {record['heal_precision']}, "
               f"{record['cpu']}); report regenerated, {summary['builds_landed']} of {summary['builds_declared']} "
               "builds landed")

    run_builds(args.seeds, args.types, runs_dir=args.runs_dir, results_dir=args.results_dir, sts=sts,
               threads=args.threads, on_landed=landed)
    return 0


def report_main(argv) -> int:
    parser = argparse.ArgumentParser(prog="conversions.py report", description="Aggregate the repeated builds.")
    parser.add_argument("--results-dir", type=Path, default=REPEATED_DIR)
    parser.add_argument("--output-dir", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    print(write_report(args.results_dir, args.output_dir)[2])
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("build", "report"):
        return (build_main if argv[0] == "build" else report_main)(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--builds", type=Path, required=True, help="Folder of one build per type, named as the type.")
    parser.add_argument("--sts", type=Path, default=None, help="GLUE STS-B dev.tsv (default: the shared data's).")
    parser.add_argument("--output-dir", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    from sharedbert.atomic import atomic_write_text
    from sharedbert.data.location import shared_data_dir

    sts = args.sts
    if sts is None:
        root = shared_data_dir("glue/STS-B/dev.tsv")
        if root is None:
            raise SystemExit("GLUE's STS-B/dev.tsv was not found in a shared data folder: pass --sts FILE.")
        sts = root / "glue" / "STS-B" / "dev.tsv"
    folders = sorted(p for p in args.builds.iterdir() if (p / "conversion_report.json").is_file())
    if not folders:
        raise SystemExit(f"{args.builds} holds no finished build (a folder with conversion_report.json).")
    builds = {folder.name: measure(folder, sts) for folder in folders}
    for kind, build in builds.items():
        if build["attention_type"] != kind:
            raise SystemExit(f"{args.builds / kind} holds attention_type={build['attention_type']}: name each build's "
                             "folder after its attention type.")
    verdicts = judge(builds)
    atomic_write_text(args.output_dir / "conversions.json",
                      json.dumps({"builds": builds, "verdicts": verdicts}, indent=1) + "\n")
    text = markdown(builds, verdicts)
    atomic_write_text(args.output_dir / "conversions.md", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
