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
    "interrupted_in",
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


def interrupted_in(exc: BaseException) -> bool:
    """Whether ``exc`` came of a Ctrl-C: a KeyboardInterrupt in its chain of causes. A native
    module's import that a SIGINT cuts short fails as an ImportError caused by it (pybind11's
    "initialization failed"); such a failure must end as an interrupt, never as a missing package."""
    seen: BaseException | None = exc
    for _ in range(20):
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
