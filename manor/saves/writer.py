"""The save writer: an instrument that writes a run to a save file as it goes."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, final

import msgspec
import trio

from ..errors import SaveError
from ..records import CallRecord, StoryEntry, TickRecord
from ..tick.instruments import Instrument
from ..version import engine_version
from ..wording import counted
from ..worlds import world_positions
from .format import (
    EndFrame,
    FleetSeat,
    Header,
    SettingChange,
    SettingRow,
    TickFrame,
    WorldAtStart,
)
from .framing import SIGNATURE, write_frame

if TYPE_CHECKING:
    from ..config import Config
    from ..content import Scene
    from ..tick.instruments import RunningLoop
    from ..tick.loop import TickLoop

__all__ = ["Recordable", "SaveWriter", "header_for"]

_ENCODER = msgspec.msgpack.Encoder()


class Recordable(Protocol):
    """A run before its first tick, as a save's header takes it down: its settings, scene,
    seed, id and loop (``manor.run.engine.Engine`` is one). A save format knows no engine."""

    @property
    def config(self) -> Config: ...

    @property
    def scene(self) -> Scene: ...

    @property
    def seed(self) -> int: ...

    @property
    def run_id(self) -> str: ...

    @property
    def loop(self) -> TickLoop: ...


@final
class SaveWriter(Instrument):
    """Writes the header when created, then one frame per tick as the tick is applied
    (flushed at once, so a killed run keeps every whole tick), then an end frame when
    the run finishes.

    A write that fails does not stop the run: the writer stops writing and remembers
    why; ``check()`` raises it afterwards. Create one with ``SaveWriter.create``.
    """

    def __init__(self, path: Path, file: BinaryIO) -> None:
        self.path = path
        self._file: BinaryIO | None = file
        self._attempts: list[CallRecord] = []
        self._changes: list[SettingChange] = []
        self._error: SaveError | None = None
        #: Whole ticks written so far.
        self.ticks = 0
        #: Bytes written so far, signature and header included.
        self.size = 0

    @classmethod
    def create(cls, path: str | Path, engine: Recordable, *, force: bool = False, fleet: FleetSeat | None = None) -> SaveWriter:
        """Create the save file for ``engine``'s run, write its header, and add the
        writer to the engine's loop (create it before the run starts).

        Args:
            path: the file to create.
            force: overwrite the file if it exists.
            fleet: the run is this world of a fleet.

        Raises:
            SaveError: the file exists (and ``force`` is not set) or cannot be created.
        """
        path = Path(path)
        try:
            file = open(path, "wb" if force else "xb")  # noqa: SIM115 - the writer owns it until the run ends
        except FileExistsError:
            raise SaveError(f"{path}: already exists; pass --force to overwrite it") from None
        except OSError as exc:
            raise SaveError(f"{path}: cannot create the save file: {exc.strerror or exc}") from None
        writer = cls(path, file)
        writer._write(SIGNATURE, frame=False)
        writer._write(_ENCODER.encode(header_for(engine, fleet)))
        writer.check()
        engine.loop.add_instrument(writer)
        return writer

    # -- instrument hooks -------------------------------------------------------------

    def setting_changed(self, key: str, value: object, during_tick: bool) -> None:
        self._changes.append(SettingChange(key, value, trio.current_time() if during_tick else None))

    def call_finished(self, record: CallRecord) -> None:
        self._attempts.append(record)

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        kept = {id(call) for call in record.calls}
        superseded = tuple(call for call in self._attempts if id(call) not in kept)
        self._attempts.clear()
        frame = TickFrame(record=record, superseded=superseded, changes=tuple(self._changes))
        self._changes.clear()
        if self._write(_ENCODER.encode(frame)):
            self.ticks += 1

    def run_finished(self, loop: RunningLoop) -> None:
        self._write(_ENCODER.encode(EndFrame(ticks=self.ticks)))
        self.close()

    # -- the file ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the file (idempotent). Ticks written so far stay readable."""
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                self._fail(exc)

    def check(self) -> None:
        """Raise the error a write ran into, if any.

        Raises:
            SaveError: a write failed; the file holds the ticks written before it.
        """
        if self._error is not None:
            raise self._error

    def _write(self, data: bytes, *, frame: bool = True) -> bool:
        if self._file is None:
            return False
        try:
            if frame:
                self.size += write_frame(self._file, data)
            else:
                self._file.write(data)
                self.size += len(data)
        except OSError as exc:
            self._fail(exc)
            self.close()
            return False
        return True

    def _fail(self, exc: OSError) -> None:
        if self._error is None:
            self._error = SaveError(f"{self.path}: writing failed after {counted(self.ticks, 'tick')}: {exc.strerror or exc}")


def header_for(engine: Recordable, fleet: FleetSeat | None = None) -> Header:
    """The header of a save of ``engine``'s run (world ``fleet`` of a fleet), taken
    before its first tick."""
    world = engine.loop.world
    return Header(
        engine_version=engine_version(),
        created_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        scene=engine.scene,
        settings=tuple(SettingRow(key, value, origin) for key, value, origin in engine.config.rows()),
        seed=engine.seed,
        run_id=engine.run_id,
        world=WorldAtStart(tick=world.tick, positions=world_positions(world), hash=world.hash),
        world_name=world.name,
        world_version=world.version,
        world_callers=tuple(world.callers),
        fleet=fleet,
    )
