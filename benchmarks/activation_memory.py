"""The activations a training step keeps for backward, shared attention against standard, at all-MiniLM-L6-v2's sizes.

Counts the bytes of every tensor autograd saves during the forward pass (`torch.autograd.graph.saved_tensors_hooks`,
storages counted once), which is what a training step holds at its peak beside weights and optimizer state. The
count does not depend on timing, so runs of two versions of the package compare exactly:

    python benchmarks/activation_memory.py                                  # this checkout
    PYTHONPATH=/path/to/older/checkout python benchmarks/activation_memory.py --label before

Prints a table and merges the run into benchmarks/results/activation_memory.json under --label: read, merged and
written back under a lock (two runs at once both keep their rows), atomically (a kill leaves the previous file).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "activation_memory.json"
DIMS = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
            max_position_embeddings=512)


def saved_bytes(model, inputs: dict) -> int:
    """Bytes of the distinct storages autograd saves for backward in one forward pass with a loss."""
    import torch

    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(**inputs).loss
    loss.backward()
    return sum(storages.values())


def models():
    """(name, model, inputs) of the measured cases: the MLM encoder and the seq2seq model, each attention type."""
    import torch

    from sharedbert import SharedBertConfig
    from sharedbert.modeling_sharedbert import SharedBertForConditionalGeneration, SharedBertForMaskedLM

    torch.manual_seed(0)
    ids = torch.randint(1000, 30000, (8, 128))
    for attention_type in ("standard", "shared"):
        config = SharedBertConfig(**DIMS, attention_type=attention_type, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
        yield f"encoder, {attention_type}", SharedBertForMaskedLM(config).train(), {"input_ids": ids, "labels": ids}
        # Cross-attention of the self-attention's family (shared_kv for shared), so that the seq2seq rows compare
        # shared-projection attention throughout with standard attention throughout.
        cross_attention_type = "shared_kv" if attention_type == "shared" else "standard"
        config = SharedBertConfig(**DIMS, attention_type=attention_type, is_encoder_decoder=True,
                                  cross_attention_type=cross_attention_type, decoder_start_token_id=101,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        yield (f"seq2seq, {attention_type}", SharedBertForConditionalGeneration(config).train(),
               {"input_ids": ids, "labels": ids[:, :64].contiguous()})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import torch

    import sharedbert

    torch.set_num_threads(1)
    measured = {name: saved_bytes(model, inputs) for name, model, inputs in models()}
    # The package measured, relative to the repository (no machine's absolute paths in a results file).
    package = os.path.relpath(Path(sharedbert.__file__).parent, REPO)
    merge_result(args.output, args.label, {"package": package, "batch": [8, 128], "saved_bytes": measured})
    for name, value in measured.items():
        print(f"{name:20s} {value / 2**20:8.1f} MiB saved for backward")
    return 0


def merge_result(output: Path, label: str, row: dict) -> None:
    """Put `row` under `label` in the JSON file `output`, keeping every other label: read, merge and write under an
    exclusive lock (`output`.lock), the write atomic."""
    from sharedbert.atomic import atomic_write_text, file_lock

    output.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(output.with_name(output.name + ".lock")):
        results = json.loads(output.read_text()) if output.is_file() else {}
        results[label] = row
        atomic_write_text(output, json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
