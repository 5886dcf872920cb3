"""A world's own code failing: a game developer's bug, reported as theirs.

Manor calls a world's ``from_scene``, ``plan`` and ``apply``. An exception out of them
that is not a ``ManorError`` is a bug in the world, not in Manor: ``world_code`` turns it
into a ``WorldError`` that names the world, its file, the method and the tick
(``world 'auction' (auction.py) failed in apply at tick 3: KeyError: 'boom'``), the
original kept as its cause for ``--debug``.
"""

from __future__ import annotations

import inspect
import os
from types import TracebackType

from ..errors import ManorError, WorldError, one_line

__all__ = ["world_code"]


# Named as a function is, like ``contextlib.suppress``: it is used as one.
class world_code:
    """Within: a world's ``method`` runs for ``tick``; its failure is a ``WorldError``.

    A class rather than a ``@contextmanager`` generator: the tick loop enters it twice a
    tick, and a generator's context manager costs twice the Python calls.

    Args:
        world: the world, or its class (``from_scene``).
        method: the method called, as the message names it.
        tick: the tick it was called for (0: before the first).

    Raises:
        WorldError: the world raised something other than a ``ManorError``.
    """

    __slots__ = ("method", "tick", "world")

    def __init__(self, world: object, method: str, tick: int) -> None:
        self.world = world
        self.method = method
        self.tick = tick

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        if kind is None or not issubclass(kind, Exception) or issubclass(kind, ManorError):
            return  # nothing raised, or not the world's to answer for
        # Whatever else a world's code raises is the world's.
        world = self.world
        cls = world if isinstance(world, type) else type(world)
        name = getattr(cls, "name", cls.__name__)
        try:
            where = f" ({os.path.basename(inspect.getfile(cls))})"
        except (TypeError, OSError):
            where = ""
        said = one_line(exc)  # type: ignore[arg-type]
        raise WorldError(
            f"world '{name}'{where} failed in {self.method} at tick {self.tick}: {kind.__name__}{': ' + said if said else ''}"
        ) from exc
