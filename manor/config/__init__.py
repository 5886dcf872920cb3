"""Settings: the schema, its layered sources, and the named backend tables."""

from .backends import BackendTable, Backends
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
    with_backends,
)
from .schema import KEYS, POLICIES, Settings

__all__ = [
    "KEYS",
    "POLICIES",
    "BackendTable",
    "Backends",
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
    "with_backends",
]
