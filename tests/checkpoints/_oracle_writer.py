"""Writes the checkpoints of the oracle's generated cases with the classes as they were, in a
process of their own, for `tests/checkpoints/test_checkpoint_oracle_written.py` (which restores
them into the classes as they are, in its own process).

    python tests/checkpoints/_oracle_writer.py DIRECTORY

DIRECTORY/cases.json holds the cases (`test_checkpoint_oracle.Change`s, as JSON objects). For
the i-th, this process builds the old class from the case's description alone (the oracle's
`classes`) and its tree (`old_tree`: the model, its optimizer state after one step), and writes
`i.msgpack` (flax `to_bytes`), `i-orbax/` (an orbax checkpoint, keyed by field names) and
`i-orbax-1.6/` (orbax, in the positional layout 1.6 wrote: `jdc.v1_6_layout` of the tree is
exactly what 1.6 saved for it). All cases share one process: orbax is slow to start.
"""

import json
import sys
from pathlib import Path

import orbax.checkpoint as ocp
from flax import serialization
from test_checkpoint_oracle import Change, classes, old_tree

import jax_dataclasses as jdc


def main(directory: Path) -> None:
    rows = json.loads((directory / "cases.json").read_text())
    with ocp.StandardCheckpointer() as checkpointer:
        for i, row in enumerate(rows):
            change = Change(**{k: tuple(v) if isinstance(v, list) else v for k, v in row.items()})
            old = old_tree(change, classes(change)[0])
            (directory / f"{i}.msgpack").write_bytes(serialization.to_bytes(old))
            checkpointer.save((directory / f"{i}-orbax").absolute(), old)
            checkpointer.save((directory / f"{i}-orbax-1.6").absolute(), jdc.v1_6_layout(old))
        checkpointer.wait_until_finished()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
