"""`sharedbert params`: parameter counts for every attention type and sharing mode, from built modules."""

import json

from ..params import parameter_table, reduction
from ..presets import PRESETS, config_values


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "params",
        help="print parameter counts for every attention type and sharing mode",
        description="Parameter counts of the attention projections and of the whole model (SharedBertModel with "
        "pooler, no task head) for every attention type and cross-layer sharing mode, counted from modules built "
        "on the meta device. 'QKV/layer' is one self-attention projection block (Wq,Wk,Wv+biases; or Ws,b,dq,dk,dv; "
        "or Wq,Wv(+P_h)); a shared sublayer counts once however many depths use it.",
    )
    parser.add_argument(
        "config", nargs="?", default="bert-base", help=f"a preset ({', '.join(PRESETS)}) or a config JSON file"
    )
    parser.add_argument("--num-unique-layers", type=int, default=1, help="distinct layers when sharing (default 1)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(run=run)


def run(args) -> int:
    values = config_values(args.config)
    for key in ("attention_type", "layer_sharing", "num_unique_layers", "sharing_order"):
        values.pop(key, None)
    values["num_unique_layers"] = args.num_unique_layers
    rows = parameter_table(values)
    if args.json:
        print(json.dumps([row.__dict__ for row in rows], indent=2))
        return 0
    baseline = next(r for r in rows if r.attention_type == "standard" and r.layer_sharing == "none")
    print(f"Parameters of {args.config} (QKV = one layer's self-attention projections; model = encoder + pooler)\n")
    header = f"{'attention':<10} {'sharing':<10} {'QKV/layer':>11} {'vs std':>8} {'model':>13} {'vs BERT':>8}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.attention_type:<10} {row.layer_sharing:<10} {row.qkv_per_layer:>11,} "
            f"{reduction(row.qkv_per_layer, baseline.qkv_per_layer):>7.2f}% {row.model:>13,} "
            f"{reduction(row.model, baseline.model):>7.2f}%"
        )
    print(
        f"\n'vs std' / 'vs BERT': reduction relative to standard attention without sharing "
        f"(QKV {baseline.qkv_per_layer:,} per layer, model {baseline.model:,}). Shared sublayers use "
        f"{args.num_unique_layers} distinct set(s)."
    )
    return 0
