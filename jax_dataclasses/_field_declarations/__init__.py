"""The declarations: what a field declares, read once from its annotation.

Modules: `forms` (what users write: `Static`, `Sharded`, `Frozen`, `Evolution`, the marks),
`reader` (the one reader of annotations, into each field's `Declaration`), `scope` (the scope
that defines a class, where names resolve as Python resolves them), `evolution` (a class's
declared `Evolution`, checked against its fields),
`messages` (the reader's long error messages). Entry function: `reader.declare`.

Dependency rule: nothing of the package outside this folder (docs/design.md, Folders). The folder
is not named _declarations, the module it replaces, so that the old path stays a plain alias
(`_compat.moved`).
"""
