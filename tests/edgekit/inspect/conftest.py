"""Generated belt detections for the per-part tests: parts with defects riding left to right."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import pytest

from edgekit.results import Detections
from tests.conftest import write_mjpg

LABELS = ("part", "scratch", "dent")


def kite_video(path: Path, shared_images: Path, frames: int) -> Path:
    """kite_and_cold.jpg (people flying kites, kites in the top third) as a 640x426 MJPG video at
    10 fps, shifting a little per frame."""
    import cv2

    img = cv2.resize(cv2.imread(str(shared_images / "kite_and_cold.jpg")), (640, 426))
    return write_mjpg(path, (np.roll(img, i % 5, axis=1) for i in range(frames)), 10)


class Belt(NamedTuple):
    frames: list[Detections]
    truth: list[tuple[str, ...]]  # per part, in the order they cross x = line_x: its defect labels
    line_x: float


def belt(seed: int, n_parts: int = 7, *, speed: float = 6.0, gap: float = 60.0, rows: int = 1, width: int = 640,
         noise: float = 1.0, miss: float = 0.05, flicker: float = 0.005, p_defect: float = 0.5,
         merge: int = 0) -> Belt:
    """Parts (80x60 boxes) spaced ``gap`` pixels apart (0: touching) in ``rows`` rows entering together,
    each with 0-2 defects; detections miss now and then, and a defect flickers onto a part for one
    frame now and then (a one-frame false alarm that must not fail a good part).

    ``merge``: for that many frames after a part starts entering, the detector sees it and the part
    ahead of it as one box (scoring high), the part ahead itself only weakly (0.12-0.45, missed 3
    times in 10) and the entering part not at all: what a real detector does with touching parts."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(n_parts):
        n_def = int(rng.integers(1, 3)) if rng.random() < p_defect else 0
        defects = tuple((LABELS[1 + int(rng.integers(0, 2))], rng.uniform(5, 50), rng.uniform(5, 30))
                        for _ in range(n_def))
        column, row = divmod(k, rows)
        parts.append((-80 - column * (80 + gap), 20 + row * 90, defects))
    line_x = width / 2
    order = sorted(range(n_parts), key=lambda k: (-parts[k][0], parts[k][1]))
    n_frames = int((width + 80 + (n_parts // rows + 1) * (80 + gap)) / speed) + 2
    frames = []
    for t in range(n_frames):
        boxes, scores, ids = [], [], []
        for k, (x0, y0, defects) in enumerate(parts):
            x = x0 + speed * t
            if x > width or x + 80 < 0:
                continue
            behind = parts[k + rows][0] + speed * t if k + rows < n_parts else -1e9  # the next part in the row
            if k >= rows and (x + 80) / speed < merge:
                pass  # entering for less than `merge` frames: only seen merged with the part ahead
            elif (behind + 80) / speed >= 0 and (behind + 80) / speed < merge:  # the part behind is entering
                boxes.append(np.array([max(behind, 0.0), y0, x + 80, y0 + 60]) + rng.normal(0, noise, 4))
                scores.append(rng.uniform(0.8, 0.95))
                ids.append(0)
                if rng.random() >= 0.3:
                    boxes.append(np.array([x, y0, x + 80, y0 + 60]) + rng.normal(0, noise, 4))
                    scores.append(rng.uniform(0.12, 0.45))
                    ids.append(0)
            elif rng.random() >= miss:
                boxes.append(np.array([x, y0, x + 80, y0 + 60]) + rng.normal(0, noise, 4))
                scores.append(rng.uniform(0.6, 0.95))
                ids.append(0)
            for label, dx, dy in defects:
                if rng.random() >= miss * 2:
                    boxes.append([x + dx, y0 + dy, x + dx + 20, y0 + dy + 20])
                    scores.append(rng.uniform(0.55, 0.9))
                    ids.append(LABELS.index(label))
            if not defects and rng.random() < flicker:
                boxes.append([x + 30, y0 + 20, x + 45, y0 + 35])
                scores.append(0.7)
                ids.append(1)
        frames.append(Detections(np.array(boxes, np.float32).reshape(-1, 4), np.array(scores, np.float32),
                                 np.array(ids, np.int32), tuple(LABELS[i] for i in ids)))
    truth = [tuple(sorted({d[0] for d in parts[k][2]})) for k in order]
    return Belt(frames, truth, line_x)


@pytest.fixture(scope="session")
def make_parts_belt() -> Callable[..., Belt]:
    return belt


class ModbusServer:
    """pymodbus' own TCP server on 127.0.0.1 in a thread: 256 coils and 16 holding registers; counts the
    writes that set a coil or register (``sets``)."""

    def __init__(self, port: int = 0) -> None:
        import asyncio
        import socket
        import threading

        from pymodbus.server import ModbusTcpServer
        from pymodbus.simulator import DataType, SimData, SimDevice

        if not port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port, self.sets = port, []
        bits = [SimData(0, count=16, datatype=DataType.BITS)]
        regs = [SimData(0, count=16, datatype=DataType.REGISTERS)]
        device = SimDevice(1, simdata=(bits, bits, regs, regs))
        self._loop = asyncio.new_event_loop()
        started = threading.Event()

        def trace(sending: bool, pdu):  # count what the server is asked to set
            if not sending and pdu.function_code in (5, 6) and (pdu.bits[:1] == [True] or any(pdu.registers)):
                self.sets.append((pdu.function_code, pdu.address, time.perf_counter()))
            return pdu

        async def serve() -> None:
            self._server = ModbusTcpServer(device, address=("127.0.0.1", port), trace_pdu=trace)
            started.set()
            await self._server.serve_forever()

        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(serve(),), daemon=True)
        self._thread.start()
        started.wait(5)
        self._wait_listening()

    def _wait_listening(self) -> None:
        import socket

        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.02)
        raise RuntimeError(f"the Modbus test server did not listen on {self.port}")

    def read(self, kind: str, address: int) -> int:
        from pymodbus.client import ModbusTcpClient

        client = ModbusTcpClient("127.0.0.1", port=self.port, timeout=2, retries=0)
        try:
            client.connect()
            if kind == "coil":
                return int(client.read_coils(address, count=1, device_id=1).bits[0])
            return int(client.read_holding_registers(address, count=1, device_id=1).registers[0])
        finally:
            client.close()

    def stop(self) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self._server.shutdown(), self._loop).result(5)
        self._thread.join(5)


@pytest.fixture
def modbus_server():
    pytest.importorskip("pymodbus", reason="pymodbus is not installed")
    import logging

    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)
    server = ModbusServer()
    yield server
    server.stop()


@pytest.fixture
def start_modbus_server():
    """Start a Modbus test server on a given port (stopped after the test)."""
    pytest.importorskip("pymodbus", reason="pymodbus is not installed")
    servers = []

    def start(port: int) -> ModbusServer:
        servers.append(ModbusServer(port))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
