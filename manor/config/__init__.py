"""Settings: the schema and its layered sources."""

from .layering import (
    Config,
    Source,
    environment_source,
    file_source,
    flags_source,
    layer_defaults_source,
    resolve,
    scene_source,
    standard_sources,
)
from .schema import KEYS, POLICIES, Settings

__all__ = [
    "KEYS",
    "POLICIES",
    "Config",
    "Settings",
    "Source",
    "environment_source",
    "file_source",
    "flags_source",
    "layer_defaults_source",
    "resolve",
    "scene_source",
    "standard_sources",
]
