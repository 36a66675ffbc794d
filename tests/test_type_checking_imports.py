"""A name imported under `if TYPE_CHECKING:` exists for the type checker only: used at run time
(an `except` clause, an `isinstance`, a call) it is a NameError on the one path that reaches it,
which neither pyflakes nor mypy reports (both read the block as if it ran). ruff's TC004 says
so in `make lint`; this holds the same in the suite, whatever the lint's configuration."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED = {".venv", ".data", "node_modules", ".git"}


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _bound_by_imports(nodes: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import | ast.ImportFrom):
                for alias in inner.names:
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def _bound_locally(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Names a function binds itself (imports, parameters, assignments): they shadow the
    module's."""
    names = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    body: list[ast.AST] = (
        list(function.body) if isinstance(function.body, list) else [function.body]
    )
    names |= _bound_by_imports([n for n in body if isinstance(n, ast.stmt)])
    for node in body:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                names.add(inner.id)
    return names


class _RuntimeUses(ast.NodeVisitor):
    def __init__(self, names: set[str], *, lazy_annotations: bool) -> None:
        self.names = names
        self.lazy = lazy_annotations
        self.shadowed: list[set[str]] = []
        self.found: list[tuple[str, int]] = []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        if not isinstance(node, ast.Lambda):
            for decorator in node.decorator_list:
                self.visit(decorator)
            if not self.lazy:
                for a in ast.walk(node.args):
                    if isinstance(a, ast.arg) and a.annotation is not None:
                        self.visit(a.annotation)
                if node.returns is not None:
                    self.visit(node.returns)
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.visit(default)
        self.shadowed.append(_bound_locally(node))
        for stmt in node.body if isinstance(node.body, list) else [node.body]:
            self.visit(stmt)
        self.shadowed.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function
    visit_Lambda = _function

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not self.lazy and not self.shadowed:
            self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.names and not any(node.id in s for s in self.shadowed):
            self.found.append((node.id, node.lineno))


def runtime_uses(source: str) -> list[tuple[str, int]]:
    """(name, line) of each run-time use of a name imported only under TYPE_CHECKING."""
    tree = ast.parse(source)
    blocks = [n for n in tree.body if isinstance(n, ast.If) and _is_type_checking(n.test)]
    names = _bound_by_imports([stmt for block in blocks for stmt in block.body])
    # Imported at run time at the top as well: defined either way.
    names -= {
        alias.asname or alias.name.split(".")[0]
        for n in tree.body
        if isinstance(n, ast.Import | ast.ImportFrom)
        for alias in n.names
    }
    if not names:
        return []
    lazy = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    visitor = _RuntimeUses(names, lazy_annotations=lazy)
    visitor.visit(tree)
    return visitor.found


def sources() -> list[Path]:
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not SKIPPED.intersection(path.relative_to(ROOT).parts)
    ]


def test_a_name_imported_for_type_checking_is_found_when_used_at_run_time() -> None:
    """The check itself: the shape of a NameError that once dead-lettered events."""
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import stripe\n"
        "def typed(client: stripe.StripeClient) -> stripe.Product: ...\n"
        "def loaded():\n"
        "    import stripe\n"
        "    try:\n"
        "        pass\n"
        "    except stripe.InvalidRequestError:\n"
        "        pass\n"
        "def forgot():\n"
        "    try:\n"
        "        pass\n"
        "    except stripe.InvalidRequestError:\n"
        "        pass\n"
    )
    assert runtime_uses(source) == [("stripe", 15)]


def test_no_name_imported_for_type_checking_is_used_at_run_time() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in sources()
        for name, line in runtime_uses(path.read_text(encoding="utf-8"))
    }
    assert found == set()
