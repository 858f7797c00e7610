"""benchmarks/deploy_matrix.py runs end to end in --quick mode (tiny models, a few sentences) and writes its JSON,
Markdown table and plot with every cell of the matrix. Nothing here asserts a timing: speed is the benchmark's job."""

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason='the onnx extra is not installed (pip install "sharedbert[onnx]")')
pytest.importorskip("openvino", reason='the openvino extra is not installed (pip install "sharedbert[openvino]")')
pytest.importorskip("nncf", reason='the openvino extra is not installed (pip install "sharedbert[openvino]")')

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "deploy_matrix.py"


@pytest.mark.slow
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


def _matrix():
    from conftest import benchmark_script

    return benchmark_script("deploy_matrix")


def _cells(worst_cosine: float, threads: int = 1) -> dict:
    """A matrix at one thread count where SharedBert's int8 files are fast enough and score well on STS-B."""
    def row(model, backend, ratio, same_backend):
        speed = {"ratio_to_minilm_pytorch_fp32": ratio}
        if model == "SharedBert":
            speed["ratio_to_minilm_same_backend"] = same_backend
        int8 = backend.endswith("int8") and model == "SharedBert"
        return {"sts_spearman": 0.864, "cosine_to_pytorch_fp32_mean": 0.99 if int8 else 1.0,
                "cosine_to_pytorch_fp32_min": worst_cosine if int8 else 1.0,
                "speed": {"batch 1": speed, "batch 32": dict(speed)}}

    return {(model, backend, threads): row(model, backend, 3.5 if "int8" in backend else 1.2, 1.2)
            for model in ("all-MiniLM-L6-v2", "SharedBert")
            for backend in ("pytorch-fp32", "onnxruntime-int8", "openvino-int8")}


def test_a_target_is_met_only_where_the_file_passes_the_export_check():
    matrix = _matrix()
    from sharedbert.export import MIN_COSINE

    passing, refused = matrix.goals(_cells(MIN_COSINE + 0.02), 1), matrix.goals(_cells(0.651), 1)
    for goal in passing:
        assert passing[goal]["met"], goal
        assert not refused[goal]["met"], goal  # same speed and STS-B, but a file `sharedbert export` refuses
    int8 = next(goal for goal in refused if "int8" in goal)
    assert refused[int8]["per_backend"]["openvino-int8"] == pytest.approx(
        {"speed_ratio_worst_batch": 3.5, "sts_spearman": 0.864, "cosine_mean": 0.99, "cosine_worst": 0.651,
         "passes_export_check": False, "met": False})


def test_the_committed_table_is_the_committed_json_reported_and_holds_no_machine_paths():
    matrix = _matrix()
    results = matrix.HERE / "results"
    report = json.loads((results / "deploy_matrix.json").read_text())
    cells = {(row["model"], row["backend"], row["threads"]): row for row in report["cells"]}
    assert report["goals"] == {str(t): matrix.goals(cells, t) for t in report["threads"]}  # JSON keys are strings
    assert (results / "deploy_matrix.md").read_text() == matrix.markdown(report)
    for name in ("deploy_matrix.json", "deploy_matrix.md"):
        text = (results / name).read_text()
        assert str(matrix.REPO.parent) not in text and not re.search(r"(?<![\w.])/(work|home|tmp|root)/", text), name


def test_report_only_rewrites_the_results_from_the_json_without_measuring(tmp_path, monkeypatch):
    matrix = _matrix()
    saved = json.loads((matrix.HERE / "results" / "deploy_matrix.json").read_text())
    saved["sharedbert_path"] = str(matrix.REPO.parent / "runs" / "elsewhere")
    saved["sharedbert_note"] = f"the SharedBert build at {saved['sharedbert_path']}"
    saved["goals"] = {}  # stale targets are recomputed
    (tmp_path / "deploy_matrix.json").write_text(json.dumps(saved))
    monkeypatch.setattr(matrix, "load_models", lambda *a: pytest.fail("--report-only must not load models"))
    assert matrix.main(["--report-only", "--out-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "deploy_matrix.json").read_text())
    assert report["cells"] == saved["cells"] and set(report["goals"]) == {str(t) for t in saved["threads"]}
    assert report["sharedbert_path"] == "../runs/elsewhere"
    table = (tmp_path / "deploy_matrix.md").read_text()
    assert "build at ../runs/elsewhere" in table and str(matrix.REPO.parent) not in table
    assert (tmp_path / "deploy_matrix.png").read_bytes()[:4] == b"\x89PNG"


def test_report_only_without_a_saved_json_says_so(tmp_path):
    with pytest.raises(SystemExit, match="run the benchmark first"):
        _matrix().main(["--report-only", "--out-dir", str(tmp_path)])


def test_a_failure_while_saving_leaves_the_previous_results(tmp_path, monkeypatch):
    matrix = _matrix()
    report = json.loads((matrix.HERE / "results" / "deploy_matrix.json").read_text())
    matrix.save(report, tmp_path, "deploy_matrix")
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(os, "replace", killed)  # every atomic write dies just before its rename
    with pytest.raises(KeyboardInterrupt):
        matrix.save(dict(report, rounds=99), tmp_path, "deploy_matrix")
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before  # no temporary file left either


def test_commands_and_notes_hold_paths_relative_to_the_repository():
    matrix = _matrix()
    outside = matrix.REPO.parent / "runs" / "healed"
    assert matrix.portable_command(["--sharedbert", str(outside), f"--out-dir={matrix.REPO / 'x'}", "--quick"]) == (
        "python benchmarks/deploy_matrix.py --sharedbert ../runs/healed --out-dir=x --quick")
