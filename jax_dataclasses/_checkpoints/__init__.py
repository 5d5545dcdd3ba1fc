"""Checkpoints: a tree's saved form and its way back, across versions and class changes.

Modules: `serialization` (flax's state dicts and 1.6's layout), `evolution` (a class's
`Evolution` and the saved layout orbax restores into), `export` (`jax.export` registration).
Entry functions: `serialization.install_flax_hooks`, `evolution.saved_layout`,
`export.register_export`.

Dependency rule: a feature; it uses `_core`, `_field_declarations` and the utilities.
"""
