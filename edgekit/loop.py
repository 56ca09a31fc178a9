"""The pipelined detection loop: capture | preprocess | inference | post-process and output.

Each stage runs in its own thread and hands over through small bounded channels, so the
interpreter never waits on reading, decoding, drawing or writing (OpenCV, numpy and the
TFLite interpreter release the GIL while they work):

* a file is read frame by frame; preprocessing runs one frame ahead into a staging buffer
  and the inference thread only copies it into the input tensor; reading and preprocessing
  run at background CPU priority, in the gaps the interpreter's threads leave;
* a live source (camera, stream, ``realtime`` file) keeps only its newest frame, and the
  inference thread takes it the moment the interpreter is free and resizes it straight
  into the input tensor, so results are as fresh as the model allows;
* decoding outputs into results, and whatever the caller does with them, runs in the
  caller's thread (the iterator of :class:`Stream`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, NamedTuple, Protocol

import numpy as np

from edgekit.errors import InputError
from edgekit.preprocess import Transform
from edgekit.results import FrameResult, Result, StageTimes
from edgekit.video import Channel, Frame, VideoSource, background_priority

__all__ = ["Engine", "LoopOptions", "LoopSummary", "Stream", "Samples"]


class Engine(Protocol):
    """What the loop drives: one model with its preprocessing and decoder (see edgekit.tasks)."""

    lock: threading.Lock

    def staging(self) -> np.ndarray: ...  # a buffer shaped and typed like the input tensor

    def write(self, image: np.ndarray, dest: np.ndarray | None = None) -> Transform: ...

    def load(self, staged: np.ndarray) -> None: ...

    def infer(self) -> list[np.ndarray]: ...

    def decode(self, outputs: list[np.ndarray], transform: Transform) -> Result: ...


@dataclass(frozen=True)
class LoopOptions:
    """When to stop, and how much may be in flight between stages."""

    max_frames: int | None = None  # stop after this many processed frames
    duration: float | None = None  # stop after this many seconds
    queue_size: int = 2

    def __post_init__(self) -> None:
        if self.max_frames is not None and self.max_frames < 1:
            raise InputError(f"max_frames must be at least 1, got {self.max_frames}")
        if self.duration is not None and self.duration <= 0:
            raise InputError(f"duration must be positive seconds, got {self.duration}")
        if self.queue_size < 1:
            raise InputError(f"queue_size must be at least 1, got {self.queue_size}")


class Samples:
    """The last ``capacity`` values of a figure, for percentiles without growing forever."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._data = np.zeros(capacity, dtype=np.float64)
        self._n = 0

    def add(self, value: float) -> None:
        self._data[self._n % len(self._data)] = value
        self._n += 1

    def percentile(self, q: float) -> float:
        n = min(self._n, len(self._data))
        return float(np.percentile(self._data[:n], q)) if n else float("nan")


@dataclass(frozen=True)
class LoopSummary:
    """The figures of one run. Latency is capture -> result; stage times are medians (ms)."""

    source: str
    captured: int
    processed: int
    dropped: int
    undecodable: int
    reopens: int
    elapsed_s: float
    fps: float
    latency_p50_ms: float
    latency_p99_ms: float
    stages_p50_ms: dict[str, float] = field(default_factory=dict)
    stopped_by: str = "end of source"

    def to_dict(self) -> dict[str, Any]:
        def r(v: float) -> float | None:
            return None if v != v else round(v, 3)  # NaN (no frames) -> null

        return {"source": self.source, "frames": {"captured": self.captured, "processed": self.processed,
                                                  "dropped": self.dropped, "undecodable": self.undecodable},
                "reopens": self.reopens, "elapsed_s": r(self.elapsed_s), "fps": r(self.fps),
                "latency_ms": {"p50": r(self.latency_p50_ms), "p99": r(self.latency_p99_ms)},
                "stages_ms_p50": {k: r(v) for k, v in self.stages_p50_ms.items()}, "stopped_by": self.stopped_by}

    def line(self) -> str:
        stages = " / ".join(f"{k} {v:.1f}" for k, v in self.stages_p50_ms.items())
        return (f"{self.processed} frames processed of {self.captured} captured ({self.dropped} dropped, "
                f"{self.undecodable} undecodable, {self.reopens} reopens) in {self.elapsed_s:.1f} s: "
                f"{self.fps:.1f} fps; latency p50 {self.latency_p50_ms:.1f} ms, p99 {self.latency_p99_ms:.1f} ms; "
                f"stages p50 {stages} ms; stopped by {self.stopped_by}")


class _Staged(NamedTuple):
    frame: Frame
    transform: Transform
    buffer: np.ndarray
    preprocess_ms: float


class _Inferred(NamedTuple):
    frame: Frame
    transform: Transform
    outputs: list[np.ndarray]
    preprocess_ms: float
    inference_ms: float


class Stream:
    """Results of a source, one :class:`FrameResult` per processed frame, in the iterating thread.

    Iterate it once; it is a context manager, and :meth:`close` (safe twice) stops every
    thread. :meth:`stop` may be called from another thread or a signal handler.

    Raises (while iterating):
        SourceError: the source failed for good.
        ModelError: inference failed.
    """

    def __init__(self, engine: Engine, source: VideoSource, options: LoopOptions = LoopOptions()) -> None:
        self._engine = engine
        self._source = source
        self._options = options
        self._live = source.spec.live
        n = options.queue_size
        self._staged: Channel[_Staged] = Channel(n)
        self._free: Channel[np.ndarray] = Channel(n + 2)
        self._done: Channel[_Inferred] = Channel(n)
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None
        self._stopped_by: str | None = None
        self._started = self._closed = False
        self._t0 = self._t_last = 0.0
        self._processed = 0
        self._latency = Samples()
        self._stages = {name: Samples() for name in StageTimes._fields}

    # --- control --------------------------------------------------------------------------
    def __iter__(self) -> Iterator[FrameResult]:
        if self._started:
            raise InputError("a Stream can be iterated once; start a new one with stream(source)")
        self._start()
        try:
            yield from self._results()
            if self._error is not None:
                raise self._error
        finally:
            self.close()

    def _start(self) -> None:
        self._started = True
        self._source.start()
        if not self._live:
            for _ in range(self._options.queue_size + 2):
                self._free.put(self._engine.staging())
            self._spawn("edgekit-preprocess", self._preprocess)
        self._spawn("edgekit-inference", self._infer)
        self._t0 = time.perf_counter()

    def _spawn(self, name: str, target: Any) -> None:
        t = threading.Thread(target=self._guard, args=(target,), name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self, reason: str = "stop request") -> None:
        """Stop soon: frames already inferred are still handed out, then iteration ends."""
        if self._stopped_by is None:
            self._stopped_by = reason
        # A signal handler may interrupt a thread holding a channel's lock: do the closing elsewhere.
        threading.Thread(target=self._halt, name="edgekit-stop", daemon=True).start()

    def _halt(self) -> None:
        self._source.close()
        self._staged.close(discard=True)
        self._free.close(discard=True)

    def close(self) -> None:
        """Stop every stage and release the source. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._stopped_by is None:
            self._stopped_by = "close"
        self._halt()
        self._done.close(discard=True)
        for t in self._threads:
            t.join(timeout=10.0)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the stages -----------------------------------------------------------------------
    def _guard(self, target: Any) -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the iterating thread
            if self._error is None:
                self._error = exc
            self._halt()
        finally:
            if target == self._infer:
                self._done.close()
            else:
                self._staged.close()

    def _preprocess(self) -> None:
        background_priority()  # only a file is preprocessed ahead; it must not slow the model
        while (frame := self._source.get()) is not None:
            buf = self._free.get()
            if buf is None:
                return
            t0 = time.perf_counter()
            transform = self._engine.write(frame.image, buf)
            if not self._staged.put(_Staged(frame, transform, buf, (time.perf_counter() - t0) * 1e3)):
                return

    def _infer(self) -> None:
        engine, live = self._engine, self._live
        while True:
            if live:
                frame = self._source.get()
                if frame is None:
                    return
                with engine.lock:
                    t0 = time.perf_counter()
                    transform = engine.write(frame.image)
                    t1 = time.perf_counter()
                    outputs = engine.infer()
                pre_ms = (t1 - t0) * 1e3
            else:
                staged = self._staged.get()
                if staged is None:
                    return
                frame, transform, pre_ms = staged.frame, staged.transform, staged.preprocess_ms
                with engine.lock:
                    t1 = time.perf_counter()
                    engine.load(staged.buffer)
                    outputs = engine.infer()
                self._free.put(staged.buffer)
            ms = (time.perf_counter() - t1) * 1e3
            if not self._done.put(_Inferred(frame, transform, outputs, pre_ms, ms)):
                return

    def _results(self) -> Iterator[FrameResult]:
        opts = self._options
        deadline = None if opts.duration is None else self._t0 + opts.duration
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.perf_counter())
            item = self._done.get(timeout)
            if item is None:
                if deadline is not None and time.perf_counter() >= deadline:
                    self._stopped_by = self._stopped_by or "duration"
                if self._done.done or self._stopped_by:
                    self._stopped_by = self._stopped_by or ("error" if self._error else "end of source")
                    return
                continue
            yield self._result(item)
            if opts.max_frames is not None and self._processed >= opts.max_frames:
                self._stopped_by = self._stopped_by or "max frames"
                return
            if deadline is not None and time.perf_counter() >= deadline:
                self._stopped_by = self._stopped_by or "duration"
                return

    def _result(self, item: _Inferred) -> FrameResult:
        t0 = time.perf_counter()
        result = self._engine.decode(item.outputs, item.transform)
        t1 = time.perf_counter()
        f = item.frame
        stages = StageTimes(f.capture_ms, item.preprocess_ms, item.inference_ms, (t1 - t0) * 1e3)
        latency = (t1 - f.capture_ts) * 1e3
        self._processed += 1
        self._t_last = t1
        self._latency.add(latency)
        for name, value in zip(StageTimes._fields, stages):
            self._stages[name].add(value)
        return FrameResult(f.index, f.timestamp, f.capture_ts, latency, result, stages, f.image)

    # --- figures --------------------------------------------------------------------------
    @property
    def summary(self) -> LoopSummary:
        """The figures so far (final once iteration has ended)."""
        st = self._source.stats
        end = self._t_last if self._processed else time.perf_counter()
        elapsed = max(end - self._t0, 1e-9) if self._started else 0.0
        return LoopSummary(
            source=str(self._source.spec), captured=st.captured, processed=self._processed, dropped=st.dropped,
            undecodable=st.undecodable, reopens=st.reopens, elapsed_s=elapsed,
            fps=self._processed / elapsed if elapsed else 0.0,
            latency_p50_ms=self._latency.percentile(50), latency_p99_ms=self._latency.percentile(99),
            stages_p50_ms={k: s.percentile(50) for k, s in self._stages.items()},
            stopped_by=self._stopped_by or ("end of source" if self._source.finished else "running"))
