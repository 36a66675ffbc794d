"""cloudbuild.yaml parses, names what exists, and speaks the installed gcloud's language.

Every `gcloud` call in its scripts (and in the shell blocks of the README and of docs/) is
checked against the installed Google Cloud CLI's own `--help`: the command exists and knows each
flag. gcloud is slow to start, so each command's help is fetched once, in parallel.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import HANG_GUARD

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "cloudbuild.yaml"
# Every page a reader may copy commands from.
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Cloud Build's default substitutions.
BUILTINS = {
    *("PROJECT_ID", "PROJECT_NUMBER", "BUILD_ID", "LOCATION", "COMMIT_SHA", "SHORT_SHA"),
    *("REVISION_ID", "REPO_NAME", "REPO_FULL_NAME", "BRANCH_NAME", "TAG_NAME", "REF_NAME"),
    *("TRIGGER_NAME", "TRIGGER_BUILD_CONFIG_PATH", "SERVICE_ACCOUNT_EMAIL", "SERVICE_ACCOUNT"),
}
SECRETS = {
    *("DATABASE_URL", "SUPABASE_PUBLISHABLE_KEY", "SUPABASE_SECRET_KEY", "SUPABASE_JWT_SECRET"),
    *("STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET", "RESEND_API_KEY", "GITHUB_TOKEN"),
}
# `$$` is an escaped `$`; `$NAME` and `${NAME}` are substitutions; any other `$` is an error.
_DOLLAR = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<bare>\w+)|)")
_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_FILE_REFERENCE = re.compile(
    r"(?<![\w/.$-])((?:[\w-]+/)*(?:[\w.-]+\.(?:py|md|yaml|toml|lock|sql)|Dockerfile)|bin/[\w-]+)"
    r"(?![\w/-])"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# gcloud-wide flags that take a value; `--help` lists them without their `=VALUE`.
GLOBAL_VALUED = {
    *("--access-token-file", "--account", "--billing-project", "--configuration", "--flatten"),
    *("--flags-file", "--format", "--impersonate-service-account", "--project", "--verbosity"),
    "--trace-token",
}
_PUNCTUATION = "();<>|&\n"
_COMMAND_WORD = re.compile(r"^[a-z][a-z0-9-]*$")


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    return loaded


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def _scripts(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for step in config["steps"]:
        if step.get("entrypoint") == "bash" and step["args"][0] == "-c":
            yield step["id"], step["args"][1]


def test_steps_are_named_and_ordered(config: dict[str, Any]) -> None:
    seen: set[str] = set()
    for step in config["steps"]:
        assert step["id"] not in seen, f"duplicate step id {step['id']}"
        for dependency in step.get("waitFor", []):
            assert dependency == "-" or dependency in seen, f"{step['id']} waits for {dependency}"
        seen.add(step["id"])
    assert {"build", "push", "migrate", "deploy", "subscriptions"} <= seen


def test_referenced_files_exist(config: dict[str, Any]) -> None:
    named = set(_FILE_REFERENCE.findall(CONFIG.read_text()))
    flask_apps = [s["args"][1] + ".py" for s in config["steps"] if s["args"][:1] == ["--app"]]
    missing = sorted(path for path in named | set(flask_apps) if not (ROOT / path).exists())
    assert "Dockerfile" in named
    assert flask_apps == ["main.py"], "one step runs the migrations"
    assert not missing, f"cloudbuild.yaml names files that do not exist: {missing}"


def test_substitutions_are_declared_and_used(config: dict[str, Any]) -> None:
    declared = set(config["substitutions"])
    used: set[str] = set()
    for text in _strings(config):
        for match in _DOLLAR.finditer(text):
            if match["escaped"]:
                continue
            name = match["braced"] or match["bare"]
            assert name, f"unescaped $ (write $$) in: {text[:80]!r}"
            assert _NAME.match(name), f"not a substitution name: {name!r}"
            used.add(name)
    assert all(name.startswith("_") for name in declared), "user substitutions start with _"
    assert used - BUILTINS <= declared, f"undeclared: {sorted(used - BUILTINS - declared)}"
    assert declared <= used, f"declared but unused: {sorted(declared - used)}"
    assert "SHORT_SHA" not in used, "empty for `gcloud builds submit` from a checkout"


def test_secrets_come_from_secret_manager(config: dict[str, Any]) -> None:
    available = {s["env"] for s in config["availableSecrets"]["secretManager"]}
    for step in config["steps"]:
        assert set(step.get("secretEnv", [])) <= available, step["id"]
        plain = {entry.split("=", 1)[0] for entry in step.get("env", [])}
        assert not plain & SECRETS, f"{step['id']} passes a secret as a plain value"
    for step_id, script in _scripts(config):
        assert "--set-env-vars" not in script, f"{step_id}: settings go in --env-vars-file"


def _rendered(script: str) -> str:
    """The script as bash receives it, with placeholder values for the substitutions."""
    return _DOLLAR.sub(lambda m: "$" if m["escaped"] else "substituted", script)


@pytest.mark.parametrize(
    "step_id", ["check-substitutions", "provision", "deploy", "subscriptions", "check-private"]
)
def test_scripts_are_valid_bash(config: dict[str, Any], step_id: str) -> None:
    script = dict(_scripts(config))[step_id]
    result = subprocess.run(["bash", "-n", "-c", _rendered(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _simple_commands(text: str) -> Iterator[list[str]]:
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    text = "\n".join(lines).replace("\\\n", " ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace, lexer.commenters, lexer.whitespace_split = " \t\r", "", True
    command: list[str] = []
    for token in lexer:
        if token and set(token) <= set(_PUNCTUATION):
            yield from [command] if command else []
            command = []
        else:
            command.append(token)
    yield from [command] if command else []


def _command_substitutions(token: str) -> Iterator[str]:
    start = token.find("$(")
    while start != -1:
        depth, end = 1, start + 2
        while end < len(token) and depth:
            depth += {"(": 1, ")": -1}.get(token[end], 0)
            end += 1
        yield token[start + 2 : end - 1]
        start = token.find("$(", end)


def gcloud_calls(text: str) -> Iterator[list[str]]:
    """The arguments of every `gcloud` call in a shell script, `$(...)` included."""
    for command in _simple_commands(text):
        for token in command:
            for inner in _command_substitutions(token):
                yield from gcloud_calls(inner)
        if "gcloud" in command:
            yield command[command.index("gcloud") + 1 :]


def _doc_scripts() -> Iterator[tuple[str, str]]:
    for page in DOCS:
        blocks = re.findall(r"```(?:bash|sh|shell)\n(.*?)```", page.read_text(), re.S)
        name = page.relative_to(ROOT)
        yield from ((f"{name} block {n}", block) for n, block in enumerate(blocks, 1))


def _all_calls(config: dict[str, Any]) -> list[tuple[str, list[str]]]:
    calls = []
    for where, script in [*_scripts(config), *_doc_scripts()]:
        found = list(gcloud_calls(script))
        code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
        expected = len(re.findall(r"(?<![\w./-])gcloud\s", code))
        assert len(found) == expected, f"{where}: parsed {len(found)} of {expected} gcloud calls"
        calls += [(where, call) for call in found]
    return calls


@dataclass(frozen=True)
class Help:
    """What `gcloud <words> --help` says about a command."""

    error: str
    command: tuple[str, ...] = ()
    is_group: bool = False
    flags: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()


def _gcloud() -> str:
    found = shutil.which("gcloud")
    if found is None:
        message = "the Google Cloud CLI (gcloud) is not installed"
        if os.environ.get("CI", "").lower() in {"1", "true"}:
            pytest.fail(message)
        pytest.skip(message)
    return found


def _flags(text: str) -> frozenset[str]:
    flags = set()
    for optional_no, name in re.findall(r"--(\[no-\])?([a-z][a-z0-9-]*)", text):
        flags |= {f"--{name}", f"--no-{name}"} if optional_no else {f"--{name}"}
    return frozenset(flags)


def _help_cache(gcloud: str) -> Path | None:
    """Where the help of this release of gcloud is kept between runs: each `--help` costs a
    second of a core, and a release's help never changes. None when the release is unknown."""
    version = Path(gcloud).resolve().parents[1] / "VERSION"
    if not version.is_file():
        return None
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return home / "saas-backend-tests" / "gcloud-help" / version.read_text().strip()


def _help_output(gcloud: str, words: tuple[str, ...]) -> dict[str, Any]:
    """`gcloud <words> --help`'s exit status, output and errors, from the cache when it has them."""
    cache = _help_cache(gcloud)
    kept = cache / f"{'_'.join(words) or '_'}.json" if cache else None
    if kept and kept.is_file():
        return dict(json.loads(kept.read_text()))
    env = {**os.environ, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
    env["CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK"] = "1"
    result = subprocess.run(
        [gcloud, *words, "--help"], capture_output=True, text=True, env=env, timeout=HANG_GUARD
    )
    found = {"returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr}
    if kept and result.returncode == 0:  # a failure is asked again: it may have been the machine's
        kept.parent.mkdir(parents=True, exist_ok=True)
        # Written whole, then renamed: a parallel worker reads all of it or none.
        partial = kept.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(found))
        partial.replace(kept)
    return found


def _help(gcloud: str, words: tuple[str, ...]) -> Help:
    result = _help_output(gcloud, words)
    text = _ANSI.sub("", result["stdout"])
    name = re.search(r"^NAME\n\s+gcloud ([a-z0-9 -]+?) - ", text, re.M)
    if result["returncode"] or name is None:
        stderr = result["stderr"].strip()
        return Help(error=stderr.splitlines()[0] if stderr else "no help")
    is_group = re.search(r"^(GROUPS|COMMANDS)$", text, re.M) is not None
    valued = {f"--{name}" for name in re.findall(r"--([a-z][a-z0-9-]*)=", text)}
    return Help("", tuple(name[1].split()), is_group, _flags(text), frozenset(valued))


@pytest.fixture(scope="module")
def gcloud_help(config: dict[str, Any]) -> Callable[[tuple[str, ...]], Help]:
    gcloud = _gcloud()
    words = {_command_words(call) for _, call in _all_calls(config)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        helps = dict(zip(words, pool.map(lambda w: _help(gcloud, w), words), strict=True))
    return helps.__getitem__


def _command_words(call: list[str]) -> tuple[str, ...]:
    words: list[str] = []
    for token in call:
        if not _COMMAND_WORD.match(token):
            break
        words.append(token)
    return tuple(words)


def _problems(call: list[str], help: Help) -> list[str]:
    words = _command_words(call)
    if help.error:
        return [help.error]
    if words[: len(help.command)] != help.command:
        return [f"resolves to `gcloud {' '.join(help.command)}`"]
    if help.is_group:
        return [f"`gcloud {' '.join(help.command)}` is a command group, not a command"]
    flags = {token.split("=", 1)[0] for token in call if token.startswith("--")}
    valued = {token.split("=", 1)[0] for token in call if token.startswith("--") and "=" in token}
    problems = [f"unknown flag {flag}" for flag in sorted(flags - help.flags)]
    switches = (valued & help.flags) - help.valued - GLOBAL_VALUED
    return problems + [f"{flag} is a switch: write {flag} or --no-{flag[2:]}" for flag in switches]


def test_gcloud_calls_name_known_commands_and_flags(
    config: dict[str, Any], gcloud_help: Callable[[tuple[str, ...]], Help]
) -> None:
    calls = _all_calls(config)
    problems = [
        f"{where}: gcloud {' '.join(call)[:90]}\n    {problem}"
        for where, call in calls
        for problem in _problems(call, gcloud_help(_command_words(call)))
    ]
    assert len(calls) > 20
    assert not problems, "\n".join(problems)


def test_call_parser_reads_continuations_and_substitutions() -> None:
    script = 'x="$(gcloud run services describe "$s" \\\n  --format=\'value(status.url)\')"\n'
    script += (
        "gcloud pubsub topics describe t >/dev/null 2>&1 ||\n  gcloud pubsub topics create t\n"
    )
    assert list(gcloud_calls(script)) == [
        ["run", "services", "describe", "$s", "--format=value(status.url)"],
        ["pubsub", "topics", "describe", "t"],
        ["pubsub", "topics", "create", "t"],
    ]


def test_subscribers_check_the_push_token_they_are_sent(config: dict[str, Any]) -> None:
    scripts = dict(_scripts(config))
    deploy, subscriptions = scripts["deploy"], scripts["subscriptions"]
    for name in ("PUSH_AUDIENCE", "PUSH_SERVICE_ACCOUNT"):
        assert f'echo "{name}: ' in deploy
    # The audience the services expect is the one the subscriptions put in the tokens.
    expected = re.search(r'audience\(\) \{ echo "(.*?)"; \}', deploy)
    sent = re.search(r'audience="(.*?)"', subscriptions)
    assert expected
    assert sent
    assert expected[1].replace("$$1", "access") == sent[1].replace(
        "$$service", "${_SERVICE_PREFIX}-access"
    )
    assert subscriptions.count('--push-auth-token-audience="$$audience"') == 2
