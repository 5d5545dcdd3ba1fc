"""Virtual environments made once and reused until their inputs change, and commands run in them.

What every command of `dev.py` and `tools.downstream` needs: a venv is created with a given
Python, filled by `pip install`, and stamped with the hash of the files the install depends on,
so a repeated run skips the install. A command runs as it is or wrapped (`Wrap`: inside the
Debian root, `tools.debian_root`).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout: commands run from it, and stamps hash files relative to it."""
STAMP_NAME = ".jdc-stamp"


def log(message: str) -> None:
    print(f"[dev.py] {message}", flush=True)


Wrap = Callable[[list[str]], list[str]]
"""How a command runs: as it is, or inside the Debian root (`tools.debian_root.inside`)."""


def as_is(cmd: list[str]) -> list[str]:
    return cmd


def run(cmd: list[str], env: dict[str, str] | None = None, wrap: Wrap = as_is) -> int:
    """Run `cmd` in the checkout, shown first as a shell would take it; its exit code."""
    print("$ " + shlex.join(cmd), flush=True)
    return subprocess.call(wrap(cmd), cwd=ROOT, env=env)


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
