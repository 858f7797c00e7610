"""Public names of a package imported on first use (PEP 562), so that importing the package does not load what its
modules import (`transformers.Trainer` and its training dependencies, for `sharedbert.training`).

    __getattr__, __dir__ = lazy_exports(__name__, {"pretrain": "pretraining", "DataError": "..data"})
"""

from __future__ import annotations

import importlib
import sys


def lazy_exports(package: str, exports: dict[str, str]):
    """`__getattr__` and `__dir__` for the package named `package`, whose public names `exports` maps to the module
    defining each, relative to the package ("pretraining") or above it ("..data")."""

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = exports[name]
        value = getattr(importlib.import_module(module if module.startswith("..") else f".{module}", package), name)
        vars(sys.modules[package])[name] = value  # later look-ups skip __getattr__
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
