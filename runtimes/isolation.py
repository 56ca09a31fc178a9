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
        raise ModelError(_crash_message(path, backend, delegate, result.error, result.crashed_at))
    if result.stage == "create" and not result.error.startswith("DelegateError"):
        # (a delegate that cannot load is reported by this process, when it tries)
        kind, _, text = result.error.partition(": ")
        raise interpreter_error(text or kind)
    if result.stage == "invoke":
        return [f"a test run on zeros in a separate process failed ({result.error}); check the inputs you give it"]
    if result.ok:
        remember_passed(path, data, *setting)
    return []


_STEPS = {"create": "creating the interpreter and allocating its tensors", "invoke": "running it once on zeros",
          "teardown": "freeing the interpreter"}


def _crash_message(path: str, backend: Backend, delegate: Delegate, error: str, step: str) -> str:
    """A crash of a file that passed the reader and the graph checks: the interpreter's, on this machine.

    The checks refuse every layout edgekit knows to crash an interpreter, so what is left is most
    likely this build of the interpreter on this CPU (qemu, an old ARM core, a build bug), not the
    file; which build, on which machine, and with which signal is what a bug report needs.
    """
    import platform
    import struct

    during = f" while {_STEPS[step]}" if step in _STEPS else ""
    other = {"ai_edge_litert": "tflite_runtime", "tflite_runtime": "ai_edge_litert"}.get(backend.name)
    tries = [f"another version of {backend.name.replace('_', '-')}"]
    if other:
        tries.insert(0, f"the other interpreter (EDGEKIT_BACKEND={other})")
    if delegate is Delegate.XNNPACK:
        tries.append("--delegate cpu (without XNNPACK)")
    return (f"the TFLite interpreter crashed on model {path!r} on this machine ({backend} on "
            f"{platform.machine()}, {struct.calcsize('P') * 8}-bit Python, delegate {delegate.value}){during}: "
            f"{error}. The file passed edgekit's structural checks, so this is most likely a fault of this "
            "interpreter build on this machine rather than of the file (it was tried in a separate process, "
            f"this one is unharmed). Try {', or '.join(tries)}; report it with this message if it persists. "
            "A file from someone you do not trust stays refused: do not load it without isolation.")
