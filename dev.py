#!/usr/bin/env python3
"""Developer and CI entry point for jax_dataclasses. Needs only the standard library.

    python3 dev.py tour             run examples/tour.py in `.venv-tour` (JDC_VENV_TOUR), which
                                    holds only the package's own dependencies
    python3 dev.py test [ARGS...]   ruff check, ruff format --check, mypy, pyright, the docs
                                    site, then pytest -n 2 ARGS (ARGS: everything after `test`)
    python3 dev.py test --quick [ARGS...]
                                    pytest -n 2 ARGS only, without the tests marked
                                    `subprocess` (docs pages, builds, type checkers, several
                                    processes or devices): the edit-test loop
    python3 dev.py test --oldest [ARGS...]
                                    pytest -n 2 ARGS in `.venv-oldest`, built from
                                    constraints-oldest.txt: the oldest supported jax, jaxlib,
                                    flax, orbax-checkpoint, numpy and typing_extensions
    python3 dev.py test --newest [ARGS...]
                                    pytest -n 2 ARGS on the newest supported Python (3.14) with
                                    the newest pins (constraints-newest.txt), in `.venv-3.14`
    python3 dev.py test --python X.Y [ARGS...]
                                    the same on Python X.Y (3.12, 3.13, 3.14, 3.14t), in
                                    `.venv-X.Y`: python X.Y on PATH, or pyenv's; for 3.14 on a
                                    Debian machine without one, a Debian sid root made with
                                    debootstrap (as root, once, outside the checkout: JDC_ROOT,
                                    default ~/.cache/jax_dataclasses/debian-sid-python3.14),
                                    where the suite runs under chroot, the checkout bind-mounted
                                    (tools/debian_root.py)
    python3 dev.py lint             ruff check, ruff format --check
    python3 dev.py typecheck        mypy, pyright
    python3 dev.py docs             build the documentation site into site/ (mkdocs, strict:
                                    any warning fails)
    python3 dev.py screenshots      build the site, then save screenshots of three pages, taken
                                    with headless Chromium (/usr/bin/chromium), to site-screenshots/
                                    (tools/screenshots.py)
    python3 dev.py bench            benchmarks/bench_core.py: the hot paths against
                                    register_dataclass, as ratios
    python3 dev.py bench --check    its short version against benchmarks/recorded.json: fails
                                    on a ratio that grew by more than max(noise, 10%)
                                    (benchmarks/check.py); --record rewrites the figures
    python3 dev.py downstream [PROJECT...] [--lock]
                                    run published projects' own test suites (upstream's 1.6.3,
                                    jaxsim) with jax_dataclasses 1.6.3 and with this checkout, and
                                    fail on a test only 1.6.3 passes that downstream/differences.toml
                                    does not list (tools/downstream.py; Python 3.11); --lock re-pins

Every other command first ensures the corner's virtual environment: it creates the venv with
`python -m venv` if needed, and runs `pip install -c <pins> -e '.[<extra>]'` whenever the
stamp file `<venv>/.jdc-stamp` is missing or does not match the current hash of pyproject.toml
and the pins (the `Corner`s below: the venv, its variable, pins and extra of each;
tools/venvs.py makes and stamps them).

Steps run in order and stop at the first failure; the exit code is that step's exit code.
CI runs `python3 dev.py test`, `python3 dev.py bench --check`, `python3 dev.py downstream`,
`python3 dev.py test --newest`, then `python3 dev.py test --oldest` (.ci/run; the workflow in
.github/workflows/ci.yml also runs the tour and the other Pythons). The oldest corner runs on
Python 3.11: NumPy 1.24 has no wheels for newer Pythons. `downstream` keeps its venvs in
`.downstream/`, stamped the same way (pyproject.toml and `downstream/<project>.txt`).

This file holds the supported versions, the command table and the command line; what the
commands do lives in tools/ (its __init__ lists the modules), which never imports this file.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

from tools import debian_root
from tools.venvs import ROOT, Wrap, as_is, ensure_venv, log, run, venv_env, venv_exe

PYTHONS = ("3.11", "3.12", "3.13", "3.14")
"""The supported Pythons, oldest first: the oldest corner runs on the first, the newest on the
last (pyproject.toml's classifiers and the workflow's jobs name the same)."""
NEWEST_PYTHON = PYTHONS[-1]


class Corner(NamedTuple):
    """A tested corner of the supported versions: its venv, pins, extra and Python."""

    name: str
    venv_variable: str
    constraints: str
    extra: str
    python: str | None = None
    """The Python version it runs on (`X.Y`, `X.Yt` free-threaded); None: this one."""

    def stamp_inputs(self) -> tuple[str, str]:
        return ("pyproject.toml", self.constraints)


NEWEST = Corner(".venv", "JDC_VENV", "constraints.txt", "dev")
OLDEST_CORNER = Corner(
    ".venv-oldest", "JDC_VENV_OLDEST", "constraints-oldest.txt", "test", PYTHONS[0]
)
TOUR = Corner(".venv-tour", "JDC_VENV_TOUR", "constraints.txt", "")  # The base dependencies.


QUICK, OLDEST, NEWEST_OPTION, PYTHON = "--quick", "--oldest", "--newest", "--python"


def python_corner(version: str) -> Corner:
    """The newest pins on Python `version`, in `.venv-<version>`."""
    return Corner(f".venv-{version}", "", "constraints-newest.txt", "dev", version)


def venv_dir(corner: Corner) -> Path:
    override = os.environ.get(corner.venv_variable) if corner.venv_variable else None
    return Path(override).resolve() if override else ROOT / corner.name


class Interpreter(NamedTuple):
    """A Python to create a corner's venv with, and how its commands run."""

    python: str
    wrap: Wrap = as_is


def find_interpreter(version: str | None) -> Interpreter:
    """Python `version` (`3.12`, `3.14t`): this one if it is that version, else `pythonX.Y` on
    PATH (not a pyenv shim, which refuses versions not selected), else pyenv's, else (3.14)
    a Debian root's, made if missing (tools/debian_root.py)."""
    if version is None or version == running_version():
        return Interpreter(sys.executable)
    executable = f"python{version}"
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if "shims" not in p
    )
    found = shutil.which(executable, path=path)
    if found is None:
        pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        installed = sorted(
            glob.glob(str(pyenv / "versions" / f"{version.rstrip('t')}.*" / "bin" / executable))
        )
        found = installed[-1] if installed else None
    if found is not None:
        return Interpreter(found)
    if version == NEWEST_PYTHON:
        return Interpreter(
            f"/usr/bin/{executable}", debian_root.inside(debian_root.ensure(version))
        )
    sys.exit(f"[dev.py] Python {version} not found: install it (pyenv install {version})")


def running_version() -> str:
    free_threaded = not getattr(sys, "_is_gil_enabled", lambda: True)()
    return f"{sys.version_info[0]}.{sys.version_info[1]}" + ("t" if free_threaded else "")


def ensure_corner(corner: Corner) -> tuple[Path, Wrap]:
    """The corner's venv, with the project installed (editable) under the corner's pins, and
    how to run commands in it."""
    interpreter = find_interpreter(corner.python)
    install = ["-c", corner.constraints, "-e", f".[{corner.extra}]" if corner.extra else "."]
    venv = ensure_venv(venv_dir(corner), corner.stamp_inputs(), [install], "", *interpreter)
    return venv, interpreter.wrap


class Step(NamedTuple):
    name: str
    args: list[str]
    """The command: its first word a tool of the venv, the rest its arguments."""


LINT = [
    Step("ruff check", ["ruff", "check", "."]),
    Step("ruff format --check", ["ruff", "format", "--check", "."]),
]
# mypy reads mypy.ini; pyright reads [tool.pyright] in pyproject.toml, whose `venv = ".venv"`
# wins over --pythonpath when ./.venv exists (--pythonpath serves JDC_VENV otherwise).
TYPECHECK = [Step("mypy", ["mypy"]), Step("pyright", ["pyright", "--pythonpath", "{python}"])]
# NO_MKDOCS_2_WARNING silences a banner about mkdocs' future; it changes nothing built.
DOCS = [Step("docs", ["mkdocs", "build", "--strict", "--quiet", "--site-dir", "site"])]
PYTEST = [Step("pytest", ["pytest", "-n", "2", "{args}"])]
COMMANDS: dict[str, list[Step]] = {
    "test": [*LINT, *TYPECHECK, *DOCS, *PYTEST],
    "test-quick": [Step("pytest", ["pytest", "-n", "2", "-m", "not subprocess", "{args}"])],
    "test-corner": PYTEST,  # The suite only: lint and type-checking need no other versions.
    "lint": LINT,
    "typecheck": TYPECHECK,
    "docs": DOCS,
    "tour": [Step("tour", ["python", "examples/tour.py"])],
    "bench": [Step("bench_core", ["python", "benchmarks/bench_core.py", "{args}"])],
    "bench-check": [Step("bench --check", ["python", "benchmarks/check.py", "{args}"])],
}
"""Each command's steps. `{args}` stands for the command's extra arguments, `{python}` for the
venv's python."""


def steps_for(command: str, venv: Path, args: list[str]) -> list[tuple[str, list[str]]]:
    """The steps of `command` (COMMANDS), with the venv's tools and `args` filled in."""
    if venv != ROOT / ".venv" and (ROOT / ".venv").exists() and command in ("test", "typecheck"):
        log(f"note: pyright resolves imports from {ROOT / '.venv'} (pyproject), not {venv}")
    filled: list[tuple[str, list[str]]] = []
    for step in COMMANDS[command]:
        words: list[str] = [str(venv_exe(venv, step.args[0]))]
        for word in step.args[1:]:
            words += args if word == "{args}" else [word.format(python=venv_exe(venv, "python"))]
        filled.append((step.name, words))
    return filled


def run_steps(steps: list[tuple[str, list[str]]], venv: Path, wrap: Wrap = as_is) -> int:
    env = venv_env(venv)
    for index, (name, cmd) in enumerate(steps, start=1):
        log(f"step {index}/{len(steps)}: {name}")
        code = run(cmd, env, wrap)
        if code != 0:
            hint = " (no tests were collected)" if name == "pytest" and code == 5 else ""
            log(f"FAILED at step {index}/{len(steps)}: {name} exited with {code}{hint}")
            return code
    log(f"all {len(steps)} step(s) passed: " + ", ".join(name for name, _ in steps))
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 dev.py",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("tour", help="run examples/tour.py (its own venv: base dependencies)")
    commands.add_parser(
        "test",
        help="lint, type-check, then pytest -n 2 ARGS (all arguments after `test`); "
        f"`test {OLDEST} ARGS`: pytest with the oldest supported versions; "
        f"`test {NEWEST_OPTION} ARGS`: with the newest (Python {NEWEST_PYTHON}); "
        f"`test {PYTHON} X.Y ARGS`: the newest pins on Python X.Y; "
        f"`test {QUICK} ARGS`: pytest without the tests that start a process",
    )
    commands.add_parser("lint", help="ruff check, ruff format --check")
    commands.add_parser("typecheck", help="mypy, pyright")
    commands.add_parser("docs", help="build the documentation site into site/ (strict)")
    commands.add_parser("screenshots", help="build the site and screenshot three pages")
    bench = commands.add_parser(
        "bench", help="the core benchmarks against register_dataclass (benchmarks/bench_core.py)"
    )
    bench.add_argument(
        "--check", action="store_true", help="short version, against benchmarks/recorded.json"
    )
    bench.add_argument(
        "--record", action="store_true", help="write benchmarks/recorded.json from a short run"
    )
    downstream = commands.add_parser(
        "downstream",
        help="run published projects' tests with jax_dataclasses 1.6.3 and with this checkout",
    )
    downstream.add_argument("projects", nargs="*", metavar="PROJECT", help="default: all")
    downstream.add_argument(
        "--lock", action="store_true", help="re-pin the projects' environments instead"
    )
    # Everything after `test` goes to pytest verbatim (argparse would reject `-k expr`).
    pytest_args: list[str] = []
    if argv[:1] == ["test"]:
        argv, pytest_args = argv[:1], argv[1:]
    args = parser.parse_args(argv)

    if sys.version_info[:2] < tuple(map(int, PYTHONS[0].split("."))):
        log(f"Python >= {PYTHONS[0]} is required, this is {sys.version.split()[0]}")
        return 1

    if args.command == "downstream":
        from tools.downstream import main as run_downstream  # Only this command needs it.

        return run_downstream(args.projects, relock=args.lock)

    command, corner = args.command, NEWEST
    if command == "tour":
        corner = TOUR
    if command == "bench" and (args.check or args.record):
        command, pytest_args = "bench-check", ["--record"] if args.record else []
    if command == "test":
        command, corner, pytest_args = test_corner(pytest_args)
    venv, wrap = ensure_corner(corner)
    if command == "screenshots":
        from tools.screenshots import take_screenshots  # Only this command needs it.

        code = run_steps(steps_for("docs", venv, []), venv)
        return code or take_screenshots(ROOT / "site", ROOT / "site-screenshots")
    return run_steps(steps_for(command, venv, pytest_args), venv, wrap)


def test_corner(args: list[str]) -> tuple[str, Corner, list[str]]:
    """`test`'s command, corner and pytest arguments, from its options (the first argument)."""
    option = args[:1]
    if option == [QUICK]:
        return "test-quick", NEWEST, args[1:]
    if option == [OLDEST]:
        return "test-corner", OLDEST_CORNER, args[1:]
    if option == [NEWEST_OPTION]:
        return "test-corner", python_corner(NEWEST_PYTHON), args[1:]
    if option == [PYTHON]:
        versions = (*PYTHONS, f"{NEWEST_PYTHON}t")
        if len(args) < 2 or args[1] not in versions:
            sys.exit(f"[dev.py] --python takes one of {', '.join(versions)} (t: free-threaded)")
        return "test-corner", python_corner(args[1]), args[2:]
    return "test", NEWEST, args


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
