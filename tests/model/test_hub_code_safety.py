"""The three Hub code files run on users' machines under `trust_remote_code=True`: read their syntax trees and
refuse anything a reviewer would have to think twice about.

Rules (checked by `check_hub_source`, which is itself tested on deliberately bad sources below):

* Imports, anywhere in the file: only `torch`, `transformers` (and their submodules) and the sibling code files by
  flat relative import (`from .modeling_sharedbert import X`). No stdlib, no other package, no absolute import of
  the `sharedbert` package, no imported name that is a dangerous module (`from transformers.utils.hub import os`).
* Import time (module level and class bodies, which Python runs on import): only a docstring, imports, class and
  function definitions, `pass`, and assignments of constant expressions (literals, names, dotted names, tuples,
  lists, dicts, operators, type subscripts) or of an allow-listed simple call (`dict(...)`, `tuple(...)`,
  `logging.get_logger(__name__)`). Decorators, base classes, default values and annotations, also run on import,
  must be constant expressions or calls of a dotted name with constant arguments (`@torch.no_grad()`).
* Anywhere: no `eval`, `exec`, `compile`, `__import__`, `open`, `globals`, `breakpoint`, ..., no use of a dangerous
  module name (`os`, `subprocess`, `socket`, `urllib`, `requests`, `pickle`, ...), no environment access
  (`.environ`, `.getenv`), no unpickling or code loading through torch (`torch.load`, `torch.hub`, `torch.package`,
  `load_library`), no sandbox-escape attributes (`__globals__`, `__subclasses__`, ...), including via
  `getattr(x, "name")` with a constant name.

A static check cannot stop deliberate obfuscation; it keeps honest code honest and makes a change that needs a
reviewer's thought fail loudly.
"""

import ast
from pathlib import Path

import pytest


PACKAGE_DIR = Path(__file__).resolve().parents[2] / "sharedbert"
HUB_CODE_FILES = ("configuration_sharedbert", "modeling_sharedbert", "tokenization_sharedbert")

ALLOWED_TOP_LEVEL_PACKAGES = ("torch", "transformers")
FORBIDDEN_NAMES = frozenset(
    {
        "eval", "exec", "compile", "__import__", "open", "globals", "locals", "vars", "breakpoint", "input",
        "exit", "quit", "__builtins__", "memoryview",
    }
)  # fmt: skip
FORBIDDEN_MODULE_NAMES = frozenset(
    {
        "os", "sys", "subprocess", "socket", "urllib", "urllib3", "requests", "httpx", "http", "pickle", "marshal",
        "shelve", "importlib", "builtins", "shutil", "ctypes", "pathlib", "multiprocessing",
        "tempfile", "webbrowser", "ftplib", "smtplib", "telnetlib", "pty", "runpy",
    }
)  # fmt: skip
FORBIDDEN_ATTRIBUTES = frozenset(
    {
        "environ", "environb", "getenv", "putenv", "unsetenv", "system", "popen", "spawnl", "spawnv", "execv",
        "execve", "urlopen", "load_library", "cpp_extension", "__globals__", "__code__", "__subclasses__",
        "__builtins__", "__import__", "__loader__", "__reduce__", "__reduce_ex__", "__setstate__",
    }
)  # fmt: skip
# Dotted names that unpickle, download or load compiled code, even though their package is allowed.
FORBIDDEN_DOTTED_PREFIXES = ("torch.load", "torch.hub", "torch.package", "torch.jit.load", "torch.serialization")
# The only calls allowed to run at import time outside decorators.
ALLOWED_IMPORT_TIME_CALLS = frozenset({"dict", "tuple", "list", "set", "frozenset", "logging.get_logger"})
# transformers' validated config fields (transformers.utils.type_validators): `name(default=...)`, or for a
# parameterised validator `name(...)(default=...)`, with constant arguments, in a class body.
VALIDATED_FIELDS = frozenset({"positive_int_field", "probability", "activation_fn_key", "interval"})


def dotted_name(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def is_constant_expression(node: ast.AST | None) -> bool:
    """Literals, names, dotted names, containers, operators and type subscripts of those: values that run no code
    of the file's choosing when evaluated."""
    if node is None:
        return True
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Attribute):
        return dotted_name(node) is not None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(is_constant_expression(element) for element in node.elts)
    if isinstance(node, ast.Dict):
        return all(is_constant_expression(n) for n in node.keys if n is not None) and all(
            is_constant_expression(value) for value in node.values
        )
    if isinstance(node, ast.UnaryOp):
        return is_constant_expression(node.operand)
    if isinstance(node, ast.BinOp):
        return is_constant_expression(node.left) and is_constant_expression(node.right)
    if isinstance(node, ast.BoolOp):
        return all(is_constant_expression(value) for value in node.values)
    if isinstance(node, ast.Compare):
        return is_constant_expression(node.left) and all(is_constant_expression(c) for c in node.comparators)
    if isinstance(node, ast.Subscript):  # list[int], Unpack[TransformersKwargs]
        return is_constant_expression(node.value) and is_constant_expression(node.slice)
    if isinstance(node, ast.JoinedStr):
        return all(is_constant_expression(value) for value in node.values)
    if isinstance(node, ast.FormattedValue):
        return is_constant_expression(node.value)
    if isinstance(node, ast.Starred):
        return is_constant_expression(node.value)
    return False


def is_validated_field(node: ast.AST) -> bool:
    """A config field declared with one of transformers' validators (`VALIDATED_FIELDS`), constant arguments only."""
    if not isinstance(node, ast.Call):
        return False
    factory = node.func.func if isinstance(node.func, ast.Call) else node.func
    if dotted_name(factory) not in VALIDATED_FIELDS:
        return False
    calls = [node, node.func] if isinstance(node.func, ast.Call) else [node]
    return all(is_allowed_call(call, None) for call in calls) if len(calls) == 1 else (
        is_allowed_call(node.func, None)
        and all(is_constant_expression(a) for a in node.args)
        and all(is_constant_expression(k.value) for k in node.keywords)
    )


def is_allowed_call(node: ast.AST, allowed: frozenset | None) -> bool:
    """A call of a dotted name (in `allowed`, unless None) whose arguments are constant expressions."""
    if not isinstance(node, ast.Call):
        return False
    name = dotted_name(node.func)
    if name is None or (allowed is not None and name not in allowed):
        return False
    return all(is_constant_expression(arg) for arg in node.args) and all(
        is_constant_expression(keyword.value) for keyword in node.keywords
    )


class HubSourceChecker:
    def __init__(self, siblings):
        self.siblings = frozenset(siblings)
        self.violations: list[str] = []

    def fail(self, node: ast.AST, message: str) -> None:
        self.violations.append(f"line {getattr(node, 'lineno', '?')}: {message}")

    # -- imports (anywhere) --------------------------------------------------------------------------------------

    def check_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ALLOWED_TOP_LEVEL_PACKAGES:
                    self.fail(node, f"imports `{alias.name}`: only torch, transformers and the sibling code files")
                elif alias.asname:  # `import torch as os`
                    self.check_bound_name(node, alias)
            return
        if node.level == 0:
            if (node.module or "").split(".")[0] not in ALLOWED_TOP_LEVEL_PACKAGES:
                self.fail(node, f"imports from `{node.module}`: only torch, transformers and the sibling code files")
        elif node.level != 1 or node.module is None or node.module not in self.siblings:
            target = "." * node.level + (node.module or "")
            self.fail(
                node,
                f"relative import `from {target} import ...`: only flat imports of the sibling code files "
                f"{sorted(self.siblings)} are copied to the Hub",
            )
        for alias in node.names:
            if alias.name == "*":
                self.fail(node, "star import: name what you import")
            self.check_bound_name(node, alias)

    def check_bound_name(self, node: ast.AST, alias: ast.alias) -> None:
        for name in (alias.asname,) if isinstance(node, ast.Import) else (alias.name, alias.asname):
            if name in FORBIDDEN_MODULE_NAMES or name in FORBIDDEN_NAMES:
                self.fail(node, f"imports the name `{name}` (a dangerous module or builtin, even via an allowed package)")

    # -- import-time structure -----------------------------------------------------------------------------------

    def check_import_time_body(self, body: list[ast.stmt], where: str) -> None:
        for index, statement in enumerate(body):
            if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Pass)):
                continue
            if isinstance(statement, ast.Expr):
                is_docstring = index == 0 and isinstance(statement.value, ast.Constant) and isinstance(
                    statement.value.value, str
                )
                if not (is_docstring or (isinstance(statement.value, ast.Constant) and where == "class body")):
                    self.fail(statement, f"{where} runs an expression `{ast.unparse(statement)[:60]}` on import")
            elif isinstance(statement, ast.ClassDef):
                self.check_class(statement)
            elif isinstance(statement, ast.FunctionDef):
                self.check_function_signature(statement)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                self.check_assignment(statement, where)
            else:
                self.fail(
                    statement,
                    f"{where} runs a `{type(statement).__name__}` statement on import: only definitions, constants "
                    "and imports belong there",
                )

    def check_assignment(self, statement: ast.Assign | ast.AnnAssign, where: str) -> None:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        for target in targets:
            if not isinstance(target, ast.Name):
                self.fail(statement, f"{where} assigns to `{ast.unparse(target)}`: only plain names")
        if isinstance(statement, ast.AnnAssign) and not is_constant_expression(statement.annotation):
            self.fail(statement, f"annotation `{ast.unparse(statement.annotation)}` runs code on import")
        value = statement.value
        if value is not None and not (
            is_constant_expression(value)
            or is_allowed_call(value, ALLOWED_IMPORT_TIME_CALLS)
            or (where == "class body" and is_validated_field(value))
        ):
            self.fail(statement, f"{where} computes `{ast.unparse(value)[:60]}` on import: only constants")

    def check_decorators(self, node: ast.FunctionDef | ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            if not (is_constant_expression(decorator) or is_allowed_call(decorator, None)):
                self.fail(decorator, f"decorator `{ast.unparse(decorator)[:60]}` runs code on import")

    def check_class(self, node: ast.ClassDef) -> None:
        self.check_decorators(node)
        for expression in [*node.bases, *(keyword.value for keyword in node.keywords)]:
            if not is_constant_expression(expression):
                self.fail(node, f"class `{node.name}` base `{ast.unparse(expression)[:60]}` runs code on import")
        self.check_import_time_body(node.body, "class body")

    def check_function_signature(self, node: ast.FunctionDef) -> None:
        # The body runs only when called; decorators, defaults and annotations run on import.
        self.check_decorators(node)
        arguments = node.args
        every_argument = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every_argument += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
        for expression in [
            *arguments.defaults,
            *(d for d in arguments.kw_defaults if d is not None),
            *(a.annotation for a in every_argument if a.annotation is not None),
            *([node.returns] if node.returns is not None else []),
        ]:
            if not is_constant_expression(expression):
                self.fail(expression, f"`{node.name}` default/annotation `{ast.unparse(expression)[:60]}` runs code")

    # -- forbidden anywhere --------------------------------------------------------------------------------------

    def check_everywhere(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.check_import(node)
            elif isinstance(node, ast.Name):
                if node.id in FORBIDDEN_NAMES:
                    self.fail(node, f"uses `{node.id}`")
                elif node.id in FORBIDDEN_MODULE_NAMES:
                    self.fail(node, f"uses the name `{node.id}` (a dangerous module)")
            elif isinstance(node, ast.Attribute):
                if node.attr in FORBIDDEN_ATTRIBUTES:
                    self.fail(node, f"accesses `.{node.attr}` (environment, process, network or sandbox escape)")
                name = dotted_name(node)
                if name and any(name == p or name.startswith(p + ".") for p in FORBIDDEN_DOTTED_PREFIXES):
                    self.fail(node, f"uses `{name}` (unpickles, downloads or loads compiled code)")
            elif isinstance(node, ast.Call) and dotted_name(node.func) in ("getattr", "setattr", "delattr", "hasattr"):
                if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    attribute = node.args[1].value
                    if attribute in FORBIDDEN_ATTRIBUTES or attribute in FORBIDDEN_NAMES or attribute == "load":
                        self.fail(node, f"reaches `{attribute}` through {dotted_name(node.func)}()")


def check_hub_source(source: str, siblings=HUB_CODE_FILES) -> list[str]:
    """Every rule violation in `source`, as "line N: what" strings (empty when the file is fine)."""
    tree = ast.parse(source)
    checker = HubSourceChecker(siblings)
    checker.check_import_time_body(tree.body, "module level")
    checker.check_everywhere(tree)
    return checker.violations


# -- the real files ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("module", HUB_CODE_FILES)
def test_hub_code_file_follows_the_rules(module):
    source = (PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8")
    assert check_hub_source(source) == [], f"{module}.py breaks the Hub code rules"


def test_hub_code_files_are_the_ones_save_pretrained_ships(tmp_path):
    """The checked list must be the shipped list: a new code file copied to the Hub has to be checked too."""
    from conftest import tiny_config

    import sharedbert

    sharedbert.SharedBertForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    sharedbert.SharedBertTokenizer(vocab={"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}).save_pretrained(tmp_path)
    shipped = {path.stem for path in tmp_path.glob("*.py")}
    assert shipped and shipped <= set(HUB_CODE_FILES)


# -- the checker on synthetic sources ------------------------------------------------------------------------------

GOOD_SOURCE = '''"""Docstring."""

import torch
import torch.nn.functional as F
from torch import nn
from transformers.utils import logging
from transformers.configuration_utils import PreTrainedConfig
from transformers.utils.type_validators import interval, positive_int_field

from .configuration_sharedbert import SharedBertConfig

logger = logging.get_logger(__name__)
CHOICES = ("a", "b")
TABLE = {"a": nn.Linear, "b": None, **{"c": 1}}
LIMIT = 2**10 - 1
DEFAULTS = dict(x=1, y=(2, 3))


class Config(PreTrainedConfig):
    """Doc."""

    model_type = "x"
    size: int = 3
    maybe: int | None = None
    names: list[str] = ["a"]
    width: int = positive_int_field(default=8)
    rate: float = interval(min=0.0, max=1.0, exclude_max=True)(default=0.1)

    @classmethod
    def make(cls, value: float = -1.0, *args, flag: bool = True, **kwargs) -> "Config":
        import transformers.activations  # a lazy import of an allowed package
        return getattr(cls, "make")


@torch.no_grad()
def run(x: torch.Tensor | None = None) -> torch.Tensor:
    for _ in range(3):
        x = F.relu(x)
    return x


__all__ = ["Config", "run"]
'''

BAD_SOURCES = {
    "import os": ("import os\n", "imports `os`"),
    "from os import path": ("from os import path\n", "imports from `os`"),
    "import numpy": ("import numpy as np\n", "imports `numpy`"),
    "absolute self-import": ("from sharedbert.modeling_sharedbert import X\n", "imports from `sharedbert"),
    "parent relative import": ("from ..utils import x\n", "relative import"),
    "dotted relative import": ("from .sub.configuration_sharedbert import x\n", "relative import"),
    "bare relative import": ("from . import modeling_sharedbert\n", "relative import"),
    "relative import of a non-shipped file": ("from .helpers import x\n", "relative import"),
    "star import": ("from torch import *\n", "star import"),
    "dangerous name via allowed package": ("from transformers.utils.hub import os\n", "imports the name `os`"),
    "aliased to a module name": ("from torch import nn as subprocess\n", "imports the name `subprocess`"),
    "lazy import in a function": ("def f():\n    import subprocess\n", "imports `subprocess`"),
    "import in try block": ("try:\n    import requests\nexcept ImportError:\n    pass\n", "imports `requests`"),
    "eval in a function": ("def f(s):\n    return eval(s)\n", "uses `eval`"),
    "exec in a method": ("class A:\n    def f(self):\n        exec('x = 1')\n", "uses `exec`"),
    "compile": ("def f(s):\n    return compile(s, 'f', 'exec')\n", "uses `compile`"),
    "__import__": ("def f():\n    return __import__('socket')\n", "uses `__import__`"),
    "open at module level": ("DATA = open('weights.txt').read()\n", "uses `open`"),
    "open in a function": ("def f(p):\n    with open(p) as h:\n        return h.read()\n", "uses `open`"),
    "environment via attribute": ("def f(m):\n    return m.environ['HOME']\n", "accesses `.environ`"),
    "getenv via transformers": ("import transformers\nX = 1\ndef f():\n    return transformers.os.getenv('A')\n",
                                "accesses `.getenv`"),
    "os name without import": ("def f():\n    return os.listdir('.')\n", "uses the name `os`"),
    "getattr to a forbidden attribute": ("def f(m):\n    return getattr(m, 'system')('ls')\n", "through getattr"),
    "torch.load": ("import torch\ndef f(p):\n    return torch.load(p)\n", "uses `torch.load`"),
    "getattr torch load": ("import torch\ndef f(p):\n    return getattr(torch, 'load')(p)\n", "through getattr"),
    "torch.hub at module level": ("import torch\nM = torch.hub.load('a/b', 'm')\n", "uses `torch.hub"),
    "sandbox escape": ("def f():\n    return ().__class__.__base__.__subclasses__()\n", "accesses `.__subclasses__`"),
    "module-level call": ("print('hello')\n", "runs an expression"),
    "module-level side-effect call": ("import torch\nX = torch.zeros(3)\n", "computes `torch.zeros(3)`"),
    "module-level loop": ("for i in range(3):\n    pass\n", "`For` statement"),
    "module-level if": ("import torch\nif torch.cuda.is_available():\n    X = 1\n", "`If` statement"),
    "module-level with": ("import torch\nwith torch.no_grad():\n    pass\n", "`With` statement"),
    "module-level try": ("try:\n    X = 1\nexcept Exception:\n    X = 2\n", "`Try` statement"),
    "lambda constant": ("F = lambda: 1\n", "computes `lambda"),
    "comprehension constant": ("X = [i for i in range(3)]\n", "computes `[i"),
    "call in class body": ("import torch\nclass A:\n    w = torch.randn(3)\n", "computes `torch.randn(3)`"),
    "statement in class body": ("class A:\n    for i in range(3):\n        pass\n", "`For` statement"),
    "call in default argument": ("import torch\ndef f(x=torch.randn(2)):\n    return x\n", "default/annotation"),
    "call in decorator argument": ("import torch\n@torch.no_grad(print('x'))\ndef f():\n    pass\n", "decorator"),
    "call as class base": ("class A(type('B', (), {})):\n    pass\n", "base"),
    "attribute assignment": ("import torch\ntorch.x = 1\n", "assigns to `torch.x`"),
    "second string expression": ('"""Doc."""\n"not a docstring"\n', "runs an expression"),
    "walrus hidden in a call": ("X = dict(a=(y := 1))\n", "computes `dict("),
    "validated field computing its default": ("class A:\n    x: int = positive_int_field(default=f())\n",
                                              "computes `positive_int_field"),
    "validator parameter computed": ("class A:\n    x: int = interval(min=f())(default=1)\n", "computes `interval"),
    "validated field at module level": ("X = positive_int_field(default=1)\n", "computes `positive_int_field"),
    "another call in a field": ("class A:\n    x: int = make_field(default=1)\n", "computes `make_field"),
}


def test_checker_accepts_a_well_formed_sample():
    assert check_hub_source(GOOD_SOURCE) == []


@pytest.mark.parametrize("label", sorted(BAD_SOURCES))
def test_checker_rejects_a_bad_sample(label):
    source, expected = BAD_SOURCES[label]
    violations = check_hub_source(source)
    assert any(expected in violation for violation in violations), (label, violations)


def test_checker_reports_every_violation_with_its_line():
    source = "import os\nimport torch\nX = torch.zeros(2)\n\ndef f():\n    return eval('1')\n"
    violations = check_hub_source(source)
    assert [v.split(":")[0] for v in violations] == ["line 3", "line 1", "line 6"], violations
    assert check_hub_source("import torch as os\n") == [
        "line 1: imports the name `os` (a dangerous module or builtin, even via an allowed package)"
    ]
