"""``manor play``: the live Textual dashboard (trio hosted in guest mode)."""

from __future__ import annotations

from .app import PlayApp, build_app
from .replay_app import ReplayApp

__all__ = ["PlayApp", "ReplayApp", "build_app"]
