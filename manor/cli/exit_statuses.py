"""The exit statuses of ``manor``, said once: ``manor --help`` lists them."""

from __future__ import annotations

__all__ = ["ERROR", "NO_CALL_SUCCEEDED", "OK", "USAGE"]

#: Done.
OK = 0
#: An error, said in one line.
ERROR = 1
#: A command line argparse refused.
USAGE = 2
#: run, replay or fleet made calls and not one succeeded.
NO_CALL_SUCCEEDED = 3
