"""``manor play``: watch a scene tick live in a Textual dashboard."""

from __future__ import annotations

import argparse
import datetime
import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..output_file import check_not_read
from ..run import interrupts
from ..run.engine import configure
from ..saves import read_save
from .options import files_read, flags_from_args, sources_from_args
from .output import report_saved

if TYPE_CHECKING:
    from textual.app import App

__all__ = ["SAVES", "play", "replay"]

#: Where a run is saved unless --save names a file: ``saves/`` in the current directory.
SAVES = Path("saves")


def play(args: argparse.Namespace) -> int:
    # Settings, content and the save file are checked before the screen is taken over,
    # so a mistake ends in one line on a normal terminal.
    if args.replay is not None:
        return replay(args)
    config, scene = configure(sources_from_args(args))
    from ..play import build_app  # Textual loads only for this command

    save = None if args.no_save else args.save or default_save_path(Path(scene.path).stem)
    if save is not None:  # --force may replace a save, never the scene or config read
        check_not_read(save, files_read(args, scene.path))
    app = build_app(config, scene, paused=args.paused, save=save, force=args.force)
    if not _has_terminal():
        if app.writer is not None:  # created just now, holding no tick: leave nothing behind
            app.writer.close()
            app.writer.path.unlink(missing_ok=True)
        return _no_terminal()
    _run(app)
    if app.stopped_by is not None:
        raise interrupts.Interrupted(app.stopped_by, app.stopped_after())
    if app.writer is not None:
        app.writer.check()
        report_saved(app.writer)
    return app.return_code or 0


def default_save_path(scene: str) -> Path:
    """``saves/<scene>-<local time>.msav``, creating ``saves/`` if needed."""
    SAVES.mkdir(exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return SAVES / f"{scene}-{stamp}.msav"


def replay(args: argparse.Namespace) -> int:
    """``--replay SAVE``: the recording, with the settings it was made with."""
    flags = flags_from_args(args)
    if flags.values or args.save or args.no_save:
        given = [flags.spelling[key] for key in flags.values] + ["--save"] * bool(args.save) + ["--no-save"] * args.no_save
        raise ConfigError(
            f"--replay shows the recording with its own settings; it cannot be combined with {', '.join(given)} "
            "(to ask what other settings would have done, use 'manor replay SAVE --gate-size N' and the like)"
        )
    save = read_save(args.replay)
    save.require_ticks()
    for warning in save.warnings:
        print(f"manor: warning: {warning}", file=sys.stderr)
    if not _has_terminal():
        return _no_terminal()
    from ..play import ReplayApp

    app = ReplayApp(save)
    if args.paused:
        app.driver.paused = True
    _run(app)
    if app.stopped_by is not None:
        raise interrupts.Interrupted(app.stopped_by, app.stopped_after())
    return app.return_code or 0


def _has_terminal() -> bool:
    """Whether keys can be read and a screen drawn: stdin and stdout are terminals."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _no_terminal() -> int:
    # Without a terminal Textual would write escape codes to a file and wait forever for keys.
    print("manor: error: manor play needs a terminal; use manor run for headless runs", file=sys.stderr)
    return 2


def _run(app: App[None]) -> None:
    # Everything loaded so far lives as long as the process: keep it out of the
    # collector's full passes, which otherwise stall frames by 100-300 ms with a big world.
    gc.collect()
    gc.freeze()
    app.run()
