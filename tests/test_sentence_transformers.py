"""sentence-transformers' trainer on a SharedBert: SentenceTransformerTrainer with CosineSimilarityLoss fine-tunes a
converted sentence-transformers model, and the STS score (EmbeddingSimilarityEvaluator) improves."""

import json

import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer

from sharedbert import sentence_embeddings
from sharedbert.recipes import convert_checkpoint

WORDS = "man woman dog cat plays runs guitar ball park river city car book song sun moon".split()


def tiny_sentence_transformer_bert(folder):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."] + WORDS
    BertTokenizer(vocab={token: i for i, token in enumerate(vocab)}).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=64)
    BertModel(config).save_pretrained(folder)
    sentence_embeddings.write_default_modules(folder, hidden_size=32, max_seq_length=32)
    return folder


@pytest.mark.slow
def test_sentence_transformer_trainer_fine_tunes_a_sharedbert(tmp_path):
    source = tiny_sentence_transformer_bert(tmp_path / "bert")
    converted = tmp_path / "sharedbert"
    convert_checkpoint(src=str(source), out=converted, attention_type="shared")
    assert json.loads((converted / "config.json").read_text())["model_type"] == "sharedbert"
    # Pairs whose gold similarity is whether they share the first word: learnable, and random weights rank them
    # poorly. Train and dev are the same pairs: the test is that training moves the score, not generalisation.
    g = torch.Generator().manual_seed(0)
    rows = ["index\tsentence1\tsentence2\tscore"]
    for i in range(96):
        a, b, c, d, e, f = (WORDS[int(j)] for j in torch.randperm(len(WORDS), generator=g)[:6])
        same = i % 2 == 0
        rows.append(f"{i}\t{a} {b} {c} .\t{a if same else d} {e} {f} .\t{5.0 if same else 0.0}")
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("\n".join(rows) + "\n")
    result = sentence_embeddings.finetune_sts(converted, tsv, tsv, tmp_path / "tuned", max_steps=60, batch_size=16,
                                     learning_rate=1e-3)
    # With a yes/no gold score Spearman cannot exceed 0.866 (every tie ranked alike): training reaches it.
    assert result["dev_before"] < 0.8 and result["dev_after"] > 0.85, result
    # The fine-tuned model is saved as a sentence-transformers SharedBert and reloads with the same scores.
    tuned = sentence_embeddings.load(tmp_path / "tuned")
    assert [type(m).__name__ for m in tuned] == ["Transformer", "Pooling", "Normalize"]
    assert type(tuned[0].auto_model).__name__ == "SharedBertModel"
    assert sentence_embeddings.sts_spearman(tuned, tsv) == result["dev_after"]
