"""`sharedbert params`: parameter counts for every attention type and sharing mode, from built modules
(`sharedbert.parameter_counts.parameter_counts`), as a table or JSON."""

import dataclasses
import json

from .common import HelpFormatter, add_command, arguments_from, call_library

DESCRIPTION = (
    "Parameter counts of the attention projections and of the whole model (SharedBertModel with pooler, no task "
    "head) for every attention type and cross-layer sharing mode, counted from modules built on the meta device. "
    "'QKV/layer' is one self-attention projection block (Wq,Wk,Wv+biases; or Ws,b,dq,dk,dv; or Wq,Wv(+P_h)); a shared "
    "sublayer counts once however many depths use it."
)


def add_parser(subparsers):
    from ..parameter_counts import ParamsArguments

    parser = add_command(subparsers, "params", [ParamsArguments], description=DESCRIPTION,
                         help="print parameter counts for every attention type and sharing mode",
                         formatter_class=HelpFormatter)
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..parameter_counts import ParamsArguments, parameter_counts

    arguments = arguments_from(args, ParamsArguments)
    rows, code = call_library("params", lambda: parameter_counts(arguments))
    if code:
        return code
    if args.json:
        print(json.dumps([dataclasses.asdict(row) for row in rows], indent=2))
    elif arguments.sharing_presets:
        print(preset_table(rows, arguments))
    else:
        print(table(rows, arguments))
    return 0


def preset_table(rows, arguments) -> str:
    """Each sharing preset's stored self-attention projections and model size, against standard attention's."""
    baseline = next(r for r in rows if r.sharing_preset == "standard")
    width = max(len("preset"), *(len(row.sharing_preset) for row in rows))
    header = f"{'preset':<{width}} {'stored QKV':>11} {'of std':>7} {'model':>13} {'of BERT':>8}"
    lines = [f"Sharing presets at the sizes of {arguments.config} (stored QKV = the self-attention projections of "
             "every stored layer; model = encoder + pooler)", "", header, "-" * len(header)]
    lines += [f"{row.sharing_preset:<{width}} {row.qkv_total:>11,} {row.qkv_total / baseline.qkv_total:>7.1%} "
              f"{row.model:>13,} {row.model / baseline.model:>8.1%}" for row in rows]
    return "\n".join(lines)


def table(rows, arguments) -> str:
    """The counts, each with how many fewer parameters it has than standard attention without sharing (a
    reduction, as the paper quotes its 66.53%; `preset_table` gives shares instead)."""
    from ..parameter_counts import reduction

    baseline = next(r for r in rows if r.attention_type == "standard" and r.layer_sharing == "none")
    width = max(len("attention"), *(len(row.attention_type) for row in rows))
    header = f"{'attention':<{width}} {'sharing':<10} {'QKV/layer':>11} {'fewer':>8} {'model':>13} {'fewer':>8}"
    lines = [
        f"Parameters of {arguments.config} (QKV = one layer's self-attention projections; model = encoder + pooler)",
        "",
        header,
        "-" * len(header),
    ]
    for row in rows:
        lines.append(
            f"{row.attention_type:<{width}} {row.layer_sharing:<10} {row.qkv_per_layer:>11,} "
            f"{reduction(row.qkv_per_layer, baseline.qkv_per_layer):>7.2f}% {row.model:>13,} "
            f"{reduction(row.model, baseline.model):>7.2f}%"
        )
    lines += [
        "",
        f"'fewer': how many fewer parameters than standard attention without sharing "
        f"(QKV {baseline.qkv_per_layer:,} per layer, model {baseline.model:,}). Shared sublayers use "
        f"{arguments.num_unique_layers} distinct set(s).",
    ]
    return "\n".join(lines)
