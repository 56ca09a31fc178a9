"""Model: a loaded .tflite file, its typed input/output specs, and running it."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from edgekit.errors import DelegateError, InputError, ModelError
from edgekit.runtimes.backends import Backend, resolve_backend
from edgekit.runtimes.delegates import (
    EDGETPU_INSTALL_HINT,
    Delegate,
    EdgeTPUDevice,
    load_edgetpu_delegate,
)
from edgekit.runtimes.isolation import DEFAULT_ISOLATE_TIMEOUT, isolate_default, try_in_child
from edgekit.runtimes.isolation import isolate_timeout as _isolate_timeout
from edgekit.runtimes.metadata import other_metadata_names, read_metadata
from edgekit.runtimes.tflite_file import TensorDef, TFLiteFile
from edgekit.runtimes.validate import validate_model_file

__all__ = ["TensorSpec", "ModelInfo", "Model", "load_model", "inspect_model", "default_threads",
           "isolate_default", "DEFAULT_ISOLATE_TIMEOUT"]



_NON_NUMPY_TYPES = frozenset({"string", "resource", "variant", "int4", "bfloat16"})


@dataclass(frozen=True)
class TensorSpec:
    """What one input or output tensor holds. ``scale == 0`` means not quantized."""

    name: str
    index: int
    shape: tuple[int, ...]
    dtype: np.dtype
    scale: float = 0.0
    zero_point: int = 0

    @property
    def quantized(self) -> bool:
        return self.scale != 0.0 and np.issubdtype(self.dtype, np.integer)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Real values -> this tensor's integer type: round(x / scale) + zero_point, clipped."""
        if not self.quantized:
            return np.asarray(x, dtype=self.dtype)
        info = np.iinfo(self.dtype)
        q = np.round(np.asarray(x, dtype=np.float32) / np.float32(self.scale)) + self.zero_point
        return np.clip(q, info.min, info.max).astype(self.dtype)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """This tensor's integers -> real values: scale * (q - zero_point), widened first."""
        if not self.quantized:
            return np.asarray(q)
        return (np.float32(self.scale) * (q.astype(np.int32) - np.int32(self.zero_point))).astype(np.float32)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "index": self.index, "shape": list(self.shape),
                "dtype": np.dtype(self.dtype).name, "scale": float(self.scale),
                "zero_point": int(self.zero_point)}

    @classmethod
    def from_details(cls, d: Mapping[str, Any]) -> TensorSpec:
        scale, zero_point = d.get("quantization", (0.0, 0))
        return cls(name=str(d["name"]), index=int(d["index"]), shape=tuple(int(s) for s in d["shape"]),
                   dtype=np.dtype(d["dtype"]), scale=float(scale), zero_point=int(zero_point))

    @classmethod
    def from_tensordef(cls, t: TensorDef, index: int) -> TensorSpec:
        # numpy has no int4 or bfloat16, and string/resource/variant are not arrays of numbers.
        dtype = np.dtype(object) if t.type in _NON_NUMPY_TYPES else np.dtype(t.type)
        return cls(name=t.name, index=index, shape=t.shape, dtype=dtype,
                   scale=float(t.scale[0]) if len(t.scale) == 1 else 0.0,
                   zero_point=int(t.zero_point[0]) if len(t.zero_point) == 1 else 0)

    def __str__(self) -> str:
        q = f" q(scale={self.scale:.6g}, zero_point={self.zero_point})" if self.quantized else ""
        return f"{self.name} {np.dtype(self.dtype).name}{list(self.shape)}{q}"


@dataclass(frozen=True)
class ModelInfo:
    """What a .tflite file holds, read from the file alone (no interpreter)."""

    path: str
    size_bytes: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    ops: dict[str, int]
    edgetpu_compiled: bool
    custom_ops: tuple[str, ...]
    subgraphs: int
    metadata: dict[str, Any] | None
    other_metadata: tuple[str, ...] = ()
    signatures: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["inputs"] = [s.to_dict() for s in self.inputs]
        d["outputs"] = [s.to_dict() for s in self.outputs]
        d["custom_ops"] = list(self.custom_ops)
        d["other_metadata"] = list(self.other_metadata)
        d["signatures"] = list(self.signatures)
        return d


def _info_from_parsed(path: str, data: bytes, parsed: TFLiteFile) -> ModelInfo:
    main = parsed.subgraphs[0]
    return ModelInfo(
        path=path, size_bytes=parsed.size_bytes,
        inputs=tuple(TensorSpec.from_tensordef(main.tensors[i], i) for i in main.inputs),
        outputs=tuple(TensorSpec.from_tensordef(main.tensors[i], i) for i in main.outputs),
        ops=parsed.op_counts(), edgetpu_compiled=parsed.edgetpu_compiled,
        custom_ops=tuple(parsed.custom_ops()), subgraphs=len(parsed.subgraphs),
        metadata=read_metadata(data, parsed), other_metadata=tuple(other_metadata_names(parsed)),
        signatures=parsed.signature_keys,
    )


def inspect_model(path: str | os.PathLike[str]) -> ModelInfo:
    """Describe a .tflite file without creating an interpreter (safe on any file).

    Raises:
        ModelError: the file is missing, not a TFLite model, truncated or inconsistent.
    """
    data, parsed = validate_model_file(path)
    return _info_from_parsed(os.fspath(path), data, parsed)


def default_threads() -> int:
    """Threads used when none are given: every core, at most 4 (more rarely helps a small model)."""
    return max(1, min(os.cpu_count() or 1, 4))


@dataclass
class _Runtime:
    backend: Backend
    delegate: Delegate
    device: EdgeTPUDevice | None
    num_threads: int
    delegate_nodes: int
    init_ms: float
    notes: list[str] = field(default_factory=list)


class Model:
    """A .tflite model loaded into an interpreter. Create it with :func:`load_model`.

    Use it as a context manager, or call :meth:`close` (safe to call twice).
    """

    def __init__(self, path: str, interpreter: Any, info: ModelInfo, runtime: _Runtime) -> None:
        self.path = path
        self.info = info
        self._interp: Any = interpreter
        self._runtime = runtime
        self.inputs: tuple[TensorSpec, ...] = tuple(
            TensorSpec.from_details(d) for d in interpreter.get_input_details())
        self.outputs: tuple[TensorSpec, ...] = tuple(
            TensorSpec.from_details(d) for d in interpreter.get_output_details())
        self._by_name = {s.name: i for i, s in enumerate(self.inputs)}
        self._in_idx = [s.index for s in self.inputs]
        self._out_idx = [s.index for s in self.outputs]
        self._set = interpreter.set_tensor
        self._get = interpreter.get_tensor
        self._invoke = interpreter.invoke

    # --- what it is -----------------------------------------------------------------------
    @property
    def backend(self) -> Backend:
        return self._runtime.backend

    @property
    def delegate(self) -> Delegate:
        """The delegate in use after resolving AUTO."""
        return self._runtime.delegate

    @property
    def edgetpu_device(self) -> EdgeTPUDevice | None:
        return self._runtime.device

    @property
    def num_threads(self) -> int:
        return self._runtime.num_threads

    @property
    def delegate_nodes(self) -> int:
        """How many DELEGATE nodes the graph has after delegation (partitions a delegate took)."""
        return self._runtime.delegate_nodes

    @property
    def init_ms(self) -> float:
        return self._runtime.init_ms

    @property
    def metadata(self) -> dict[str, Any] | None:
        return self.info.metadata

    @property
    def notes(self) -> list[str]:
        """Things worth telling the user about how the model was loaded."""
        return list(self._runtime.notes)

    @property
    def interpreter(self) -> Any:
        """The underlying interpreter, for what edgekit does not wrap."""
        self._check_open()
        return self._interp

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend.name, "backend_version": self.backend.version,
                "delegate": self.delegate.value,
                "edgetpu_device": str(self.edgetpu_device) if self.edgetpu_device else None,
                "num_threads": self.num_threads, "delegate_nodes": self.delegate_nodes,
                "init_ms": round(self.init_ms, 3)}

    # --- running --------------------------------------------------------------------------
    def run(self, inputs: np.ndarray | Sequence[np.ndarray] | Mapping[str, np.ndarray],
            *, dequantize: bool = True) -> list[np.ndarray]:
        """Run one inference.

        Args:
            inputs: one array (single-input models), a sequence in input order, or a dict by
                input name. Float arrays are quantized with the input's own scale and zero
                point; arrays already of the input's dtype are passed untouched. A missing
                leading batch dimension of 1 is added.
            dequantize: return float outputs (True) or the raw tensors (False).

        Returns:
            One array per output, in output order (copies; safe to keep).

        Raises:
            InputError: wrong number of inputs, shape or dtype.
        """
        self._check_open()
        arrays = self._arrange(inputs)
        for spec, arr in zip(self.inputs, arrays):
            self._set(spec.index, self.prepare_input(spec, arr))
        self.invoke()
        if dequantize:
            return [s.dequantize(self._get(s.index)) if s.quantized else self._get(s.index)
                    for s in self.outputs]
        return [self._get(i) for i in self._out_idx]

    def prepare_input(self, spec: TensorSpec, arr: np.ndarray) -> np.ndarray:
        """Check one input array against its spec and convert it to the tensor's dtype."""
        a = np.asarray(arr)
        if a.shape != spec.shape:
            if a.shape == spec.shape[1:] and spec.shape[:1] == (1,):
                a = a[np.newaxis]
            else:
                raise InputError(
                    f"input {spec.name!r} expects shape {spec.shape} ({np.dtype(spec.dtype).name}), "
                    f"got {a.shape} ({a.dtype.name}). Resize the image to "
                    f"{'x'.join(map(str, spec.shape[1:3]))} first (edgekit.preprocess does it).")
        if a.dtype == spec.dtype:
            return a
        if np.issubdtype(a.dtype, np.floating):
            if spec.quantized:
                return spec.quantize(a)
            if np.issubdtype(spec.dtype, np.floating):
                return a.astype(spec.dtype)
        elif np.issubdtype(a.dtype, np.integer) and np.issubdtype(spec.dtype, np.integer) \
                and not spec.quantized:
            info = np.iinfo(spec.dtype)
            if a.size == 0 or (a.min() >= info.min and a.max() <= info.max):
                return a.astype(spec.dtype)
        elif a.dtype == np.bool_ and spec.dtype == np.bool_:
            return a
        what = (f"float values (quantized with scale {spec.scale:g}, zero point {spec.zero_point}) or "
                if spec.quantized else "")
        raise InputError(
            f"input {spec.name!r} expects {what}{np.dtype(spec.dtype).name} of shape {spec.shape}, "
            f"got {a.dtype.name} {a.shape}. Convert the array, e.g. "
            f"{'x.astype(np.float32) / 255' if np.issubdtype(spec.dtype, np.floating) else 'pass floats'}.")

    def _arrange(self, inputs: Any) -> list[np.ndarray]:
        n = len(self.inputs)
        if isinstance(inputs, Mapping):
            unknown = set(inputs) - set(self._by_name)
            missing = set(self._by_name) - set(inputs)
            if unknown or missing:
                raise InputError(f"inputs by name must be exactly {sorted(self._by_name)}; "
                                 f"unknown {sorted(unknown)}, missing {sorted(missing)}")
            return [inputs[s.name] for s in self.inputs]
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
            arrays = [inputs]
        else:
            arrays = list(inputs)
        if len(arrays) != n:
            raise InputError(f"the model has {n} input(s) ({', '.join(s.name for s in self.inputs)}), "
                             f"got {len(arrays)} array(s)")
        return arrays

    # --- zero-copy hot path -------------------------------------------------------------
    def input_view(self, i: int = 0) -> np.ndarray:
        """A numpy view of input tensor `i`: write into it, drop it, then :meth:`invoke`.

        The interpreter refuses to run while such a view is alive, so do not keep it
        across :meth:`invoke` (write with ``model.input_view()[...] = x`` or in a
        function that returns before invoking).
        """
        self._check_open()
        return self._interp.tensor(self._in_idx[i])()

    def output_view(self, i: int = 0) -> np.ndarray:
        """A view of output tensor `i` after :meth:`invoke` (raw dtype); drop it before the next invoke."""
        self._check_open()
        return self._interp.tensor(self._out_idx[i])()

    def invoke(self) -> None:
        """Run the model on what is in the input tensors.

        Raises:
            ModelError: the interpreter failed (a kernel refused its inputs, or a view from
                :meth:`input_view` is still alive).
        """
        self._check_open()
        try:
            self._invoke()
        except RuntimeError as exc:
            raise self._invoke_error(exc) from None

    def _invoke_error(self, exc: RuntimeError) -> ModelError:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if "reference to internal data" in text:
            return ModelError(f"model {self.path!r} cannot run while a view from input_view() or output_view() "
                              "is alive: drop it (del it, or write with model.input_view()[...] = x) before invoke()")
        return ModelError(f"{self.backend} failed running model {self.path!r}: {text[:300]}. The inputs do not suit "
                          "the model (check their shapes and values), or the file is damaged.")

    def output(self, i: int = 0, *, dequantize: bool = True) -> np.ndarray:
        """A copy of output `i` after :meth:`invoke`, dequantized by default."""
        self._check_open()
        spec = self.outputs[i]
        raw = self._get(spec.index)
        return spec.dequantize(raw) if dequantize and spec.quantized else raw

    # --- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Release the interpreter and its delegate. Safe to call more than once."""
        self._interp = None
        self._set = self._get = self._invoke = _closed

    @property
    def closed(self) -> bool:
        return self._interp is None

    def _check_open(self) -> None:
        if self._interp is None:
            raise ModelError(f"model {self.path!r} is closed; load it again with load_model()")

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.backend}, {self.delegate.value}, {self.num_threads} threads"
        return f"Model({self.path!r}, {state})"


def _closed(*_: Any, **__: Any) -> Any:
    raise ModelError("the model is closed; load it again with load_model()")


def _count_delegate_nodes(interp: Any) -> int:
    getter = getattr(interp, "_get_ops_details", None)
    if getter is None:
        return 0
    try:
        return sum(1 for op in getter() if op.get("op_name") == "DELEGATE")
    except Exception:  # noqa: BLE001 - a private helper; a count is a nicety, never a failure
        return 0


def load_model(path: str | os.PathLike[str], delegate: Delegate | str = Delegate.AUTO,
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
    info = _info_from_parsed(spath, data, parsed)
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
    runtime = _Runtime(be, resolved, device, threads, nodes, init_ms, notes)
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
