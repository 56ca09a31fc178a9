"""load_model: pick the interpreter and delegate, check the file, optionally try it in a
child process, and hand back a :class:`~edgekit.runtimes.model.Model`."""

from __future__ import annotations

import os
import time
from typing import Any

from edgekit.errors import DelegateError, InputError, ModelError
from edgekit.runtimes.backends import Backend, resolve_backend
from edgekit.runtimes.delegates import (
    EDGETPU_INSTALL_HINT,
    Delegate,
    DelegateSpec,
    EdgeTPUDevice,
    load_edgetpu_delegate,
)
from edgekit.runtimes.isolation import isolate_default, try_in_child
from edgekit.runtimes.isolation import isolate_timeout as _isolate_timeout
from edgekit.runtimes.model import Model, Runtime
from edgekit.runtimes.native_log import interpreter_info_dropped
from edgekit.runtimes.tensors import ModelInfo, model_info
from edgekit.runtimes.validate import validate_model_file

__all__ = ["load_model", "default_threads"]


def default_threads() -> int:
    """Threads used when none are given: every core, at most 4 (more rarely helps a small model)."""
    return max(1, min(os.cpu_count() or 1, 4))


def _count_delegate_nodes(interp: Any) -> int:
    """Nodes of the execution plan a delegate took. By the wrapper's node names where it has them
    (the interpreters' private ``_get_ops_details`` builds every node's tensor details for that:
    1-3 ms of start-up), else by ``_get_ops_details``."""
    inner: Any = getattr(interp, "_interpreter", None)
    try:
        if hasattr(inner, "NumNodes") and hasattr(inner, "NodeName"):
            names: list[str] = [inner.NodeName(i) for i in range(int(inner.NumNodes()))]
            return names.count("DELEGATE")
        getter = getattr(interp, "_get_ops_details", None)
        return 0 if getter is None else sum(1 for op in getter() if op.get("op_name") == "DELEGATE")
    except Exception:  # noqa: BLE001 - private helpers; a count is a nicety, never a failure
        return 0


def load_model(path: str | os.PathLike[str], delegate: Delegate | DelegateSpec | str = Delegate.AUTO,
               num_threads: int | None = None, *, backend: str | None = None,
               edgetpu_device: str | EdgeTPUDevice | None = None, isolate: bool | None = None,
               isolate_timeout: float | None = None) -> Model:
    """Load a .tflite model with the best interpreter and delegate available here.

    Every file is first checked by edgekit's bounds-checked reader, which refuses what
    would make the interpreter read outside the file or crash on known patterns. With
    ``isolate=True`` the interpreter is also created, allocated and invoked once on zeros
    in a child process first (about 0.3-0.5 s, once per file content and settings per
    process): a file that crashes or hangs the interpreter there raises ModelError here,
    and this process never runs it. Use it for files you did not produce (uploads,
    hot-updated model folders); trusted files load faster without it.

    Args:
        path: the .tflite file.
        delegate: a :class:`Delegate` or its name ('auto', 'cpu', 'xnnpack', 'edgetpu',
            'edgetpu:usb:0', ...).
        num_threads: CPU threads; default :func:`default_threads`.
        backend: 'ai_edge_litert', 'tflite_runtime' or 'tensorflow'; default the
            ``EDGEKIT_BACKEND`` variable, else the first that works.
        edgetpu_device: 'usb', 'usb:N', 'pci', 'pci:N' or ':N'.
        isolate: try the file in a child process first (see above); default the
            ``EDGEKIT_ISOLATE`` variable, else False.
        isolate_timeout: seconds the child may take to load and run the model once;
            default ``EDGEKIT_ISOLATE_TIMEOUT``, else 60.

    Raises:
        ModelError: the file is missing, malformed, uses ops this interpreter lacks, or
            (isolate=True) crashed or hung the interpreter in the child process.
        DelegateError: the Edge TPU was asked for and cannot be used.
        BackendError: no interpreter can be used.
        InputError, ConfigError: a bad argument, or a bad ``EDGEKIT_ISOLATE_TIMEOUT``.
    """
    delegate, device = Delegate.parse(delegate)
    if isinstance(edgetpu_device, str):
        device = EdgeTPUDevice.parse(edgetpu_device)
    elif edgetpu_device is not None:
        device = edgetpu_device
    if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
        raise InputError(f"num_threads must be a positive integer, got {num_threads!r}")
    threads = num_threads or default_threads()
    spath = os.fspath(path)
    data, parsed = validate_model_file(spath)
    info = model_info(spath, data, parsed)
    be = resolve_backend(backend)

    notes: list[str] = []
    delegates: list[Any] = []
    resolved = delegate
    if delegate is Delegate.AUTO:
        resolved = Delegate.EDGETPU if parsed.edgetpu_compiled else Delegate.XNNPACK
    if parsed.edgetpu_compiled and resolved is not Delegate.EDGETPU:
        raise ModelError(f"model {spath!r} is compiled for the Edge TPU and cannot run with delegate "
                         f"{resolved.value!r}: use --delegate edgetpu (or auto), or the model before "
                         "edgetpu_compiler. " + EDGETPU_INSTALL_HINT)
    if isolate_default() if isolate is None else isolate:
        # Before this process opens the Edge TPU: the child must be able to open it too.
        notes.extend(try_in_child(spath, data, be, resolved, device, threads, _isolate_timeout(isolate_timeout),
                                  lambda text: _interpreter_error(spath, RuntimeError(text), info, be)))
    if resolved is Delegate.EDGETPU:
        try:
            delegates.append(load_edgetpu_delegate(be.load_delegate, device))
        except DelegateError as exc:
            if parsed.edgetpu_compiled:
                raise ModelError(
                    f"model {spath!r} is compiled for the Edge TPU (it holds edgetpu-custom-op) and "
                    f"needs the Edge TPU delegate, which could not be loaded: {exc}") from None
            raise
        if not parsed.edgetpu_compiled:
            notes.append("the model is not compiled for the Edge TPU: every op runs on the CPU. "
                         "Compile it with `edgekit convert --mode edgetpu` (edgetpu_compiler).")

    t0 = time.perf_counter()
    try:
        with interpreter_info_dropped():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
            interp = be.make_interpreter(model_content=data, num_threads=threads, delegates=delegates,
                                         disable_default_delegates=resolved is Delegate.CPU
                                         or resolved is Delegate.EDGETPU)
            interp.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        raise _interpreter_error(spath, exc, info, be) from None
    except MemoryError:  # std::bad_alloc from a tensor or arena the file makes huge
        raise ModelError(f"{be} ran out of memory loading model {spath!r}: its tensors need more memory than "
                         "this machine has. Use a smaller model, or check the file is not corrupt.") from None
    init_ms = (time.perf_counter() - t0) * 1e3
    nodes = _count_delegate_nodes(interp)
    if resolved is Delegate.XNNPACK and nodes == 0 and be.op_resolver_type is not None:
        notes.append(f"XNNPACK took no ops of this model on {be}: it runs on the reference kernels "
                     "(int16x8 models and some ops are not supported by XNNPACK).")
    runtime = Runtime(be, resolved, device, threads, nodes, init_ms, notes)
    try:
        return Model(spath, interp, info, runtime)
    except (ValueError, RuntimeError) as exc:  # tensor details the interpreter cannot describe
        raise _interpreter_error(spath, exc, info, be) from None


def _interpreter_error(path: str, exc: Exception, info: ModelInfo, be: Backend) -> ModelError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    low = str(exc).lower()
    if "edgetpu-custom-op" in low:
        return ModelError(f"model {path!r} is compiled for the Edge TPU and needs its delegate. "
                          + EDGETPU_INSTALL_HINT)
    if "unresolved custom op" in low or "custom op" in low:
        ops = ", ".join(info.custom_ops) or "unknown"
        return ModelError(f"model {path!r} uses custom op(s) {ops} that {be} does not provide ({text}). "
                          "Re-export the model with builtin ops only, or load it where those ops are registered.")
    if "version" in low and ("op builtin_code" in low or "didn't find op" in low or "opcode" in low):
        upgrade = ("upgrade it (pip install -U ai-edge-litert)" if be.name == "ai_edge_litert" else
                   "install ai-edge-litert (pip install ai-edge-litert), or where only this interpreter "
                   f"exists (32-bit Raspberry Pi OS), convert with TensorFlow {be.version}")
        text = text.rstrip(". ")
        end = " " if text.endswith(("?", "!")) else ". "
        return ModelError(f"{be} cannot run model {path!r}: {text}{end}The model uses op versions "
                          f"newer than this interpreter: {upgrade}.")
    return ModelError(f"{be} could not load model {path!r}: {text}")
