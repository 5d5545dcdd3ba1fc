"""Compatibility: what earlier versions and layouts of the package keep working through.

Modules: `enforced_annotations` (1.x's deprecated `EnforcedAnnotationsMixin`).

Dependency rule: a feature; it uses `_core`, `_field_declarations` and the utilities.
"""
