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
    python3 dev.py lint             ruff check, ruff format --check
    python3 dev.py typecheck        mypy, pyright
    python3 dev.py docs             build the documentation site into site/ (mkdocs, strict:
                                    any warning fails)
    python3 dev.py screenshots      build the site, then save screenshots of three pages, taken
                                    with headless Chromium (/usr/bin/chromium), to site-screenshots/
    python3 dev.py bench            benchmarks/bench_core.py: the hot paths against
                                    register_dataclass, as ratios
    python3 dev.py bench --check    its short version against benchmarks/recorded.json: fails
                                    on a ratio that grew by more than max(noise, 10%)
                                    (benchmarks/check.py); --record rewrites the figures
    python3 dev.py downstream [PROJECT...] [--lock]
                                    run published projects' own test suites (upstream's 1.6.3,
                                    jaxsim) with jax_dataclasses 1.6.3 and with this checkout, and
                                    fail on a test only 1.6.3 passes that downstream/differences.toml
                                    does not list (dev_downstream.py; Python 3.11); --lock re-pins

Every other command first ensures the virtual environment: it creates `.venv` (or the directory
named by the JDC_VENV environment variable) with `python3 -m venv` if needed, and runs
`pip install -c constraints.txt -e '.[dev]'` whenever the stamp file `<venv>/.jdc-stamp` is
missing or does not match the current hash of pyproject.toml and constraints.txt. `--oldest`
does the same for `.venv-oldest` (or JDC_VENV_OLDEST) with constraints-oldest.txt and the
`test` extra, and `tour` for `.venv-tour` with constraints.txt and no extra.

Steps run in order and stop at the first failure; the exit code is that step's exit code.
CI runs `python3 dev.py test`, `python3 dev.py bench --check`, `python3 dev.py downstream`,
then `python3 dev.py test --oldest` (.ci/run; the workflow in .github/workflows/ci.yml also
runs the tour). The oldest
corner runs on Python 3.11: NumPy 1.24 has no wheels for newer Pythons. `downstream` keeps its
venvs in `.downstream/`, stamped the same way (pyproject.toml and `downstream/<project>.txt`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent
STAMP_NAME = ".jdc-stamp"
MIN_PYTHON = (3, 11)
OLDEST_PYTHON = (3, 11)
OLDEST = "--oldest"


class Corner(NamedTuple):
    """A tested corner of the supported versions: its venv, pins and extra."""

    name: str
    venv_variable: str
    constraints: str
    extra: str

    def stamp_inputs(self) -> tuple[str, str]:
        return ("pyproject.toml", self.constraints)


NEWEST = Corner(".venv", "JDC_VENV", "constraints.txt", "dev")
OLDEST_CORNER = Corner(".venv-oldest", "JDC_VENV_OLDEST", "constraints-oldest.txt", "test")
TOUR = Corner(".venv-tour", "JDC_VENV_TOUR", "constraints.txt", "")  # The base dependencies.
QUICK = "--quick"


def log(message: str) -> None:
    print(f"[dev.py] {message}", flush=True)


def venv_dir(corner: Corner) -> Path:
    override = os.environ.get(corner.venv_variable)
    return Path(override).resolve() if override else ROOT / corner.name


def venv_bin(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin")


def venv_exe(venv: Path, name: str) -> Path:
    return venv_bin(venv) / (f"{name}.exe" if os.name == "nt" else name)


def venv_env(venv: Path) -> dict[str, str]:
    """The environment for child processes: as if the venv were activated."""
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv_bin(venv)), env.get("PATH", "")])
    env["NO_MKDOCS_2_WARNING"] = "1"
    return env


def stamp_digest(inputs: Sequence[str], salt: str = "") -> str:
    """The hash of the files `inputs` (relative to ROOT) and `salt`: all an install depends on."""
    digest = hashlib.sha256(salt.encode() + b"\0" if salt else b"")  # Corners' stamps predate salt.
    for name in inputs:
        digest.update(name.encode() + b"\0")
        digest.update((ROOT / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def run(cmd: list[str], env: dict[str, str] | None = None) -> int:
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT, env=env)


def ensure_venv(
    venv: Path, inputs: Sequence[str], installs: Sequence[Sequence[str]], salt: str = ""
) -> Path:
    """Create `venv` if missing, then run `pip install ARGS` (from ROOT) for each ARGS of
    `installs`, unless the stamp `<venv>/.jdc-stamp` matches `stamp_digest(inputs, salt)`: a
    repeated run skips the install until one of the inputs changes.

    Shared by the corners (`.venv`, `.venv-oldest`) and `python3 dev.py downstream`'s venvs.
    """
    python = venv_exe(venv, "python")
    if not python.exists():
        log(f"creating virtual environment {venv}")
        if run([sys.executable, "-m", "venv", str(venv)]) != 0:
            sys.exit(
                "[dev.py] `python3 -m venv` failed (on Debian/Ubuntu: apt install python3-venv)"
            )

    stamp = venv / STAMP_NAME
    digest = stamp_digest(inputs, salt)
    current = stamp.read_text().strip() if stamp.exists() else None
    if current == digest:
        log(f"virtual environment {venv} is up to date")
        return venv

    reason = "no install stamp" if current is None else f"{' or '.join(inputs)} changed"
    log(f"installing into {venv} ({reason})")
    quiet_ci = ["--progress-bar=off"] if os.environ.get("CI") else []
    for args in installs:
        code = run([str(python), "-m", "pip", "install", *quiet_ci, *args], env=venv_env(venv))
        if code != 0:
            log("FAILED: pip install")
            sys.exit(code)
    stamp.write_text(digest + "\n")
    return venv


def ensure_corner(corner: Corner) -> Path:
    """The corner's venv, with the project installed (editable) under the corner's pins."""
    install = ["-c", corner.constraints, "-e", f".[{corner.extra}]" if corner.extra else "."]
    return ensure_venv(venv_dir(corner), corner.stamp_inputs(), [install])


def steps_for(command: str, venv: Path, pytest_args: list[str]) -> list[tuple[str, list[str]]]:
    def tool(name: str) -> str:
        return str(venv_exe(venv, name))

    pytest = ("pytest", [tool("pytest"), "-n", "2", *pytest_args])
    if command == "test-oldest":  # The suite only: lint and type-checking need no old jax.
        return [pytest]
    if command == "test-quick":  # The edit-test loop: no tests that start a Python process.
        return [("pytest", [tool("pytest"), "-n", "2", "-m", "not subprocess", *pytest_args])]
    if command == "bench":
        return [("bench_core", [tool("python"), "benchmarks/bench_core.py", *pytest_args])]
    if command == "bench-check":
        return [("bench --check", [tool("python"), "benchmarks/check.py", *pytest_args])]

    lint = [
        ("ruff check", [tool("ruff"), "check", "."]),
        ("ruff format --check", [tool("ruff"), "format", "--check", "."]),
    ]
    # mypy reads mypy.ini; pyright reads [tool.pyright] in pyproject.toml, whose `venv = ".venv"`
    # wins over --pythonpath when ./.venv exists (--pythonpath serves JDC_VENV otherwise).
    if venv != ROOT / ".venv" and (ROOT / ".venv").exists():
        log(f"note: pyright resolves imports from {ROOT / '.venv'} (pyproject), not {venv}")
    typecheck = [
        ("mypy", [tool("mypy")]),
        ("pyright", [tool("pyright"), "--pythonpath", tool("python")]),
    ]
    # NO_MKDOCS_2_WARNING silences a banner about mkdocs' future; it changes nothing built.
    docs = ("docs", [tool("mkdocs"), "build", "--strict", "--quiet", "--site-dir", "site"])
    if command == "lint":
        return lint
    if command == "typecheck":
        return typecheck
    if command == "docs":
        return [docs]
    if command == "test":
        return [*lint, *typecheck, docs, pytest]
    if command == "tour":
        return [("tour", [tool("python"), "examples/tour.py"])]
    raise ValueError(command)


def run_steps(steps: list[tuple[str, list[str]]], venv: Path) -> int:
    env = venv_env(venv)
    for index, (name, cmd) in enumerate(steps, start=1):
        log(f"step {index}/{len(steps)}: {name}")
        code = run(cmd, env=env)
        if code != 0:
            hint = " (no tests were collected)" if name == "pytest" and code == 5 else ""
            log(f"FAILED at step {index}/{len(steps)}: {name} exited with {code}{hint}")
            return code
    log(f"all {len(steps)} step(s) passed: " + ", ".join(name for name, _ in steps))
    return 0


SCREENSHOT_PAGES = ("index.html", "guides/model-surgery.html", "api.html")
CHROMIUM = Path("/usr/bin/chromium")


def take_screenshots(site: Path, out: Path) -> int:
    """Render pages of the built `site` in headless Chromium, served on localhost, as PNGs in `out`.

    The flags keep Chromium from reaching for the network (it has none here): a page that
    needs it shows up as unstyled text in the pictures.
    """
    import http.server
    import threading
    from functools import partial

    if not CHROMIUM.exists():
        log(f"{CHROMIUM} not found (Debian: apt install chromium)")
        return 1
    missing = [page for page in SCREENSHOT_PAGES if not (site / page).is_file()]
    if missing:
        log(f"FAILED: {site} has no {', '.join(missing)} (build the site first)")
        return 1
    out.mkdir(exist_ok=True)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        """Serves the site without logging every request."""

        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = partial(Quiet, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            return _screenshot_pages(server.server_address[1], out)
        finally:
            server.shutdown()


def _screenshot_pages(port: int, out: Path) -> int:
    """One Chromium run per page of SCREENSHOT_PAGES, served on `port`."""
    import tempfile

    for page in SCREENSHOT_PAGES:
        png = out / (page.replace("/", "-").removesuffix(".html") + ".png")
        png.unlink(missing_ok=True)  # A stale picture must not pass for a new one.
        with tempfile.TemporaryDirectory() as profile:
            flags = [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                "--window-size=1280,1000", "--virtual-time-budget=5000",
                f"--user-data-dir={profile}",
            ]  # fmt: skip
            url = f"http://127.0.0.1:{port}/{page}"
            command = [str(CHROMIUM), *flags, f"--screenshot={png}", url]
            try:
                code = subprocess.call(command, stderr=subprocess.DEVNULL, timeout=120)
            except subprocess.TimeoutExpired:
                code = 124
        if code != 0 or not png.exists():
            log(f"FAILED: no screenshot of {page}")
            return code or 1
        log(f"saved {png}")
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

    if sys.version_info < MIN_PYTHON:
        wanted = ".".join(map(str, MIN_PYTHON))
        log(f"Python >= {wanted} is required, this is {sys.version.split()[0]}")
        return 1

    if args.command == "downstream":
        import dev_downstream  # Next to dev.py; only this command needs it.

        return dev_downstream.main(args.projects, ensure_venv, relock=args.lock)

    command, corner = args.command, NEWEST
    if command == "tour":
        corner = TOUR
    if command == "test" and pytest_args[:1] == [QUICK]:
        command, pytest_args = "test-quick", pytest_args[1:]
    if command == "bench" and (args.check or args.record):
        command, pytest_args = "bench-check", ["--record"] if args.record else []
    if command == "test" and pytest_args[:1] == [OLDEST]:
        command, corner, pytest_args = "test-oldest", OLDEST_CORNER, pytest_args[1:]
        if sys.version_info[:2] != OLDEST_PYTHON:
            wanted = ".".join(map(str, OLDEST_PYTHON))
            log(
                f"the oldest corner runs on Python {wanted} (its pins have no wheels for newer ones)"
            )
            return 1
    venv = ensure_corner(corner)
    if command == "screenshots":
        code = run_steps(steps_for("docs", venv, []), venv)
        return code or take_screenshots(ROOT / "site", ROOT / "site-screenshots")
    return run_steps(steps_for(command, venv, pytest_args), venv)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
