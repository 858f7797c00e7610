"""Train a new WordPiece vocabulary (BERT's uncased normalisation and pre-tokenisation) with the `tokenizers` library
and wrap it in a `SharedBertTokenizer`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .tokenization_sharedbert import SharedBertTokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(
    texts: Iterable[str],
    vocab_size: int = 8000,
    min_frequency: int = 2,
    lowercase: bool = True,
    model_max_length: int = 512,
) -> SharedBertTokenizer:
    """Learn a WordPiece vocabulary of at most `vocab_size` entries from `texts` (an iterable of lines/documents).

    Special tokens come first ([PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4), so `pad_token_id` is 0 as in BERT."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    if vocab_size < len(SPECIAL_TOKENS) + 100:
        raise ValueError(f"vocab_size {vocab_size} is too small; use at least {len(SPECIAL_TOKENS) + 100}.")
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
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
    ordered = dict(sorted(vocab.items(), key=lambda item: item[1]))
    return SharedBertTokenizer(vocab=ordered, do_lower_case=lowercase, model_max_length=model_max_length)


def _non_empty(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        if text and not text.isspace():
            yield text


__all__ = ["SPECIAL_TOKENS", "train_wordpiece"]
