"""Keep CI, the README, .ci/run, dev.py, tools/, downstream/ and pyproject.toml in agreement.

These tests read the files as data and never import jax_dataclasses.
"""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from doc_blocks import anchors
from load_file import load_file, load_tool
from packaging.specifiers import SpecifierSet  # installed with pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
README_COMMANDS = {"python3 dev.py test", "python3 dev.py tour"}
OLDEST_COMMAND = "python3 dev.py test --oldest"
NEWEST_COMMAND = "python3 dev.py test --newest"  # .ci/run: Python 3.14 from a Debian root.
PYTHON_COMMAND = "python3 dev.py test --python ${{ matrix.python-version }}"
DOWNSTREAM_COMMAND = "python3 dev.py downstream"  # CI only: CONTRIBUTING.md says when to run it.
BENCH_CHECK_COMMAND = "python3 dev.py bench --check"  # .ci/run only: ratios need one machine.
CLASSIFIER = re.compile(r"^Programming Language :: Python :: (3\.\d+)$")


DOWNSTREAM = load_tool("downstream")
DEV = load_file(ROOT / "dev.py")


def load_pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def load_workflow(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path.name} is not a YAML mapping"
    return data


def triggers(workflow: dict[str, Any]) -> set[str]:
    # YAML 1.1 (PyYAML) reads the bare key `on` as the boolean True.
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on}
    if isinstance(on, list):
        return set(on)
    assert isinstance(on, dict), f"unexpected `on:` value {on!r}"
    return set(on)


def run_commands(job: dict[str, Any]) -> list[str]:
    commands: list[str] = []
    for step in job.get("steps", []):
        for line in str(step.get("run", "")).splitlines():
            if line.strip():
                commands.append(line.strip())
    return commands


def classifier_versions() -> set[str]:
    classifiers: list[str] = load_pyproject()["project"]["classifiers"]
    return {m.group(1) for c in classifiers if (m := CLASSIFIER.match(c))}


def readme_development_commands() -> set[str]:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"^## Development\n(.*?)^## ", readme, re.DOTALL | re.MULTILINE)
    assert match, "README.md has no '## Development' section followed by another section"
    return set(re.findall(r"^python3 dev\.py \w+", match.group(1), re.MULTILINE))


def all_jobs() -> dict[str, dict[str, Any]]:
    jobs: dict[str, dict[str, Any]] = {}
    for path in WORKFLOWS:
        for name, job in load_workflow(path).get("jobs", {}).items():
            jobs[f"{path.name}:{name}"] = job
    return jobs


def test_there_is_a_workflow() -> None:
    assert WORKFLOWS, "no .github/workflows/*.yml found"


@pytest.mark.parametrize("path", WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def test_workflow_runs_on_push_and_pull_request(path: Path) -> None:
    assert {"push", "pull_request"} <= triggers(load_workflow(path))


def test_classifiers_list_the_supported_versions() -> None:
    assert classifier_versions() == set(DEV.PYTHONS)  # dev.py names them once.


def test_requires_python_admits_every_classifier_version() -> None:
    spec = SpecifierSet(load_pyproject()["project"]["requires-python"])
    for version in classifier_versions():
        assert spec.contains(version), f"requires-python {spec} rejects {version}"
    assert not spec.contains("3.10"), "requires-python admits a version without a classifier"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # The pinned corner (constraints.txt) on every Python its jax has wheels for...
        ("python3 dev.py test", DEV.PYTHONS[:-1]),
        # ...and the newest pins (constraints-newest.txt) on every Python they install on.
        (PYTHON_COMMAND, (*DEV.PYTHONS[1:], f"{DEV.NEWEST_PYTHON}t")),
    ],
)
def test_test_job_matrices_are_the_supported_versions(
    command: str, expected: tuple[str, ...]
) -> None:
    test_jobs = [job for job in all_jobs().values() if command in run_commands(job)]
    assert test_jobs, f"no workflow job runs `{command}`"
    for job in test_jobs:
        versions = job["strategy"]["matrix"]["python-version"]
        assert all(isinstance(v, str) for v in versions), f"quote the versions: {versions!r}"
        assert sorted(versions) == sorted(expected)
        assert len(versions) == len(set(versions))
        setup = [
            s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-python")
        ]
        assert setup, "the test job does not set up Python"
        assert setup[0]["with"]["python-version"] == "${{ matrix.python-version }}"


def test_every_job_checks_out_and_sets_up_python_before_running() -> None:
    for name, job in all_jobs().items():
        uses = [str(step.get("uses", "")) for step in job["steps"]]
        assert "actions/checkout@v4" in uses, name
        assert "actions/setup-python@v5" in uses, name
        first_run = next(i for i, step in enumerate(job["steps"]) if "run" in step)
        assert uses.index("actions/setup-python@v5") < first_run, name


def test_workflow_commands_are_the_readme_commands() -> None:
    readme = readme_development_commands()
    assert readme == README_COMMANDS
    workflow = {cmd for job in all_jobs().values() for cmd in run_commands(job)}
    assert workflow == readme | {OLDEST_COMMAND, DOWNSTREAM_COMMAND, PYTHON_COMMAND}


def test_the_oldest_corner_runs_on_the_oldest_python() -> None:
    jobs = [job for job in all_jobs().values() if OLDEST_COMMAND in run_commands(job)]
    assert len(jobs) == 1
    setup = next(s for s in jobs[0]["steps"] if "setup-python" in str(s.get("uses", "")))
    assert setup["with"]["python-version"] == min(classifier_versions())
    floors = (ROOT / "constraints-oldest.txt").read_text()
    project = load_pyproject()["project"]
    dependencies = " ".join(project["dependencies"] + project["optional-dependencies"]["test"])
    for name in ("jax", "jaxlib", "numpy", "typing_extensions", "flax", "orbax-checkpoint"):
        pinned = re.search(rf"^{name}==(\S+)$", floors, re.MULTILINE)
        assert pinned, f"constraints-oldest.txt does not pin {name}"
        version = pinned.group(1)
        assert f"{name}>={version}" in dependencies, f"the floor of {name} is not {version}"


def test_ci_run_script_runs_dev_py_test() -> None:
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK), ".ci/run is not executable"
    lines = [line.strip() for line in script.read_text().splitlines()]
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines
    commands = [line for line in lines if line and not line.startswith("#")]
    assert "python3 dev.py test" in commands  # the README's command first
    assert commands.index(DOWNSTREAM_COMMAND) > commands.index("python3 dev.py test")
    assert commands.index(BENCH_CHECK_COMMAND) > commands.index("python3 dev.py test")
    assert commands.index(NEWEST_COMMAND) > commands.index(DOWNSTREAM_COMMAND)
    assert commands[-1] == f"exec {OLDEST_COMMAND}"


def test_downstream_runs_once_on_the_python_its_pins_were_resolved_on() -> None:
    jobs = [job for job in all_jobs().values() if DOWNSTREAM_COMMAND in run_commands(job)]
    assert len(jobs) == 1
    setup = next(s for s in jobs[0]["steps"] if "setup-python" in str(s.get("uses", "")))
    version = setup["with"]["python-version"]
    assert tuple(map(int, version.split("."))) == DOWNSTREAM.PYTHON
    for project in DOWNSTREAM.PROJECTS:
        pins = ROOT / "downstream" / f"{project.name}.txt"
        assert f"(Python {version})" in pins.read_text().splitlines()[0], pins.name


def test_downstream_lists_name_known_projects() -> None:
    differences, deselections, problems = DOWNSTREAM.load_lists()
    assert problems == []
    assert differences and deselections


def test_downstream_differences_point_at_existing_docs_sections() -> None:
    pytest.importorskip("markdown", reason="the docs' own dependency (the docs extra)")
    for difference in DOWNSTREAM.load_lists()[0]:
        page, _, anchor = difference.docs.partition("#")
        assert anchor in anchors(ROOT / page), f"{difference.test}: no section #{anchor} in {page}"


def test_dev_py_offers_the_documented_commands() -> None:
    # --help exits before dev.py touches any virtual environment.
    result = subprocess.run(
        [sys.executable, str(ROOT / "dev.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    listed = set(re.findall(r"^ {4}(\w+)\b", result.stdout, re.MULTILINE))
    for command in README_COMMANDS | {DOWNSTREAM_COMMAND, BENCH_CHECK_COMMAND}:
        assert command.split()[2] in listed, f"`{command}` is not a dev.py subcommand"
    # The subprocess marker that `test --quick` leaves out is declared.
    assert any(
        m.startswith("subprocess:")
        for m in load_pyproject()["tool"]["pytest"]["ini_options"]["markers"]
    )


def test_dev_extra_contains_the_test_and_docs_extras() -> None:
    extras: dict[str, list[str]] = load_pyproject()["project"]["optional-dependencies"]
    assert "jax_dataclasses[test,docs]" in extras["dev"]


def requirement_name(requirement: str) -> str:
    """`mkdocstrings[python]>=1` -> `mkdocstrings`, normalised as pip compares names."""
    name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_development_dependency_is_pinned() -> None:
    """`python3 dev.py test` installs exactly what constraints.txt says (docs tools included)."""
    extras: dict[str, list[str]] = load_pyproject()["project"]["optional-dependencies"]
    pinned = {
        requirement_name(line)
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    wanted = {requirement_name(r) for extra in extras.values() for r in extra}
    wanted.discard("jax-dataclasses")
    assert wanted - pinned == set(), "constraints.txt does not pin these"


def test_the_quick_loop_and_the_tour_take_what_they_need() -> None:
    ((name, command),) = DEV.steps_for("test-quick", ROOT / ".venv", ["-x"])
    assert name == "pytest" and command[-3:] == ["-m", "not subprocess", "-x"]
    assert DEV.TOUR.extra == "" and DEV.TOUR.name != DEV.NEWEST.name  # base dependencies only


def test_downstream_type_checks_fail_on_an_error_only_ours_produces() -> None:
    project = DOWNSTREAM.PROJECTS[0]
    reference = {("mypy", "a.py", 3, "arg-type")}
    ours = reference | {("pyright", "b.py", 7, "reportCallIssue"), ("mypy", "c.py", 1, "misc")}
    allowance = DOWNSTREAM.Allowed(project.name, "mypy", "c.py", "misc", "a reason")
    allowed, failing = DOWNSTREAM.only_ours(project, reference, ours, [allowance])
    assert allowed == [("mypy", "c.py", 1, "misc")]
    assert failing == [("pyright", "b.py", 7, "reportCallIssue")]
    assert DOWNSTREAM.only_ours(project, ours, reference, []) == ([], [])  # Fewer: fine.
    entries, problems = DOWNSTREAM.load_allowed()
    assert problems == [] and all(entry.reason for entry in entries)


def test_downstream_lists_report_each_entry_that_does_not_fit(tmp_path: Path) -> None:
    (tmp_path / "downstream").mkdir()
    (tmp_path / "downstream" / "typecheck.toml").write_text(
        '[[allowed]]\nproject = "nowhere"\nchecker = "mypy"\nfile = "a.py"\ncode = "misc"\n'
        'reason = "r"\n\n[[allowed]]\nproject = "x"\n'
    )
    entries, problems = DOWNSTREAM.load_allowed(tmp_path)
    assert len(entries) == 1 and len(problems) == 2
    unfit, unknown = problems
    assert unfit.startswith("typecheck.toml: {'project': 'x'} does not fit the keys")
    assert "project='nowhere'" in unknown and "unknown project or checker" in unknown
