"""`sharedbert params`: parameter counts for every attention type and sharing mode, from built modules
(`sharedbert.params.parameter_report`)."""

from ..training.presets import PRESETS
from .common import call_library


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
    from ..params import parameter_report

    report, code = call_library("params", parameter_report, preset_or_json=args.config,
                                num_unique_layers=args.num_unique_layers, as_json=args.json)
    if code:
        return code
    print(report)
    return 0
