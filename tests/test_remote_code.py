"""No command runs code shipped inside a model folder unless the user passes --trust-remote-code (issue 43).

Each test plants a module in a model folder, points the folder's config.json, tokenizer_config.json or modules.json at
it, and runs a command that loads the folder: the module writes a marker file when imported, so the marker says
whether anything of it ran. The refusal must name the flag, and SharedBert folders (whose saved config.json carries
an auto_map) must still load without it, through the package's registered classes.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import sharedbert
from sharedbert.remote_code import RemoteCodeRefused, check_remote_code, remote_code_of
from conftest import child_pythonpath, tiny_config

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "a", "it", "was", "."]


def plant(folder: Path, marker: Path, **json_files) -> Path:
    """`folder` with planted.py (it writes `marker` when imported, and defines the classes the JSON files name) and
    the given JSON files (`config_json=...` is written as config.json)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "planted.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('the planted module ran')\n"
        "from transformers import PreTrainedConfig, PreTrainedModel\n"
        "class PlantedConfig(PreTrainedConfig):\n    model_type = 'planted'\n"
        "class PlantedModel(PreTrainedModel):\n    config_class = PlantedConfig\n",
        encoding="utf-8")
    for name, data in json_files.items():
        (folder / name.replace("_json", ".json")).write_text(json.dumps(data), encoding="utf-8")
    return folder


PLANTED_MAP = {name: f"planted.{'PlantedConfig' if name == 'AutoConfig' else 'PlantedModel'}" for name in (
    "AutoConfig", "AutoModel", "AutoModelForSequenceClassification", "AutoModelForSeq2SeqLM")}


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "planted-code-ran"


@pytest.fixture
def planted(tmp_path, marker) -> Path:
    """A model folder of an unknown type whose config.json asks for its own code."""
    return plant(tmp_path / "planted", marker, config_json={"model_type": "planted", "auto_map": PLANTED_MAP})


@pytest.fixture
def planted_seq2seq(tmp_path, marker) -> Path:
    return plant(tmp_path / "planted-seq2seq", marker,
                 config_json={"model_type": "planted", "is_encoder_decoder": True, "auto_map": PLANTED_MAP})


def sharedbert_classifier(folder: Path) -> Path:
    """A tiny saved SharedBert classifier with its tokenizer (its config.json carries the full auto_map)."""
    torch.manual_seed(0)
    config = tiny_config(vocab_size=len(WORDS), num_labels=2, id2label={0: "0", 1: "1"}, label2id={"0": 0, "1": 1})
    model = sharedbert.SharedBertForSequenceClassification(config)
    model.save_pretrained(folder)
    sharedbert.SharedBertTokenizer(vocab={token: i for i, token in enumerate(WORDS)}).save_pretrained(folder)
    return folder


def write_task(folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    rows = "text,label\n" + "".join(f"{text},{label}\n" for text, label in [
        ("a good film", 1), ("a bad film", 0), ("it was good", 1), ("it was bad", 0)] * 2)
    for split in ("train", "validation"):
        (folder / f"{split}.csv").write_text(rows, encoding="utf-8")
    return {"train": folder / "train.csv", "validation": folder / "validation.csv"}


def run(argv) -> int:
    from sharedbert.cli import main

    try:
        return main([str(a) for a in argv])
    except SystemExit as stop:
        return stop.code


def assert_refused(code: int, capsys, marker: Path) -> None:
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--trust-remote-code" in err and "planted" in err, err
    assert not marker.exists(), "the planted module ran"


def test_evaluate_refuses_a_folder_that_ships_code(planted, marker, capsys):
    assert_refused(run(["evaluate", "--model", planted, "--task", "sst2"]), capsys, marker)


def test_generate_refuses_a_folder_that_ships_code(planted_seq2seq, marker, tmp_path, capsys):
    sources = tmp_path / "sources.txt"
    sources.write_text("a good film\n", encoding="utf-8")
    code = run(["generate", planted_seq2seq, "--input", sources, "--output", tmp_path / "out.jsonl"])
    assert_refused(code, capsys, marker)


def test_finetune_refuses_a_folder_that_ships_code(planted, marker, tmp_path, capsys):
    files = write_task(tmp_path / "data")
    code = run(["finetune", "--model", planted, "--train-file", files["train"], "--validation-file",
                files["validation"], "--text-columns", "text", "--label-column", "label", "--output-dir",
                tmp_path / "out"])
    assert_refused(code, capsys, marker)


def test_finetune_refuses_a_distillation_teacher_that_ships_code(planted, marker, tmp_path, capsys):
    student = sharedbert_classifier(tmp_path / "student")
    files = write_task(tmp_path / "data")
    code = run(["finetune", "--model", student, "--distill-from", planted, "--train-file", files["train"],
                "--validation-file", files["validation"], "--text-columns", "text", "--label-column", "label",
                "--output-dir", tmp_path / "out", "--max-steps", 1, "--precision", "fp32"])
    assert_refused(code, capsys, marker)


def test_seq2seq_finetune_refuses_a_folder_that_ships_code(planted_seq2seq, marker, tmp_path, capsys):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("source,target\na good film,it was good\n", encoding="utf-8")
    code = run(["finetune", "--model", planted_seq2seq, "--train-file", pairs, "--validation-file", pairs,
                "--source-column", "source", "--target-column", "target", "--output-dir", tmp_path / "out"])
    assert_refused(code, capsys, marker)


def test_pretrain_refuses_a_tokenizer_that_ships_code(planted, marker, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a good film. it was bad.\n" * 20, encoding="utf-8")
    code = run(["pretrain", "--corpus", corpus, "--tokenizer", planted, "--config", "bert-tiny", "--output-dir",
                tmp_path / "out", "--max-steps", 1])
    assert_refused(code, capsys, marker)


def test_convert_refuses_a_bert_whose_tokenizer_ships_code(minilm_path, marker, tmp_path, capsys):
    """A real BERT checkpoint beside a tokenizer_config.json that asks for a tokenizer class of its own."""
    bert = tmp_path / "bert"
    bert.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        (bert / name).symlink_to(minilm_path / name)
    plant(bert, marker, tokenizer_config_json={"tokenizer_class": "PlantedTokenizer",
                                               "auto_map": {"AutoTokenizer": [None, "planted.PlantedTokenizer"]}})
    assert_refused(run(["convert", bert, tmp_path / "out"]), capsys, marker)


def test_export_refuses_a_folder_that_ships_code(planted, marker, tmp_path, capsys):
    assert_refused(run(["export", planted, tmp_path / "out"]), capsys, marker)


def test_upload_refuses_a_sharedbert_folder_asking_for_code_of_its_own(tmp_path, marker, capsys):
    """Upload publishes this package's code only: a folder that asks for a tokenizer of its own is refused, and the
    planted tokenizer never runs (the verification loads with trust_remote_code=True, in a process of its own)."""
    folder = sharedbert_classifier(tmp_path / "model")
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    settings.update(tokenizer_class="PlantedTokenizer", auto_map={"AutoTokenizer": [None, "planted.PlantedTokenizer"]})
    plant(folder, marker, tokenizer_config_json=settings)
    code = run(["upload", folder, "--repo-id", "someone/model", "--dry-run", tmp_path / "staged"])
    err = capsys.readouterr().err
    assert code != 0 and "PlantedTokenizer" in err and "only this package's code" in err, err
    assert not marker.exists() and not (tmp_path / "staged").exists()


def test_sentence_transformers_module_of_its_own_is_refused(tmp_path, marker):
    from sharedbert import sentence_embeddings

    folder = sharedbert_classifier(tmp_path / "model")
    plant(folder, marker, modules_json=[{"idx": 0, "name": "0", "path": "", "type": "planted.PlantedModule"}])
    with pytest.raises(RemoteCodeRefused, match="modules.json: planted.PlantedModule"):
        sentence_embeddings.load(folder)
    assert not marker.exists()


def test_the_flag_lets_the_code_run(planted, marker, capsys):
    """The refusals above are the flag's doing: with it, transformers imports the planted module."""
    code = run(["evaluate", "--model", planted, "--task", "sst2", "--trust-remote-code"])
    assert marker.exists(), capsys.readouterr().err
    assert code != 0  # the planted classes are no classifier


def test_sharedbert_folders_load_without_the_flag_even_with_a_planted_auto_map(tmp_path, marker, capsys):
    """A SharedBert folder's auto_map is ignored where the package is installed: even one pointing at a planted
    module loads the registered classes and scores, and the planted module does not run."""
    folder = sharedbert_classifier(tmp_path / "model")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["auto_map"] = PLANTED_MAP
    plant(folder, marker, config_json=config)
    assert remote_code_of(folder) == []
    files = write_task(tmp_path / "data")
    code = run(["evaluate", "--model", folder, "--file", files["validation"], "--task", "mine",
                "--text-columns", "text", "--label-column", "label"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert '"accuracy"' in out.out
    assert not marker.exists()


def test_a_missing_model_folder_gets_the_packages_message(tmp_path, capsys):
    code = run(["evaluate", "--model", tmp_path / "no" / "such" / "model", "--task", "sst2"])
    err = capsys.readouterr().err
    assert code == 2 and "no such model folder" in err and "Repo id must be" not in err, err


def test_check_remote_code_lists_what_would_run(planted):
    with pytest.raises(RemoteCodeRefused) as refused:
        check_remote_code(planted)
    assert "config.json: AutoConfig -> planted.PlantedConfig" in str(refused.value)
    check_remote_code(planted, trust_remote_code=True)  # allowed: no error (and nothing imported by the check)


# -- one gate for every part of a folder (issue 52) ----------------------------------------------------------------
# The gate reads config.json and every config nested in it, the tokenizer and processor configs and modules.json (and
# the module folders it names), and knows each auto_map form. An encoder-decoder folder whose decoder sub-config asks
# for its own code used to pass: EncoderDecoderModel builds its parts through Auto*.from_config without a trust
# setting, so transformers asked at its prompt, and imported the module on "y".


def planted_encoder_decoder(folder: Path, marker: Path, reference: str | None = None) -> Path:
    """A BERT encoder + ALBERT decoder folder (with weights and a tokenizer) whose decoder sub-config maps
    AutoModelForCausalLM, which ALBERT lacks, to planted.py (by default as `FOLDER--planted.PlantedModel`, the form
    transformers imports from a local folder)."""
    from safetensors.torch import save_file
    from transformers import AlbertConfig, BertConfig, BertModel, BertTokenizer, EncoderDecoderConfig

    plant(folder, marker)
    small = dict(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                 intermediate_size=37)
    config = EncoderDecoderConfig.from_encoder_decoder_configs(
        BertConfig(**small), AlbertConfig(**small, embedding_size=16, is_decoder=True, add_cross_attention=True))
    config = config.to_dict()
    config["decoder"]["auto_map"] = {"AutoModelForCausalLM": reference or f"{folder}--planted.PlantedModel"}
    config.update(decoder_start_token_id=2, pad_token_id=0)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    encoder = BertModel(BertConfig(**small))
    save_file({f"encoder.{key}": value.contiguous() for key, value in encoder.state_dict().items()},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    BertTokenizer(vocab={token: i for i, token in enumerate(WORDS)}).save_pretrained(folder)
    return folder


def _routes(folder: Path, tmp: Path) -> dict:
    sources = tmp / "sources.txt"
    sources.write_text("a good film\n", encoding="utf-8")
    pairs = tmp / "pairs.csv"
    pairs.write_text("source,target\na good film,it was good\n", encoding="utf-8")
    cli = [sys.executable, "-m", "sharedbert"]
    return {
        "convert": cli + ["convert", folder, tmp / "converted"],
        "generate": cli + ["generate", folder, "--input", sources, "--output", tmp / "out.jsonl"],
        "seq2seq finetune": cli + ["finetune", "--model", folder, "--train-file", pairs, "--validation-file", pairs,
                                   "--source-column", "source", "--target-column", "target", "--output-dir",
                                   tmp / "tuned"],
        "from_bert": [sys.executable, "-c", f"from sharedbert.conversion.bert import from_bert; from_bert({str(folder)!r})"],
    }


@pytest.mark.parametrize("route", ["convert", "generate", "seq2seq finetune", "from_bert"])
def test_a_decoder_sub_config_asking_for_code_is_refused_before_transformers_asks(tmp_path, marker, route):
    """Each route as a user runs it, in a process of its own whose stdin answers "y" to any prompt: the gate refuses
    first, naming the decoder's entry and the flag, transformers' prompt never appears, and the module never runs."""
    folder = planted_encoder_decoder(tmp_path / "encoder-decoder", marker)
    env = dict(os.environ, PYTHONPATH=child_pythonpath(), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    done = subprocess.run([str(part) for part in _routes(folder, tmp_path)[route]], input="y\n" * 5, env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert "config.json decoder: AutoModelForCausalLM" in output and "trust_remote_code=True" in output, output[-3000:]
    assert "Do you wish to run the custom code" not in output
    assert not marker.exists(), "the planted module ran"


REFERENCE_FORMS = ["planted.PlantedModel", "someone/elsewhere--planted.PlantedModel", "{folder}--planted.PlantedModel"]


def _place(folder: Path, where: str, reference: str) -> str:
    """Put `reference` in one part of a SharedBert folder; returns the start of the line the gate should list."""
    def edit(name, change):
        path = folder / name
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        change(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data), encoding="utf-8")

    unknown = {"model_type": "planted", "auto_map": {"AutoModel": reference}}
    if where == "encoder sub-config":
        edit("config.json", lambda c: c.update(encoder=unknown))
        return "config.json encoder: AutoModel -> "
    if where == "nested sub-config":
        edit("config.json", lambda c: c.update(decoder={"model_type": "albert", "text_config": unknown}))
        return "config.json decoder text_config: AutoModel -> "
    if where == "tokenizer (dict form)":
        edit("tokenizer_config.json", lambda c: c.update(tokenizer_class="PlantedTokenizer",
                                                          auto_map={"AutoTokenizer": [None, reference]}))
        return "tokenizer_config.json: AutoTokenizer -> "
    if where == "tokenizer (list form)":
        edit("tokenizer_config.json", lambda c: c.update(tokenizer_class="PlantedTokenizer",
                                                          auto_map=[reference, None]))
        return "tokenizer_config.json: AutoTokenizer -> "
    if where in ("processor_config.json", "preprocessor_config.json"):
        edit(where, lambda c: c.update(processor_class="PlantedProcessor", auto_map={"AutoProcessor": reference}))
        return f"{where}: AutoProcessor -> "
    assert where == "sentence-transformers module folder"
    edit("modules.json", lambda m: None)
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "0_Transformer",
                                                      "type": "sentence_transformers.models.Transformer"}]))
    edit("0_Transformer/config.json", lambda c: c.update(unknown))
    return "0_Transformer/config.json: AutoModel -> "


PLACES = ["encoder sub-config", "nested sub-config", "tokenizer (dict form)", "tokenizer (list form)",
          "processor_config.json", "preprocessor_config.json", "sentence-transformers module folder"]


@pytest.mark.parametrize("form", REFERENCE_FORMS)
@pytest.mark.parametrize("where", PLACES)
def test_the_gate_finds_code_in_every_part_and_every_auto_map_form(tmp_path, where, form):
    folder = sharedbert_classifier(tmp_path / "model")
    reference = form.format(folder=folder)
    listed = _place(folder, where, reference)
    assert any(line.startswith(listed) and line.endswith(reference) for line in remote_code_of(folder)), (
        remote_code_of(folder))
    with pytest.raises(RemoteCodeRefused, match="--trust-remote-code") as refused:
        check_remote_code(folder)
    assert reference in str(refused.value)
    check_remote_code(folder, trust_remote_code=True)  # the user's flag lets it through


def test_a_sub_config_whose_class_transformers_has_is_not_refused(tmp_path):
    """A BERT decoder's auto_map for AutoModelForCausalLM is never imported without the flag (transformers has
    BertLMHeadModel and asks nothing): the gate lists it as a reference but does not refuse it."""
    from sharedbert.remote_code import code_references

    folder = tmp_path / "model"
    folder.mkdir()
    config = {"model_type": "encoder-decoder", "encoder": {"model_type": "bert"},
              "decoder": {"model_type": "bert", "auto_map": {"AutoModelForCausalLM": "planted.PlantedModel"}}}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert remote_code_of(folder) == []
    assert ("config.json decoder", "AutoModelForCausalLM", "planted.PlantedModel", True) in code_references(folder)
    check_remote_code(folder)


def test_with_the_gate_switched_off_transformers_still_never_asks(tmp_path, marker):
    """The package's loads run inside `transformers_never_asks`: even with `check_remote_code` switched off in the
    loader (as for a route the gate might not know of), transformers refuses the decoder's code instead of asking,
    and stdin's "y" is never read."""
    folder = planted_encoder_decoder(tmp_path / "encoder-decoder", marker)
    script = ("import sharedbert.loading as loader\n"
              "loader.check_remote_code = lambda *args, **kwargs: None\n"
              "from transformers import AutoModelForSeq2SeqLM\n"
              f"loader.from_pretrained(AutoModelForSeq2SeqLM, {str(folder)!r})\n")
    env = dict(os.environ, PYTHONPATH=child_pythonpath(), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               HF_MODULES_CACHE=str(tmp_path / "modules"))
    done = subprocess.run([sys.executable, "-c", script], input="y\n" * 5, env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "trust_remote_code" in output, output[-3000:]
    assert "Do you wish to run the custom code" not in output
    assert not marker.exists(), "the planted module ran"


def test_the_gate_reads_a_hub_repositorys_module_folders_too(tmp_path):
    """A Hub id's module folders are read through the Hub cache as subfolders (here an offline cache laid out as the
    Hub client lays it out), as sentence-transformers reads them."""
    snapshot = tmp_path / "hub" / "models--someone--sentence" / "snapshots" / ("0" * 40)
    (snapshot / "0_Transformer").mkdir(parents=True)
    (tmp_path / "hub" / "models--someone--sentence" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--sentence" / "refs" / "main").write_text("0" * 40)
    (snapshot / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "0_Transformer",
                                                        "type": "sentence_transformers.models.Transformer"}]))
    (snapshot / "0_Transformer" / "config.json").write_text(json.dumps(
        {"model_type": "planted", "auto_map": {"AutoModel": "planted.PlantedModel"}}))
    hub = {"cache_dir": str(tmp_path / "hub"), "local_files_only": True}
    assert remote_code_of("someone/sentence", **hub) == ["0_Transformer/config.json: AutoModel -> planted.PlantedModel"]
    with pytest.raises(RemoteCodeRefused, match="0_Transformer/config.json"):
        check_remote_code("someone/sentence", **hub)
