"""ONNX export (`sharedbert.export`): onnxruntime reproduces PyTorch for every task, with dynamic batch and sequence
axes and folded shared attention; bad input is refused and nothing half-written is left."""

import json

import numpy as np
import pytest
import torch
from conftest import tiny_config

from sharedbert import SharedBertForSequenceClassification, SharedBertModel, SharedBertTokenizer

pytest.importorskip("onnxruntime", reason='the onnx extra is not installed (pip install "sharedbert[onnx]")')
pytest.importorskip("onnxscript", reason='the onnx extra is not installed (pip install "sharedbert[onnx]")')

import onnx  # noqa: E402
import onnxruntime  # noqa: E402

from sharedbert.export import CHECK_SENTENCES, ExportError, export_onnx  # noqa: E402

WORDS = sorted({w for s in CHECK_SENTENCES for w in s.lower().replace(",", " , ").replace(".", " . ").split()})
VOCAB = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}


def save(model, folder):
    # Distinctive scales, so that folding them away is visible in the outputs if it went wrong.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("_scale"):
                parameter.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    SharedBertTokenizer(vocab=VOCAB).save_pretrained(folder)
    return folder


def run(onnx_path, input_ids, attention_mask):
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    feed = {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy(),
            "token_type_ids": np.zeros_like(input_ids.numpy())}
    return session.run(None, feed)[0]


def other_shape_inputs(vocab_size, batch=4, length=23):
    input_ids = torch.randint(5, vocab_size, (batch, length))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 11:] = 0
    return input_ids, attention_mask


@pytest.mark.parametrize("attention_type", ["shared", "standard", "pairwise"])
def test_base_model_export_matches_pytorch_at_other_shapes(tmp_path, attention_type):
    model = SharedBertModel(tiny_config(vocab_size=len(VOCAB), attention_type=attention_type)).eval()
    report = export_onnx(save(model, tmp_path / "model"), tmp_path / "onnx")
    assert report.task == "base" and report.max_abs_difference <= 1e-4 and report.check_sentences == 6
    input_ids, attention_mask = other_shape_inputs(len(VOCAB))  # not the shapes it was traced with
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.numpy()
    np.testing.assert_allclose(run(tmp_path / "onnx" / "model.onnx", input_ids, attention_mask), expected, atol=1e-4)
    written = {p.name for p in (tmp_path / "onnx").iterdir()}
    assert {"model.onnx", "config.json", "tokenizer.json", "onnx_export.json"} <= written
    assert json.loads((tmp_path / "onnx" / "onnx_export.json").read_text())["task"] == "base"
    assert not model.is_folded  # the caller's model is left as it was
    if attention_type == "shared":
        names = [initializer.name for initializer in onnx.load(str(tmp_path / "onnx" / "model.onnx")).graph.initializer]
        # Folding moved dq, dk, dv into the projections: no scale vector and no unfolded shared_proj weight remain.
        assert report.folded
        assert not [name for name in names if name.endswith(("_scale", "shared_proj.weight"))]


def test_classifier_export_is_detected_and_matches(tmp_path):
    model = SharedBertForSequenceClassification(tiny_config(vocab_size=len(VOCAB), num_labels=3)).eval()
    report = export_onnx(save(model, tmp_path / "model"), tmp_path / "onnx")
    assert report.task == "sequence-classification" and report.output_name == "logits"
    input_ids, attention_mask = other_shape_inputs(len(VOCAB))
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask).logits.numpy()
    got = run(tmp_path / "onnx" / "model.onnx", input_ids, attention_mask)
    assert got.shape == (4, 3)
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_sentence_transformers_folder_exports_its_pooling_and_normalisation(tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    folder = save(SharedBertModel(tiny_config(vocab_size=len(VOCAB))).eval(), tmp_path / "model")
    transformer = Transformer(str(folder))
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    pipeline = sentence_transformers.SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu")
    pipeline.save(str(tmp_path / "st"))
    report = export_onnx(tmp_path / "st", tmp_path / "onnx")
    assert report.task == "sentence-embedding" and report.output_name == "sentence_embedding"
    sentences = list(CHECK_SENTENCES[:4])
    expected = pipeline.encode(sentences, convert_to_numpy=True)
    batch = pipeline.tokenizer(sentences, padding=True, return_tensors="pt")
    got = run(tmp_path / "onnx" / "model.onnx", batch["input_ids"], batch["attention_mask"])
    np.testing.assert_allclose(got, expected, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_a_bert_is_refused_with_the_fix(tmp_path):
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                         intermediate_size=37)).save_pretrained(tmp_path / "bert")
    SharedBertTokenizer(vocab=VOCAB).save_pretrained(tmp_path / "bert")
    with pytest.raises(ExportError, match="not a SharedBert: convert it first"):
        export_onnx(tmp_path / "bert", tmp_path / "onnx")
    assert not (tmp_path / "onnx").exists()


def test_bad_task_and_failed_check_leave_nothing(tmp_path):
    folder = save(SharedBertModel(tiny_config(vocab_size=len(VOCAB))).eval(), tmp_path / "model")
    with pytest.raises(ValueError, match="task must be"):
        export_onnx(folder, tmp_path / "onnx", task="fill-mask")
    with pytest.raises(ExportError, match="differs from PyTorch"):
        export_onnx(folder, tmp_path / "onnx", atol=-1.0)  # no export can pass: the check must refuse it
    assert not (tmp_path / "onnx").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no temporary folder left behind either


def test_export_command(tmp_path):
    from sharedbert.cli import main

    folder = save(SharedBertForSequenceClassification(tiny_config(vocab_size=len(VOCAB))).eval(), tmp_path / "model")
    assert main(["export", str(folder), str(tmp_path / "onnx")]) == 0
    assert json.loads((tmp_path / "onnx" / "onnx_export.json").read_text())["task"] == "sequence-classification"
    assert main(["export", str(tmp_path / "missing"), str(tmp_path / "other")]) != 0
    assert not (tmp_path / "other").exists()
