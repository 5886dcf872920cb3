"""The ``manor`` command: one entry point, two modules per subcommand.

A command's parser (``manor.cli.parsers.<name>``: its description and flags) is imported
only when the command is named, and builds without the engine; the command's module
(``manor.cli.<name>_cmd``), which does the work, only when it runs. So ``manor --help``,
``manor <command> --help`` and a mistyped flag load next to nothing, and each command
loads only what it uses.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import select
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

import attrs

from ..errors import ManorError, leaves, one_line
from ..run import interrupts, startup
from .exit_statuses import NO_CALL_SUCCEEDED

__all__ = ["COMMANDS", "Command", "build_parser", "command", "main"]


@attrs.frozen
class Command:
    """A subcommand: its name, the module that runs it (``manor.cli.<module>``), and its
    line in ``manor --help`` (``None``: not listed).

    Its parser is ``manor.cli.parsers.<module without _cmd>``, whose ``register`` gives
    the command's parser its description and flags, and sets ``handler``: the name of
    the function of ``module`` that runs the command (or, for a command with nothing to
    run, as ``manor experiment`` without an experiment, a function of the parsed
    arguments that needs no module)."""

    name: str
    module: str
    help: str | None

    @property
    def parser(self) -> str:
        return f"parsers.{self.module.removesuffix('_cmd')}"


#: The subcommands, in the order ``manor --help`` lists them.
COMMANDS = (
    Command("run", "run_cmd", "run a scene headless and print what every tick cost"),
    Command("play", "play_cmd", "watch a scene tick live in a dashboard"),
    Command("fleet", "fleet_cmd", "run many worlds side by side, every call through one shared gate"),
    # The command each process of 'manor fleet --processes' runs (fleet.processes.PART_COMMAND).
    Command("fleet-part", "fleet_part_cmd", None),
    Command("replay", "replay_cmd", "replay a save file: verify it reproduces, or ask what other settings would have done"),
    Command("story", "story_cmd", "write a save file's story: Markdown, plain text or JSON Lines"),
    Command("trace", "trace_cmd", "export a save file as a Chrome trace (open it in Perfetto or chrome://tracing)"),
    Command("bench", "bench_cmd", "headless tick benchmarks: scheduling, overhead, fastforward, scale, replay, play, fleet, redis-gate"),
    Command("config", "config_cmd", "show every setting and where it came from"),
    Command("gate", "gate_cmd", "show or resize a gate shared across processes through Redis"),
    Command("serve-agent", "serve_agent_cmd", "run a local remote agent (Agno-style, OpenAI- and Anthropic-compatible HTTP) on loopback"),
    Command("experiment", "experiment_cmd", "run one of Manor's experiments"),
)  # fmt: skip


#: What ``manor --help`` says of exit statuses.
EXIT_STATUSES = f"""exit status:
  0    done
  1    an error, said in one line (a bad file or setting, a server that cannot be reached)
  2    a command line argparse refused
  {NO_CALL_SUCCEEDED}    run, replay or fleet made calls and not one succeeded (a bad model, a wrong key,
       a server down): one line on stderr says how they failed and what failed first
  130  stopped by Ctrl-C (SIGINT); 143: by SIGTERM"""


class _Parser(argparse.ArgumentParser):
    """argparse, with a user's mistake reported in one line instead of a usage dump.

    An unknown command names the commands ``--help`` lists (not the hidden one a
    fleet's processes run) and the nearest to what was typed."""

    #: The commands ``--help`` lists (set on the top-level parser).
    commands: tuple[str, ...] = ()

    def error(self, message: str) -> NoReturn:
        if self.commands and (typed := re.match(r"argument COMMAND: invalid choice: '(.*)' \(choose from ", message)):
            nearest = difflib.get_close_matches(typed[1], self.commands, n=1)
            guess = f" (did you mean {nearest[0]}?)" if nearest else ""
            message = f"unknown command {one_line(repr(typed[1]))}{guess}; the commands: {', '.join(self.commands)}"
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option_string: str | None = None) -> None:
        from ..version import engine_version

        print(f"manor {engine_version()}")
        parser.exit()


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The ``manor`` parser, with the flags of the command ``argv`` names (its first
    word that is not an option: ``manor``'s own options take no value); the other
    commands are there by name and help line only, their modules not imported."""
    parser = _Parser(
        prog="manor",
        description="Tick-loop orchestration for LLM-agent worlds: every call of a tick through one fair gate.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, also show its traceback (so does MANOR_DEBUG=1)",
    )
    given = next((word for word in argv if not word.startswith("-")), None)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        listed = {} if command.help is None else {"help": command.help}
        command_parser = commands.add_parser(command.name, **listed)
        if command.name == given:
            importlib.import_module(f".{command.parser}", __name__).register(command_parser)
            command_parser.set_defaults(command_module=command.module)
    parser.commands = tuple(action.dest for action in commands._choices_actions)  # those with help: listed
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit status.

    Whatever goes wrong ends in one line on stderr, never a traceback (unless
    ``--debug`` or ``MANOR_DEBUG=1``): a ``ManorError`` (also inside an exception group)
    as ``manor: error: ...``, exit 1; a signal as ``manor: interrupted ...``, exit 128 +
    its number; anything else as an internal error, exit 1. A stdout closed by its
    reader (``manor ... | head``) ends the command quietly, exit 0, as ruff does.
    """
    with interrupts.sigterm_as_interrupt(), interrupts.lost_interrupts_kept(), interrupts.unawaited_coroutines_held() as forget_unawaited:
        debug = os.environ.get("MANOR_DEBUG", "") not in ("", "0")
        stdout = _file_identity(sys.stdout)
        try:
            # Ctrl-C is a KeyboardInterrupt from here on, reported below however early.
            with startup.handed_over():
                if argv is None:
                    argv = sys.argv[1:]
                parser = build_parser(argv)
                args = parser.parse_args(argv)
                if not hasattr(args, "handler"):
                    parser.print_help()
                    return 2
                debug = debug or args.debug
                status = _handler(args)(args) or 0
                sys.stdout.flush()  # here, so a closed stdout is seen while it can be handled
                return status
        except SystemExit as exc:
            # Rich meets a closed stdout by pointing it at devnull and exiting 1.
            if exc.code == 1 and stdout is not None and _file_identity(sys.stdout) != stdout:
                return 0
            raise
        except BaseException as exc:  # noqa: BLE001 - the one place every failure is reported
            if any(isinstance(cause, KeyboardInterrupt) for leaf in leaves(exc) for cause in _causes(leaf)):
                forget_unawaited()
            return _report(exc, debug)


def _handler(args: argparse.Namespace) -> Callable[[argparse.Namespace], int | None]:
    """The function that runs the parsed command: its module is imported here, once the
    command line has been read."""
    if callable(args.handler):
        return args.handler  # type: ignore[no-any-return]
    return getattr(importlib.import_module(f".{args.command_module}", __name__), args.handler)  # type: ignore[no-any-return]


def command() -> NoReturn:
    """The ``manor`` command (its script and ``python -m manor``): ``main`` on the
    process's arguments, then exit with its status.

    A command a signal stopped ends at once: the interpreter's finalization gives the
    signals back to the system's defaults, and a SIGINT still on its way then killed the
    process (exit -2) after its one line had been said."""
    status = main()
    if status >= 128:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def _report(exc: BaseException, debug: bool) -> int:
    """Say in one line why the command stopped; its exit status."""
    inside = leaves(exc)
    interrupted = next((cause for leaf in inside for cause in _causes(leaf) if isinstance(cause, KeyboardInterrupt)), None)
    errors = [leaf for leaf in inside if isinstance(leaf, ManorError)]
    if interrupted is None and any(isinstance(leaf, BrokenPipeError) for leaf in inside) and _stdout_closed():
        # Whatever else was to be printed has no reader: point stdout at devnull so
        # that the interpreter's last flush at exit does not fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
    if debug:
        traceback.print_exception(exc)
    if interrupted is not None:
        if not isinstance(interrupted, interrupts.Interrupted):
            interrupted = interrupts.Interrupted(interrupts.signal_received())
        _say(interrupted.line())
        return interrupted.exit_status
    if errors:
        more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
        _say(f"manor: error: {one_line(errors[0])}{more}")
        return 1
    first = inside[0]
    hint = "" if debug else " (run with --debug for the traceback)"
    _say(f"manor: internal error: {type(first).__name__}: {one_line(first)}{hint}")
    return 1


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or during: a Ctrl-C while a module is imported
    can come out as the ``RuntimeError`` Python wraps a class's ``__set_name__`` failure in."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return chain


def _stdout_closed() -> bool:
    """True if nobody reads stdout any more (its pipe's reader has gone)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False  # not a file: the broken pipe was another one
    if not hasattr(select, "poll"):
        return True  # no way to ask (Windows): the likeliest pipe is stdout
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poll.poll(0))


def _file_identity(file: object) -> tuple[int, int] | None:
    """What the file descriptor of ``file`` is open on, if it has one."""
    try:
        status = os.fstat(file.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    return status.st_dev, status.st_ino


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass  # stderr is gone too: the exit status is all that is left
