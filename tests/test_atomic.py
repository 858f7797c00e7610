"""sharedbert.atomic: files and folders appear complete or not at all, including when the writer is SIGKILLed."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sharedbert.atomic import atomic_directory, atomic_write_bytes, atomic_write_text, recover_directory


ATOMIC_PY = Path(__file__).resolve().parents[1] / "sharedbert" / "atomic.py"


def siblings(path: Path) -> list[str]:
    """Every temporary or leftover name beside `path`."""
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


# -- files ---------------------------------------------------------------------------------------------------------


def test_write_bytes_creates_parents_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "a" / "b" / "weights.bin"
    atomic_write_bytes(path, b"\x00\x01" * 1000)
    assert path.read_bytes() == b"\x00\x01" * 1000
    assert siblings(path) == []


def test_write_text_replaces_and_encodes(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("old")
    atomic_write_text(path, "naïve ☃")
    assert path.read_bytes() == "naïve ☃".encode()
    atomic_write_text(path, "latin", encoding="latin-1")
    assert path.read_text(encoding="latin-1") == "latin"


def test_written_file_has_the_usual_permissions(tmp_path):
    previous = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "x.json", "{}")
    finally:
        os.umask(previous)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o644


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    path.write_text("old")

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert siblings(path) == []


# -- folders -------------------------------------------------------------------------------------------------------


def test_new_folder_appears_only_when_complete(tmp_path):
    final = tmp_path / "out" / "model"
    with atomic_directory(final) as tmp:
        assert isinstance(tmp, Path) and tmp.parent == final.parent and tmp.is_dir() and not any(tmp.iterdir())
        (tmp / "config.json").write_text("{}")
        assert not final.exists()
    assert (final / "config.json").read_text() == "{}"
    assert siblings(final) == []
    assert final.stat().st_mode & 0o700 == 0o700


def test_existing_folder_is_replaced_whole(tmp_path):
    final = tmp_path / "model"
    final.mkdir()
    (final / "stale.bin").write_text("from the previous run")
    (final / "config.json").write_text("old")
    with atomic_directory(final) as tmp:
        (tmp / "config.json").write_text("new")
        assert (final / "config.json").read_text() == "old"  # readers see the old version until the end
    assert sorted(p.name for p in final.iterdir()) == ["config.json"]
    assert (final / "config.json").read_text() == "new"
    assert siblings(final) == []


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_error_in_the_block_leaves_the_old_folder_untouched(tmp_path, error):
    final = tmp_path / "model"
    final.mkdir()
    (final / "config.json").write_text("old")
    with pytest.raises(type(error)):
        with atomic_directory(final) as tmp:
            (tmp / "config.json").write_text("half")
            raise error
    assert sorted(p.name for p in final.iterdir()) == ["config.json"]
    assert (final / "config.json").read_text() == "old"
    assert siblings(final) == []


def test_existing_folder_is_swapped_in_one_step_where_the_system_can(tmp_path, monkeypatch):
    """On Linux the new folder and the old one are exchanged atomically: no moment without the folder."""
    import sharedbert.atomic as atomic

    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2(RENAME_EXCHANGE) is Linux's")
    final = tmp_path / "model"
    final.mkdir()
    (final / "config.json").write_text("old")
    real_replace = os.replace

    def replace(src, dst):
        assert Path(dst) != final and Path(src) != final, "the folder itself must not be moved aside"
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with atomic_directory(final) as tmp:
        (tmp / "config.json").write_text("new")
    assert (final / "config.json").read_text() == "new" and siblings(final) == []
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir(), (a / "x").write_text("in a")
    assert atomic._exchange(a, b) and (b / "x").read_text() == "in a" and not (a / "x").exists()


def test_failed_rename_puts_the_old_folder_back(tmp_path, monkeypatch):
    """Where the folders cannot be exchanged in one step (two renames), a failed second rename is undone."""
    import sharedbert.atomic as atomic

    monkeypatch.setattr(atomic, "_exchange", lambda first, second: False)
    final = tmp_path / "model"
    final.mkdir()
    (final / "config.json").write_text("old")
    real_replace = os.replace

    def replace(src, dst):
        if Path(src).name.startswith(".model.new-") and Path(dst) == final:
            raise OSError("rename failed")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="rename failed"):
        with atomic_directory(final) as tmp:
            (tmp / "config.json").write_text("new")
    assert (final / "config.json").read_text() == "old"
    assert siblings(final) == []


def test_refuses_to_replace_a_file_with_a_folder(tmp_path):
    final = tmp_path / "model"
    final.write_text("a file")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        with atomic_directory(final):
            pytest.fail("the block must not run")
    assert final.read_text() == "a file"


@pytest.mark.parametrize(
    "leftovers, expected",
    [
        ({"tmp": "partial"}, None),  # killed while writing the first version
        ({"new": "v2", "old": "v1"}, "v2"),  # killed between moving the old one aside and renaming the new one in
        ({"old": "v1"}, "v1"),
        ({"final": "v2", "old": "v1", "tmp": "partial"}, "v2"),  # killed while deleting the old one
        ({"final": "v1", "new": "v2"}, "v1"),  # killed before the old one moved: the write never happened
    ],
)
def test_recover_directory_after_a_crash(tmp_path, leftovers, expected):
    final = tmp_path / "model"
    for kind, version in leftovers.items():
        folder = final if kind == "final" else tmp_path / f".model.{kind}-abc{kind}"
        folder.mkdir()
        (folder / "version").write_text(version)
    result = recover_directory(final)
    assert siblings(final) == []
    if expected is None:
        assert result is None and not final.exists()
    else:
        assert result == final and (final / "version").read_text() == expected


# -- SIGKILL at random moments -------------------------------------------------------------------------------------

WRITER = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atomic)
final, version = sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
while True:
    version += 1
    with atomic.atomic_directory(final) as tmp:
        payload = bytes([version % 256]) * 200_000  # big enough that writes take a while
        for name in ("a.bin", "b.bin", "c.bin"):
            (tmp / name).write_bytes(payload)
        (tmp / "manifest.json").write_text(json.dumps({"version": version, "files": 3}))
"""


def check_complete(final: Path) -> int:
    """A folder under its final name is always whole: every file present and of the same version."""
    manifest = json.loads((final / "manifest.json").read_text())
    for name in ("a.bin", "b.bin", "c.bin"):
        data = (final / name).read_bytes()
        assert len(data) == 200_000 and set(data) == {manifest["version"] % 256}, name
    return manifest["version"]


@pytest.mark.slow
def test_sigkill_at_random_moments_never_leaves_a_half_written_folder(tmp_path):
    """Kill a writer that keeps replacing a folder, 20 times at random moments: the folder under its final name is
    always complete, recovery restores it, and the version never goes backwards."""
    final = tmp_path / "checkpoint"
    rng = random.Random(0)
    version, survived = 0, 0
    for _ in range(20):
        process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(ATOMIC_PY), str(final), str(version)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.15))
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stdout.close()
        if final.exists():
            assert check_complete(final) >= version  # readable as-is, before any recovery
        elif version and sys.platform.startswith("linux"):
            pytest.fail("the folder went missing: Linux replaces it in one step (RENAME_EXCHANGE)")
        recovered = recover_directory(final)
        assert siblings(final) == []
        if recovered is not None:
            new_version = check_complete(final)
            assert new_version >= version
            version = new_version
            survived += 1
    assert survived >= 15, "the writer should have finished at least one folder in most runs"


# -- the scripts that write results ----------------------------------------------------------------------------------


def test_activation_memory_merges_every_run_under_the_lock(tmp_path):
    """Runs that finish together each keep their row (read-modify-write under a lock), written atomically."""
    import threading

    from conftest import benchmark_script

    merge_result = benchmark_script("activation_memory").merge_result
    output = tmp_path / "activation_memory.json"
    output.write_text(json.dumps({"earlier": {"saved_bytes": {}}}))
    threads = [threading.Thread(target=merge_result, args=(output, f"run {i}", {"saved_bytes": {"x": i}}))
               for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    merged = json.loads(output.read_text())
    assert set(merged) == {"earlier", *(f"run {i}" for i in range(8))}
    assert merged["run 3"] == {"saved_bytes": {"x": 3}}
    assert siblings(output) == []


def test_activation_memory_killed_mid_write_keeps_the_previous_file(tmp_path, monkeypatch):
    from conftest import benchmark_script

    merge_result = benchmark_script("activation_memory").merge_result
    output = tmp_path / "activation_memory.json"
    output.write_text('{"earlier": {}}\n')
    monkeypatch.setattr(os, "replace", _killed)
    with pytest.raises(KeyboardInterrupt):
        merge_result(output, "new", {"saved_bytes": {}})
    assert output.read_text() == '{"earlier": {}}\n' and siblings(output) == []


def _killed(*args, **kwargs):
    raise KeyboardInterrupt("killed just before the rename")


def test_st_finetune_leaves_no_half_saved_model_and_no_results_when_killed(tmp_path, monkeypatch, glue_dir):
    """A kill while the fine-tuned model is being saved leaves the previous model folder and results untouched; a
    finished run puts the complete folder and then its results in place."""
    from conftest import experiment_script
    from sharedbert import sentence_embeddings

    if not (glue_dir / "STS-B" / "train.tsv").is_file():
        pytest.skip("STS-B train is needed (the shared data folder's glue/)")
    script = experiment_script("finetuning/st_finetune.py")
    monkeypatch.setattr(script, "RESULTS", tmp_path / "results")
    output = tmp_path / "model"
    output.mkdir()
    (output / "model.safetensors").write_text("the previous model")

    def finetune(model, train, dev, output_dir, **options):
        (Path(output_dir) / "config.json").write_text("{}")  # saving has begun ...
        if options["max_steps"] == 1:
            raise KeyboardInterrupt("killed while saving")  # ... and dies before the weights
        (Path(output_dir) / "model.safetensors").write_text("the new model")
        return {"dev_before": 0.5, "dev_after": 0.6, "seconds": 1.0, "train_pairs": 10, "steps": 2}

    monkeypatch.setattr(sentence_embeddings, "finetune_sts", finetune)
    command = ["some-model", "--output-dir", str(output), "--threads", "1"]
    with pytest.raises(KeyboardInterrupt):
        script.main([*command, "--steps", "1"])
    assert sorted(p.name for p in output.iterdir()) == ["model.safetensors"] and siblings(output) == []
    assert not (tmp_path / "results").exists()

    script.main([*command, "--steps", "2"])
    assert (output / "model.safetensors").read_text() == "the new model" and (output / "config.json").is_file()
    assert json.loads((tmp_path / "results" / "st_finetune.json").read_text())["dev_after"] == 0.6


@pytest.mark.slow
def test_export_replaces_onnx_and_openvino_together_or_not_at_all(tmp_path, monkeypatch):
    """The sentence-transformers layout writes onnx/ and openvino/ into the model folder: a kill after onnx/ is
    written but before openvino/ is (here: the OpenVINO conversion dies) leaves both previous folders exactly as they
    were; a finished export replaces both, keeps every other file of the folder (hard-linked, not copied)."""
    pytest.importorskip("onnxruntime", reason='the onnx extra is not installed (pip install "sharedbert[onnx]")')
    pytest.importorskip("openvino", reason='the openvino extra is not installed ("sharedbert[openvino]")')
    from test_export import sentence_model

    from sharedbert import export

    def contents(folder):
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    _, folder = sentence_model(tmp_path)
    (folder / "extra").mkdir()
    (folder / "extra" / "notes.txt").write_text("the user's own file")
    export.export(model=folder, output_dir=folder, layout="sentence-transformers", openvino=True)
    before = contents(folder)
    assert {"onnx/model.onnx", "openvino/openvino_model.xml", "extra/notes.txt"} <= set(before)
    weights_inode = next(folder.glob("*.safetensors")).stat().st_ino

    real_convert = export.convert_to_openvino

    def killed_while_converting(onnx_path, path):
        Path(path).write_text("<half an IR")
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(export.exporting, "convert_to_openvino", killed_while_converting)
    with pytest.raises(KeyboardInterrupt):
        export.export(model=folder, output_dir=folder, layout="sentence-transformers", quantize=["avx2"], openvino=True)
    assert contents(folder) == before  # the new onnx/ (with its int8 file) was never put in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary folder left beside it

    monkeypatch.setattr(export.exporting, "convert_to_openvino", real_convert)
    import sharedbert.atomic as atomic

    replaced, real_replace_directory = [], atomic._replace_directory
    monkeypatch.setattr(atomic, "_replace_directory", lambda tmp, final: (replaced.append(final),
                                                                          real_replace_directory(tmp, final)))
    export.export(model=folder, output_dir=folder, layout="sentence-transformers", quantize=["avx2"], openvino=True)
    assert replaced == [folder.resolve()]  # one folder swapped in, not onnx/ then openvino/
    after = contents(folder)
    assert "onnx/model_quint8_avx2.onnx" in after and after["openvino/openvino_model.xml"].startswith(b"<?xml")
    assert {name: data for name, data in after.items() if not name.startswith(("onnx/", "openvino/"))} == {
        name: data for name, data in before.items() if not name.startswith(("onnx/", "openvino/"))}
    assert next(folder.glob("*.safetensors")).stat().st_ino == weights_inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]

    # ONNX only: the earlier openvino/ stays as it was.
    openvino_before = {k: v for k, v in after.items() if k.startswith("openvino/")}
    export.export(model=folder, output_dir=folder, layout="sentence-transformers")
    final = contents(folder)
    assert {k: v for k, v in final.items() if k.startswith("openvino/")} == openvino_before
    assert "onnx/model_quint8_avx2.onnx" not in final
