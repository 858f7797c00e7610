"""How much faster (or slower) one training iteration of a study arm runs in bf16 autocast than in fp32, on this
machine: the ratio that decides what `--precision auto` buys.

Both precisions train the same freshly built model on the same training windows, alternating blocks of iterations in
one process, so a change in the machine's load hits both alike. It reports wall time and this thread's CPU time (which
time-slicing by other processes does not inflate) per precision and their ratios.

    python experiments/charlm/precision_timing.py --arm standard --iterations 50 --block 10 --threads 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import study  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objective", choices=study.OBJECTIVES, default="clm")
    parser.add_argument("--arm", default="standard")
    parser.add_argument("--recipe", choices=list(study.RECIPES), default="cpu")
    parser.add_argument("--iterations", type=int, default=50, help="per precision")
    parser.add_argument("--block", type=int, default=10, help="iterations per block before switching precision")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", type=Path)
    parser.add_argument("--output", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    import sharedbert  # noqa: F401
    from sharedbert.precision import native_bf16

    recipe = study.RECIPES[args.recipe]
    data = study.load_data(args.data or study.default_data_path(), recipe.train_fraction)
    torch.manual_seed(0)
    model, _ = study.build_model(args.arm, args.objective, recipe,
                                 study.model_vocab_size(args.objective, data.vocab_size))
    optimizer, schedule = study.optimizer_and_schedule(model, recipe)
    windows = study.TrainWindows(data.train_ids, 2 * args.iterations * recipe.batch, recipe.context, 0,
                                 args.objective, recipe.mask_probability, data.vocab_size)
    totals = {"fp32": [0.0, 0.0, 0], "bf16": [0.0, 0.0, 0]}  # wall s, CPU s, iterations
    step = 0
    while min(total[2] for total in totals.values()) < args.iterations:
        for precision in ("fp32", "bf16"):
            autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                        else contextlib.nullcontext())
            for _ in range(args.block):
                items = [windows[step * recipe.batch + j] for j in range(recipe.batch)]
                batch = {key: torch.stack([item[key] for item in items]) for key in items[0]}
                wall, cpu = time.perf_counter(), time.thread_time()
                with autocast:
                    outputs = model(input_ids=batch["input_ids"])
                    loss = study.token_mean_cross_entropy(outputs, batch["labels"])
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                totals[precision][0] += time.perf_counter() - wall
                totals[precision][1] += time.thread_time() - cpu
                totals[precision][2] += 1
                step += 1
    tokens = recipe.batch * recipe.context
    figures = {precision: {"iterations": n, "wall_tokens_per_second": n * tokens / wall,
                           "cpu_tokens_per_second": n * tokens / cpu}
               for precision, (wall, cpu, n) in totals.items()}
    figures["bf16_over_fp32_speed_wall"] = (figures["bf16"]["wall_tokens_per_second"]
                                            / figures["fp32"]["wall_tokens_per_second"])
    figures["bf16_over_fp32_speed_cpu"] = (figures["bf16"]["cpu_tokens_per_second"]
                                           / figures["fp32"]["cpu_tokens_per_second"])
    figures.update(arm=args.arm, objective=args.objective, recipe=args.recipe, threads=args.threads,
                   block=args.block, native_bf16=native_bf16("cpu"), **study.machine())
    text = json.dumps(figures, indent=1)
    if args.output:
        from sharedbert.atomic import atomic_write_text

        atomic_write_text(args.output, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
