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
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import ManorError, WorldError, one_line

__all__ = ["world_code"]


@contextmanager
def world_code(world: object, method: str, tick: int) -> Iterator[None]:
    """Within: a world's ``method`` runs for ``tick``; its failure is a ``WorldError``.

    Args:
        world: the world, or its class (``from_scene``).
        method: the method called, as the message names it.
        tick: the tick it was called for (0: before the first).

    Raises:
        WorldError: the world raised something other than a ``ManorError``.
    """
    try:
        yield
    except ManorError:
        raise
    except Exception as exc:  # whatever a world's code raises is the world's
        cls = world if isinstance(world, type) else type(world)
        name = getattr(cls, "name", cls.__name__)
        try:
            where = f" ({os.path.basename(inspect.getfile(cls))})"
        except (TypeError, OSError):
            where = ""
        said = one_line(exc)
        raise WorldError(f"world '{name}'{where} failed in {method} at tick {tick}: {type(exc).__name__}{': ' + said if said else ''}") from exc
