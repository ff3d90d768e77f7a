"""The layout rules of src/lamina read from its source: no module over 550 lines, no function
over 80 lines, and no private member (``_name``) used outside the module that defines it,
whether reached on another object than ``self``/``cls`` or imported by name; and, read from
its classes, none inheriting from more than 3 of lamina's own (parts are held, not stacked);
and tests/ mirroring its packages."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path

import pydantic

import lamina

SRC = Path(__file__).resolve().parents[1] / "src" / "lamina"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 550

#: Functions allowed over the limit for now ("module:function"); none since the server's
#: tools are declared (issue 34).
LONG_FOR_NOW: set[str] = set()

#: The public API of ``collections.namedtuple``, underscored so as not to clash with fields.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_field_defaults", "_make"}

MAX_OWN_BASES = 3

#: Classes allowed over MAX_OWN_BASES for now ("module.Class"): none since the memory,
#: knowledge and observational services and the stores hold their parts (issue 34); the
#: services were listed while they were recomposed in parallel. No class may join it.
STACKED_FOR_NOW: set[str] = set()


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(), str(path))


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def names_defined(tree: ast.Module) -> set[str]:
    """Every name the module defines: functions, classes, assigned names and attributes."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
    return found


def long_modules(sources: Iterable[tuple[str, str]]) -> Iterator[str]:
    """The Python modules of ``sources`` ((path under src/lamina, text)) over the limit;
    migrations are history, kept as they were applied, and data files are not Python."""
    for module, text in sources:
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES and "migrations" not in module.split("/"):
            yield f"{module} ({lines} lines)"


def long_functions(module: str, tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > MAX_FUNCTION_LINES and f"{module}:{node.name}" not in LONG_FOR_NOW:
                yield f"{module}:{node.lineno} {node.name} ({length} lines)"


def foreign_private_uses(module: str, tree: ast.Module) -> Iterator[str]:
    own = names_defined(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            on_itself = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not on_itself and node.attr not in own and node.attr not in NAMEDTUPLE_API:
                yield f"{module}:{node.lineno} {ast.unparse(node)}"
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if is_private(alias.name):
                    yield f"{module}:{node.lineno} from {node.module} import {alias.name}"


def counted_base(klass: type) -> bool:
    """Whether ``klass``, a base of some class, counts as one of lamina's own classes: a
    class of the package, not a Protocol (ports combine by design), a pydantic model (the
    argument models) nor a NamedTuple or TypedDict."""
    return (
        klass.__module__.split(".")[0] == "lamina"
        and not getattr(klass, "_is_protocol", False)
        and not issubclass(klass, pydantic.BaseModel)
        and not (issubclass(klass, tuple) and "_fields" in vars(klass))
        and not typing.is_typeddict(klass)
    )


def own_bases(klass: type) -> list[type]:
    """The classes of lamina that ``klass`` inherits from, however far up (its MRO)."""
    return [base for base in klass.__mro__[1:] if counted_base(base)]


def lamina_classes() -> Iterator[type]:
    """Every class defined in a module of src/lamina (Protocols aside)."""
    for found in pkgutil.walk_packages(lamina.__path__, "lamina."):
        if found.name.endswith("__main__"):
            continue
        module = importlib.import_module(found.name)
        for _, klass in inspect.getmembers(module, inspect.isclass):
            if klass.__module__ == module.__name__ and not getattr(klass, "_is_protocol", False):
                yield klass


def stacked(classes: Iterable[type], allowed: set[str] = STACKED_FOR_NOW) -> list[str]:
    """``module.Class (n)`` of each class inheriting from more than MAX_OWN_BASES of
    lamina's own, but those ``allowed`` for now."""
    return [
        f"{name} ({len(own_bases(klass))})"
        for klass in classes
        if len(own_bases(klass)) > MAX_OWN_BASES
        and (name := f"{klass.__module__}.{klass.__qualname__}") not in allowed
    ]


def test_no_module_is_over_550_lines() -> None:
    sources = ((p.relative_to(SRC).as_posix(), p.read_text()) for p in SRC.rglob("*.py"))
    assert list(long_modules(sources)) == []


def test_no_function_is_over_80_lines() -> None:
    found = [line for module, tree in modules() for line in long_functions(module, tree)]
    assert found == []


def test_no_private_member_is_used_outside_its_module() -> None:
    found = [line for module, tree in modules() for line in foreign_private_uses(module, tree)]
    assert found == []


def test_the_checks_see_what_they_look_for() -> None:
    """The rules catch a long function, a private member reached on another object and a
    private name imported, and let ``self._x`` and a module's own ``other._x`` be."""
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    tree = ast.parse(
        f"def long():\n{body}\n"
        "from a import _hidden\n"
        "class C:\n"
        "    def m(self, other):\n"
        "        self._mine = other._mine\n"
        "        return other.part._theirs\n"
    )
    assert list(long_functions("m.py", tree)) == ["m.py:1 long (81 lines)"]
    assert list(foreign_private_uses("m.py", tree)) == [
        "m.py:82 from a import _hidden",
        "m.py:86 other.part._theirs",
    ]


def test_the_module_check_sees_a_long_module_and_lets_migrations_be() -> None:
    long = "x = 1\n" * (MAX_MODULE_LINES + 1)
    sources = [
        ("a/long.py", long),
        ("a/short.py", "x = 1\n" * MAX_MODULE_LINES),
        ("store/postgres/migrations/backfill.py", long),
    ]
    assert list(long_modules(sources)) == ["a/long.py (551 lines)"]


def test_no_class_inherits_from_more_than_3_of_laminas_own() -> None:
    assert stacked(lamina_classes()) == []


def test_the_class_check_counts_laminas_own_bases_only() -> None:
    """Classes of lamina count, however far up; Protocols, pydantic models, NamedTuples,
    TypedDicts and classes of other packages do not; the allowed ones are let be."""

    def own(name: str, *bases: type, **body: object) -> type:
        return type(name, bases, {"__module__": "lamina.fake", **body})

    port = typing.cast(type, own("Port", typing.Protocol))

    class Row(typing.NamedTuple):
        a: int

    class Shape(typing.TypedDict):
        a: int

    row, shape = Row, Shape
    row.__module__ = shape.__module__ = "lamina.fake"
    others = [port, own("Model", pydantic.BaseModel), row, shape, Exception]
    assert not any(counted_base(k) for k in others)
    a = own("A")
    b = own("B", a)
    c = own("C", b, port)
    d = own("D", c, row)
    assert [k.__name__ for k in own_bases(d)] == ["C", "B", "A"]
    e = own("E", d)
    assert stacked([a, b, c, d, e]) == ["lamina.fake.E (4)"]
    assert stacked([e], allowed={"lamina.fake.E"}) == []


def test_tests_mirror_the_packages() -> None:
    """Each package of src/lamina has its folder of tests of the same name (issue 34)."""
    tests = Path(__file__).resolve().parent
    packages = {p.parent.relative_to(SRC) for p in SRC.rglob("__init__.py")}
    top = {p for p in packages if len(p.parts) == 1}
    assert sorted(str(p) for p in top if not (tests / p / "__init__.py").is_file()) == []
