"""The house: production code never imports the local-only `dev` package, and the image
leaves it out; a handful of modules at the root; no product module named like a test."""

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


# The layers, bottom up: each package imports only packages below it.
LAYERS = {
    "config": 0,
    "core": 1,
    "adapters": 2,
    "services": 3,
    "subscribers": 3,
    "handlers": 4,
    "runtime": 5,
    "main": 6,
}


def layer_of(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in LAYERS else None


def test_imports_point_down_the_layers_only() -> None:
    back_arrows = []
    for path in product_modules():
        relative = path.relative_to(ROOT)
        own = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        if own not in LAYERS:
            continue
        # Imports inside functions and TYPE_CHECKING blocks count too (`imported` walks all).
        for name in imported(path):
            target = layer_of(name)
            if target is None or target == own:
                continue
            if LAYERS[target] >= LAYERS[own]:
                back_arrows.append(f"{relative} imports {name} ({own} -> {target})")
    assert back_arrows == []


def test_config_imports_nothing_of_the_project() -> None:
    modules = sorted((ROOT / "config").glob("*.py"))
    assert len(modules) > 5, "one module per group of settings"
    assert {
        n for path in modules for n in imported(path) if layer_of(n) not in (None, "config")
    } == set()
