"""Precision choice: bf16 only where the hardware computes it natively (it is 10x slower where emulated)."""

import pytest

from sharedbert import precision


@pytest.mark.parametrize(
    "flags, expected",
    [("fpu sse avx2 fma", "fp32"), ("fpu avx512f avx512_bf16", "bf16"), ("fpu amx_tile amx_bf16 avx2", "bf16")],
)
def test_auto_picks_bf16_only_with_native_support(tmp_path, monkeypatch, flags, expected):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    read_flags = precision.cpu_flags
    monkeypatch.setattr(precision, "cpu_flags", lambda *_: read_flags(cpuinfo))  # this file instead of the machine's
    assert precision.resolve_precision("auto") == expected
    assert precision.describe_precision("auto").startswith(f"precision: {expected} (auto: ")
    assert precision.resolve_precision("fp32") == "fp32" and precision.resolve_precision("bf16") == "bf16"


def test_forcing_bf16_without_support_warns_in_the_log(monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda *_: frozenset({"avx2"}))
    assert "runs slower than fp32" in precision.describe_precision("bf16")


def test_no_cpuinfo_means_no_native_bf16(tmp_path):
    assert precision.cpu_flags(tmp_path / "missing") == frozenset()


def test_the_cpu_name_for_results_files_is_cpuinfos_model_name_or_none(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2\nvmx flags\t: ept\n")
    assert precision.cpu_name(cpuinfo) == "AMD EPYC 9R14"
    assert precision.cpu_flags(cpuinfo) == frozenset({"fpu", "avx2"})
    assert precision.cpu_name(tmp_path / "missing") is None


def test_the_cpu_name_tells_apart_two_cpus_a_virtual_machine_names_alike(tmp_path):
    """Two sittings' machines both reported a bare "AMD EPYC": one computes bf16 natively, one does not."""
    names = []
    for family, model in (("25", "1"), ("25", "17")):
        cpuinfo = tmp_path / f"cpuinfo-{model}"
        cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                           "model name\t: AMD EPYC\nstepping\t: 1\n")
        names.append(precision.cpu_name(cpuinfo))
    assert names == ["AMD EPYC (family 25, model 1)", "AMD EPYC (family 25, model 17)"]


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision must be one of"):
        precision.resolve_precision("fp16")
