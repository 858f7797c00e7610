"""The directed-attention study's conversion arm: all-MiniLM-L6-v2 converted to each attention type and healed on the
transfer study's budget, then STS-B dev Spearman of each build, by the rule its README declares.

    sharedbert convert all-MiniLM-L6-v2 runs/directed-convert/T --attention-type T --heal --steps 2860 --threads 1
    python experiments/directed-attention/conversions.py --builds runs/directed-convert   # results/conversions.*

`--builds` holds one folder per type, named as the type (`shared`, `shared_lowrank_query`, ...). The goal "reaches at
least shared's STS-B" is met for T when T's STS-B >= shared's as printed to 4 decimals. Builds of one comparison must
share the healing's precision and the CPU that healed them (both recorded); the rule does not judge builds that differ.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINE = "shared"


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


def main(argv=None) -> int:
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
