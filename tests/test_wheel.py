"""The built wheel works without the repository: installed into a fresh virtual environment and run from a folder with
no repository around, `sharedbert --help`, `sharedbert convert all-MiniLM-L6-v2 OUT` and `sharedbert upload OUT
--repo-id NAME/REPO --dry-run STAGE` (which renders the packaged model-card template) all work.

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

    def run(*arguments, timeout=900):
        return subprocess.run([env_dir / "bin" / "sharedbert", *arguments], cwd=workdir, env=environment,
                              capture_output=True, text=True, timeout=timeout)

    where = subprocess.run([python, "-c", "import sharedbert; print(sharedbert.__file__)"], cwd=workdir,
                           env=environment, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(env_dir)), f"the fresh environment imported sharedbert from {where}"
    return run, workdir


def test_help_lists_the_commands(wheel_env):
    run, _ = wheel_env
    result = run("--help")
    assert result.returncode == 0, result.stderr
    for command in ("convert", "pretrain", "finetune", "evaluate", "upload", "export"):
        assert command in result.stdout


def test_convert_then_stage_with_a_model_card(wheel_env, minilm_path):
    run, workdir = wheel_env
    converted = run("convert", "all-MiniLM-L6-v2", "minilm-shared")
    assert converted.returncode == 0, converted.stderr[-3000:]
    assert (workdir / "minilm-shared" / "model.safetensors").is_file()
    staged = run("upload", "minilm-shared", "--repo-id", "someone/sharedbert-minilm", "--dry-run", "staged")
    assert staged.returncode == 0, staged.stderr[-3000:]
    card = (workdir / "staged" / "README.md").read_text(encoding="utf-8")
    assert "from sharedbert/hub/template.md" in card  # rendered from the wheel's packaged template
    assert "someone/sharedbert-minilm" in card and "shared" in card
    assert "Dry run: the verified folder is in" in staged.stdout, staged.stdout
    assert {"config.json", "model.safetensors", "modeling_sharedbert.py"} <= {p.name for p in (workdir / "staged").iterdir()}
