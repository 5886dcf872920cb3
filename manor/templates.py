"""Templates a user writes — a line the simulator speaks, a remote session's id — checked
when they are read, so that filling one in can neither fail mid-run nor blow up in size."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from .errors import one_line

__all__ = ["template_problem"]

# The standard format spec (``[[fill]align][sign][z][#][0][width][grouping][.precision][type]``),
# with its width and precision captured so they can be bounded.
_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>\d*)[,_]?(?:\.(?P<precision>\d+))?[a-zA-Z%]?", re.DOTALL)


def template_problem(template: str, placeholders: Sequence[str], *, max_width: int = 0) -> str | None:
    """What is wrong with ``template``, or ``None`` if it can be filled in.

    Args:
        placeholders: the names it may use; each is filled in with a word or a name.
        max_width: the widest a field may be padded to (``{someone:>100000000}`` would
            make a 100 MB line); 0: a field takes no format spec or conversion at all.
    """
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return f"not a valid template ({exc}): {one_line(template)!r}; write {{{{ and }}}} for a literal brace"
    known = ", ".join(f"{{{name}}}" for name in placeholders)
    for name, spec, conversion in fields:
        if name not in placeholders:
            return f"unknown placeholder {{{one_line(name)}}} (known: {known})"
        if not max_width:
            if spec or conversion:
                return f"{{{name}}} takes no format spec or conversion (known placeholders: {known})"
            continue
        match = _FORMAT_SPEC.fullmatch(spec or "")
        if match is None or conversion not in (None, "r", "s", "a"):
            return f"{{{name}}} has a format a name or a word cannot take"
        if max(int(match["width"] or 0), int(match["precision"] or 0)) > max_width:
            return f"{{{name}}} is wider than {max_width} characters"
        field = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        try:  # its width is bounded now: the trial is small
            field.format(**{name: name})
        except ValueError as exc:
            return f"{one_line(field)} cannot be filled in: {exc}"
    return None
