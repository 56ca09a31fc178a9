"""Hot model updates from a versioned folder (:mod:`edgekit.inspect.versions`: numbered version
folders, golden inputs), the way TensorFlow Serving picks up versions.

The highest version that loads, keeps the serving model's task, output format and labels, and
passes its self-test serves (its input may differ: an int8 model may be replaced by its float32
build, or by one with a larger input; ``prepare`` builds its preprocessing in the background).
A new version is loaded, warmed up and tested in a background thread while the old one keeps
serving; the loop calls :meth:`ModelWatcher.acquire` between two frames and gets the new model
from then on. A version that fails is refused (and not retried until its file changes) and the
old one runs on. Removing the serving
version's folder rolls back to the highest remaining one. Every switch and refusal is
logged and reported through ``on_event`` (see :class:`edgekit.inspect.events.EventKind`).

Deploy a version atomically: copy it to ``models/inspection/.3.tmp`` and rename it to
``3`` (names that are not numbers are ignored). A file still growing is not loaded
until its size and time stay the same for one poll.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from edgekit.errors import InputError, ModelError
from edgekit.inspect.events import EventKind
from edgekit.runtimes import Model, load_model
from edgekit.inspect.selftest import ModelRefused, compatible, self_test, write_expected_outputs
from edgekit.inspect.versions import SelfTest, VersionFolder, find_versions

__all__ = ["ModelVersion", "ModelWatcher", "ModelRefused", "SelfTest", "find_versions", "self_test",
           "write_expected_outputs"]  # all but the first two re-exported from selftest and versions

log = logging.getLogger(__name__)

OnEvent = Callable[[EventKind, dict[str, Any]], None]


@dataclass(frozen=True)
class ModelVersion:
    name: str
    version: int
    path: Path

    def __str__(self) -> str:
        return f"{self.name}/{self.version}"


class _Ready(NamedTuple):
    """A version loaded, checked and tested, waiting to serve."""

    version: ModelVersion
    model: Model
    test: SelfTest
    prepared: Any


class ModelWatcher:
    """Serves the best version of a versioned model folder and swaps in new ones safely.

    Args:
        root: the model folder (``models/NAME``); NAME is the folder's name.
        delegate, num_threads: passed to :func:`edgekit.runtimes.load_model`.
        poll_seconds: how often the folder is scanned.
        on_event: called with (EventKind.MODEL_SWITCH | MODEL_REFUSED, payload) for every
            switch and refusal, e.g. ``EventEmitter.emit``.
        warmup: inferences run on a new version before it may serve.
        prepare: builds what serving a version needs besides the model (for a detector: its
            preprocessing for the version's input, and its decoder), in the background thread
            that loads the version; a ModelError, InputError or ValueError from it refuses the
            version. :attr:`prepared` holds the result for the serving version.
        isolate: try each version in a child process before loading it (a crashing file then
            ends in a refusal, not in a dead process); False where the files were verified and
            self-tested already (a fleet follower's test devices).
        vet: called with a version's folder before anything reads its model; a reason (a string)
            refuses the version (a fleet follower checks the folder against its signed manifest).
    """

    def __init__(self, root: str | os.PathLike[str], *, delegate: Any = "auto", num_threads: int | None = None,
                 poll_seconds: float = 2.0, on_event: OnEvent | None = None, warmup: int = 2,
                 prepare: Callable[[Model], Any] | None = None, isolate: bool = True,
                 vet: Callable[[Path], str | None] | None = None) -> None:
        self.root = Path(root)
        self.versions = VersionFolder(self.root)
        self.isolate, self._vet = isolate, vet
        self.name = self.root.resolve().name
        self._load_kw: dict[str, Any] = {"delegate": delegate, "num_threads": num_threads}
        self.poll_seconds, self.warmup = poll_seconds, warmup
        self._on_event = on_event
        self._prepare_fn = prepare
        self._lock = threading.Lock()
        self._model: Model | None = None
        self.current: ModelVersion | None = None
        self.prepared: Any = None  # what `prepare` made for the serving version
        self._pending: _Ready | None = None
        self._refused: dict[int, tuple[int, int]] = {}  # version -> (size, mtime_ns) that failed
        self._seen: dict[int, tuple[int, int]] = {}  # version -> stat at the previous poll
        self._last_reason = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.switches = 0

    @property
    def model(self) -> Model:
        if self._model is None:
            raise ModelError(f"no model is serving from {str(self.root)!r}; call start() first")
        return self._model

    def start(self, background: bool = True) -> ModelWatcher:
        """Load the best version now (refusing broken ones), then watch in the background.

        Raises:
            ModelError: the folder holds no version that loads and passes its self-test.
        """
        versions = self.versions.find()
        if not versions:
            raise ModelError(f"model folder {str(self.root)!r} has no version: expected "
                             f"{self.root}/1/model.tflite (numbered subfolders)")
        reasons = []
        for v in sorted(versions, reverse=True):
            ready = self._prepare(ModelVersion(self.name, v, versions[v]))
            if ready is not None:
                self._serve(ready, previous=None)
                break
            reasons.append(f"{v}: {self._last_reason}")
        else:
            raise ModelError(f"no version in {str(self.root)!r} can serve: " + "; ".join(reasons))
        self._seen = {v: _stat(p) for v, p in versions.items()}
        if background:
            self._thread = threading.Thread(target=self._watch, name="edgekit-modelwatch", daemon=True)
            self._thread.start()
        return self

    def acquire(self) -> Model:
        """The model to use for the next frame; call between frames. Switches to a new version
        that is ready (closing the old one, which the caller must no longer use)."""
        pending = self._pending
        if pending is not None:
            with self._lock:
                pending, self._pending = self._pending, None
            if pending is not None:
                old = self._model
                self._serve(pending, previous=self.current)
                if old is not None and old is not self._model:
                    old.close()
        return self.model

    def poll(self) -> None:
        """Scan the folder once and prepare a version that should serve (blocking)."""
        versions = self.versions.find()
        stats = {v: _stat(p) for v, p in versions.items()}
        settled = {v for v, s in stats.items() if self._seen.get(v) == s}
        self._seen = stats
        for v in list(self._refused):
            if stats.get(v) != self._refused[v]:
                del self._refused[v]  # the file changed: worth another try
        candidates = sorted((v for v in settled if v not in self._refused), reverse=True)
        serving = self.current.version if self.current else None
        pending = self._pending.version.version if self._pending else None
        for v in candidates:
            if v in (serving, pending):
                return  # the best candidate already serves or waits for acquire()
            if serving is not None and v < serving and serving in versions:
                return  # an older version never replaces a serving one that still exists
            ready = self._prepare(ModelVersion(self.name, v, versions[v]))
            if ready is not None:
                with self._lock:
                    stale, self._pending = self._pending, ready
                if stale is not None:
                    stale.model.close()
                return

    def _prepare(self, mv: ModelVersion) -> _Ready | None:
        """Load, check, warm up and self-test one version; None (after reporting why) if it fails."""
        t0 = time.perf_counter()
        model: Model | None = None
        try:
            if self._vet is not None and (why := self._vet(mv.path.parent)):
                raise ModelRefused(why)
            model = load_model(mv.path, isolate=self.isolate, **self._load_kw)
            load_ms = (time.perf_counter() - t0) * 1e3
            if self._model is not None and (why := compatible(model, self._model)):
                raise ModelRefused(why)
            test = self.versions.self_test(model, mv.path.parent, warmup=self.warmup, load_ms=load_ms)
            prepared = self._prepare_fn(model) if self._prepare_fn is not None else None
            return _Ready(mv, model, test, prepared)
        except (ModelError, InputError, ValueError, OSError) as exc:
            if model is not None:
                model.close()
            self._refuse(mv, str(exc))
            return None

    def _refuse(self, mv: ModelVersion, reason: str) -> None:
        self._last_reason = reason
        try:
            self._refused[mv.version] = _stat(mv.path)
        except OSError:
            pass
        serving = str(self.current) if self.current else None
        log.error("model %s refused, %s: %s", mv, f"{serving} keeps serving" if serving else "not serving", reason)
        self._emit(EventKind.MODEL_REFUSED, {"name": mv.name, "version": mv.version, "path": str(mv.path),
                                             "reason": reason, "serving": serving})

    def _serve(self, ready: _Ready, *, previous: ModelVersion | None) -> None:
        mv, model, test = ready.version, ready.model, ready.test
        self._model, self.current, self.prepared = model, mv, ready.prepared
        if previous is not None:
            self.switches += 1
        log.info("model %s serving%s (%s)", mv, f", was {previous}" if previous else "", model.describe())
        self._emit(EventKind.MODEL_SWITCH, {"name": mv.name, "version": mv.version, "path": str(mv.path),
                                            "from": str(previous) if previous else None, "to": str(mv),
                                            "selftest": test.to_dict(), **model.describe()})

    def _emit(self, kind: EventKind, payload: dict[str, Any]) -> None:
        if self._on_event is not None:
            try:
                self._on_event(kind, payload)
            except Exception as exc:  # noqa: BLE001 - reporting must not break serving
                log.error("model event handler failed: %s", exc)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - a bad scan must not end watching
                log.error("scanning %s failed: %s", self.root, exc)

    def close(self) -> None:
        """Stop watching and close the models (safe twice)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            pending.model.close()
        if self._model is not None:
            self._model.close()

    def __enter__(self) -> ModelWatcher:
        return self if self._model is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns
