"""Which floating-point precision a run trains in: bf16 autocast (fp32 master weights) where the hardware computes
bf16 natively, fp32 elsewhere.

bf16 pays only on hardware with bf16 arithmetic: on a CPU that emulates it, a training step runs many times *slower*
than fp32 (experiments/bf16/README.md). So "auto" must look at the machine, never assume.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

import torch

PRECISIONS = ("auto", "bf16", "fp32")
# Linux /proc/cpuinfo flags of native bf16 arithmetic: AVX512-BF16 (Cooper Lake, Zen 4+) and AMX-BF16 (Sapphire Rapids+)
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def precision_option():
    """The `precision` field of a Trainer job's arguments (pretrain, finetune): its default, choices and help."""
    return field(default="auto", metadata={
        "help": "bf16 autocast with fp32 master weights, or fp32; auto: bf16 where the CPU (or GPU) computes bf16 "
        "natively. A checkpoint may be resumed in another precision.", "choices": PRECISIONS})


def _cpuinfo_field(name: str, cpuinfo: str | Path) -> str | None:
    """The first `name: value` line's value in Linux's /proc/cpuinfo (None where there is none)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags as Linux reports them (empty where there is no /proc/cpuinfo)."""
    return frozenset((_cpuinfo_field("flags", cpuinfo) or "").split())


def cpu_name(cpuinfo: str | Path = "/proc/cpuinfo") -> str | None:
    """The CPU for results files: its model name as Linux reports it, with its family and model numbers where Linux
    gives them (None where there is no /proc/cpuinfo). A virtual machine may report a bare "AMD EPYC" for CPUs of
    different generations, one with native bf16 and one without; the numbers tell them apart."""
    name = _cpuinfo_field("model name", cpuinfo)
    family, model = _cpuinfo_field("cpu family", cpuinfo), _cpuinfo_field("model", cpuinfo)
    if name is None or family is None or model is None:
        return name
    return f"{name} (family {family}, model {model})"


def native_bf16(device: str = "cpu") -> bool:
    """Whether `device` ("cpu" or "cuda") computes bf16 natively."""
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(cpu_flags() & NATIVE_BF16_FLAGS)


def resolve_precision(precision: str = "auto", device: str = "cpu") -> str:
    """"bf16" or "fp32": `precision` itself, or for "auto" bf16 exactly where the device computes it natively."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}.")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    return precision


def describe_precision(precision: str, device: str = "cpu") -> str:
    """One line for the run's log: the precision used and why."""
    chosen = resolve_precision(precision, device)
    native = native_bf16(device)
    if precision == "auto":
        reason = "native bf16 on this machine" if native else "no native bf16 on this machine (it would be slower)"
        return f"precision: {chosen} (auto: {reason})"
    warning = "" if chosen == "fp32" or native else "; this machine has no native bf16, so it runs slower than fp32"
    return f"precision: {chosen} (asked for){warning}"


__all__ = ["NATIVE_BF16_FLAGS", "PRECISIONS", "cpu_flags", "describe_precision", "native_bf16", "precision_option",
           "resolve_precision"]
