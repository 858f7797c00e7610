"""`sharedbert.training` and `sharedbert.recipes` import their public names on first use (`sharedbert.lazy_exports`):
importing the package loads none of its jobs, every exported name resolves to its module's object, and a misspelt
name is an AttributeError that names the package."""

import importlib
import subprocess
import sys

import pytest

PACKAGES = ("sharedbert.training", "sharedbert.recipes")


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_the_package_loads_none_of_its_jobs(package):
    code = (f"import sys, {package} as p\n"
            "loaded = sorted(m for m in sys.modules if m.startswith(p.__name__ + '.') or m == 'transformers.trainer')\n"
            "print(loaded)")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_its_modules_object_and_is_listed(package):
    module = importlib.import_module(package)
    for name, source in module._EXPORTS.items():
        defining = importlib.import_module(source if source.startswith("..") else f".{source}", package)
        assert getattr(module, name) is getattr(defining, name), name
        assert name in vars(module)  # cached: the next look-up is a plain attribute
    assert set(module._EXPORTS) <= set(dir(module)) and module.__all__ == sorted(module._EXPORTS)


@pytest.mark.parametrize("package", PACKAGES)
def test_a_name_it_does_not_export_is_an_attribute_error_naming_the_package(package):
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'pretrian'"):
        module.pretrian
    assert not hasattr(module, "pretrian")
