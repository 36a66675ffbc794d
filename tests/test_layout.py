"""The house: one package per concept (the domains) over shared packages, each domain importing
the shared ones and the domains its line of `DOMAIN_IMPORTS` names; no circle; production code
never imports the local-only `dev` package, and the image leaves it out; a handful of modules at
the root; no product module named like a test."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_PRODUCT = ("dev", "tests", "bench", ".venv", ".data", "docs")


def product_modules() -> list[Path]:
    return [
        path for path in ROOT.rglob("*.py") if path.relative_to(ROOT).parts[0] not in NOT_PRODUCT
    ]


def imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_production_code_never_imports_the_dev_package() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in imported(path) if n.split(".")[0] == "dev")
        for path in product_modules()
    }
    # The composition root alone adds the local-only commands, where dev/ exists (never in
    # the image); it imports nothing else of it.
    assert offenders.pop("main.py") == ["dev.commands"]
    assert {k: v for k, v in offenders.items() if v} == {}
    assert len(offenders) > 40, "the walk found the product's modules"


def test_local_only_code_sits_in_dev() -> None:
    """Samples, local users and their commands are not production's: the image leaves them out."""
    local_only = ("sample_events", "local_users", "users")
    misplaced = [
        str(path.relative_to(ROOT)) for path in product_modules() if path.stem in local_only
    ]
    assert misplaced == []
    assert (ROOT / "dev" / "commands" / "users.py").exists()
    assert (ROOT / "dev" / "samples" / "events.py").exists()


def test_the_image_leaves_out_dev_tests_bench_and_local_data() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for name in ("dev", "tests", "bench", ".data", ".env", ".venv"):
        assert any(fnmatch.fnmatch(name, p) for p in patterns), name


def test_only_main_and_gunicorn_conf_sit_at_the_root() -> None:
    # The settings are a package beside them: `config/`.
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["gunicorn.conf.py", "main.py"]


def test_no_product_module_or_class_is_named_like_a_test() -> None:
    named = [p for p in product_modules() if p.name.startswith("test_")]
    classes = [
        f"{path.relative_to(ROOT)}:{node.name}"
        for path in product_modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test")
    ]
    assert named == []
    assert classes == []


def test_only_settings_read_the_environment() -> None:
    readers = [
        str(path.relative_to(ROOT))
        for path in product_modules()
        if path.relative_to(ROOT).parts[0] != "config"
        and ("os.environ" in path.read_text() or "getenv" in path.read_text())
    ]
    assert readers == []


# The shared packages, bottom up: each imports only those below it, and none imports a domain.
SHARED = {"config": 0, "core": 1, "adapters": 2, "api": 3}
# The composition root imports everything; nothing of the product imports it back (`main`
# builds the app from it; gunicorn.conf.py starts it).
TOP = {"runtime": 5, "main": 6, "gunicorn.conf": 6}
# One package per concept. A domain imports the shared packages and the domains named here,
# and no other: a new arrow between two domains is a line of this table.
DOMAIN_IMPORTS: dict[str, set[str]] = {
    "catalogue": set(),
    "credits": {"catalogue"},
    "access": {"catalogue", "credits"},
    "teams": {"access"},
    "accounts": {"access", "credits", "teams", "topups"},
    "billing": {"access", "accounts", "catalogue", "teams"},
    "plans": {"billing", "teams"},
    "github_access": {"access", "teams"},
    "emails": {"access", "catalogue"},
    "events": {"credits"},
    "support": {"access", "accounts", "events"},
    "topups": {"catalogue", "credits", "teams"},
}
PACKAGES = {**SHARED, **dict.fromkeys(DOMAIN_IMPORTS, 4), **TOP}


def own_package(path: Path) -> str:
    relative = path.relative_to(ROOT)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def package_of(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def package_arrows() -> set[tuple[str, str, str]]:
    """(importing file, imported module, imported package) for every import between packages,
    those inside functions and TYPE_CHECKING blocks too."""
    arrows = set()
    for path in product_modules():
        own = own_package(path)
        for name in imported(path):
            target = package_of(name)
            if target is not None and target != own:
                arrows.add((str(path.relative_to(ROOT)), name, target))
    return arrows


def test_every_product_package_is_placed() -> None:
    tops = {own_package(path) for path in product_modules()}
    assert tops - set(PACKAGES) == set(), "a new top-level package goes in SHARED or the table"
    assert set(DOMAIN_IMPORTS) <= tops


def test_shared_packages_import_no_domain_and_point_down() -> None:
    back_arrows = [
        f"{path} imports {name}"
        for path, name, target in package_arrows()
        if (own := own_package(ROOT / path)) in SHARED
        and (target not in SHARED or SHARED[target] >= SHARED[own])
    ]
    assert back_arrows == []


def test_a_domain_imports_the_shared_packages_and_its_declared_domains_only() -> None:
    undeclared = [
        f"{path} imports {name}"
        for path, name, target in package_arrows()
        if (own := own_package(ROOT / path)) in DOMAIN_IMPORTS
        and target not in SHARED
        and target not in DOMAIN_IMPORTS[own]
    ]
    assert undeclared == []


def test_every_declared_domain_arrow_is_used() -> None:
    used = {
        (own_package(ROOT / path), target)
        for path, _, target in package_arrows()
        if own_package(ROOT / path) in DOMAIN_IMPORTS and target in DOMAIN_IMPORTS
    }
    declared = {(own, target) for own, targets in DOMAIN_IMPORTS.items() for target in targets}
    assert declared - used == set(), "an arrow no module takes leaves the table"


def test_the_domains_import_each_other_in_no_circle() -> None:
    order: list[str] = []
    left = dict(DOMAIN_IMPORTS)
    while left:
        ready = sorted(d for d, targets in left.items() if targets <= set(order))
        assert ready, f"a circle among {sorted(left)}"
        order += ready
        for d in ready:
            del left[d]


def test_nothing_imports_the_composition_root_back() -> None:
    back_arrows = [
        f"{path} imports {name}"
        for path, name, target in package_arrows()
        if target in TOP
        and PACKAGES[target] >= PACKAGES[own_package(ROOT / path)]
        and (own_package(ROOT / path), target) != ("gunicorn.conf", "runtime")
    ]
    assert back_arrows == []


def runtime_imports(path: Path) -> set[str]:
    """The modules a file imports when it runs: TYPE_CHECKING blocks left out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_module_imports_itself_back_when_it_runs() -> None:
    """No circle of imports between the product's modules (config's settings and their groups
    name each other for typing only)."""
    module_of = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for path in product_modules()
    }
    # A package's own modules importing it (its __init__ gathering them) is how a package
    # loads, not a circle.
    graph = {
        name: {
            m
            for m in runtime_imports(path)
            if m in module_of and m != name and not name.startswith(m + ".")
        }
        for name, path in module_of.items()
    }
    done: set[str] = set()
    for start in graph:
        stack, on_path = [(start, iter(sorted(graph[start])))], [start]
        while stack:
            node, following = stack[-1]
            nxt = next(following, None)
            if nxt is None:
                stack.pop()
                on_path.pop()
                done.add(node)
            elif nxt in on_path:
                raise AssertionError(f"circle: {' -> '.join(on_path[on_path.index(nxt) :])}")
            elif nxt not in done:
                stack.append((nxt, iter(sorted(graph[nxt]))))
                on_path.append(nxt)


def test_config_imports_nothing_of_the_project() -> None:
    modules = sorted((ROOT / "config").glob("*.py"))
    assert len(modules) > 5, "one module per group of settings"
    assert {
        n for path in modules for n in imported(path) if package_of(n) not in (None, "config")
    } == set()
