"""Both checkers run in strict mode: an unannotated function is an error only there.

Guards the harness itself: if the strict configuration stopped applying to these files, this
case would fail instead of every other case silently being checked less strictly.
"""


def f(x):  # E: mypy[no-untyped-def] pyright[reportMissingParameterType, reportUnknownParameterType]
    return 0
