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

Every other command first ensures the corner's virtual environment: it creates the venv with
`python -m venv` if needed, and runs `pip install -c <pins> -e '.[<extra>]'` whenever the
stamp file `<venv>/.jdc-stamp` is missing or does not match the current hash of pyproject.toml
and the pins (CORNERS below: the venv, its variable, pins and extra of each).

Steps run in order and stop at the first failure; the exit code is that step's exit code.
CI runs `python3 dev.py test`, `python3 dev.py bench --check`, `python3 dev.py downstream`,
`python3 dev.py test --newest`, then `python3 dev.py test --oldest` (.ci/run; the workflow in
.github/workflows/ci.yml also runs the tour and the other Pythons). The oldest corner runs on
Python 3.11: NumPy 1.24 has no wheels for newer Pythons. `downstream` keeps its venvs in
`.downstream/`, stamped the same way (pyproject.toml and `downstream/<project>.txt`).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent
STAMP_NAME = ".jdc-stamp"
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


def log(message: str) -> None:
    print(f"[dev.py] {message}", flush=True)


def venv_dir(corner: Corner) -> Path:
    override = os.environ.get(corner.venv_variable) if corner.venv_variable else None
    return Path(override).resolve() if override else ROOT / corner.name


def venv_exe(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def venv_env(venv: Path) -> dict[str, str]:
    """The environment for child processes: as if the venv were activated."""
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
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


Wrap = Callable[[list[str]], list[str]]
"""How a command runs: as it is, or inside the Debian root (`in_root`)."""


def as_is(cmd: list[str]) -> list[str]:
    return cmd


def run(cmd: list[str], env: dict[str, str] | None = None, wrap: Wrap = as_is) -> int:
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.call(wrap(cmd), cwd=ROOT, env=env)


def ensure_venv(
    venv: Path,
    inputs: Sequence[str],
    installs: Sequence[Sequence[str]],
    salt: str = "",
    python: str = sys.executable,
    wrap: Wrap = as_is,
) -> Path:
    """Create `venv` with `python` if missing, then run `pip install ARGS` (from ROOT) for each
    ARGS of `installs`, unless the stamp `<venv>/.jdc-stamp` matches `stamp_digest(inputs,
    salt)`: a repeated run skips the install until one of the inputs changes.

    Shared by the corners (`.venv`, `.venv-oldest`, `.venv-X.Y`) and `python3 dev.py
    downstream`'s venvs.
    """
    if not (venv / "pyvenv.cfg").exists():  # Its python may be a link into the Debian root.
        log(f"creating virtual environment {venv}")
        if run([python, "-m", "venv", str(venv)], wrap=wrap) != 0:
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
    python_in_venv = str(venv_exe(venv, "python"))
    for args in installs:
        code = run([python_in_venv, "-m", "pip", "install", *quiet_ci, *args], venv_env(venv), wrap)
        if code != 0:
            log("FAILED: pip install")
            sys.exit(code)
    stamp.write_text(digest + "\n")
    return venv


class Interpreter(NamedTuple):
    """A Python to create a corner's venv with, and how its commands run."""

    python: str
    wrap: Wrap = as_is


def find_interpreter(version: str | None) -> Interpreter:
    """Python `version` (`3.12`, `3.14t`): this one if it is that version, else `pythonX.Y` on
    PATH (not a pyenv shim, which refuses versions not selected), else pyenv's, else (3.14)
    the Debian root's."""
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
        return Interpreter(f"/usr/bin/{executable}", in_root)
    sys.exit(f"[dev.py] Python {version} not found: install it (pyenv install {version})")


def running_version() -> str:
    free_threaded = not getattr(sys, "_is_gil_enabled", lambda: True)()
    return f"{sys.version_info[0]}.{sys.version_info[1]}" + ("t" if free_threaded else "")


def ensure_corner(corner: Corner) -> tuple[Path, Wrap]:
    """The corner's venv, with the project installed (editable) under the corner's pins, and
    how to run commands in it."""
    interpreter = find_interpreter(corner.python)
    if interpreter.wrap is in_root:
        ensure_debian_root()
    install = ["-c", corner.constraints, "-e", f".[{corner.extra}]" if corner.extra else "."]
    venv = ensure_venv(venv_dir(corner), corner.stamp_inputs(), [install], "", *interpreter)
    return venv, interpreter.wrap


# Python 3.14 on a Debian 12 machine (no package, none on PyPI): Debian sid's, in a root made
# with debootstrap; the suite runs there under chroot, in a private mount namespace (nothing
# stays mounted), with the checkout, the machine's CA certificates and DNS bind-mounted.
# nodejs: pyright (tests/test_typing.py) runs on it, and would download one otherwise.
DEBIAN_PACKAGES = f"python{NEWEST_PYTHON},python{NEWEST_PYTHON}-venv,ca-certificates,nodejs"
DEBOOTSTRAP = ["debootstrap", "--variant=minbase", f"--include={DEBIAN_PACKAGES}", "sid"]


def debian_root() -> Path:
    default = Path.home() / ".cache" / "jax_dataclasses" / f"debian-sid-python{NEWEST_PYTHON}"
    return Path(os.environ.get("JDC_ROOT") or default)


def ensure_debian_root() -> Path:
    """Make the Debian root once (about 30 s to 3 min), then reuse it (stamped with the
    debootstrap command)."""
    root = debian_root()
    stamp = root / STAMP_NAME
    wanted = " ".join(DEBOOTSTRAP)
    if stamp.exists() and stamp.read_text().strip() == wanted:
        return root
    if os.geteuid() != 0:
        sys.exit(
            f"[dev.py] Python {NEWEST_PYTHON} not found, and making a Debian root for it "
            "(debootstrap, chroot) needs root: install it, or run as root"
        )
    if shutil.which("debootstrap") is None:
        for step in (["apt-get", "update"], ["apt-get", "install", "-y", "debootstrap"]):
            if run(step) != 0:
                sys.exit("[dev.py] could not install debootstrap")
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    mirror = debian_mirror()
    log(f"making a Debian sid root with Python {NEWEST_PYTHON} in {root} (from {mirror})")
    if run([*DEBOOTSTRAP, str(partial), mirror]) != 0:
        sys.exit("[dev.py] debootstrap failed")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    stamp.write_text(wanted + "\n")
    return root


def debian_mirror() -> str:
    """The machine's own Debian mirror, from its apt sources (not the security archive)."""
    sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    for source in sources:
        if not source.is_file() or source.suffix not in ("", ".list", ".sources"):
            continue
        for line in source.read_text().splitlines():
            words = line.split()
            urls = (
                words[1:] if words[:1] == ["URIs:"] else words[1:2] if words[:1] == ["deb"] else []
            )
            for url in urls:
                if "/debian" in url and "security" not in url:
                    return url
    return "http://deb.debian.org/debian"


_MOUNT_AND_CHROOT = """
set -e
root=$1 checkout=$2; shift 2
mkdir -p "$root$checkout"
mount --bind "$checkout" "$root$checkout"
for file in /etc/ssl/certs/ca-certificates.crt /etc/resolv.conf; do
  if [ -f "$file" ]; then mount --bind "$file" "$root$file"; fi
done
mount -t proc proc "$root/proc"
mount -t tmpfs tmpfs "$root/dev/shm"
exec chroot "$root" /bin/sh -c 'cd "$0" && exec "$@"' "$checkout" "$@"
"""


def in_root(cmd: list[str]) -> list[str]:
    """`cmd`, run in the Debian root with the checkout at the same path."""
    return [
        "unshare",
        "--mount",
        "sh",
        "-c",
        _MOUNT_AND_CHROOT,
        "sh",
        str(debian_root()),
        str(ROOT),
        *cmd,
    ]


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
        import dev_downstream  # Next to dev.py; only this command needs it.

        return dev_downstream.main(args.projects, relock=args.lock)

    command, corner = args.command, NEWEST
    if command == "tour":
        corner = TOUR
    if command == "bench" and (args.check or args.record):
        command, pytest_args = "bench-check", ["--record"] if args.record else []
    if command == "test":
        command, corner, pytest_args = test_corner(pytest_args)
    venv, wrap = ensure_corner(corner)
    if command == "screenshots":
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
    if option == [PYTHON] and len(args) >= 2:
        if args[1].rstrip("t") not in PYTHONS:
            sys.exit(f"[dev.py] --python takes one of {', '.join(PYTHONS)} (t: free-threaded)")
        return "test-corner", python_corner(args[1]), args[2:]
    return "test", NEWEST, args


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
