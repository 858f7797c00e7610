"""benchmarks/deploy_matrix.py runs end to end in --quick mode (tiny models, a few sentences) and writes its JSON,
Markdown table and plot with every cell of the matrix. Nothing here asserts a timing: speed is the benchmark's job."""

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason='the onnx extra is not installed (pip install "sharedbert[onnx]")')
pytest.importorskip("openvino", reason='the openvino extra is not installed (pip install "sharedbert[openvino]")')
pytest.importorskip("nncf", reason='the openvino extra is not installed (pip install "sharedbert[openvino]")')

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "deploy_matrix.py"


def test_quick_matrix_writes_every_cell(tmp_path, glue_dir):
    from sharedbert.precision import native_bf16

    if not (glue_dir / "STS-B" / "dev.tsv").is_file() or not (glue_dir / "SST-2" / "train.tsv").is_file():
        pytest.skip("STS-B dev and SST-2 train are needed (the shared data folder's glue/)")
    spec = importlib.util.spec_from_file_location("deploy_matrix", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--threads", "2", "1", "--out-dir", str(tmp_path)]) == 0

    report = json.loads((tmp_path / "deploy_matrix_quick.json").read_text())
    backends = ["pytorch-fp32", "onnxruntime-fp32", "onnxruntime-int8", "openvino-fp32", "openvino-int8"]
    if native_bf16():
        backends += ["pytorch-bf16", "openvino-fp32-bf16hint"]
    cells = {(row["model"], row["backend"], row["threads"]): row for row in report["cells"]}
    assert set(cells) == {(model, backend, threads) for model in ("all-MiniLM-L6-v2", "SharedBert")
                          for backend in backends for threads in (2, 1)}
    for (model, backend, threads), row in cells.items():
        assert -1 <= row["sts_spearman"] <= 1 and row["sentences"] > 0
        for size in ("batch 1", "batch 32"):
            speed = row["speed"][size]
            assert speed["sentences_per_second"] > 0 and len(speed["round_seconds"]) == report["rounds"]
            if (model, backend) == ("all-MiniLM-L6-v2", "pytorch-fp32"):
                assert speed["ratio_to_minilm_pytorch_fp32"] == pytest.approx(1.0)
            if model == "SharedBert":
                assert speed["ratio_to_minilm_same_backend"] > 0
    # fp32 files reproduce their own PyTorch fp32 embeddings; the check thresholds' evidence is there.
    assert cells["SharedBert", "onnxruntime-fp32", 2]["cosine_to_pytorch_fp32_min"] > 0.9999
    assert "attention mask ignored" in report["broken_graphs"]
    assert set(report["goals"]) == {"2", "1"} and report["sharedbert_note"].startswith("quick mode")
    table = (tmp_path / "deploy_matrix_quick.md").read_text()
    assert table.count("| SharedBert | ") == 2 * len(backends) and "## Targets at 2 thread(s)" in table
    assert (tmp_path / "deploy_matrix_quick.png").read_bytes()[:4] == b"\x89PNG"
