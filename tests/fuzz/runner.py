"""Feed one candidate file to edgekit the way a user would, in a forked child, and classify what happened.

Everything runs in the fork, under an address-space limit: the reader and ``edgekit info``
(pure Python: anything but an EdgekitError there is an edgekit bug, and so is running out
of memory on a small file), then ``load_model`` in-process as an unprotected caller would,
one invoke on zeros, and close. The child tells the parent which stage it is in through a
pipe, so a segfault, an abort or a hang is pinned to a stage.

Linux/macOS only (os.fork). The parent never creates an interpreter, so it has no
threads to lose in the fork.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

__all__ = ["Kind", "Outcome", "run_case", "save_finding", "BAD_KINDS", "CHILD_MEMORY"]

# A file of a few MB that makes edgekit or the interpreter want more is a finding, not a
# reason to wake the OOM killer (which took a whole fuzz run down once).
CHILD_MEMORY = 4 * 1024**3


class Kind(str, enum.Enum):
    REJECTED = "rejected"            # the reader or `info` refused it with an EdgekitError (the goal)
    LOAD_ERROR = "load_error"        # load_model raised an EdgekitError (fine: a clear message)
    INVOKE_ERROR = "invoke_error"    # loaded; the interpreter raised on invoke (a Python exception, fine)
    LOADED = "loaded"                # loaded and ran on zeros
    CRASH = "crash"                  # the child died by a signal: would have killed the caller
    HANG = "hang"                    # the child did not finish in time
    PY_ERROR = "python_error"        # a non-edgekit exception (MemoryError too): an edgekit bug


BAD_KINDS = frozenset({Kind.CRASH, Kind.HANG, Kind.PY_ERROR})


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    stage: str = ""
    detail: str = ""

    @property
    def bad(self) -> bool:
        return self.kind in BAD_KINDS


def _short_tb(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames))
    return f"{type(exc).__name__}: {str(exc)[:200]} at {where}"


def _stage(say: Callable[[dict[str, str]], None], name: str, work: Callable[[], object],
           refused: Kind) -> object | None:
    """Run one stage; report `refused` for an EdgekitError, PY_ERROR for anything else.
    Returns the work's result, or None once a verdict was sent."""
    from edgekit.errors import EdgekitError

    say({"stage": name})
    try:
        return work()
    except EdgekitError as exc:
        say({"kind": refused.value, "detail": str(exc)[:300]})
    except Exception as exc:  # noqa: BLE001 - the point: any other exception is a finding
        say({"kind": Kind.PY_ERROR.value, "detail": _short_tb(exc)})
    return None


def _child(path: str, delegate: str, w: int) -> None:
    """Runs in the fork: read, info, load, invoke on zeros, close; reports on fd `w`."""
    import gc

    import numpy as np

    from edgekit.commands.info import info_dict, render
    from edgekit.errors import EdgekitError
    from edgekit.runtimes.loader import load_model
    from edgekit.runtimes.validate import validate_model_file

    def say(doc: dict[str, str]) -> None:
        os.write(w, (json.dumps(doc) + "\n").encode())

    if _stage(say, "reader", lambda: validate_model_file(path), Kind.REJECTED) is None:
        return
    if _stage(say, "info", lambda: render(info_dict(path)), Kind.REJECTED) is None:
        return
    model = _stage(say, "load", lambda: load_model(path, delegate=delegate, num_threads=1), Kind.LOAD_ERROR)
    if model is None:
        return
    say({"stage": "invoke"})
    kind, detail = Kind.LOADED, ""
    try:
        interp = model.interpreter  # type: ignore[attr-defined]
        for spec in model.inputs:  # type: ignore[attr-defined]
            if np.dtype(spec.dtype).kind not in "OSU":
                interp.set_tensor(spec.index, np.zeros(spec.shape, spec.dtype))
        interp.invoke()
        for i in range(len(model.outputs)):  # type: ignore[attr-defined]
            model.output(i)  # type: ignore[attr-defined]
        del interp
    except (RuntimeError, ValueError, EdgekitError) as exc:
        kind, detail = Kind.INVOKE_ERROR, str(exc)[:300]
    except Exception as exc:  # noqa: BLE001
        kind, detail = Kind.PY_ERROR, _short_tb(exc)
    say({"stage": "close"})
    model.close()  # type: ignore[attr-defined]
    gc.collect()
    say({"kind": kind.value, "detail": detail})


def run_case(data: bytes, *, delegate: str = "xnnpack", timeout: float = 10.0,
             workdir: str | None = None) -> Outcome:
    """Classify what edgekit does with `data` (see :class:`Kind`)."""
    fd, path = tempfile.mkstemp(suffix=".tflite", dir=workdir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return _fork(path, delegate, timeout)
    finally:
        os.unlink(path)


def _fork(path: str, delegate: str, timeout: float) -> Outcome:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            import faulthandler
            import resource

            faulthandler.disable()  # pytest enables it on a copy of stderr: a crash here is expected
            resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, resource.getrlimit(resource.RLIMIT_AS)[1]))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            signal.alarm(int(max(1, timeout)))
            _child(path, delegate, w)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        raw = f.read()
    _, status = os.waitpid(pid, 0)
    lines = [json.loads(ln) for ln in raw.decode().splitlines() if ln.strip()]
    stage = next((d["stage"] for d in reversed(lines) if "stage" in d), "start")
    verdict = next((d for d in reversed(lines) if "kind" in d), None)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGALRM:
            return Outcome(Kind.HANG, stage, f"no verdict within {timeout:g} s")
        return Outcome(Kind.CRASH, stage, signal.Signals(sig).name)
    if verdict is None:
        return Outcome(Kind.CRASH, stage, f"exit status {os.WEXITSTATUS(status)} without a verdict")
    return Outcome(Kind(verdict["kind"]), stage, verdict.get("detail", ""))


def save_finding(folder: Path, data: bytes, outcome: Outcome, seed: str, what: str) -> Path:
    """Write the file and a JSON note on how it was made and what it did; returns the file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(data).hexdigest()[:12]
    path = folder / f"{outcome.kind.value}-{outcome.stage}-{seed}-{digest}.tflite"
    path.write_bytes(data)
    note = {"seed": seed, "mutation": what, "kind": outcome.kind.value, "stage": outcome.stage,
            "detail": outcome.detail, "found": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path.with_suffix(".json").write_text(json.dumps(note, indent=2) + "\n")
    return path
