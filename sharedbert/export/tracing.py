"""The model as an ONNX graph: which output a folder exports (`detect_task`), the model loaded behind a signature of
three named inputs and one output (`load_for_export`), and torch's dynamo exporter with dynamic batch and sequence axes
(`trace_to_onnx`).

Tasks:
* ``"base"``: `last_hidden_state` of `SharedBertModel` (what sentence-transformers' ONNX/OpenVINO backends read);
* ``"sequence-classification"``: `logits` of `SharedBertForSequenceClassification`;
* ``"sentence-embedding"``: `sentence_embedding` of the folder's sentence-transformers pipeline (its own pooling and,
  where it has one, `Normalize`), loaded with sentence-transformers itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

from .. import modeling_sharedbert
from ..loading import from_pretrained, load_sentence_transformer
from .errors import ExportError

EXPORT_TASKS = ("base", "sequence-classification", "sentence-embedding")
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAMES = {"base": "last_hidden_state", "sequence-classification": "logits",
                "sentence-embedding": "sentence_embedding"}  # fmt: skip


def detect_task(model_dir: str | os.PathLike, layout: str = "flat") -> str:
    """`sentence-embedding` for a sentence-transformers folder (`modules.json`; `base` in the sentence-transformers
    layout, whose loaders pool themselves), `sequence-classification` for a saved classifier, else `base`."""
    folder = Path(model_dir)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ExportError(f"{folder} has no config.json: pass a folder written by save_pretrained.")
    architectures = json.loads(config_file.read_text(encoding="utf-8")).get("architectures") or []
    if any(a.endswith("ForSequenceClassification") for a in architectures):
        return "sequence-classification"
    if (folder / "modules.json").is_file() and layout == "flat":
        return "sentence-embedding"
    return "base"


class EncoderOutput(torch.nn.Module):
    """One named output of a transformers model as a plain tensor, from three named inputs: the signature ONNX
    consumers expect."""

    def __init__(self, model, output_name: str):
        super().__init__()
        self.model, self.output_name = model, output_name

    def forward(self, input_ids, attention_mask, token_type_ids):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return outputs[self.output_name]


class _SentenceEncoder(torch.nn.Module):
    def __init__(self, sentence_transformer):
        super().__init__()
        self.sentence_transformer = sentence_transformer

    def forward(self, input_ids, attention_mask, token_type_ids):
        features = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        return self.sentence_transformer(features)["sentence_embedding"]


def load_for_export(model_dir: Path, task: str, trust_remote_code: bool = False):
    """(wrapper module, tokenizer, the SharedBert model inside it) for `task`, in eval mode, loaded through the
    package's loader (`sharedbert.loading`); an ExportError naming the fix for a model that is not a SharedBert. A
    folder's own code runs only with `trust_remote_code`."""
    if task == "sentence-embedding":
        try:
            sentence_transformer = load_sentence_transformer(model_dir, trust_remote_code=trust_remote_code).eval()
        except ImportError as error:
            raise ExportError("The sentence-embedding export needs sentence-transformers: "
                              "pip install sentence-transformers") from error
        model = sentence_transformer[0].auto_model
        wrapper, tokenizer = _SentenceEncoder(sentence_transformer), sentence_transformer.tokenizer
    else:
        auto = AutoModelForSequenceClassification if task == "sequence-classification" else AutoModel
        model = from_pretrained(auto, model_dir, trust_remote_code).eval()
        tokenizer = from_pretrained(AutoTokenizer, model_dir, trust_remote_code)
        wrapper = EncoderOutput(model, OUTPUT_NAMES[task])
    if not isinstance(model, modeling_sharedbert.SharedBertPreTrainedModel):
        raise ExportError(f"{model_dir} holds a {type(model).__name__}, not a SharedBert: convert it first "
                          "(sharedbert convert).")
    return wrapper.eval(), tokenizer, model


def trace_to_onnx(module: torch.nn.Module, inputs: dict, output_name: str, opset: int = 18):
    """torch's dynamo exporter with dynamic batch and sequence axes on every input; returns the `ONNXProgram`.
    `module(**inputs)` must return one tensor (the benchmarks export transformers' BERT through this too).

    The sequence axis runs up to the model's `max_position_embeddings`: its position embeddings make longer inputs
    impossible, and an axis declared unbounded fails torch.export's shape check, after which torch.onnx traces the
    model a second time with the bound it suggests (the same graph, for the price of a second trace)."""
    batch_dim = torch.export.Dim("batch", min=1)
    sequence_dim = torch.export.Dim("sequence", min=1, max=_max_positions(module))
    with torch.no_grad():
        return torch.onnx.export(
            module, (), kwargs=inputs, dynamo=True, opset_version=opset, input_names=list(inputs),
            output_names=[output_name], dynamic_shapes={name: {0: batch_dim, 1: sequence_dim} for name in inputs},
        )


def _max_positions(module: torch.nn.Module) -> int | None:
    """The `max_position_embeddings` of the first model config inside `module` (None: no bound)."""
    for submodule in module.modules():
        limit = getattr(getattr(submodule, "config", None), "max_position_embeddings", None)
        if isinstance(limit, int):
            return limit
    return None
