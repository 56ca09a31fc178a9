"""Model: a .tflite file loaded into an interpreter, and running it.

:func:`~edgekit.runtimes.loader.load_model` creates one; the tensors' specs come from
:mod:`edgekit.runtimes.tensors`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from edgekit.errors import InputError, ModelError
from edgekit.runtimes.backends import Backend
from edgekit.runtimes.delegates import Delegate, EdgeTPUDevice
from edgekit.runtimes.tensors import ModelInfo, TensorSpec

if TYPE_CHECKING:
    from edgekit.contract.enums import Task
    from edgekit.contract.modelreading import ModelReading

__all__ = ["Model", "Runtime"]


@dataclass
class Runtime:
    """How :func:`~edgekit.runtimes.loader.load_model` set the interpreter up."""

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

    def __init__(self, path: str, interpreter: Any, info: ModelInfo, runtime: Runtime) -> None:
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
        self._readings: dict[Task | None, ModelReading | ModelError] = {}

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
    def support(self) -> Any:
        """The file's own TFLite Support metadata (:class:`~edgekit.runtimes.support_metadata.SupportMetadata`), or None."""
        return self.info.support

    def reading(self, task: Task | None = None) -> ModelReading:
        """What edgekit makes of this model (:mod:`edgekit.contract.modelreading`): task, format,
        layout, preprocessing, labels and decoder options, each with where it came from. Read once
        (per ``task`` asked for, which picks among readings that serve it) and kept.

        Raises:
            ModelError: the model reads as no format (or none serving ``task``), or two ways.
        """
        got = self._readings.get(task)
        if got is None:
            plain = self._readings.get(None)
            if task is not None and not isinstance(plain, (ModelError, type(None))) and plain.task is task:
                got = plain  # the plain reading serves the task: asking for it picks the same
            else:
                from edgekit.contract.modelreading import read_model

                try:
                    got = read_model(self, task=task)
                except ModelError as exc:
                    got = exc
            self._readings[task] = got
        if isinstance(got, ModelError):
            raise got
        return got

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
        view: np.ndarray = self._interp.tensor(self._in_idx[i])()  # (the interpreter has no type hints)
        return view

    def output_view(self, i: int = 0) -> np.ndarray:
        """A view of output tensor `i` after :meth:`invoke` (raw dtype); drop it before the next invoke."""
        self._check_open()
        view: np.ndarray = self._interp.tensor(self._out_idx[i])()
        return view

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
