"""`python3 dev.py downstream`: real users' published test suites, run against this checkout.

jax_dataclasses 2.0 replaces 1.6; the tests its users published are the best check that it
does. For each project below, its sdist (pinned, checked by hash) is downloaded and its tests
run twice in one virtual environment built from `downstream/<project>.txt` with this checkout
installed editable: once with jax_dataclasses 1.6.3 first on PYTHONPATH (the reference), once
with this checkout. Before each run a bare `python -c 'import jax_dataclasses'`, from the same
directory and environment as pytest, must find the expected copy.

The command fails on a test that passes with 1.6.3 and not with this checkout, unless
`downstream/differences.toml` lists it with its reason and the docs section that documents it.
It also type-checks each project's source (`Project.typed`) with mypy and pyright, with 1.6.3
and with this checkout, and fails on a diagnostic only this checkout produces, unless
`downstream/typecheck.toml` lists it with its reason.
Tests that cannot run here are left out by `downstream/deselected.toml`, each with its reason.

Everything lives in `.downstream/` (git-ignored): the venvs (reinstalled when the pins or
pyproject.toml change), the sdists, each run's log and junit XML, and the 1.6.3 outcomes,
which depend only on the environment and are reused until it changes (delete
`.downstream/<project>/reference.json` to rerun them).

`python3 dev.py downstream --lock [PROJECT...]` regenerates the pins: it resolves the
project's requirements with this checkout and constraints.txt in a scratch venv and freezes
them. Standard library only: dev.py runs this before any venv exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, TypeVar

from tools.venvs import ROOT, ensure_venv, run, venv_exe  # The venvs are made as dev.py's corners.

Entry = TypeVar("Entry")
LISTS = ROOT / "downstream"  # Committed: pins, differences, deselections.
CACHE = ROOT / ".downstream"  # Git-ignored.
REFERENCE = "jax_dataclasses==1.6.3"
PYTHON = (3, 11)  # The pins were resolved on it.
# jaxsim converts URDF to SDF with `gz sdf` or `ign sdf` (through rod); Debian's packages.
SDF_PACKAGES = ("ignition-tools", "libsdformat-dev")
CHECK_IMPORT = """if True:
    import importlib.metadata, jax_dataclasses
    print(jax_dataclasses.__file__)
    print(getattr(jax_dataclasses, "__version__", None)  # 1.6.3 has none.
          or importlib.metadata.version("jax_dataclasses"))
"""


class Project(NamedTuple):
    """A published project whose sdist carries tests that run here."""

    name: str  # Also names its pins (downstream/<name>.txt) and its cache folder.
    sdist: str  # Pinned requirement.
    sha256: str  # Of the sdist.
    # The file pytest reads its configuration from, in the sdist: given as `-c`, so that pytest
    # does not look further up, to this repository's pyproject.toml, when the sdist has none.
    config: str
    lock: tuple[str, ...]  # What `--lock` resolves, with this checkout and constraints.txt.
    pytest_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    needs_sdf: bool = False  # Needs `gz sdf` or `ign sdf`.
    typed: tuple[str, ...] = ()  # Its source that mypy and pyright check, in the sdist.


PROJECTS = (
    Project(
        name="jax_dataclasses",  # Upstream's own suite.
        sdist="jax_dataclasses==1.6.3",
        sha256="e8bbd61221083d618a71217b2ee35ee26d438df1ac0a67eb25292f5a6ffa7f73",
        config="setup.cfg",  # It has no pytest section: pytest's defaults.
        lock=("flax", "pytest"),  # Its `testing` extra, less pytest-cov.
        typed=("tests",),  # Its users' code: the package itself is what is replaced.
    ),
    Project(
        name="jaxsim",  # A physics engine: deep class hierarchies, 1.6's mutability API.
        sdist="jaxsim==0.8.2",
        sha256="03082ac9116c90c46159339e0c2a2e1e6714114416dd23fb6e5b3458d5a0750a",
        config="pyproject.toml",
        lock=("jaxsim[testing,viz]==0.8.2",),
        pytest_args=("-n", "2"),
        # rod refuses sdformat older than it wants (Debian's is); the few tests that need a
        # newer one then fail with 1.6.3 as well.
        env=(("ROD_SKIP_SDFORMAT_CHECK", "1"),),
        needs_sdf=True,
        typed=("src/jaxsim",),
    ),
)


class Result(NamedTuple):
    """One test's outcome (passed, failed, error, skipped) and its error's first line."""

    outcome: str
    message: str = ""


Results = dict[str, Result]  # By pytest node id.


class Difference(NamedTuple):
    """A listed test that passes with 1.6.3 and fails with this checkout on purpose."""

    project: str
    test: str
    reason: str
    docs: str


class Deselection(NamedTuple):
    """Tests that cannot run here: a file not collected, or a `-k` keyword."""

    project: str
    reason: str
    ignore: str = ""
    keyword: str = ""


class Report(NamedTuple):
    """One project's comparison: the table row and what it lists below the table."""

    project: str
    tests: int
    left_out: str  # Deselected tests, and files not collected.
    passed_reference: int
    passed_ours: int
    allowed: list[str]
    failing: list[tuple[str, str]]  # (node id, first line of the error with ours)
    listed_not_differing: list[tuple[str, str]]  # (node id, why it does not differ)
    only_ours: int


def log(message: str) -> None:
    print(f"[downstream] {message}", flush=True)


# -- the lists -------------------------------------------------------------------------------


def read_entries(
    root: Path, file: str, table: str, kind: Callable[..., Entry]
) -> tuple[list[Entry], list[str]]:
    """The entries of the `[[table]]` array of downstream/`file` as `kind` records, and one
    problem for each entry whose keys do not fit `kind`."""
    with (root / "downstream" / file).open("rb") as f:
        raw: list[dict[str, object]] = tomllib.load(f).get(table, [])
    entries: list[Entry] = []
    problems: list[str] = []
    for entry in raw:
        try:
            entries.append(kind(**entry))
        except TypeError:
            fields = getattr(kind, "_fields", ())
            problems.append(f"{file}: {entry} does not fit the keys {fields}")
    return entries, problems


def load_lists(root: Path = ROOT) -> tuple[list[Difference], list[Deselection], list[str]]:
    """Read downstream/differences.toml and deselected.toml; also return what is wrong in them
    (an unknown project, a missing key, a docs section that does not exist)."""
    projects = {project.name for project in PROJECTS}
    differences, problems = read_entries(root, "differences.toml", "difference", Difference)
    for difference in differences:
        page = difference.docs.partition("#")[0]  # Its section: checked by the test suite.
        if difference.project not in projects:
            problems.append(f"differences.toml: unknown project {difference.project!r}")
        elif not (root / page).is_file():
            problems.append(f"differences.toml: {difference.test}: no page {page}")
    deselections, more = read_entries(root, "deselected.toml", "deselect", Deselection)
    problems += more
    for deselection in deselections:
        if deselection.project not in projects:
            problems.append(f"deselected.toml: unknown project {deselection.project!r}")
        if bool(deselection.ignore) == bool(deselection.keyword) or not deselection.reason:
            problems.append(
                f"deselected.toml: {deselection} needs a reason and `ignore` or `keyword`"
            )
    return differences, deselections, problems


class Allowed(NamedTuple):
    """A diagnostic only this checkout produces, on purpose (downstream/typecheck.toml)."""

    project: str
    checker: str
    file: str
    code: str  # mypy's error code, pyright's rule.
    reason: str


def load_allowed(root: Path = ROOT) -> tuple[list[Allowed], list[str]]:
    """downstream/typecheck.toml's entries, and what is wrong in them."""
    allowed, problems = read_entries(root, "typecheck.toml", "allowed", Allowed)
    projects = {project.name for project in PROJECTS}
    for item in allowed:
        if item.project not in projects or item.checker not in ("mypy", "pyright"):
            problems.append(f"typecheck.toml: {item}: unknown project or checker")
    return allowed, problems


def deselect_args(deselections: Iterable[Deselection]) -> list[str]:
    """pytest arguments that leave the deselected tests out."""
    args = [f"--ignore={d.ignore}" for d in deselections if d.ignore]
    keywords = [f"not ({d.keyword})" for d in deselections if d.keyword]
    return [*args, "-k", " and ".join(keywords)] if keywords else args


# -- the environment -------------------------------------------------------------------------


def install_sdf_packages() -> None:
    """apt-get install SDF_PACKAGES as root, or in CI with passwordless sudo; else nothing."""
    root = os.geteuid() == 0
    may_sudo = bool(os.environ.get("CI")) and shutil.which("sudo") is not None
    if not shutil.which("apt-get") or not (root or may_sudo):
        return
    sudo = [] if root else ["sudo", "-n"]
    log(f"no `gz` or `ign` on PATH: installing {' '.join(SDF_PACKAGES)}")
    apt = [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q"]
    for command in ([*apt, "update"], [*apt, "install", "-y", *SDF_PACKAGES]):
        if run(command) != 0:
            return


def sdf_tool() -> str | None:
    """Describe the `gz` or `ign` that rod will run, installing Debian's when neither is there
    and we may; or say what to install and return None."""
    if not (shutil.which("gz") or shutil.which("ign")):
        install_sdf_packages()
    tool = shutil.which("gz") or shutil.which("ign")
    if tool is None:
        log(
            "jaxsim converts URDF with `gz sdf` or `ign sdf`, and neither is on PATH: install "
            f"them (Debian/Ubuntu, as root: apt-get install {' '.join(SDF_PACKAGES)})"
        )
        return None
    with tempfile.TemporaryDirectory() as scratch:  # As rod checks it: what SDF it writes.
        probe = Path(scratch) / "probe.sdf"
        probe.write_text("<sdf version='1.4'/>")
        written = subprocess.run([tool, "sdf", "-p", str(probe)], capture_output=True, text=True)
    spec = re.search(r"<sdf version=['\"]([\d.]+)", written.stdout)
    description = f"{tool} sdf (writes SDF {spec.group(1) if spec else 'unknown'})"
    if shutil.which("dpkg-query"):
        query = ["dpkg-query", "-W", "-f", "${Package}=${Version} ", *SDF_PACKAGES]
        listed = subprocess.run(query, capture_output=True, text=True).stdout.split()
        description += "".join(f", {p}" for p in listed if not p.endswith("="))
    return description


def fetch_sdist(project: Project, python: Path) -> Path | None:
    """The project's sdist in .downstream/sdists, downloaded once and checked against its hash."""
    folder = CACHE / "sdists"
    name, _, version = project.sdist.partition("==")
    pattern = f"{re.sub(r'[-_.]+', '[-_.]', name)}-{re.escape(version)}.tar.gz"
    found = [path for path in folder.glob("*.tar.gz") if re.fullmatch(pattern, path.name, re.I)]
    if not found:
        command = [str(python), "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        command += ["--quiet", "-d", str(folder), project.sdist]
        run(command)
        found = [p for p in folder.glob("*.tar.gz") if re.fullmatch(pattern, p.name, re.I)]
    if len(found) != 1:
        log(f"could not download the sdist of {project.sdist}")
        return None
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != project.sha256:
        log(f"{found[0]} has sha256 {digest}, not {project.sha256}: delete it and rerun")
        return None
    return found[0]


def unpack(sdist: Path, into: Path) -> Path:
    """A fresh copy of the sdist's tree, without the `jax_dataclasses` package and metadata that
    1.6.3's carries at its root: the working directory comes first on sys.path, so they would
    shadow the package under test and its version."""
    shutil.rmtree(into, ignore_errors=True)
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")
    (tree,) = into.iterdir()
    for shadow in [tree / "jax_dataclasses", *tree.glob("jax_dataclasses*.egg-info")]:
        shutil.rmtree(shadow, ignore_errors=True)
    return tree


# -- running and reading ---------------------------------------------------------------------


def read_junit(path: Path) -> Results:
    """Outcomes by node id from pytest's junit XML (xunit1, whose `file` gives the path)."""
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    results: Results = {}
    for case in ET.parse(path).iter("testcase"):
        file, classname, name = case.get("file", ""), case.get("classname"), case.get("name", "")
        if not classname:  # A module that failed to collect.
            node = file or name
        else:  # classname is the module's dotted path, then any classes.
            classes = classname.removeprefix(file.removesuffix(".py").replace("/", "."))
            node = "::".join([file, *filter(None, classes.split(".")), name])
        result = Result("passed")
        for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            element = case.find(tag)
            if element is not None:
                result = Result(outcome, first_line(element))
                break
        if node not in results or rank[result.outcome] > rank[results[node].outcome]:
            results[node] = result
    return results


def first_line(element: ET.Element) -> str:
    """The error's first line; for a collection error, the last `E` line of its traceback."""
    message = element.get("message", "")
    if message in ("", "collection failure"):
        errors = [line[1:].strip() for line in (element.text or "").splitlines() if line[:1] == "E"]
        message = errors[-1] if errors else message
    return message.strip().splitlines()[0] if message.strip() else ""


def run_side(
    project: Project,
    python: Path,
    sdist: Path,
    side: str,
    overlay: Path | None,
    deselect: list[str],
) -> tuple[Results, int] | None:
    """Run the project's tests with 1.6.3 (`overlay` first on PYTHONPATH) or with this checkout
    (`overlay` None): their outcomes and how many `deselect` left out; None when it could not
    (the wrong jax_dataclasses, pytest crashed)."""
    folder = CACHE / project.name
    tree = unpack(sdist, folder / side)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(project.env)
    if overlay is not None:
        env["PYTHONPATH"] = str(overlay)

    found = subprocess.run(
        [str(python), "-c", CHECK_IMPORT], cwd=tree, env=env, capture_output=True, text=True
    )
    file, _, version = found.stdout.strip().partition("\n")
    expected = (overlay if overlay is not None else ROOT) / "jax_dataclasses"
    label = "1.6.3" if overlay is not None else "ours"
    wrong_version = overlay is not None and version != REFERENCE.partition("==")[2]
    if found.returncode != 0 or not Path(file).resolve().is_relative_to(expected) or wrong_version:
        log(f"{project.name}, {label}: expected jax_dataclasses from {expected}, got")
        print(found.stdout + found.stderr, flush=True)
        return None
    log(f"{project.name}, {label}: imports jax_dataclasses {version} from {file}")

    pytest = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-c", project.config]
    pytest += [f"--rootdir={tree}", "--continue-on-collection-errors", *deselect]
    # Under xdist the summary does not count deselected tests: a collection says.
    collect = [*pytest, "--collect-only", "-q"]
    collected = subprocess.run(collect, cwd=tree, env=env, capture_output=True, text=True)
    deselected = re.search(r"(\d+) deselected", collected.stdout)

    junit, output = folder / f"{side}.xml", folder / f"{side}.log"
    junit.unlink(missing_ok=True)
    command = [*pytest, f"--junitxml={junit}", "-o", "junit_family=xunit1", *project.pytest_args]
    print(f"$ (cd {tree} && {shlex.join(command)}) > {output}", flush=True)
    with output.open("w") as out:
        code = subprocess.call(command, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT)
    lines = [line for line in output.read_text(errors="replace").splitlines() if line.strip()]
    summary = lines[-1] if lines else "(no output)"
    log(f"{project.name}, {label}: {summary}")
    if code not in (0, 1) or not junit.exists():
        print("\n".join(lines[-30:]), flush=True)
        log(f"{project.name}, {label}: pytest exited with {code}; output in {output}")
        return None
    return read_junit(junit), int(deselected.group(1)) if deselected else 0


Diagnostic = tuple[str, str, int, str]
"""(checker, file relative to the sdist's root, line, mypy code or pyright rule)."""
_MYPY_LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[\w-]+)\]$")


def typecheck(
    project: Project, python: Path, sdist: Path, side: str, overlay: Path | None
) -> set[Diagnostic]:
    """mypy's and pyright's errors on the project's typed source, with 1.6.3 (`overlay`
    searched first) or with this checkout (the checkout searched first: neither checker reads
    setuptools' editable install); both read no configuration of the project."""
    tree = unpack(sdist, CACHE / project.name / f"typecheck-{side}")
    found: set[Diagnostic] = set()
    first = overlay if overlay is not None else ROOT
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MYPYPATH"] = str(first)
    mypy = [str(python), "-m", "mypy", "--python-executable", str(python), "--no-incremental"]
    mypy += ["--config-file", os.devnull, "--ignore-missing-imports", "--no-error-summary"]
    ran = subprocess.run([*mypy, *project.typed], cwd=tree, env=env, capture_output=True, text=True)
    for line in ran.stdout.splitlines():
        match = _MYPY_LINE.match(line)
        if match:
            found.add(("mypy", match["file"], int(match["line"]), match["code"]))
    config = tree / "pyrightconfig.json"
    settings = {"include": list(project.typed), "extraPaths": [str(first)]}
    config.write_text(json.dumps(settings))
    pyright = [str(python), "-m", "pyright", "--outputjson", "-p", str(config)]
    pyright += ["--pythonpath", str(python)]
    ran = subprocess.run(pyright, cwd=tree, env=env, capture_output=True, text=True)
    try:
        report = json.loads(ran.stdout)
    except json.JSONDecodeError:
        log(f"{project.name}: pyright gave no report: {ran.stderr.strip()[:500]}")
        return found | {("pyright", "(did not run)", 0, "")}
    for diagnostic in report.get("generalDiagnostics", []):
        if diagnostic.get("severity") == "error":
            file = str(Path(diagnostic["file"]).relative_to(tree))
            line = diagnostic["range"]["start"]["line"] + 1
            found.add(("pyright", file, line, diagnostic.get("rule", "")))
    log(f"{project.name}, {side}: {len(found)} type-checker error(s)")
    return found


def only_ours(
    project: Project, reference: set[Diagnostic], ours: set[Diagnostic], allowed: list[Allowed]
) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """The diagnostics only this checkout produces: (allowed, failing)."""
    listed = {(a.checker, a.file, a.code) for a in allowed if a.project == project.name}
    new = sorted(ours - reference)
    return (
        [d for d in new if (d[0], d[1], d[3]) in listed],
        [d for d in new if (d[0], d[1], d[3]) not in listed],
    )


def reference_results(
    project: Project, python: Path, sdist: Path, overlay: Path, deselect: list[str], tool: str
) -> tuple[Results, int] | None:
    """The 1.6.3 outcomes, reused while nothing they depend on has changed: the installed
    packages, Python, the SDF tool, the project's definition and deselections."""
    freeze = [str(python), "-m", "pip", "freeze", "--exclude-editable"]
    installed = subprocess.run(freeze, capture_output=True, text=True, check=True).stdout
    key = hashlib.sha256()
    for part in (REFERENCE, project, sys.version, tool, deselect, installed):
        key.update(repr(part).encode() + b"\0")
    cached_path = CACHE / project.name / "reference.json"
    if cached_path.exists():
        cached = json.loads(cached_path.read_text())
        if cached["key"] == key.hexdigest():
            log(f"{project.name}, 1.6.3: outcomes reused from {cached_path}")
            results = {node: Result(*result) for node, result in cached["results"].items()}
            return results, cached["deselected"]
    ran = run_side(project, python, sdist, "reference", overlay, deselect)
    if ran is not None:
        record = {"key": key.hexdigest(), "results": ran[0], "deselected": ran[1]}
        cached_path.write_text(json.dumps(record, indent=1) + "\n")
    return ran


def compare(
    project: Project, reference: Results, ours: Results, left_out: str, listed: list[Difference]
) -> Report:
    """What passes with 1.6.3 and not with ours, split into listed and failing differences."""
    allowed_tests = {d.test for d in listed if d.project == project.name}

    def why(node: str) -> str:  # A listed test that does not differ.
        if ours.get(node, Result("")).outcome == "passed":
            return "passes"
        return "fails with 1.6.3" if node in reference else "not run"

    allowed: list[str] = []
    failing: list[tuple[str, str]] = []
    for node, result in sorted(reference.items()):
        if result.outcome != "passed" or ours.get(node, Result("")).outcome == "passed":
            continue
        if node in allowed_tests:
            allowed.append(node)
            continue
        mine = ours.get(node)
        if mine is None:  # Its module did not collect: say why.
            error = ours.get(node.partition("::")[0])
            mine = Result("missing", f"not collected: {error.message}" if error else "not run")
        failing.append((node, f"{mine.outcome}: {mine.message}"))
    return Report(
        project=project.name,
        tests=len(reference.keys() | ours.keys()),
        left_out=left_out,
        passed_reference=sum(r.outcome == "passed" for r in reference.values()),
        passed_ours=sum(r.outcome == "passed" for r in ours.values()),
        allowed=allowed,
        failing=failing,
        listed_not_differing=[(node, why(node)) for node in sorted(allowed_tests - set(allowed))],
        only_ours=sum(
            r.outcome == "passed" and reference.get(n, Result("")).outcome != "passed"
            for n, r in ours.items()
        ),
    )


def print_table(reports: list[Report], problems: list[str]) -> None:
    """The summary: one row per project, then every difference and note."""
    header = ("project", "tests", "left out", "pass 1.6.3", "pass ours", "allowed", "failing")
    rows = [header] + [
        (
            r.project,
            str(r.tests),
            r.left_out,
            str(r.passed_reference),
            str(r.passed_ours),
            str(len(r.allowed)),
            str(len(r.failing)),
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    print()
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    for report in reports:
        for node in report.allowed:
            print(f"allowed difference  {report.project} {node} (downstream/differences.toml)")
        for node, why in report.listed_not_differing:
            print(f"listed but {why}: {report.project} {node} (downstream/differences.toml)")
        if report.only_ours:
            print(f"pass only with ours {report.project}: {report.only_ours} test(s)")
        for node, error in report.failing:
            print(f"FAILING DIFFERENCE  {report.project} {node}\n    {error}")
    for problem in problems:
        print(f"ENVIRONMENT PROBLEM {problem}")
    print(flush=True)


# -- the command -----------------------------------------------------------------------------


def project_venv(project: Project) -> tuple[Path, Path]:
    """The project's venv (pins and this checkout) and its 1.6.3 overlay folder."""
    venv = CACHE / project.name / "venv"
    overlay = venv / REFERENCE.replace("==", "-")
    installs = [
        ["-r", f"downstream/{project.name}.txt", "-e", "."],
        ["--no-deps", "--upgrade", "--target", str(overlay), REFERENCE],
        # The type checkers, at the versions `python3 dev.py test` runs.
        ["-c", "constraints.txt", "mypy", "pyright"],
    ]
    pins = ["pyproject.toml", f"downstream/{project.name}.txt", "constraints.txt"]
    return ensure_venv(venv, pins, installs, salt=REFERENCE), overlay


def lock(project: Project) -> None:
    """Resolve the project's requirements in a scratch venv and freeze them as its pins."""
    venv = CACHE / project.name / "lock-venv"
    shutil.rmtree(venv, ignore_errors=True)
    install = ["-c", "constraints.txt", *project.lock, "-e", "."]
    ensure_venv(venv, ["pyproject.toml", "constraints.txt"], [install])
    freeze = [str(venv_exe(venv, "python")), "-m", "pip", "freeze", "--exclude-editable"]
    frozen = subprocess.run(freeze, capture_output=True, text=True, check=True).stdout.split()
    pins = sorted(
        (p for p in frozen if not re.match(r"jax[-_]dataclasses==", p, re.I)), key=str.lower
    )
    python = ".".join(map(str, sys.version_info[:2]))
    header = [
        f"# {project.name}'s test environment for `python3 dev.py downstream` (Python {python}).",
        f"# Generated by `python3 dev.py downstream --lock {project.name}`: it resolves",
        f"# {' '.join(project.lock)} with this checkout under constraints.txt, then freezes.",
        "# jax_dataclasses is left out: this checkout is installed beside these.",
    ]
    (LISTS / f"{project.name}.txt").write_text("\n".join([*header, *pins]) + "\n")
    shutil.rmtree(venv)
    log(f"wrote downstream/{project.name}.txt ({len(pins)} pins)")


def main(names: Sequence[str], relock: bool = False) -> int:
    """Run (or with `relock`, re-pin) the named projects, all by default; 0 when no test that
    passes with 1.6.3 fails with this checkout unlisted, and the environment was sound."""
    if sys.version_info[:2] != PYTHON:
        wanted = ".".join(map(str, PYTHON))
        log(f"downstream runs on Python {wanted}, whose versions downstream/*.txt pins")
        return 1
    unknown = set(names) - {p.name for p in PROJECTS}
    if unknown:
        log(f"no project {', '.join(sorted(unknown))}; the projects: {[p.name for p in PROJECTS]}")
        return 2
    chosen = [p for p in PROJECTS if not names or p.name in names]
    if relock:
        for project in chosen:
            lock(project)
        return 0
    differences, deselections, problems = load_lists()
    allowances, allowance_problems = load_allowed()
    problems += allowance_problems
    if problems:
        for problem in problems:
            log(f"FAILED: {problem}")
        return 1

    reports: list[Report] = []
    for project in chosen:
        tool = sdf_tool() if project.needs_sdf else ""
        if tool is None:
            problems.append(f"{project.name}: no `gz sdf` or `ign sdf` (see above)")
            continue
        if tool:
            log(f"{project.name}: converts URDF with {tool}")
        venv, overlay = project_venv(project)
        python = venv_exe(venv, "python")
        sdist = fetch_sdist(project, python)
        if sdist is None:
            problems.append(f"{project.name}: no sdist (see above)")
            continue
        mine = [d for d in deselections if d.project == project.name]
        deselect = deselect_args(mine)
        reference = reference_results(project, python, sdist, overlay, deselect, tool)
        ours = run_side(project, python, sdist, "ours", None, deselect)
        if reference is None or ours is None:
            problems.append(f"{project.name}: a run did not complete (see above)")
            continue
        files = sum(bool(d.ignore) for d in mine)
        left_out = f"{ours[1]}" + (f" + {files} file{'s' * (files > 1)}" if files else "")
        reports.append(compare(project, reference[0], ours[0], left_out, differences))
        if project.typed:
            before = typecheck(project, python, sdist, "reference", overlay)
            after = typecheck(project, python, sdist, "ours", None)
            allowed, new = only_ours(project, before, after, allowances)
            for checker, file, line, code in allowed:
                log(
                    f"allowed type-checker difference {project.name} {checker} {file}:{line} [{code}]"
                )
            for checker, file, line, code in new:
                problems.append(
                    f"{project.name}: only ours: {checker} {file}:{line} [{code}] "
                    "(not in downstream/typecheck.toml)"
                )
            gone = len(before - after)
            log(f"{project.name}: {len(new)} new type-checker error(s), {gone} fewer than 1.6.3")

    print_table(reports, problems)
    failing = sum(len(report.failing) for report in reports)
    if failing:
        log(f"FAILED: {failing} test(s) pass with 1.6.3 and fail with this checkout, unlisted")
        log(f"logs and junit XML: {CACHE}/<project>/ours.log, ours.xml")
    return 1 if failing or problems else 0
