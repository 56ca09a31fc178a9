"""Find a TFLite interpreter: ai_edge_litert, then tflite_runtime, then tf.lite.

The order is the order of preference on a device: ai-edge-litert is current and works
with numpy 2; tflite-runtime is what 32-bit Raspberry Pi OS has (and needs numpy<2);
``tf.lite.Interpreter`` is deprecated and only found on a workstation. Choose another by
argument or with ``EDGEKIT_BACKEND=ai_edge_litert|tflite_runtime|tensorflow``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from edgekit.errors import BackendError, interrupted_in

__all__ = ["Backend", "BACKEND_ORDER", "ENV_VAR", "available_backends", "resolve_backend"]

ENV_VAR = "EDGEKIT_BACKEND"
BACKEND_ORDER = ("ai_edge_litert", "tflite_runtime", "tensorflow")
_ALIASES = {
    "litert": "ai_edge_litert", "ai-edge-litert": "ai_edge_litert", "ai_edge_litert": "ai_edge_litert",
    "tflite_runtime": "tflite_runtime", "tflite-runtime": "tflite_runtime", "tflite": "tflite_runtime",
    "tensorflow": "tensorflow", "tf": "tensorflow", "tf.lite": "tensorflow",
}
_INSTALL = {
    "ai_edge_litert": "pip install ai-edge-litert",
    "tflite_runtime": "pip install tflite-runtime 'numpy<2'",
    "tensorflow": "pip install tensorflow",
}


@dataclass(frozen=True)
class Backend:
    """One importable TFLite interpreter package."""

    name: str
    version: str
    interpreter_cls: Any
    load_delegate: Callable[..., Any]
    op_resolver_type: Any  # the OpResolverType enum, or None where the package has none

    def __str__(self) -> str:
        return f"{self.name} {self.version}"

    def make_interpreter(self, *, model_content: bytes, num_threads: int | None,
                         delegates: list[Any], disable_default_delegates: bool) -> Any:
        kwargs: dict[str, Any] = {"model_content": model_content, "num_threads": num_threads}
        if delegates:
            kwargs["experimental_delegates"] = delegates
        if self.op_resolver_type is not None:
            resolver = self.op_resolver_type
            kwargs["experimental_op_resolver_type"] = (
                resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES if disable_default_delegates else resolver.AUTO)
        with warnings.catch_warnings():
            # tf.lite.Interpreter warns that it is deprecated; we told the user at resolve time.
            warnings.simplefilter("ignore")
            return self.interpreter_cls(**kwargs)


def _load(name: str) -> Backend:
    """Import one backend, or raise BackendError saying why it cannot be used."""
    try:
        if name == "ai_edge_litert":
            mod = importlib.import_module("ai_edge_litert.interpreter")
            pkg = importlib.import_module("ai_edge_litert")
            version = getattr(pkg, "__version__", None) or _dist_version("ai-edge-litert")
        elif name == "tflite_runtime":
            mod = importlib.import_module("tflite_runtime.interpreter")
            pkg = importlib.import_module("tflite_runtime")
            version = getattr(pkg, "__version__", None) or _dist_version("tflite-runtime")
            if int(np.__version__.split(".")[0]) >= 2:
                # It imports fine and then fails inside Interpreter(): say so now.
                raise BackendError(
                    f"tflite_runtime {version} was built against numpy 1.x and fails with numpy "
                    f"{np.__version__}. Run: pip install 'numpy<2', or install ai-edge-litert instead."
                )
        elif name == "tensorflow":
            tf = importlib.import_module("tensorflow")
            mod = tf.lite
            mod.load_delegate = tf.lite.experimental.load_delegate
            version = tf.__version__
        else:
            raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_ORDER)}")
    except ImportError as exc:
        if interrupted_in(exc):  # Ctrl-C during the import, not a missing package: never try the next backend
            raise KeyboardInterrupt from exc
        raise BackendError(f"{name} is not installed ({exc}). Run: {_INSTALL[name]}") from exc
    resolver = getattr(mod, "OpResolverType", None)
    if resolver is None and name == "tensorflow":
        resolver = getattr(getattr(mod, "experimental", None), "OpResolverType", None)
    return Backend(name, str(version), mod.Interpreter, mod.load_delegate, resolver)


def _dist_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def normalize_backend_name(name: str) -> str:
    key = name.strip().lower()
    if key not in _ALIASES:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_ORDER)}")
    return _ALIASES[key]


_cache: dict[str, Backend] = {}


def resolve_backend(name: str | None = None) -> Backend:
    """Return the interpreter backend to use.

    Args:
        name: a backend name; else the ``EDGEKIT_BACKEND`` environment variable; else
            the first of ai_edge_litert, tflite_runtime, tensorflow that works here.

    Raises:
        BackendError: the named backend is unusable, or none is.
    """
    requested = name or os.environ.get(ENV_VAR) or None
    if requested:
        key = normalize_backend_name(requested)
        if key not in _cache:
            _cache[key] = _load(key)
        return _cache[key]
    reasons = []
    # TensorFlow is tried only when asked for or when nothing else works; importing it
    # on a device is what edgekit exists to avoid.
    for key in BACKEND_ORDER:
        if key in _cache:
            return _cache[key]
        try:
            _cache[key] = _load(key)
            if key == "tensorflow":
                warnings.warn("using the deprecated tf.lite.Interpreter; install ai-edge-litert for a "
                              "maintained interpreter", stacklevel=2)
            return _cache[key]
        except BackendError as exc:
            reasons.append(str(exc))
    raise BackendError("no TFLite interpreter found. Run: pip install ai-edge-litert "
                       "(or, on 32-bit Raspberry Pi OS: pip install tflite-runtime 'numpy<2'). Tried: "
                       + " | ".join(reasons))


def available_backends() -> list[tuple[str, str | None, str | None]]:
    """(name, version or None, problem or None) for each known backend, without importing TensorFlow."""
    out: list[tuple[str, str | None, str | None]] = []
    for key in BACKEND_ORDER:
        if key == "tensorflow" and "tensorflow" not in _cache:
            spec = importlib.util.find_spec("tensorflow")
            out.append((key, _dist_version("tensorflow") if spec else None, None if spec else "not installed"))
            continue
        try:
            b = _cache.get(key) or _load(key)
            out.append((key, b.version, None))
        except BackendError as exc:
            out.append((key, None, str(exc)))
    return out
