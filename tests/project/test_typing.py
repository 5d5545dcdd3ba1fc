"""The typing suite: mypy and pyright over the user programs in tests/typing/ (see its README).

Each checker runs once over the whole directory (plus a self-test sample whose expectations are
deliberately wrong, so the suite cannot pass vacuously). Every (file, checker) pair is one
pytest case that compares the checker's diagnostics with the `# E:` markers in the file; a
failed `assert_type(...)` is an unexpected diagnostic like any other. A third case per file
runs it, so the programs the checkers judge are real, working code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tokenize
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = ROOT / "tests" / "typing"
CHECKERS = ("mypy", "pyright")
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"

_MARKER = re.compile(r"#\s*E:(?P<body>.*)$")
_EXPECTATION = re.compile(r"\s*(?P<checker>[\w-]+)\[(?P<codes>[^\]]*)\]")
_REQUIRES = re.compile(r"^#\s*requires-python:\s*(?P<major>\d+)\.(?P<minor>\d+)\s*$", re.MULTILINE)

Expectations = dict[int, dict[str, frozenset[str]]]
"""line -> checker -> error codes that must be reported on that line (and no others)."""


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    path: Path
    line: int
    code: str  # "" when the checker gives none (no marker can expect that).
    message: str


@dataclasses.dataclass(frozen=True)
class Problem:
    line: int
    kind: str  # "unexpected" or "missing"
    detail: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.kind} {self.detail}"


# --------------------------------------------------------------------------- expectations


def parse_marker(text: str) -> dict[str, frozenset[str]] | None:
    """`# E: mypy[a, b] pyright[c]` -> {"mypy": {a, b}, "pyright": {c}}; None if no marker."""
    match = _MARKER.match(text)
    if match is None:
        return None
    body = match["body"]
    found: dict[str, frozenset[str]] = {}
    position = 0
    for item in _EXPECTATION.finditer(body):
        if body[position : item.start()].strip():
            break
        position = item.end()
        checker = item["checker"]
        codes = frozenset(code.strip() for code in item["codes"].split(",") if code.strip())
        if checker not in CHECKERS or not codes or checker in found:
            raise ValueError(f"bad expectation {item.group().strip()!r} in marker {text!r}")
        found[checker] = codes
    if not found or body[position:].strip():
        raise ValueError(
            f"malformed marker {text!r}: write `# E: mypy[code, ...] pyright[rule, ...]` "
            "(either part may be left out)"
        )
    return found


def parse_expectations(source: str) -> Expectations:
    """The `# E:` markers of a Python source, by line (comments only, never strings)."""
    expectations: Expectations = {}
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for token in tokens:
        if token.type == tokenize.COMMENT:
            marker = parse_marker(token.string)
            if marker is not None:
                expectations[token.start[0]] = marker
    return expectations


def required_version(source: str) -> tuple[int, int] | None:
    """The `# requires-python: 3.12` header of a case file, if any."""
    match = _REQUIRES.search(source)
    return None if match is None else (int(match["major"]), int(match["minor"]))


def compare(checker: str, expected: Expectations, found: list[Diagnostic]) -> list[Problem]:
    """Differences between one file's markers and one checker's diagnostics on it."""
    reported: dict[int, dict[str, str]] = {}
    for diagnostic in found:
        reported.setdefault(diagnostic.line, {}).setdefault(diagnostic.code, diagnostic.message)
    problems: list[Problem] = []
    for line in sorted(set(reported) | set(expected)):
        codes = reported.get(line, {})
        wanted = expected.get(line, {}).get(checker, frozenset())
        for code, message in sorted(codes.items()):
            if code not in wanted:
                problems.append(Problem(line, "unexpected", f"{checker}[{code}]: {message}"))
        for code in sorted(wanted - set(codes)):
            got = ", ".join(f"{checker}[{c}]" for c in sorted(codes)) or "nothing"
            problems.append(Problem(line, "missing", f"{checker}[{code}] (reported: {got})"))
    return problems


# --------------------------------------------------------------------------- checkers


def _resolve(path: str) -> Path:
    return (ROOT / path).resolve()


def run_mypy(files: list[Path]) -> list[Diagnostic]:
    """mypy (mypy.ini: strict) at this interpreter's Python version, as JSON lines."""
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "mypy.ini")]
    command += ["--python-version", VERSION, "--output", "json", *map(str, files)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"mypy failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    diagnostics: list[Diagnostic] = []
    for line in result.stdout.splitlines():
        if not line.startswith("{"):
            continue
        item = json.loads(line)
        if item["severity"] == "note":
            continue
        path = _resolve(item["file"])
        diagnostics.append(Diagnostic(path, item["line"], item["code"] or "", item["message"]))
    return diagnostics


def run_pyright(files: list[Path]) -> list[Diagnostic]:
    """pyright ([tool.pyright] in pyproject.toml: strict) at this interpreter's Python version."""
    command = [sys.executable, "-m", "pyright", "--outputjson", "--pythonversion", VERSION]
    command += ["--pythonpath", sys.executable, *map(str, files)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"pyright failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    diagnostics: list[Diagnostic] = []
    for item in json.loads(result.stdout)["generalDiagnostics"]:
        if item["severity"] not in ("error", "warning"):
            continue
        line = item["range"]["start"]["line"] + 1
        path = _resolve(item["file"])
        diagnostics.append(Diagnostic(path, line, item.get("rule", ""), item["message"]))
    return diagnostics


RUNNERS: dict[str, Callable[[list[Path]], list[Diagnostic]]] = {
    "mypy": run_mypy,
    "pyright": run_pyright,
}


# --------------------------------------------------------------------------- the cases

SELFTEST_SOURCE = '''\
"""Typing-harness self-test: all but the last expectation here are deliberately wrong."""

from typing import assert_type

wrong_code: int = "a"  # E: mypy[arg-type] pyright[reportArgumentType]
not_an_error: int = 1  # E: mypy[assignment] pyright[reportAssignmentType]
assert_type(1, str)
unmarked: str = 1
marked: str = 1  # E: mypy[assignment] pyright[reportAssignmentType]
'''
SELFTEST_PROBLEMS = {
    (5, "unexpected"),  # The checkers' real code for it...
    (5, "missing"),  # ...and the wrong code the marker names.
    (6, "missing"),
    (7, "unexpected"),
    (8, "unexpected"),
}


def case_files() -> list[Path]:
    """The case files; `_*.py` are helper modules the cases import."""
    return sorted(p for p in CASES_DIR.glob("*.py") if not p.name.startswith("_"))


def helper_files() -> list[Path]:
    return sorted(CASES_DIR.glob("_*.py"))


def _unsupported(path: Path) -> str | None:
    """Why `path` cannot be checked or run on this interpreter, if it cannot."""
    needed = required_version(path.read_text())
    if needed is not None and sys.version_info < needed:
        return f"{path.name} needs Python {needed[0]}.{needed[1]}+ (this is {VERSION})"
    return None


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock` (pytest-xdist workers share one checker run)."""
    import fcntl  # POSIX only, like the CI; imported here to keep collection portable.

    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class CheckerRuns:
    """Runs each checker at most once per test session, across pytest-xdist workers."""

    def __init__(self, shared: Path) -> None:
        self.shared = shared
        # mypy's cache would report a module that moved under its old path: name it by place.
        tag = hashlib.sha256(str(shared).encode()).hexdigest()[:12]
        self.selftest = shared / "typing_selftest" / f"harness_selftest_{tag}.py"
        self._done: dict[str, list[Diagnostic]] = {}

    def files(self) -> list[Path]:
        supported = [p for p in case_files() if _unsupported(p) is None]
        return supported + helper_files() + [self.selftest]

    def diagnostics(self, checker: str) -> list[Diagnostic]:
        if checker not in self._done:
            self._done[checker] = self._load_or_run(checker)
        return self._done[checker]

    def _load_or_run(self, checker: str) -> list[Diagnostic]:
        stored = self.shared / f"typing_{checker}.json"
        with _exclusive(self.shared / f"typing_{checker}.lock"):
            if not stored.exists():
                self.selftest.parent.mkdir(exist_ok=True)
                self.selftest.write_text(SELFTEST_SOURCE)
                found = RUNNERS[checker](self.files())
                records = [dataclasses.asdict(d) | {"path": str(d.path)} for d in found]
                stored.write_text(json.dumps(records))
            records = json.loads(stored.read_text())
        return [Diagnostic(**(r | {"path": Path(r["path"])})) for r in records]

    def problems(self, checker: str, path: Path) -> list[Problem]:
        found = [d for d in self.diagnostics(checker) if d.path == path.resolve()]
        return compare(checker, parse_expectations(path.read_text()), found)


@pytest.fixture(scope="session")
def checker_runs(tmp_path_factory: pytest.TempPathFactory) -> CheckerRuns:
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker has its own basetemp; their parent is common to the session.
    return CheckerRuns(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


def _case_id(path: Path) -> str:
    return path.stem


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("path", case_files(), ids=_case_id)
@pytest.mark.subprocess
def test_checker_agrees_with_markers(checker_runs: CheckerRuns, path: Path, checker: str) -> None:
    reason = _unsupported(path)
    if reason is not None:
        pytest.skip(reason)
    expected = parse_expectations(path.read_text())
    if not any(checker in marker for marker in expected.values()):
        pytest.fail(
            f"{path.name} expects no {checker} error: add at least one `# E:` line for it, "
            "so that a file the checker never looked at cannot pass"
        )
    problems = checker_runs.problems(checker, path)
    if problems:
        pytest.fail(
            f"{checker} disagrees with the markers in {path.relative_to(ROOT)}:\n"
            + "\n".join(f"  {problem}" for problem in problems),
            pytrace=False,
        )


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("path", helper_files(), ids=_case_id)
@pytest.mark.subprocess
def test_helper_is_clean(checker_runs: CheckerRuns, path: Path, checker: str) -> None:
    problems = checker_runs.problems(checker, path)
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")  # CPU: no donation.
@pytest.mark.parametrize("path", case_files(), ids=_case_id)
def test_case_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user programs are real code: importing each one runs it without error."""
    monkeypatch.syspath_prepend(str(CASES_DIR))  # For the helper modules, as the checkers see.
    reason = _unsupported(path)
    if reason is not None:
        pytest.skip(reason)
    name = f"jdc_typing_case_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Classes resolve their module's globals through sys.modules.
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]


# --------------------------------------------------------------------------- the harness itself


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.subprocess
def test_harness_reports_wrong_expectations(checker_runs: CheckerRuns, checker: str) -> None:
    """The sample's wrong markers, failed assert_type and unmarked error are all reported."""
    problems = checker_runs.problems(checker, checker_runs.selftest)
    assert {(p.line, p.kind) for p in problems} == SELFTEST_PROBLEMS, problems


def test_markers_parse() -> None:
    source = 'x = "# E: mypy[not-a-marker]"  # E: mypy[a, b] pyright[c]\ny = 1  # E: pyright[d]\n'
    assert parse_expectations(source) == {
        1: {"mypy": frozenset({"a", "b"}), "pyright": frozenset({"c"})},
        2: {"pyright": frozenset({"d"})},
    }
    assert parse_marker("# plain comment") is None


@pytest.mark.parametrize(
    "marker",
    ["# E:", "# E: mipy[x]", "# E: mypy[]", "# E: mypy[a] mypy[b]", "# E: mypy[a] junk", "# E: x"],
)
def test_malformed_markers_are_rejected(marker: str) -> None:
    with pytest.raises(ValueError, match="marker"):
        parse_marker(marker)


def test_compare_reports_both_directions() -> None:
    path = Path("sample.py")
    found = [Diagnostic(path, 3, "call-arg", "Too many arguments")]
    expected: Expectations = {
        3: {"mypy": frozenset({"call-arg"})},
        4: {"pyright": frozenset({"x"})},
    }
    assert compare("mypy", expected, found) == []
    assert [str(p) for p in compare("pyright", expected, found)] == [
        "line 3: unexpected pyright[call-arg]: Too many arguments",
        "line 4: missing pyright[x] (reported: nothing)",
    ]


def test_required_version_header() -> None:
    assert required_version("# requires-python: 3.12\nclass Box[T]: ...\n") == (3, 12)
    assert required_version("x = 1\n") is None
