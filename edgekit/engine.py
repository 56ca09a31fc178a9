"""One loaded model's input writing, inference and decoding: what the loop drives.

:class:`ModelEngine` is an :class:`edgekit.loop.Engine`; :func:`edgekit.tasks.make_engine` builds
one from a model and task options (the decoder from :mod:`edgekit.contract`), and Detector,
Classifier and the inspection cell's hot swap run on it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

import cv2
import numpy as np

from edgekit.contract import ColorOrder, Layout, Transform, image_input
from edgekit.contract.modelreading import ModelReading
from edgekit.contract.preprocessing import PreprocessingSpec
from edgekit.errors import ModelError
from edgekit.preprocess import fit_into, write_channels_first, write_channels_last
from edgekit.runtimes.model import Model

if TYPE_CHECKING:  # a union of every task's result (edgekit.results.frame): not needed to run one task
    from edgekit.results import Result

__all__ = ["ModelEngine"]


class ModelEngine:
    """One loaded model's input writing, inference and decoding: what the loop drives
    (an :class:`edgekit.loop.Engine`). Made by :func:`edgekit.tasks.make_engine`."""

    def __init__(self, model: Model, pre: PreprocessingSpec | None,
                 decode: Callable[[list[np.ndarray], Transform], Result], labels: list[str] | None = None,
                 note: str | None = None, reading: ModelReading | None = None) -> None:
        if len(model.inputs) != 1:
            raise ModelError(f"an image model has one input; {model.path!r} has {len(model.inputs)}: "
                             f"{', '.join(map(str, model.inputs))}")
        self.spec = spec = model.inputs[0]
        self.reading = reading  # what edgekit made of the model at load (edgekit.contract.modelreading)
        try:
            self.input = reading.input if reading is not None and reading.input is not None else \
                image_input(spec, model.metadata)
        except ModelError as exc:
            raise ModelError(f"model {model.path!r} takes {spec}; edgekit feeds images as (1, H, W, 3) or "
                             f"(1, 3, H, W) ({exc})") from None
        if pre is None:
            raise ModelError(f"model {model.path!r}: no preprocessing was decided for its input {spec}")
        self.size = self.input.size  # (width, height)
        self.channels_first = self.input.layout is Layout.NCHW
        self._scratch = threading.local()  # the resized frame, one per writing thread
        self.pre = pre  # decided once, at load (edgekit.contract.preprocessing), with where each setting came from
        self.resize = pre.resize
        self.labels = labels
        self.note = note  # for the user, e.g. labels that do not line up with the outputs
        self.threshold: float | None = None  # set by make_engine: the score threshold in effect
        self.norm = pre.normalization
        self._fit: dict[str, Any] = {"interpolation": pre.interpolation, "boxes": pre.box_mapping, "pad_value": pre.pad_value}
        # uint8 inputs take the pixels as they are, so they are resized straight into the tensor.
        self.direct = not self.channels_first and np.dtype(spec.dtype) == np.uint8 and (
            self.norm is None or (self.norm.mean is None and self.norm.color is ColorOrder.RGB))
        self.lock = threading.Lock()
        self._model = model
        self._decode = decode
        self._outputs = range(len(model.outputs))

    @property
    def model(self) -> Model:
        return self._model

    def staging(self) -> np.ndarray:
        return np.zeros(self.spec.shape, dtype=self.spec.dtype)

    def write(self, image: np.ndarray, dest: np.ndarray | None = None, *, bgr: bool = False) -> Transform:
        """Preprocess ``image`` into ``dest``, or straight into the input tensor when None.

        ``bgr``: the image is in OpenCV's BGR order; it is resized first and the channels of
        the small result swapped, cheaper than converting the whole frame. uint8 inputs that take
        the pixels as they are get the frame resized straight into the tensor; others get it
        resized into a small per-thread buffer, then normalized (and quantized) straight into the
        tensor, channel by channel for a channels-first input (1, 3, H, W).

        Raises:
            InputError: the image is not uint8 (H, W, 3).
        """
        target = self._model.input_view(0) if dest is None else dest
        if self.direct:
            transform = fit_into(image, target, self.resize, **self._fit)
            if bgr:
                view = target[0] if target.ndim == 4 else target
                cv2.cvtColor(view, cv2.COLOR_BGR2RGB, dst=view)
            return transform
        resized = getattr(self._scratch, "image", None)
        if resized is None:
            resized = self._scratch.image = np.empty((self.size[1], self.size[0], 3), np.uint8)
        transform = fit_into(image, resized, self.resize, **self._fit)
        write = write_channels_first if self.channels_first else write_channels_last
        write(resized, target, self.spec, self.norm, bgr=bgr)
        return transform

    def load(self, staged: np.ndarray) -> None:
        self._model.input_view(0)[...] = staged

    def infer(self) -> list[np.ndarray]:
        self._model.invoke()
        return [self._model.output(i) for i in self._outputs]

    def decode(self, outputs: list[np.ndarray], transform: Transform) -> Result:
        return self._decode(outputs, transform)

    def run(self, image: np.ndarray) -> Result:
        """One frame, start to end, in the calling thread."""
        with self.lock:
            transform = self.write(image)
            outputs = self.infer()
        return self.decode(outputs, transform)

    def warm_up(self, n: int) -> list[float]:
        """Run ``n`` inferences; their times (ms)."""
        times = []
        with self.lock:
            for _ in range(n):
                t0 = time.perf_counter()
                self._model.invoke()
                times.append((time.perf_counter() - t0) * 1e3)
        return times
