"""A fleet on localhost: a release folder behind a real HTTP server (Range, ETag), an optional
real Mosquitto broker, and devices that are each a FleetFollower, a ModelWatcher and a small
inference loop in threads (what an inspection cell runs, without the camera)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from edgekit.fleet.follower import FleetFollower
from edgekit.fleet.keys import SigningKey, generate_key, load_signing_key
from edgekit.fleet.serve import serve_folder
from edgekit.fleet.settings import FleetSettings
from edgekit.fleet.health import HealthThresholds
from edgekit.inspect.modelwatch import ModelWatcher
from edgekit.inspect.selftest import run_golden
from tests.conftest import shared_model, write_mjpg

pytest.importorskip("cryptography")

SMALL = "mobilenet_v1_0.25_128_quant.tflite"
MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(cond: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Kit:
    """The release side: keys, model files, golden inputs and the HTTP server's root."""

    def __init__(self, root: Path, shared_models: Path, shared_images: Path) -> None:
        from PIL import Image

        self.root = root
        self.www = root / "www"
        self.www.mkdir(parents=True)
        _, self.pub_path, self.public = generate_key(root / "keys" / "signing.key")
        self.key: SigningKey = load_signing_key(root / "keys" / "signing.key")
        self.model = shared_model(shared_models, SMALL)
        self.images = [np.asarray(Image.open(shared_images / n).convert("RGB").resize((128, 128)), dtype=np.uint8)
                       for n in ("grace_hopper.png", "cat.png", "parrot.jpg")]
        self.golden = root / "golden.npz"
        np.savez(self.golden, hopper=self.images[0])
        self.bad_model = root / "scrambled.tflite"  # loads and runs, but its largest weights are noise
        self.bad_model.write_bytes(scrambled(self.model.read_bytes()))
        self.server = serve_folder(self.www)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def channel_url(self, name: str) -> str:
        return f"{self.base}/{name}/channel.json"

    def cell_toml(self, device: str, video: Path, channel: str, broker_port: int, labels: Path, *,
                  fleet: str = "", tail: str = "") -> str:
        """An inspection.toml for a realtime cell that follows ``channel`` and reports to the broker
        (``fleet``: more lines of its [fleet] table; ``tail``: tables after it)."""
        return f"""
device = "{device}"
state_dir = "state"
[source]
path = "{video}"
realtime = true
[model]
dir = "models"
poll_seconds = 0.2
labels = "{labels}"
channel = "{self.channel_url(channel)}"
public_key = "{self.public.text}"
[fleet]
broker = "127.0.0.1:{broker_port}"
{fleet}
{tail}"""

    def settings(self, name: str, **kw: Any) -> FleetSettings:
        kw.setdefault("poll_seconds", 0.3)
        kw.setdefault("health", HealthThresholds(window=20, baseline=20, max_errors=0))
        return FleetSettings(channel=self.channel_url(name), public_key=self.public.text, jitter=0.3,
                             notify_spread=0.05, timeout=3.0, **kw)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def kite_line(shared_images: Path, folder: Path, size: tuple[int, int], fps: int, frames: int) -> Path:
    """A line camera stand-in: ``folder/line.avi``, the kite photo of ``size`` (w, h) sliding a little
    each frame, and ``folder/golden.npz``, its 300x300 RGB golden input for an SSD release."""
    import cv2

    img = cv2.resize(cv2.imread(str(shared_images / "kite_and_cold.jpg")), size)
    video = write_mjpg(folder / "line.avi", (np.roll(img, i % 10, axis=1) for i in range(frames)), fps)
    np.savez(folder / "golden.npz", kites=cv2.cvtColor(cv2.resize(img, (300, 300)), cv2.COLOR_BGR2RGB))
    return video


def scrambled(data: bytes) -> bytes:
    """The model with its largest weight buffer replaced by noise: a release a training bug made."""
    from edgekit.runtimes.tflite_file import parse_tflite

    out = bytearray(data)
    big = max(parse_tflite(data).buffers, key=lambda b: b.size)
    out[big.start:big.start + big.size] = np.random.default_rng(0).integers(0, 256, big.size, dtype=np.uint8).tobytes()
    return bytes(out)


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, shared_models: Path, shared_images: Path) -> Iterator[Kit]:
    k = Kit(tmp_path_factory.mktemp("fleet"), shared_models, shared_images)
    yield k
    k.close()


class Device:
    """One device: follower + model watcher + a loop judging frames at ~`fps` (FAIL: top score < 0.1)."""

    def __init__(self, name: str, home: Path, settings: FleetSettings, images: list[np.ndarray], *,
                 fps: float = 10.0, publisher: Any = None) -> None:
        self.name, self.home, self.images, self.period = name, home, images, 1.0 / fps
        self.events: list[dict[str, Any]] = []
        self.model_dir, self.state_dir = home / "models", home / "state"
        self.follower = FleetFollower(settings, device=name, model_dir=self.model_dir, state_dir=self.state_dir,
                                      on_event=self.events.append, publisher=publisher, isolate=False)
        self.watcher: ModelWatcher | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.served: set[int] = set()

    def start(self, timeout: float = 30.0) -> Device:
        self.follower.recover()
        self.follower.ensure_version(timeout)
        self.watcher = ModelWatcher(self.model_dir, num_threads=1, poll_seconds=0.1, isolate=False,
                                    on_event=self.follower.on_model_event, vet=self.follower.vet).start()
        self.follower.start()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        i = 0
        while not self._stop.wait(self.period):
            assert self.watcher is not None
            model = self.watcher.acquire()
            self.served.add(self.watcher.current.version)  # type: ignore[union-attr]
            try:
                score = float(run_golden(model, self.images[i % len(self.images)])[0].max())
            except Exception:  # noqa: BLE001 - an inference error is a health signal here
                self.follower.observe(None, None, error=True)
                continue
            i += 1
            self.follower.observe(score, failed=score < 0.1)

    def sync(self, timeout: float = 20.0) -> Any:
        """The follower's sync once the serving version has its full baseline (a version is held
        until then), so an installation shows in the outcome."""
        if self.serving is not None:
            wait_until(lambda: self.follower.health.baseline_ready, timeout, "the baseline frames")
        return self.follower.sync()

    @property
    def serving(self) -> int | None:
        return self.watcher.current.version if self.watcher is not None and self.watcher.current else None

    def installed(self) -> set[int]:
        return {int(p.name) for p in self.model_dir.iterdir() if p.name.isdigit()}

    def stop(self, clean: bool = True) -> None:
        """Stop; ``clean=False`` leaves the state as a killed process would (no clean close)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if clean:
            self.follower.close()
        else:
            self.follower._stop.set()
            self.follower._wake.set()
            if self.follower._thread is not None:
                self.follower._thread.join(10)
        if self.watcher is not None:
            self.watcher.close()


class Broker:
    """A Mosquitto process on a free port."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = folder / "mosquitto.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                        f"log_dest file {folder}/mosquitto.log\n" + ("user root\n" if os.geteuid() == 0 else ""))
        assert MOSQUITTO is not None
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(self._listening, 10, "mosquitto to listen")

    def _listening(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"mosquitto exited: {self.proc.stderr.read().decode()}")  # type: ignore[union-attr]
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    if MOSQUITTO is None:
        pytest.skip("mosquitto not installed: apt-get install -y mosquitto")
    pytest.importorskip("paho.mqtt.client")
    b = Broker(tmp_path_factory.mktemp("broker"))
    yield b
    b.stop()
