"""SharedBert tokenizer: BERT's WordPiece tokenizer under its own name, so AutoTokenizer can find it.

This file is shipped to the Hub with the model: it imports only transformers and runs nothing at import time beyond
defining classes.
"""

from transformers.models.bert.tokenization_bert import BertTokenizer, load_vocab


class SharedBertTokenizer(BertTokenizer):
    """BERT WordPiece tokenization (lower-casing, accent stripping, `[CLS] a [SEP] b [SEP]` pairs).

    Accepts `vocab` (a dict or a `vocab.txt` path) like `BertTokenizer`, and also `vocab_file`, which transformers 5's
    `BertTokenizer` ignores (every token would silently become `[UNK]`)."""

    _auto_class = "AutoTokenizer"

    def __init__(self, vocab=None, vocab_file=None, **kwargs):
        if vocab is None and vocab_file is not None:
            vocab = dict(load_vocab(vocab_file))
        super().__init__(vocab=vocab, **kwargs)


__all__ = ["SharedBertTokenizer"]
