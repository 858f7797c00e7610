"""Sentence embeddings from any (Shared)Bert encoder: mean pooling over real tokens, then L2 normalisation.

This is the pooling all-MiniLM-L6-v2 was trained with (sentence-transformers' `1_Pooling` with mean tokens plus
`Normalize`), so a model converted from it and healed stays usable as a sentence-embedding model:

    >>> from sharedbert.embeddings import encode
    >>> vectors = encode(model, tokenizer, ["A man is playing a guitar.", "Someone plays music."])
    >>> similarity = vectors[0] @ vectors[1]
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch


def mean_pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average the token vectors of each sequence, ignoring padding."""
    mask = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)
    return (last_hidden_state * mask).sum(1) / mask.sum(1).clamp_min(1e-9)


def _encoder_output(model, **inputs) -> torch.Tensor:
    """The last hidden state of a base model or of a model with a head (which holds its encoder as `base_model`)."""
    base = getattr(model, "base_model", model)
    return base(**inputs).last_hidden_state


@torch.no_grad()
def encode(
    model,
    tokenizer,
    sentences: list[str],
    batch_size: int = 64,
    max_length: int = 128,
    normalize: bool = True,
) -> torch.Tensor:
    """Embed `sentences` as (len(sentences), hidden) float tensor: mean-pooled last hidden state, L2-normalised.

    Sentences are sorted by length before batching (less padding, same result) and returned in the input order.
    """
    if isinstance(sentences, str):
        raise TypeError("encode expects a list of sentences, not a single string: wrap it as [sentence].")
    was_training = model.training
    model.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    device = next(model.parameters()).device
    out = [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        batch = tokenizer(
            [sentences[i] for i in index], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )
        batch = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        pooled = mean_pool(_encoder_output(model, **batch), batch["attention_mask"])
        if normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        for row, i in enumerate(index):
            out[i] = pooled[row].float().cpu()
    model.train(was_training)
    return torch.stack(out) if out else torch.empty(0)


def read_sts(tsv_path) -> tuple[list[str], list[str], list[float]]:
    """Read a GLUE STS-B TSV (header with `sentence1`, `sentence2`, `score`); quoting is off, as in GLUE's files."""
    path = Path(tsv_path)
    if not path.is_file():
        raise FileNotFoundError(f"STS-B file {path} not found (expected GLUE's STS-B/dev.tsv).")
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = rows[0]
    missing = [c for c in ("sentence1", "sentence2", "score") if c not in header]
    if missing:
        raise ValueError(f"{path} has no column(s) {missing} in its header {header}: is it a GLUE STS-B file?")
    a, b, s = header.index("sentence1"), header.index("sentence2"), header.index("score")
    rows = [r for r in rows[1:] if len(r) > max(a, b, s)]
    return [r[a] for r in rows], [r[b] for r in rows], [float(r[s]) for r in rows]


def sts_spearman(model, tokenizer, tsv_path, batch_size: int = 64) -> float:
    """Spearman correlation between the cosine of mean-pooled embeddings and the gold STS score (no fine-tuning)."""
    from scipy.stats import spearmanr

    first, second, gold = read_sts(tsv_path)
    unique = sorted(set(first) | set(second))
    vectors = encode(model, tokenizer, unique, batch_size=batch_size)
    position = {sentence: i for i, sentence in enumerate(unique)}
    left = vectors[[position[s] for s in first]]
    right = vectors[[position[s] for s in second]]
    cosine = (left * right).sum(-1)
    return float(spearmanr(cosine.numpy(), gold).statistic)
