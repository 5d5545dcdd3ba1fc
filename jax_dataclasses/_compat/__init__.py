"""Compatibility: what earlier versions and layouts of the package keep working through.

Modules: `enforced_annotations` (1.x's deprecated `EnforcedAnnotationsMixin`), `moved` (the
modules' paths before issue 39, for pickles and code that name them). Entry function:
`moved.install`, called by the package's `__init__`.

Dependency rule: a feature; it uses `_core`, `_field_declarations` and the utilities.
"""
