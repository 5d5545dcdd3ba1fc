"""A Python the machine lacks, from a Debian sid root: Python 3.14 on a Debian 12 machine.

Debian 12 has no package of Python 3.14 and PyPI has none, so `python3 dev.py test --newest`
takes Debian sid's: a root made once with debootstrap (as root, outside the checkout, from the
machine's own apt mirror), stamped with the debootstrap command and reused. Commands run there
under chroot, in a private mount namespace (nothing stays mounted), with the checkout, the
machine's CA certificates and DNS bind-mounted; the checkout keeps its path, so the venv made
inside the root lives in the checkout like any other.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tools.venvs import ROOT, STAMP_NAME, Wrap, log, run


def debootstrap_command(version: str) -> list[str]:
    """debootstrap's arguments (without the target and mirror) for a root with Python
    `version` and its venv module; nodejs too: pyright (tests/project/test_typing.py) runs on it, and
    would download one otherwise."""
    packages = f"python{version},python{version}-venv,ca-certificates,nodejs"
    return ["debootstrap", "--variant=minbase", f"--include={packages}", "sid"]


def root_path(version: str) -> Path:
    """JDC_ROOT, else a folder under ~/.cache named after the Python it holds."""
    default = Path.home() / ".cache" / "jax_dataclasses" / f"debian-sid-python{version}"
    return Path(os.environ.get("JDC_ROOT") or default)


def ensure(version: str) -> Path:
    """The root with Python `version`: made once (about 30 s to 3 min), then reused while its
    stamp matches the debootstrap command. Exits, saying why, when it cannot be made."""
    root = root_path(version)
    stamp = root / STAMP_NAME
    command = debootstrap_command(version)
    wanted = " ".join(command)
    if stamp.exists() and stamp.read_text().strip() == wanted:
        return root
    if os.geteuid() != 0:
        sys.exit(
            f"[dev.py] Python {version} not found, and making a Debian root for it "
            "(debootstrap, chroot) needs root: install it, or run as root"
        )
    if shutil.which("debootstrap") is None:
        for step in (["apt-get", "update"], ["apt-get", "install", "-y", "debootstrap"]):
            if run(step) != 0:
                sys.exit("[dev.py] could not install debootstrap")
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    source = mirror()
    log(f"making a Debian sid root with Python {version} in {root} (from {source})")
    if run([*command, str(partial), source]) != 0:
        sys.exit("[dev.py] debootstrap failed")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    stamp.write_text(wanted + "\n")
    return root


def mirror(apt: Path = Path("/etc/apt")) -> str:
    """The machine's own Debian mirror, from its apt sources under `apt` (one-line `deb`
    entries and deb822 `URIs:`; not the security archive), else Debian's own."""
    sources = [apt / "sources.list", *(apt / "sources.list.d").glob("*")]
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


def inside(root: Path) -> Wrap:
    """How a command runs in `root`, from the checkout at the same path."""

    def wrap(cmd: list[str]) -> list[str]:
        return [
            "unshare",
            "--mount",
            "sh",
            "-c",
            _MOUNT_AND_CHROOT,
            "sh",
            str(root),
            str(ROOT),
            *cmd,
        ]

    return wrap
