"""The pipelined detection loop: capture | preprocess | inference | post-process and output.

Each stage runs in its own thread and hands over through small bounded channels, so the
interpreter never waits on reading, decoding, drawing or writing (OpenCV, numpy and the
TFLite interpreter release the GIL while they work):

* a file is read frame by frame; preprocessing runs one frame ahead into a staging buffer
  and the inference thread only copies it into the input tensor. With one interpreter,
  reading and preprocessing run at background CPU priority, in the gaps its threads leave;
  given ``workers`` (see :class:`Performance`), several single-threaded interpreters each
  take the next frame and resize it straight into their own input tensor (while one
  preprocesses, the other infers), and results are put back in frame order;
* a live source (camera, stream, ``realtime`` file) keeps only its newest frame, resized
  straight into the input tensor the moment the interpreter is free: in the caller's thread
  while the model and the caller keep up with the camera (no thread to wake per frame), by an
  inference thread once they do not (see ``Stream._live_items``);
* decoding outputs into results, and whatever the caller does with them, runs in the
  caller's thread (the iterator of :class:`Stream`).
"""

from __future__ import annotations

import enum
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple, Protocol, Sequence

import numpy as np

from edgekit.errors import InputError
from edgekit.preprocess import Transform
from edgekit.results import FrameResult, StageTimes
from edgekit.runtimes.loader import default_threads
from edgekit.sources import Handoff, Frame, SourceKind, VideoSource, background_priority
from edgekit.loop.summary import LoopSummary, SampleWindow

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # every task's result: made with the masks and poses it names, which a detector never loads
    from edgekit.results import Result
    from edgekit.sources import SourceSpec

__all__ = ["Engine", "LoopOptions", "LoopSummary", "Performance", "Stream", "SampleWindow", "THROUGHPUT_WORKERS",
           "performance_of", "throughput_threads"]

LIVE_OVERRUNS = 3  # frames in a row over a frame period before a live stream pipelines (see Stream._live_items)


class Engine(Protocol):
    """What the loop drives: one model with its preprocessing and decoder (see edgekit.tasks)."""

    lock: threading.Lock

    def staging(self) -> np.ndarray: ...  # a buffer shaped and typed like the input tensor

    def write(self, image: np.ndarray, dest: np.ndarray | None = None, *, bgr: bool = False) -> Transform: ...

    def load(self, staged: np.ndarray) -> None: ...

    def infer(self) -> list[np.ndarray]: ...

    def decode(self, outputs: list[np.ndarray], transform: Transform) -> Result: ...


class Performance(str, enum.Enum):
    """What the loop optimizes for (the names follow OpenVINO's performance hints).

    * ``LATENCY``: one interpreter using every thread it was given, each frame as soon as
      possible: what a camera needs, where only the newest frame matters.
    * ``THROUGHPUT``: for a file or folder, where every frame is processed and only the total
      time counts: two interpreters with half the threads each on consecutive frames at once.
      One interpreter's threads wait for each other at every layer and cannot hide reading and
      resizing; two single-threaded ones keep every core busy (SSD MobileNet on 2 cores: 116
      against 109 inferences/s bare). Each frame takes longer; the model is in memory twice.
    * ``AUTO``: THROUGHPUT for a file or folder read in full on a CPU with at least 2 cores
      when the thread count was left to edgekit; LATENCY otherwise (cameras, streams,
      ``realtime`` files, the Edge TPU, an explicit thread count).
    """

    AUTO = "auto"
    LATENCY = "latency"
    THROUGHPUT = "throughput"


THROUGHPUT_WORKERS = 2  # interpreters side by side for Performance.THROUGHPUT
THROUGHPUT_MIN_IMAGES = 8  # fewer images than this are not worth loading the model twice more


def performance_of(value: Performance | str) -> Performance:
    """``value`` as a Performance (its name in any case, as the CLI and the options give it)."""
    try:
        return value if isinstance(value, Performance) else Performance(str(value).lower())
    except ValueError:
        raise InputError(f"performance must be one of {', '.join(p.value for p in Performance)}, "
                         f"got {value!r}") from None


def throughput_threads(spec: SourceSpec, perf: Performance | str, num_threads: int | None) -> int | None:
    """Each interpreter's thread count when a stream of ``spec`` runs THROUGHPUT, None when it runs
    one interpreter for LATENCY (see :class:`~edgekit.loop.Performance`; ``num_threads``: the
    task's option). The one place that decides; the Edge TPU always runs LATENCY."""
    perf = performance_of(perf)
    if spec.live or perf is Performance.LATENCY:
        return None
    if perf is Performance.AUTO and (
            (os.cpu_count() or 1) < 2 or num_threads is not None
            or (spec.kind is SourceKind.IMAGES and len(spec.images) < THROUGHPUT_MIN_IMAGES)):
        return None
    return max(1, (num_threads or default_threads()) // THROUGHPUT_WORKERS)


@dataclass(frozen=True)
class LoopOptions:
    """When to stop, how much may be in flight between stages, and what to optimize for."""

    max_frames: int | None = None  # stop after this many processed frames
    duration: float | None = None  # stop after this many seconds
    queue_size: int = 2
    performance: Performance = Performance.AUTO

    def __post_init__(self) -> None:
        if self.max_frames is not None and self.max_frames < 1:
            raise InputError(f"max_frames must be at least 1, got {self.max_frames}")
        if self.duration is not None and self.duration <= 0:
            raise InputError(f"duration must be positive seconds, got {self.duration}")
        if self.queue_size < 1:
            raise InputError(f"queue_size must be at least 1, got {self.queue_size}")


class _Staged(NamedTuple):
    seq: int
    frame: Frame
    transform: Transform
    buffer: np.ndarray
    preprocess_ms: float


class _Inferred(NamedTuple):
    seq: int
    frame: Frame
    transform: Transform
    outputs: list[np.ndarray]
    preprocess_ms: float
    inference_ms: float
    engine: Engine


class Stream:
    """Results of a source, one :class:`FrameResult` per processed frame, in the iterating thread.

    Iterate it once; it is a context manager, and :meth:`close` (safe twice) stops every
    thread. :meth:`stop` may be called from another thread or a signal handler.

    ``workers``: engines on the same model to run side by side on a file or folder (each in
    its own thread; results still come in frame order); ignored for live sources. ``on_close``
    runs once when the stream closes (e.g. to release the workers' models).

    Raises (while iterating):
        SourceError: the source failed for good.
        ModelError: inference failed.
    """

    def __init__(self, engine: Engine, source: VideoSource, options: LoopOptions = LoopOptions(), *,
                 workers: Sequence[Engine] = (), on_close: Callable[[], None] | None = None,
                 then: Callable[[Result], Result] | None = None) -> None:
        self._engine = engine
        self._then = then  # a step on each decoded result, in frame order (tracking), timed with the decode
        self._source = source
        self._options = options
        self._live = source.spec.live
        self._workers = list(workers) if workers and not self._live else [engine]
        self._on_close = on_close
        n = options.queue_size
        self._buffers = n + 1 + len(self._workers)
        self._staged: Handoff[_Staged] = Handoff(n)
        self._free: Handoff[np.ndarray] = Handoff(self._buffers)
        self._done: Handoff[_Inferred] = Handoff(n + len(self._workers))
        self._running_workers = 0
        self._count_lock = threading.Lock()
        self._take_lock = threading.Lock()
        self._next_seq = 0
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None
        self._stopped_by: str | None = None
        self._started = self._closed = False
        self._t0 = self._t_last = 0.0
        self._processed = 0
        self._latency = SampleWindow()
        self._stages = {name: SampleWindow() for name in StageTimes._fields}

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

    @property
    def workers(self) -> int:
        """How many interpreters work on this stream side by side."""
        return len(self._workers)

    def _start(self) -> None:
        self._started = True
        # Workers taking turns on a file read it themselves (ReadMode.AUTO -> PULL): while one reads
        # and resizes, the other infers, so a capture thread would only add a hand-over per frame.
        self._source.start(consumers=len(self._workers))
        if self._live:  # inferred in the caller's thread until an inference thread pays (see _live_items)
            pass
        elif len(self._workers) > 1:
            # Each worker takes the next frame and resizes it into its own input tensor: while one
            # preprocesses, the other infers, so no separate stage (and hand-over) is needed.
            self._running_workers = len(self._workers)
            for i, engine in enumerate(self._workers):
                self._spawn(f"edgekit-inference-{i}", self._infer_own, engine)
        else:
            for _ in range(self._buffers):
                self._free.put(self._engine.staging())
            self._spawn("edgekit-preprocess", self._preprocess)
            self._running_workers = 1
            self._spawn("edgekit-inference-0", self._infer_staged, self._engine)
        self._t0 = time.perf_counter()

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        t = threading.Thread(target=self._guard, args=(target, *args), name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self, reason: str = "stop request") -> None:
        """Stop soon: frames already inferred are still handed out, then iteration ends."""
        self._stopped_by = self._stopped_by or reason
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
        self._stopped_by = self._stopped_by or "close"
        self._halt()
        self._done.close(discard=True)
        for t in self._threads:
            t.join(timeout=10.0)
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            on_close()

    closed = property(lambda self: self._closed)

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the stages -----------------------------------------------------------------------
    def _guard(self, target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the iterating thread
            self._error = self._error or exc
            self._halt()
        finally:
            if target == self._preprocess:
                self._staged.close()
            else:
                with self._count_lock:
                    self._running_workers -= 1
                    if self._running_workers == 0:
                        self._done.close()

    def _preprocess(self) -> None:
        # Only a file read by one interpreter is preprocessed ahead. Background priority keeps the
        # resizing from preempting its threads mid-layer (they wait for each other); single-threaded
        # workers have no such barrier and resize in their own threads, at normal priority.
        background_priority()
        seq = 0
        while (frame := self._source.get()) is not None:
            buf = self._free.get()
            if buf is None:
                return
            t0 = time.perf_counter()
            pixels, bgr = frame.pixels
            transform = self._engine.write(pixels, buf, bgr=bgr)
            if not self._staged.put(_Staged(seq, frame, transform, buf, (time.perf_counter() - t0) * 1e3)):
                return
            seq += 1

    def _infer_live(self, seq: int) -> None:
        while (frame := self._source.get()) is not None and self._done.put(self._inferred(self._engine, frame, seq)):
            seq += 1

    @staticmethod
    def _inferred(engine: Engine, frame: Frame, seq: int) -> _Inferred:
        """Resize ``frame`` straight into ``engine``'s input and run it, in the calling thread."""
        with engine.lock:
            t0 = time.perf_counter()
            pixels, bgr = frame.pixels
            transform = engine.write(pixels, bgr=bgr)
            t1 = time.perf_counter()
            outputs = engine.infer()
        ms = (time.perf_counter() - t1) * 1e3
        return _Inferred(seq, frame, transform, outputs, (t1 - t0) * 1e3, ms, engine)

    def _live_items(self, timeout: Callable[[], float | None]) -> Iterator[_Inferred | None]:
        """A live source's frames, inferred in this (the caller's) thread while the model and the
        caller's work on a result fit in a frame period: no thread to wake per frame. Once they
        overrun it ``LIVE_OVERRUNS`` frames in a row, an inference thread takes over for good, so
        the model works on the next frame while the caller handles this one."""
        import statistics  # a live source's frame period only: with random and bisect, 2 ms of every start-up

        seq, overruns, periods = 0, 0, list[float]()
        last: Frame | None = None
        while overruns < LIVE_OVERRUNS:
            try:
                if (frame := self._source.get(timeout())) is None:
                    if self._source.finished:
                        return
                    yield None
                    continue
                t0 = time.perf_counter()
                item = self._inferred(self._engine, frame, seq)
            except Exception as exc:  # noqa: BLE001 - raised by __iter__, as a stage thread's error is
                self._error = exc
                return
            if last is not None and frame.index > last.index:
                periods = [*periods[-7:], (frame.capture_ts - last.capture_ts) / (frame.index - last.index)]
            last, seq = frame, seq + 1
            yield item
            period = statistics.median(periods) if periods else None  # np.median: 10x the time on 8 floats
            overruns = overruns + 1 if period is not None and time.perf_counter() - t0 > period else 0
        self._running_workers = 1
        self._spawn("edgekit-inference", self._infer_live, seq)
        yield from self._in_order(timeout, seq)

    def _infer_own(self, engine: Engine) -> None:
        while True:
            with self._take_lock:  # frames leave the source in order and get their place in it
                frame = self._source.get()
                seq, self._next_seq = self._next_seq, self._next_seq + 1
            if frame is None or not self._done.put(self._inferred(engine, frame, seq)):
                return

    def _infer_staged(self, engine: Engine) -> None:
        while (staged := self._staged.get()) is not None:
            with engine.lock:
                t1 = time.perf_counter()
                engine.load(staged.buffer)
                outputs = engine.infer()
            ms = (time.perf_counter() - t1) * 1e3
            self._free.put(staged.buffer)
            if not self._done.put(_Inferred(staged.seq, staged.frame, staged.transform, outputs,
                                            staged.preprocess_ms, ms, engine)):
                return

    def _in_order(self, timeout: Callable[[], float | None], next_seq: int = 0) -> Iterator[_Inferred | None]:
        """Inferred frames in frame order from ``next_seq`` on (workers may finish out of order); None on a timeout."""
        pending: dict[int, _Inferred] = {}
        while True:
            item = self._done.get(timeout())
            if item is None:
                if self._done.done:
                    yield from (pending[k] for k in sorted(pending))  # only after an error or a stop
                    return
                yield None
                continue
            pending[item.seq] = item
            while next_seq in pending:
                yield pending.pop(next_seq)
                next_seq += 1

    def _results(self) -> Iterator[FrameResult]:
        opts = self._options
        deadline = None if opts.duration is None else self._t0 + opts.duration

        def timeout() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.perf_counter())

        for item in (self._live_items if self._live else self._in_order)(timeout):
            if item is None:
                if deadline is not None and time.perf_counter() >= deadline:
                    self._stopped_by = self._stopped_by or "duration"
                if self._stopped_by:
                    return
                continue
            yield self._result(item)
            if opts.max_frames is not None and self._processed >= opts.max_frames:
                self._stopped_by = self._stopped_by or "max frames"
                return
            if deadline is not None and time.perf_counter() >= deadline:
                self._stopped_by = self._stopped_by or "duration"
                return
        self._stopped_by = self._stopped_by or ("error" if self._error else "end of source")

    def _result(self, item: _Inferred) -> FrameResult:
        t0 = time.perf_counter()
        result = item.engine.decode(item.outputs, item.transform)
        if self._then is not None:
            result = self._then(result)
        t1 = time.perf_counter()
        f = item.frame
        stages = StageTimes(f.capture_ms, item.preprocess_ms, item.inference_ms, (t1 - t0) * 1e3)
        latency = (t1 - f.capture_ts) * 1e3
        self._processed += 1
        self._t_last = t1
        self._latency.add(latency)
        for name, value in zip(StageTimes._fields, stages):
            self._stages[name].add(value)
        return FrameResult(f.index, f.timestamp, f.capture_ts, latency, result, stages, f)

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
            stopped_by=self._stopped_by or ("end of source" if self._source.finished else "running"),
            interpreters=len(self._workers))
