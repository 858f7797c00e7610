"""Generating for a file of inputs with a saved seq2seq model (`sharedbert generate`).

transformers 5 removed the text2text-generation pipeline; this reads the sources (one per line of a .txt file, or a
column of a CSV/TSV/JSON(L) file), generates in batches with greedy or beam search, and writes JSON lines
{"source": ..., "output": ...} in the input's order, atomically. `GenerateArguments` holds every option.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from .atomic import atomic_write_text
from .data.pairs import read_sources
from .data.tasks import MAX_LENGTH, DataError
from .loading import from_pretrained
from .model_files import is_seq2seq_checkpoint
from .remote_code import trust_remote_code_option

logger = logging.getLogger(__name__)


@dataclass
class GenerateArguments:
    """Every option of `generate` / `sharedbert generate`, with its default and help."""

    model: str = field(metadata={"positional": True, "help": "A saved seq2seq model folder."})
    input: str = field(metadata={"help": "The sources: a .txt file (one per line) or a CSV/TSV/JSON(L) file."})
    output: str = field(metadata={"help": "Where the JSON lines go ({\"source\": ..., \"output\": ...} per line)."})
    source_column: str | None = field(default=None, metadata={"help": "With a table: the column to generate from."})
    num_beams: int = field(default=1, metadata={"help": "Beam search width (1: greedy)."})
    max_new_tokens: int = field(default=64, metadata={"help": "The longest output, in tokens."})
    max_length: int = field(default=MAX_LENGTH, metadata={
        "help": "Truncate sources to this many tokens, as fine-tuning does."})
    batch_size: int = field(default=16, metadata={"help": "Sources per generation batch."})
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing --output file."})
    trust_remote_code: bool = trust_remote_code_option()

    def __post_init__(self):
        for name in ("num_beams", "max_new_tokens", "max_length", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}.")
        if Path(self.output).exists() and not self.overwrite:
            raise ValueError(f"--output {self.output} exists; pass --overwrite to replace it.")


def generate(arguments: GenerateArguments | None = None, /, **options) -> dict:
    """Generate for every source of `input` and write `output`; returns {"sources", "output", "seconds"}."""
    args = replace(arguments, **options) if arguments is not None else GenerateArguments(**options)
    started = time.time()
    sources = read_sources(args.input, args.source_column)  # checked before the model is loaded
    folder = Path(args.model)
    if not (folder / "config.json").is_file():
        raise DataError(f"{folder} is not a model folder (no config.json): give a saved seq2seq model.")
    if not is_seq2seq_checkpoint(folder):
        raise DataError(f"{folder} is not a seq2seq model (its config.json has no is_encoder_decoder): fine-tune one "
                        f"from it first, `sharedbert finetune --model {folder} --target-column ...` "
                        "(docs/generation.md).")
    model = from_pretrained(AutoModelForSeq2SeqLM, folder, args.trust_remote_code).eval()
    tokenizer = from_pretrained(AutoTokenizer, folder, args.trust_remote_code)
    outputs = [None] * len(sources)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))  # similar lengths: less padding
    for start in range(0, len(order), args.batch_size):
        chunk = order[start:start + args.batch_size]
        batch = tokenizer([sources[i] for i in chunk], padding=True, truncation=True, max_length=args.max_length,
                          return_tensors="pt")
        with torch.inference_mode():
            generated = model.generate(**batch, num_beams=args.num_beams, max_new_tokens=args.max_new_tokens,
                                       do_sample=False)
        for i, text in zip(chunk, tokenizer.batch_decode(generated, skip_special_tokens=True)):
            outputs[i] = text.strip()
        logger.info("generated %d of %d", min(start + args.batch_size, len(order)), len(order))
    atomic_write_text(args.output, "".join(json.dumps({"source": s, "output": o}, ensure_ascii=False) + "\n"
                                           for s, o in zip(sources, outputs)))
    return {"sources": len(sources), "output": str(args.output), "seconds": time.time() - started}


__all__ = ["GenerateArguments", "generate"]
