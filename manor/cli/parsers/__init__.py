"""The commands' parsers, one module per command: its description, flags and the name of
the function of its ``manor.cli.<module>`` that runs it.

A parser imports nothing of the engine (trio, Rich, the tick loop, the bench...), so that
``manor <command> --help`` and a mistyped flag answer at once; the command's own module,
which does the work, is imported only when the command runs.
"""

__all__: list[str] = []
