"""``load_model(..., isolate=True)``: try a model in a child process before this one loads it.

The bounds-checked reader and the graph checks refuse every file edgekit knows to crash
the interpreter; isolation covers what they cannot prove: a file that crashes the C++
interpreter in a way nobody has seen yet, or a loop that never ends. The child creates,
allocates and invokes the interpreter once on zeros (see ``_probe``); a crash or a
timeout there becomes a ModelError here, and this process never runs the file.

Policy: off by default (a child costs 0.3-0.5 s, once per file content, interpreter and delegate:
a clean pass is remembered in a per-user cache, see ``edgekit.runtimes.passed``); on for files
you did not produce. The setting travels as an argument
(``load_model(..., isolate=)``, ``DetectorOptions(isolate=)``); ``EDGEKIT_ISOLATE=1`` or ``=0`` is
the user's override, read in one place (:func:`isolate_default`) for loads that leave it open
and by the CLI, whose classify/detect/inspect isolate unless it says 0.
``EDGEKIT_ISOLATE_TIMEOUT`` sets the child's time limit (default 60 s).
"""

from __future__ import annotations

import os
from typing import Callable

from edgekit.errors import ConfigError, InputError, ModelError
from edgekit.runtimes.backends import Backend
from edgekit.runtimes.delegates import Delegate, EdgeTPUDevice

__all__ = ["ISOLATE_ENV_VAR", "ISOLATE_TIMEOUT_ENV_VAR", "DEFAULT_ISOLATE_TIMEOUT", "isolate_default",
           "isolate_timeout", "try_in_child"]

ISOLATE_ENV_VAR = "EDGEKIT_ISOLATE"
ISOLATE_TIMEOUT_ENV_VAR = "EDGEKIT_ISOLATE_TIMEOUT"
DEFAULT_ISOLATE_TIMEOUT = 60.0


_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def isolate_default(default: bool = False) -> bool:
    """What ``isolate=None`` means: the ``EDGEKIT_ISOLATE`` variable when set (1/true/yes/on or
    0/false/no/off), else ``default``. The one place the variable is read: the CLI asks with
    ``default=True`` for the commands that isolate unless the user turned it off, and passes the
    answer down as ``isolate=``.
    """
    text = os.environ.get(ISOLATE_ENV_VAR, "").strip().lower()
    if text in _ON:
        return True
    if text in _OFF:
        return False
    return default


def isolate_timeout(value: float | None) -> float:
    """`value`, else ``EDGEKIT_ISOLATE_TIMEOUT``, else 60: a positive number of seconds.

    Raises:
        ConfigError: the variable is not a number.
        InputError: the value is not positive.
    """
    if value is None:
        text = os.environ.get(ISOLATE_TIMEOUT_ENV_VAR, "").strip()
        try:
            value = float(text) if text else DEFAULT_ISOLATE_TIMEOUT
        except ValueError:
            raise ConfigError(f"{ISOLATE_TIMEOUT_ENV_VAR} must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise InputError(f"the isolation timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def try_in_child(path: str, data: bytes, backend: Backend, delegate: Delegate, device: EdgeTPUDevice | None,
                 threads: int, timeout: float, interpreter_error: Callable[[str], ModelError]) -> list[str]:
    """Run the interpreter on `data` in a child process; raise if it crashed, hung or failed there.

    A file the interpreter refused in the child is not tried here either: a bug that
    reads memory it should not may fail cleanly in one process and crash in another.
    `interpreter_error` words such a refusal as loading in-process would.

    Returns:
        Notes for the Model: a failed run on zeros, which is not a crash, is only noted.

    Raises:
        ModelError: the child crashed, timed out, or could not load the model.
        SetupError: the child could not start or import edgekit (this environment, not the model).
    """
    from edgekit.runtimes.passed import has_passed, remember_passed

    setting = (str(backend), delegate.value + (f":{device.option}" if device and device.option else ""))
    if has_passed(path, data, *setting):  # these bytes passed here before: no child (see edgekit.runtimes.passed)
        return []
    from edgekit.runtimes._probe import probe_model  # not at import: the child runs that file as a script

    result = probe_model(data, backend=backend.name, delegate=delegate.value,
                         device=device.option if device else None, num_threads=threads, timeout=timeout)
    if result.timed_out:
        raise ModelError(f"the TFLite interpreter did not load and run model {path!r} once within {timeout:g} s "
                         "(tried in a separate process, now stopped). The file is corrupt or malicious (e.g. a "
                         "loop that never ends), or far too slow for this device: if you trust it, allow longer "
                         "(isolate_timeout=..., or --timeout on the command line).")
    if result.crashed:
        raise ModelError(f"the TFLite interpreter crashed on model {path!r} ({result.error}; it was tried in a "
                         "separate process, this one is unharmed). The file is corrupt or malicious: do not load "
                         "it without isolation. Re-export it from its source model, or copy it again.")
    if result.stage == "create" and not result.error.startswith("DelegateError"):
        # (a delegate that cannot load is reported by this process, when it tries)
        kind, _, text = result.error.partition(": ")
        raise interpreter_error(text or kind)
    if result.stage == "invoke":
        return [f"a test run on zeros in a separate process failed ({result.error}); check the inputs you give it"]
    if result.ok:
        remember_passed(path, data, *setting)
    return []
