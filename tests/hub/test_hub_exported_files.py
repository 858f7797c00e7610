"""Exported ONNX and OpenVINO files in a staged Hub folder (`sharedbert.hub.exported_files`, `stage_for_hub`): the files
`sharedbert export --layout sentence-transformers` adds to a model folder are staged under sentence-transformers' names,
checked again in their own runtimes against the model being staged, and listed in the card with how to load them; a
stale or unreadable export stops staging with the file named and the fix."""

import shutil

import pytest
import torch
from conftest import tiny_config

pytest.importorskip("onnxruntime", reason='the onnx extra is not installed (pip install "sharedbert[onnx]")')
pytest.importorskip("onnxscript", reason='the onnx extra is not installed (pip install "sharedbert[onnx]")')
pytest.importorskip("openvino", reason='the openvino extra is not installed (pip install "sharedbert[openvino]")')

from test_export import VOCAB, save, sentence_model  # noqa: E402

from sharedbert import SharedBertModel, hub  # noqa: E402
from sharedbert.export import export  # noqa: E402

REPO = "someone/sharedbert-tiny"


@pytest.fixture(scope="module")
def exported_folder(tmp_path_factory):
    """A tiny sentence model folder to which `export --layout sentence-transformers` added onnx/ (fp32, avx512_vnni
    and avx2 int8) and openvino/, exported once: the first test stages it as it is, the others break a copy of it."""
    torch.manual_seed(0)  # a module's fixture runs before the tests' own seeding
    _, folder = sentence_model(tmp_path_factory.mktemp("exported"))
    export(model=folder, output_dir=folder, layout="sentence-transformers", quantize=["avx512_vnni", "avx2"],
           openvino=True)
    return folder


def copy_of(folder, tmp_path):
    """A copy of the exported folder (its own files, not links: a test that changes them leaves the fixture's alone)."""
    return shutil.copytree(folder, tmp_path / "model")


@pytest.mark.slow
def test_exported_files_are_staged_checked_and_listed_in_the_card(exported_folder, tmp_path):
    staged = hub.stage_for_hub(exported_folder, tmp_path / "staged", repo_id=REPO)
    backend = [name for name in staged.files if name.startswith(("onnx/", "openvino/"))]
    assert backend == ["onnx/model.onnx", "onnx/model_qint8_avx512_vnni.onnx", "onnx/model_quint8_avx2.onnx",
                       "openvino/openvino_model.bin", "openvino/openvino_model.xml"]  # not the export's report
    assert all(hub.is_hub_file(name) for name in staged.files)
    checks = {check["file"]: check for check in staged.backends}
    assert list(checks) == ["onnx/model.onnx", "onnx/model_qint8_avx512_vnni.onnx", "onnx/model_quint8_avx2.onnx",
                            "openvino/openvino_model.xml"]
    assert checks["onnx/model.onnx"]["max_abs_difference"] <= 1e-4
    assert checks["openvino/openvino_model.xml"]["runtime"] == "openvino"
    assert checks["onnx/model_quint8_avx2.onnx"]["variant"] == "avx2"
    assert staged.verification["backends"] == staged.backends
    card = (tmp_path / "staged" / "README.md").read_text()
    for name in checks:
        assert f"| `{name}` |" in card
    assert f'hf_hub_download("{REPO}", "onnx/model_qint8_avx512_vnni.onnx")' in card  # the int8 file as the example
    assert f'hf_hub_download("{REPO}", "openvino/openvino_model.bin")' in card
    assert f'{checks["onnx/model_quint8_avx2.onnx"]["mean_cosine"]:.4f} / ' in card


@pytest.mark.slow
def test_a_stale_export_stops_staging(exported_folder, tmp_path):
    folder = copy_of(exported_folder, tmp_path)
    model = SharedBertModel.from_pretrained(folder).eval()
    with torch.no_grad():  # the model is trained on after the export: its files no longer match it
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    model.save_pretrained(folder)
    with pytest.raises(hub.VerificationError, match=r"onnx/model.onnx does not reproduce the model being staged.*"
                                                    r"Export it again"):
        hub.stage_for_hub(folder, tmp_path / "staged", repo_id=REPO, verify=False)
    assert not (tmp_path / "staged").exists()


@pytest.mark.slow
def test_unreadable_or_incomplete_exports_are_refused(exported_folder, tmp_path):
    folder = copy_of(exported_folder, tmp_path)
    (folder / "openvino" / "openvino_model.bin").unlink()
    with pytest.raises(hub.VerificationError, match="has no openvino_model.bin beside it"):
        hub.stage_for_hub(folder, tmp_path / "staged", repo_id=REPO, verify=False)
    (folder / "openvino" / "openvino_model.xml").unlink()
    (folder / "onnx" / "model_qint8_arm64.onnx").write_bytes(b"not an onnx graph")
    with pytest.raises(hub.VerificationError, match="onnx/model_qint8_arm64.onnx does not load in onnxruntime"):
        hub.stage_for_hub(folder, tmp_path / "staged", repo_id=REPO, verify=False)
    assert not (tmp_path / "staged").exists()


def test_a_folder_without_exports_stages_as_before(tmp_path):
    config = tiny_config(vocab_size=len(VOCAB))
    folder = save(SharedBertModel(config).eval(), tmp_path / "model")
    staged = hub.stage_for_hub(folder, tmp_path / "staged", repo_id=REPO, verify=False)
    assert staged.backends == [] and not [name for name in staged.files if "/" in name]
    assert "## ONNX and OpenVINO" not in (tmp_path / "staged" / "README.md").read_text()
