"""Try a model in a throw-away process: ``python -I .../edgekit/runtimes/_probe.py [options] -``.

The TFLite interpreter is C++: a file that gets past the bounds-checked reader but still
trips a bug in it (an out-of-range index inside an op's options, a shape that makes a
kernel write past its buffer) segfaults or aborts the whole process. :func:`probe_model`
creates, allocates and invokes the interpreter once, on zeros, in a child started with
``subprocess`` (not multiprocessing: a user's script without a ``__main__`` guard would be
run again by 'spawn'), so such a file costs a :class:`~edgekit.errors.ModelError` instead
of the caller's process.

The child runs this file by its path in isolated mode (``-I``), with the parent's
``sys.path`` passed explicitly: it imports the very edgekit the parent imported, whatever
the current directory holds (``python -m`` would put the current directory first, and a
clone of edgekit's repository there would shadow the installed package). A child that
cannot start or import edgekit is a :class:`~edgekit.errors.SetupError`, never blamed on
the model.

The child reads the model from stdin ("-"), so it checks exactly the bytes the parent
validated and will load, even if the file changes in between. It prints one JSON line
``{"started": true}`` once edgekit and the interpreter are imported, then the verdict:
``{"ok": true}`` or ``{"ok": false, "stage": "start"|"create"|"invoke", "error": "..."}``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["ProbeResult", "probe_model", "DEFAULT_PROBE_TIMEOUT", "main"]

DEFAULT_PROBE_TIMEOUT = 60.0  # edgekit.runtimes.isolation.DEFAULT_ISOLATE_TIMEOUT is the public one
# The child may use at most this much address space beyond the model's own size (half the
# machine's memory, within these bounds), so a file that makes the interpreter allocate
# without end fails in the child, not by waking the kernel's OOM killer on a small device.
_MIN_HEADROOM, _MAX_HEADROOM = 512 * 1024**2, 6 * 1024**3
_STDERR_TAIL = 400


@dataclass(frozen=True)
class ProbeResult:
    """What the child reported. ``crashed``: killed by a signal, or timed out (``timed_out``)."""

    ok: bool
    stage: str = ""  # "start" (edgekit or Python), "create" (interpreter / allocate_tensors), "invoke"; "" when ok
    error: str = ""
    crashed: bool = False
    timed_out: bool = False
    ms: float = 0.0
    crashed_at: str = ""  # when crashed: the step the child had begun ("create", "invoke", "teardown"), if known


_STARTED = {"started": True}  # the child's first line: edgekit and the interpreter imported


# sha256 of bytes + configuration -> the result (never a timeout, which may be the machine's
# fault); loading the same file again (bench rows, a restarted pipeline) costs no second child.
_MAX_REMEMBERED = 256
_passed: dict[tuple[str, str, str, int], ProbeResult] = {}
_passed_lock = threading.Lock()


def probe_model(data: bytes, *, backend: str, delegate: str = "xnnpack", device: str | None = None,
                num_threads: int = 1, timeout: float = DEFAULT_PROBE_TIMEOUT) -> ProbeResult:
    """Create, allocate and invoke (on zeros) an interpreter for `data` in a child process.

    Args:
        data: the model's bytes (already validated by the reader).
        backend: the resolved backend name ('ai_edge_litert', 'tflite_runtime', 'tensorflow').
        delegate: 'cpu', 'xnnpack' or 'edgetpu' (already resolved from 'auto').
        device: the Edge TPU device option ('usb:0', ...), if any.
        num_threads: interpreter threads, as the caller will use them.
        timeout: seconds before the child is killed and the file reported as hanging.

    Returns:
        A :class:`ProbeResult`; ``crashed`` means the file must not be loaded in-process.
        Never raises for what the model does.

    Raises:
        SetupError: the child could not start, import edgekit or the interpreter: a problem
            of this Python environment, not of the model (not remembered; the next load tries again).
    """
    import time

    key = (hashlib.sha256(data).hexdigest(), backend, f"{delegate}:{device or ''}", num_threads)
    with _passed_lock:
        if key in _passed:
            return _passed[key]
    cmd = [sys.executable, "-I", os.path.abspath(__file__), "--sys-path", json.dumps(_import_path()),
           "--backend", backend, "--delegate", delegate, "--threads", str(num_threads),
           "--memory", str(len(data) + _headroom()), "-"]
    if device:
        cmd[-1:-1] = ["--device", device]
    env = dict(os.environ, PYTHONFAULTHANDLER="", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("EDGEKIT_ISOLATE", None)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return ProbeResult(False, "", f"it did not finish within {timeout:g} s", crashed=True, timed_out=True,
                           ms=(time.perf_counter() - t0) * 1e3)
    except OSError as exc:
        raise _setup_error(f"{type(exc).__name__}: {exc}") from None
    ms = (time.perf_counter() - t0) * 1e3
    result = _read_result(proc, ms)
    if result.stage == "start":
        raise _setup_error(result.error)
    with _passed_lock:  # a crash is remembered too: the same bytes are refused at once next time
        if len(_passed) >= _MAX_REMEMBERED:
            _passed.pop(next(iter(_passed)))
        _passed[key] = result
    return result


def _import_path() -> list[str]:
    """This process's ``sys.path``: where the child finds the same edgekit. Entries relative to the
    current directory ("" after ``python -c``) are left out: it may have changed since edgekit was imported."""
    return [p for p in sys.path if isinstance(p, str) and os.path.isabs(p)]


def _setup_error(reason: str) -> Exception:
    from edgekit.errors import SetupError

    return SetupError(
        f"the child process that tries models in isolation could not start ({reason}). This is a problem "
        f"of the Python environment edgekit runs in, not of the model: check that `{sys.executable} -c "
        "'import edgekit.runtimes'` works from another directory, and reinstall edgekit if not (`pip install "
        "--force-reinstall .` in your clone, or the wheel you installed it from).")


def _headroom() -> int:
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not on this OS
        return _MAX_HEADROOM
    return max(_MIN_HEADROOM, min(_MAX_HEADROOM, physical // 2))


def _read_result(proc: subprocess.CompletedProcess[bytes], ms: float) -> ProbeResult:
    stderr = proc.stderr.decode("utf-8", "replace").strip()
    tail = " ".join(ln for ln in stderr.splitlines()[-3:] if not ln.startswith("INFO: "))[-_STDERR_TAIL:]
    docs = []
    for line in proc.stdout.decode("utf-8", "replace").strip().splitlines():
        try:
            docs.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    started = _STARTED in docs
    verdict = docs[-1] if docs and isinstance(docs[-1], dict) and "ok" in docs[-1] else None
    steps = [d["at"] for d in docs if isinstance(d, dict) and isinstance(d.get("at"), str)]
    at = steps[-1] if steps else ""
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        error = f"killed by {name}" + (f" ({tail})" if tail else "")
        # Killed before the model was even read into an interpreter (e.g. SIGILL importing numpy).
        return (ProbeResult(False, "", error, crashed=True, ms=ms, crashed_at=at) if started
                else ProbeResult(False, "start", error))
    if verdict is None:
        # No verdict: the child died some other way (os._exit, out of memory in Python...),
        # or never got as far as the model (Python or edgekit could not start there).
        error = f"exited with status {proc.returncode} without a verdict" + (f" ({tail})" if tail else "")
        return (ProbeResult(False, "", error, crashed=True, ms=ms, crashed_at=at) if started
                else ProbeResult(False, "start", error))
    if verdict["ok"]:
        return ProbeResult(True, ms=ms)
    return ProbeResult(False, str(verdict.get("stage", "")), str(verdict.get("error", "")), ms=ms)


# --- the child ------------------------------------------------------------------------------
def _limit_child(memory: int) -> None:
    try:
        import resource
    except ImportError:  # not on this OS: the timeout still guards
        return
    # A crash must not leave a core file of the model's memory behind.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if memory > 0 and (hard == resource.RLIM_INFINITY or memory < hard):
        resource.setrlimit(resource.RLIMIT_AS, (memory, hard))


def _zeros_into(interp: Any) -> None:
    import numpy as np

    for d in interp.get_input_details():
        dtype = np.dtype(d["dtype"])
        if dtype.kind in "OSU":  # string inputs: leave them empty
            continue
        interp.set_tensor(d["index"], np.zeros(tuple(int(s) for s in d["shape"]), dtype=dtype))


def _start_child(args: argparse.Namespace) -> Any:
    """Import edgekit (as the parent found it) and the interpreter; the backend to use."""
    sys.path[:] = args.sys_path + [p for p in sys.path if p not in args.sys_path]
    from edgekit.runtimes.backends import resolve_backend

    return resolve_backend(args.backend)


def _step(name: str) -> None:
    """Tell the parent which step begins: a crash is then reported with the step it happened in."""
    print(json.dumps({"at": name}), flush=True)


def _run_child(data: bytes, be: Any, args: argparse.Namespace) -> dict[str, Any]:
    from edgekit.runtimes.delegates import Delegate, EdgeTPUDevice, load_edgetpu_delegate

    delegates = []
    delegate = Delegate(args.delegate)
    if delegate is Delegate.EDGETPU:
        device = EdgeTPUDevice.parse(args.device) if args.device else None
        delegates.append(load_edgetpu_delegate(be.load_delegate, device))
    _step("create")
    try:
        interp = be.make_interpreter(model_content=data, num_threads=args.threads, delegates=delegates,
                                     disable_default_delegates=delegate in (Delegate.CPU, Delegate.EDGETPU))
        interp.allocate_tensors()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which words it
        return {"ok": False, "stage": "create", "error": f"{type(exc).__name__}: {exc}"}
    _step("invoke")
    try:
        _zeros_into(interp)
        interp.invoke()
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "invoke", "error": f"{type(exc).__name__}: {exc}"}
    finally:
        # Tear down here, before the verdict: a bad model may crash in a destructor too.
        _step("teardown")
        del interp
        gc.collect()
    return {"ok": True}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -I _probe.py",
                                description="Load a .tflite model once, in this process, and report.")
    p.add_argument("model", help="the .tflite file, or - to read it from stdin")
    p.add_argument("--sys-path", type=json.loads, default=[], help="JSON list of import paths to put first")
    p.add_argument("--backend", default=None)
    p.add_argument("--delegate", default="xnnpack", choices=("cpu", "xnnpack", "edgetpu"))
    p.add_argument("--device", default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--memory", type=int, default=0, help="address-space limit in bytes (0: none)")
    args = p.parse_args(argv)
    if args.model == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(args.model, "rb") as f:
            data = f.read()
    try:
        be = _start_child(args)
    except Exception as exc:  # noqa: BLE001 - this environment, not the model: the parent says so
        print(json.dumps({"ok": False, "stage": "start", "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 0
    print(json.dumps(_STARTED), flush=True)
    _limit_child(args.memory)
    try:
        verdict = _run_child(data, be, args)
    except Exception as exc:  # noqa: BLE001 - a delegate that cannot load here
        verdict = {"ok": False, "stage": "create", "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(verdict), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
