"""ONNX export of a SharedBert: base encoder, sequence classifier or sentence-embedding model.

    >>> from sharedbert.export import export_onnx
    >>> report = export_onnx("runs/minilm-shared", "runs/minilm-shared-onnx")   # task picked from the folder
    >>> report.max_abs_difference                                                # onnxruntime vs PyTorch
    3.1e-07

The model is exported with torch's dynamo exporter, dynamic batch and sequence axes, and shared attention folded for
inference (`fold_for_inference`: query, key and value become one tensor). The export is then run in onnxruntime on
real sentences and compared with the unfolded PyTorch model; a difference above `atol` is an error and nothing is
written. The output folder (written atomically) holds `model.onnx`, the tokenizer files, the model's `config.json`,
and `onnx_export.json` (task, input and output names, the measured difference).

Tasks:
* ``"base"``: `last_hidden_state` of `SharedBertModel`;
* ``"sequence-classification"``: `logits` of `SharedBertForSequenceClassification`;
* ``"sentence-embedding"``: `sentence_embedding` of the folder's sentence-transformers pipeline (its own pooling and,
  where it has one, `Normalize`), loaded with sentence-transformers itself.

Needs the `onnx` extra (`pip install "sharedbert[onnx]"`: onnx, onnxscript, onnxruntime), and sentence-transformers
for the sentence-embedding task.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .atomic import atomic_directory

EXPORT_TASKS = ("base", "sequence-classification", "sentence-embedding")
ONNX_FILE = "model.onnx"
REPORT_FILE = "onnx_export.json"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAMES = {"base": "last_hidden_state", "sequence-classification": "logits",
                "sentence-embedding": "sentence_embedding"}  # fmt: skip

# Real sentences of different lengths for the parity check (from GLUE SST-2 and STS-B dev).
CHECK_SENTENCES = (
    "it 's a charming and often affecting journey .",
    "A man is playing a guitar.",
    "unflinchingly bleak and desperate",
    "the acting , costumes , music , cinematography and sound are all astounding given the production 's "
    "austere locales .",
    "A woman is slicing an onion.",
    "It's not a masterpiece, but I enjoyed every minute of it.",
)


class ExportError(RuntimeError):
    """The export failed or does not reproduce the PyTorch model."""


@dataclass
class ExportReport:
    onnx_path: str
    task: str
    output_name: str
    max_abs_difference: float
    check_sentences: int
    folded: bool
    opset: int


def detect_task(model_dir: str | os.PathLike) -> str:
    """`sentence-embedding` for a sentence-transformers folder (`modules.json`), `sequence-classification` for a
    saved classifier, else `base`."""
    folder = Path(model_dir)
    if (folder / "modules.json").is_file():
        return "sentence-embedding"
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ExportError(f"{folder} has no config.json: pass a folder written by save_pretrained.")
    architectures = json.loads(config_file.read_text(encoding="utf-8")).get("architectures") or []
    return "sequence-classification" if any(a.endswith("ForSequenceClassification") for a in architectures) else "base"


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


def _load(model_dir: Path, task: str):
    """(wrapper module, tokenizer, the SharedBert model inside it)."""
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

    from . import modeling_sharedbert

    if task == "sentence-embedding":
        from . import embeddings

        try:
            sentence_transformer = embeddings.load(model_dir).eval()
        except ImportError as error:
            raise ExportError("The sentence-embedding export needs sentence-transformers: "
                              "pip install sentence-transformers") from error
        model = sentence_transformer[0].auto_model
        wrapper, tokenizer = _SentenceEncoder(sentence_transformer), sentence_transformer.tokenizer
    else:
        auto = AutoModelForSequenceClassification if task == "sequence-classification" else AutoModel
        model = auto.from_pretrained(model_dir).eval()
        wrapper, tokenizer = EncoderOutput(model, OUTPUT_NAMES[task]), AutoTokenizer.from_pretrained(model_dir)
    if not isinstance(model, modeling_sharedbert.SharedBertPreTrainedModel):
        raise ExportError(f"{model_dir} holds a {type(model).__name__}, not a SharedBert: convert it first "
                          "(sharedbert convert).")
    return wrapper.eval(), tokenizer, model


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError as error:
        raise ExportError('ONNX export needs the onnx extra: pip install "sharedbert[onnx]" '
                          "(onnx, onnxscript, onnxruntime)") from error
    return onnxruntime


def trace_to_onnx(module: torch.nn.Module, inputs: dict, output_name: str, opset: int = 18):
    """torch's dynamo exporter with dynamic batch and sequence axes on every input; returns the `ONNXProgram`.
    `module(**inputs)` must return one tensor (the benchmarks export transformers' BERT through this too)."""
    batch_dim, sequence_dim = torch.export.Dim("batch", min=1), torch.export.Dim("sequence", min=1)
    with torch.no_grad():
        return torch.onnx.export(
            module, (), kwargs=inputs, dynamo=True, opset_version=opset, input_names=list(inputs),
            output_names=[output_name], dynamic_shapes={name: {0: batch_dim, 1: sequence_dim} for name in inputs},
        )


def export_onnx(
    model_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    task: str = "auto",
    *,
    opset: int = 18,
    check_sentences: list[str] | tuple[str, ...] = CHECK_SENTENCES,
    max_length: int = 128,
    atol: float = 1e-4,
) -> ExportReport:
    """Export the model in `model_dir` to `output_dir/model.onnx` and check it in onnxruntime (see the module doc)."""
    onnxruntime = _onnxruntime()
    model_dir, output_dir = Path(model_dir), Path(output_dir)
    if task == "auto":
        task = detect_task(model_dir)
    if task not in EXPORT_TASKS:
        raise ValueError(f"task must be 'auto' or one of {list(EXPORT_TASKS)}, got {task!r}.")
    wrapper, tokenizer, model = _load(model_dir, task)
    batch = tokenizer(list(check_sentences), padding=True, truncation=True, max_length=max_length,
                      return_tensors="pt")
    inputs = {name: batch[name] if name in batch else torch.zeros_like(batch["input_ids"]) for name in INPUT_NAMES}
    with torch.inference_mode():
        expected = wrapper(**inputs).float().numpy()  # the unfolded model is the reference

    model.fold_for_inference()
    try:
        program = trace_to_onnx(wrapper, inputs, OUTPUT_NAMES[task], opset=opset)
    except Exception as error:  # the exporter raises many types; say which model and task failed
        raise ExportError(f"torch.onnx.export failed for {model_dir} (task {task}): {error}") from error
    finally:
        model.unfold()

    with atomic_directory(output_dir) as work:
        onnx_path = work / ONNX_FILE
        program.save(str(onnx_path), external_data=False)
        session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
        (got,) = session.run(None, {name: tensor.numpy() for name, tensor in inputs.items()})
        difference = float(abs(got - expected).max())
        if not difference <= atol:  # NaN fails too
            raise ExportError(f"The ONNX export of {model_dir} differs from PyTorch by {difference:.2e} "
                              f"(> {atol:.0e}) on {len(check_sentences)} sentences; nothing was written.")
        tokenizer.save_pretrained(str(work))
        shutil.copy2(model_dir / "config.json", work / "config.json")
        report = ExportReport(
            onnx_path=str(output_dir / ONNX_FILE), task=task, output_name=OUTPUT_NAMES[task],
            max_abs_difference=difference, check_sentences=len(check_sentences),
            folded=model.config.attention_type == "shared", opset=opset,
        )
        (work / REPORT_FILE).write_text(json.dumps(dict(asdict(report), inputs=list(INPUT_NAMES)), indent=2) + "\n")
    return report
