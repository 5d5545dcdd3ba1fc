"""Warnings that point at the user's line, not at ours.

Our warnings are raised from generated code (`__init__`, finish) or through several of our
frames (decoration, `__init_subclass__`), so a fixed `stacklevel` would often name a line of
this package, where the user cannot act on it and `warnings` filters by module cannot match.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings

from jax_dataclasses._codegen import FILENAME_PREFIX

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _ours(filename: str) -> bool:
    return filename.startswith((_PACKAGE_DIR, FILENAME_PREFIX))


def warn_at_user(message: str, category: type[Warning]) -> None:
    """`warnings.warn(message, category)` attributed to the first frame outside this package."""
    frame = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]  # Our caller.
    level = 1
    while frame.f_back is not None and _ours(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)


_warned: set[tuple[type, str, type[Warning]]] = set()
_warned_lock = threading.Lock()


def warn_once(cls: type, field: str, message: str, category: type[Warning]) -> None:
    """`warn_at_user`, once per class, field and category in this process: a warning about a
    class's declaration would otherwise repeat at every construction."""
    key = (cls, field, category)
    if key in _warned:
        return
    warn_at_user(message, category)
    with _warned_lock:
        _warned.add(key)
