"""Train a new WordPiece vocabulary (BERT's uncased normalisation and pre-tokenisation) with the `tokenizers` library
and wrap it in a `SharedBertTokenizer`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, normalizers, pre_tokenizers, trainers
from tokenizers.models import WordPiece

from ..tokenization_sharedbert import SharedBertTokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(
    texts: Iterable[str],
    vocab_size: int = 8000,
    min_frequency: int = 2,
    lowercase: bool = True,
    model_max_length: int = 512,
) -> SharedBertTokenizer:
    """Learn a WordPiece vocabulary of at most `vocab_size` entries from `texts` (an iterable of lines/documents).

    Special tokens come first ([PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4), so `pad_token_id` is 0 as in BERT; the
    other entries follow in sorted order."""
    if vocab_size < len(SPECIAL_TOKENS) + 100:
        raise ValueError(f"vocab_size {vocab_size} is too small; use at least {len(SPECIAL_TOKENS) + 100}.")
    tokenizer = Tokenizer(WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=None if lowercase else False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        continuing_subword_prefix="##",
        show_progress=True,
    )
    tokenizer.train_from_iterator(_non_empty(texts), trainer=trainer)
    vocab = tokenizer.get_vocab()
    if len(vocab) <= len(SPECIAL_TOKENS):
        raise ValueError("The training text produced no vocabulary: is it empty?")
    # The trainer breaks frequency ties in hash order, so its ids differ from run to run (and with ties at the size
    # limit, so can the last entries). A canonical order (special tokens, then the rest sorted) at least keeps the ids
    # from depending on that order; a resumed pretraining run reuses the vocabulary saved in its checkpoint.
    rest = sorted(token for token in vocab if token not in SPECIAL_TOKENS)
    ordered = {token: index for index, token in enumerate([*SPECIAL_TOKENS, *rest])}
    return SharedBertTokenizer(vocab=ordered, do_lower_case=lowercase, model_max_length=model_max_length)


def _non_empty(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        if text and not text.isspace():
            yield text


__all__ = ["SPECIAL_TOKENS", "train_wordpiece"]
