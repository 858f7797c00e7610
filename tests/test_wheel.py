"""The built wheel works without the repository: installed into a fresh virtual environment and run from a folder with
no repository around, `sharedbert --help`, `sharedbert convert all-MiniLM-L6-v2 OUT --heal` and `sharedbert upload OUT
--repo-id NAME/REPO --dry-run STAGE` (which renders the packaged model-card template) all work, and the data defaults
come from the folder `SHAREDBERT_DATA` names (without it, the message names the variable and the flag).

The real all-MiniLM-L6-v2 is converted once (`converted`, healed for one step on the text SHAREDBERT_DATA points at):
that one conversion is both what the upload stages and the proof that the healing's data default comes from
SHAREDBERT_DATA. A second conversion, without --heal, would run the same conversion code from the same wheel again.

The fresh environment gets the dependencies (torch, transformers, ...) by a path entry to this environment's
site-packages, whose `.pth` files are not processed there, so the editable install of the repository is invisible:
the only `sharedbert` it can import is the wheel's."""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    pytest.importorskip("setuptools", reason="building the wheel without network needs setuptools installed")
    root = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO_ROOT), "--no-deps", "--no-build-isolation", "-q",
         "-w", str(root / "dist")],
        capture_output=True, text=True, timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (root / "dist").glob("sharedbert-*.whl")
    env_dir = root / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site_dir = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    (Path(site_dir) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # Without PYTHONPATH: a suite run with PYTHONPATH=REPO puts the source tree (and the sharedbert.egg-info the
    # build leaves there) on pip's path, and pip then takes the package for installed and installs nothing.
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environment.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True, text=True, timeout=600, env=environment,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    workdir = root / "elsewhere"
    workdir.mkdir()

    def run(*arguments, timeout=900, data=None):
        """`sharedbert ARGUMENTS` in the fresh environment; `data`: the SHAREDBERT_DATA folder (default: unset)."""
        extra = {} if data is None else {"SHAREDBERT_DATA": str(data)}
        without = {key: value for key, value in environment.items() if key != "SHAREDBERT_DATA"}
        return subprocess.run([env_dir / "bin" / "sharedbert", *arguments], cwd=workdir, env=without | extra,
                              capture_output=True, text=True, timeout=timeout)

    where = subprocess.run([python, "-c", "import sharedbert; print(sharedbert.__file__)"], cwd=workdir,
                           env=environment, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(env_dir)), f"the fresh environment imported sharedbert from {where}"
    return run, workdir


@pytest.mark.slow
def test_help_lists_the_commands(wheel_env):
    run, _ = wheel_env
    result = run("--help")
    assert result.returncode == 0, result.stderr
    for command in ("convert", "pretrain", "finetune", "evaluate", "upload", "export"):
        assert command in result.stdout


@pytest.fixture(scope="module")
def converted(wheel_env, minilm_path, tmp_path_factory):
    """`sharedbert convert all-MiniLM-L6-v2 minilm-shared --heal` in the fresh environment, with SHAREDBERT_DATA naming
    a folder whose mlm-text/ holds a small synthetic text, which the healing then reads by default (no --corpus).
    Cheap healing options (one step, no calibration, short pieces): what is tested is that the installed wheel
    converts, finds the data and writes a model that stages, not the healing itself."""
    import random

    run, workdir = wheel_env
    rng = random.Random(0)
    words = "the a man woman dog plays runs sees guitar park river city old young and with on in near house".split()
    data = tmp_path_factory.mktemp("wheel-data") / "data"
    (data / "mlm-text").mkdir(parents=True)
    (data / "mlm-text" / "prose.txt").write_text(" ".join(rng.choice(words) for _ in range(3000)))
    result = run("convert", "all-MiniLM-L6-v2", "minilm-shared", "--heal", "--steps", "1", "--calibration-sentences",
                 "0", "--batch-size", "2", "--long-batch-size", "1", "--max-length", "64", "--threads", "1", data=data)
    return result, workdir / "minilm-shared", data


@pytest.mark.slow
def test_convert_then_stage_with_a_model_card(wheel_env, converted):
    run, workdir = wheel_env
    result, folder, _ = converted
    assert result.returncode == 0, result.stderr[-3000:]
    assert (folder / "model.safetensors").is_file()
    staged = run("upload", folder.name, "--repo-id", "someone/sharedbert-minilm", "--dry-run", "staged")
    assert staged.returncode == 0, staged.stderr[-3000:]
    card = (workdir / "staged" / "README.md").read_text(encoding="utf-8")
    assert "from sharedbert/hub/template.md" in card  # rendered from the wheel's packaged template
    assert "someone/sharedbert-minilm" in card and "shared" in card
    assert "Dry run: the verified folder is in" in staged.stdout, staged.stdout
    assert {"config.json", "model.safetensors", "modeling_sharedbert.py"} <= {p.name for p in (workdir / "staged").iterdir()}


@pytest.mark.slow
def test_the_data_default_comes_from_SHAREDBERT_DATA_outside_the_repository(wheel_env, converted, tmp_path):
    """`sharedbert convert --heal` heals on the shared raw text by default (as build-minilm does): installed and run
    outside the repository it finds it only through SHAREDBERT_DATA (`converted` passes no --corpus), and without it
    says how to point at it."""
    import json

    run, workdir = wheel_env
    missing = run("convert", "all-MiniLM-L6-v2", "not-written", "--heal", "--steps", "1")
    assert missing.returncode == 2, missing.stderr[-3000:]
    assert "SHAREDBERT_DATA is not set" in missing.stderr and "--corpus" in missing.stderr, missing.stderr[-3000:]
    assert not (workdir / "not-written").exists()

    healed, folder, data = converted
    assert healed.returncode == 0, healed.stderr[-3000:]
    report = json.loads((folder / "conversion_report.json").read_text())
    assert report["heal"]["steps"] == 1 and not report["heal"]["interrupted"]
    assert report["calibration"] is None  # --calibration-sentences 0 reached the library too

    wrong = run("build-minilm", "staged", "--corpus", str(data / "mlm-text"), data=tmp_path / "nothing-here")
    assert wrong.returncode == 2, wrong.stderr[-3000:]
    assert f"SHAREDBERT_DATA={tmp_path / 'nothing-here'} does not hold it" in wrong.stderr and "--sts" in wrong.stderr


def test_SHAREDBERT_DATA_is_searched_first(tmp_path, monkeypatch):
    from sharedbert.data.location import raw_text_dir, shared_data_dir

    first, second = tmp_path / "first", tmp_path / "second"
    (first / "glue" / "SST-2").mkdir(parents=True)
    (second / "shared" / "data" / "glue" / "SST-2").mkdir(parents=True)
    (second / "shared" / "data" / "mlm-text").mkdir(parents=True)
    monkeypatch.chdir(second)
    monkeypatch.setenv("SHAREDBERT_DATA", str(first))
    assert shared_data_dir("glue/SST-2") == first  # before the current folder (and the repository's shared/data)
    assert raw_text_dir() != first / "mlm-text" and raw_text_dir().is_dir()  # the next place that holds it
    monkeypatch.setenv("SHAREDBERT_DATA", str(tmp_path / "missing"))
    assert shared_data_dir("glue/SST-2") != tmp_path / "missing"
