"""The mapping of docs/migrating/from-flax-partitioning.md ("Checkpoints flax wrote"), read
from the page itself, so that the tests restore checkpoints flax writes with the code readers
copy: `restore_flax_checkpoint(checkpointer, directory, abstract, rules, *, mesh)`."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
from doc_blocks import blocks

import jax_dataclasses as jdc

PAGE = Path(__file__).resolve().parents[2] / "docs" / "migrating" / "from-flax-partitioning.md"


def _from_the_page() -> Callable[..., Any]:
    source = next(b.source for b in blocks(PAGE) if "def restore_flax_checkpoint" in b.source)
    namespace: dict[str, Any] = {"jax": jax, "jdc": jdc}
    exec(compile(source, str(PAGE), "exec"), namespace)
    restore: Callable[..., Any] = namespace["restore_flax_checkpoint"]
    return restore


restore_flax_checkpoint = _from_the_page()
