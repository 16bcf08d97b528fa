"""Every public name has a numpydoc docstring with Parameters and a runnable Examples section.

The examples themselves run under ``--doctest-modules`` (see ``pyproject.toml``); this
module checks that they exist, that the sections are there, and that the API reference
(``docs/api.rst``) lists every public name.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import math
import re
from pathlib import Path

import pytest

import sklearn_rnn

ROOT = Path(__file__).resolve().parents[1]

#: Public modules whose ``__all__`` is the public API. Optional ones are skipped until
#: they exist.
MODULES = (
    "sklearn_rnn",
    "sklearn_rnn.sequences",
    "sklearn_rnn.nn",
    "sklearn_rnn.optim",
    "sklearn_rnn.datasets",
    "sklearn_rnn.clinical",
    "sklearn_rnn.diagnostics",
    "sklearn_rnn.plotting",
    "sklearn_rnn.inspection",
)

_SECTION = re.compile(r"^\s*([A-Z][A-Za-z ]+)\n\s*-{3,}\s*$", re.MULTILINE)


def _public_objects():
    seen = set()
    for module_name in MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name == module_name:
                continue
            raise
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue  # constants such as __version__ or CELLS
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            yield f"{module_name}.{name}", obj


PUBLIC = sorted(_public_objects())

#: Known gaps, reported to the owners of the modules. Strict: when one is fixed the test
#: passes unexpectedly and fails, so that its entry is removed here.
KNOWN_GAPS: dict[str, str] = {}


def _marked(items):
    return [
        pytest.param(
            name, obj, id=name, marks=pytest.mark.xfail(reason=KNOWN_GAPS[name], strict=True)
        )
        if name in KNOWN_GAPS
        else pytest.param(name, obj, id=name)
        for name, obj in items
    ]


def _sections(obj) -> set[str]:
    return set(_SECTION.findall(inspect.getdoc(obj) or ""))


def _is_record(cls) -> bool:
    """A NamedTuple or dataclass: its fields are documented as Attributes."""
    return dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields"))


def _takes_parameters(obj) -> bool:
    target = obj.__init__ if inspect.isclass(obj) else obj
    if inspect.isclass(obj) and obj.__init__ is object.__init__:
        return False
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return False
    names = [p for p in signature.parameters if p not in ("self", "cls")]
    return bool(names)


def test_public_names_are_found():
    names = {name for name, _ in PUBLIC}
    assert {"sklearn_rnn.RNNClassifier", "sklearn_rnn.plotting.plot_training_history"} <= names


@pytest.mark.parametrize("name, obj", _marked(PUBLIC))
def test_docstring_has_parameters_and_examples(name, obj):
    doc = inspect.getdoc(obj)
    assert doc, f"{name} has no docstring"
    summary = doc.splitlines()[0]
    assert summary.strip().endswith("."), f"{name}: the summary line should be a sentence"
    sections = _sections(obj)
    if inspect.isclass(obj) and _is_record(obj):
        assert "Attributes" in sections, f"{name} should document its fields under Attributes"
    elif _takes_parameters(obj):
        assert "Parameters" in sections, f"{name} takes arguments but has no Parameters section"
    assert "Examples" in sections, f"{name} has no Examples section"
    examples = doc.split("Examples\n--------", 1)[-1]
    assert ">>>" in examples, f"{name}: the Examples section holds no doctest"


def _public_methods():
    for name, cls in PUBLIC:
        if not inspect.isclass(cls) or _is_record(cls):
            continue
        for method_name, method in vars(cls).items():
            if method_name.startswith("_") or not inspect.isfunction(method):
                continue
            yield f"{name}.{method_name}", method


METHODS = sorted(_public_methods())


@pytest.mark.parametrize("name, method", METHODS, ids=[name for name, _ in METHODS])
def test_public_methods_have_docstrings(name, method):
    doc = inspect.getdoc(method)
    assert doc, f"{name} has no docstring"
    parameters = [p for p in inspect.signature(method).parameters if p not in ("self", "cls")]
    if parameters:
        assert "Parameters" in _sections(method), (
            f"{name} takes arguments but has no Parameters section"
        )


def test_api_reference_lists_only_public_names():
    """docs/api.rst orders the public names by hand; the build appends any it misses
    (the ``unlisted-public-names`` markers), but a listed name must exist."""
    api = (ROOT / "docs" / "api.rst").read_text()
    listed = set(re.findall(r"^\s{3}(\w+)\s*$", api, flags=re.MULTILINE))
    public = {name.rsplit(".", 1)[1] for name, _ in PUBLIC}
    assert listed, "no name found in docs/api.rst"
    stale = sorted(listed - public)
    assert not stale, f"docs/api.rst lists names that are not public (anymore): {stale}"
    modules = set(re.findall(r"^\.\. unlisted-public-names: ([\w.]+)\s*$", api, flags=re.MULTILINE))
    present = {m for m in MODULES if importlib.util.find_spec(m) is not None}
    assert present <= modules, (
        f"add a section and marker to docs/api.rst for {sorted(present - modules)}"
    )


def test_package_version_is_public():
    assert "__version__" in sklearn_rnn.__all__


def _documented_parameters(cls: type) -> dict[str, str | None]:
    """Name -> the documented default (the text after ``default=``, or None), in the
    order of the class docstring's Parameters section; a combined entry
    (``a, b : default=1, 2``) gives each name its own value."""
    doc = inspect.getdoc(cls)
    section = doc.split("Parameters\n----------\n", 1)[1]
    section = _SECTION.split(section, maxsplit=1)[0]
    documented: dict[str, str | None] = {}
    for line in section.splitlines():
        match = re.match(r"^(\w+(?:, \w+)*) : (.*)$", line)
        if not match:
            continue
        names = match.group(1).split(", ")
        default = re.search(r"default=(.*)$", match.group(2))
        if default is None:
            documented.update(dict.fromkeys(names))
            continue
        values = [default.group(1)] if len(names) == 1 else _split_values(default.group(1))
        assert len(values) == len(names), (cls.__name__, line)
        documented.update(zip(names, values))
    return documented


def _split_values(text: str) -> list[str]:
    """``"'auto', 32, (3, 9)"`` -> ``["'auto'", "32", "(3, 9)"]``: commas at depth 0."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    return [*parts, text[start:].strip()]


ESTIMATORS = [(name, obj) for name, obj in PUBLIC if inspect.isclass(obj) and hasattr(obj, "get_params")]


@pytest.mark.parametrize("name, cls", ESTIMATORS, ids=[name for name, _ in ESTIMATORS])
def test_estimator_parameters_and_defaults_are_documented_as_they_are(name, cls):
    """The Parameters section lists the constructor's parameters in its order, and each
    documented default is the constructor's (``get_params`` and ``clone`` read them)."""
    signature = inspect.signature(cls.__init__)
    parameters = [p for p in signature.parameters.values() if p.name != "self"
                  and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    documented = _documented_parameters(cls)
    assert list(documented) == [p.name for p in parameters], name
    for parameter in parameters:
        text = documented[parameter.name]
        if parameter.default is inspect.Parameter.empty:
            assert text is None, f"{name}({parameter.name}) is required but documents default={text}"
            continue
        assert text is not None, f"{name}({parameter.name}) documents no default"
        if text == "np.nan":  # scikit-learn's spelling of a NaN default (error_score)
            assert isinstance(parameter.default, float) and math.isnan(parameter.default), name
            continue
        assert ast.literal_eval(text) == parameter.default, (name, parameter.name, text)


def _parameters_section_names(obj) -> list[str]:
    """The names the Parameters section documents, in its order (``*args`` as ``args``)."""
    section = inspect.getdoc(obj).split("Parameters\n----------\n", 1)[1]
    section = _SECTION.split(section, maxsplit=1)[0]
    names: list[str] = []
    for line in section.splitlines():
        match = re.match(r"^(\*{0,2}\w+(?:, \*{0,2}\w+)*)(?: : |$)", line)
        if match:
            names += [name.lstrip("*") for name in match.group(1).split(", ")]
    return names


TAKING = [(name, obj) for name, obj in PUBLIC if not (inspect.isclass(obj) and _is_record(obj)) and _takes_parameters(obj)]


@pytest.mark.parametrize("name, obj", TAKING, ids=[name for name, _ in TAKING])
def test_every_public_name_documents_the_parameters_of_its_signature(name, obj):
    """Every public class and function documents its signature's parameters, in order
    (ConvStage's ``device`` was missing)."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    expected = [p for p in inspect.signature(target).parameters if p not in ("self", "cls")]
    assert _parameters_section_names(obj) == expected, name
