"""The one exception hierarchy of edgekit.

Every error edgekit raises on purpose is an :class:`EdgekitError`. Messages say what
was expected, what arrived and what to do, so the CLI can print them as they are.
"""

from __future__ import annotations

__all__ = [
    "EdgekitError",
    "ModelError",
    "BackendError",
    "DelegateError",
    "InputError",
    "SourceError",
    "ConfigError",
    "SetupError",
    "ConversionError",
    "AccuracyGateError",
]


class EdgekitError(Exception):
    """Root of every error edgekit raises deliberately."""

    exit_code = 2


class ModelError(EdgekitError):
    """The model file is missing, malformed, or cannot run here."""


class BackendError(EdgekitError):
    """No usable TFLite interpreter, or the one asked for is unavailable."""


class DelegateError(EdgekitError):
    """A delegate (Edge TPU, XNNPACK) could not be loaded or applied."""


class InputError(EdgekitError, ValueError):
    """An input (array, image, argument) does not fit what the model expects."""


class SourceError(EdgekitError):
    """A video source (camera, file, stream) could not be opened or read."""


class ConfigError(EdgekitError, ValueError):
    """A configuration file or option is invalid."""


class SetupError(EdgekitError):
    """edgekit's installation or the Python environment it runs in is broken, not the model or
    the input (e.g. the child process that tries a model in isolation cannot start or import edgekit)."""


class ConversionError(EdgekitError):
    """Converting or checking a model on the workstation failed."""


class AccuracyGateError(ConversionError):
    """A converted model lost more accuracy than allowed (--max-drop); the CLI exits with 3."""

    exit_code = 3
