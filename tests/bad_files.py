"""The bad files, misbehaving cameras and the CLI runner behind tests/bad_inputs.py.

Files are made on demand in a :class:`Workspace` (a 10000x10000 PNG is streamed row by
row, never held in memory); :func:`run_cli` runs ``python -m edgekit`` as a user would and
measures the child's own peak memory.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["CliResult", "Missing", "Workspace", "run_cli", "write_png_stream", "config_file", "cut", "derived_image",
           "huge_vector_count", "image_folder", "keras_model", "rename_custom_op", "seed_model", "set_fields",
           "ssd_with_options", "video_clip", "while_forever"]

ROOT = Path(__file__).resolve().parent.parent


class Missing(Exception):
    """A shared model or image a case needs is not on this machine."""


@dataclass
class Workspace:
    """Where a case builds its files, and where the shared models and images are."""

    root: Path
    models: Path | None
    images: Path | None
    _made: dict[str, Path] = field(default_factory=dict)
    _servers: dict[str, str] = field(default_factory=dict)

    def shared_model(self, name: str) -> Path:
        return self._shared(self.models, name)

    def shared_image(self, name: str) -> Path:
        return self._shared(self.images, name)

    @staticmethod
    def _shared(folder: Path | None, name: str) -> Path:
        if folder is None or not (folder / name).exists():
            from tests.conftest import missing

            raise Missing(missing(name, folder))
        return folder / name

    def make(self, name: str, build: Callable[[Path], None]) -> str:
        """The path of `name` in the scratch folder, built once by `build(path)`."""
        if name not in self._made:
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            build(path)
            self._made[name] = path
        return str(self._made[name])

    def bytes_file(self, name: str, data: Callable[[], bytes]) -> str:
        return self.make(name, lambda p: p.write_bytes(data()))

    def server(self, kind: str) -> str:
        """The URL of a local HTTP camera that misbehaves (see :func:`_serve`), started once."""
        if kind not in self._servers:
            self._servers[kind] = _serve(kind, self.shared_image("parrot.jpg").read_bytes())
        return self._servers[kind]


# --- building bad files ----------------------------------------------------------------------
def write_png_stream(path: Path, width: int, height: int, *, rows: bool = True) -> None:
    """A black RGB PNG written a row at a time (memory stays small); rows=False writes the
    header alone, as a file that claims a size it does not hold."""
    def chunk(f: Any, kind: bytes, data: bytes) -> None:
        f.write(struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data)))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        chunk(f, b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        comp = zlib.compressobj(6)
        row = b"\x00" * (1 + 3 * width)
        body = b"".join(comp.compress(row) for _ in range(height if rows else 1)) + comp.flush()
        chunk(f, b"IDAT", body)
        chunk(f, b"IEND", b"")


def derived_image(ws: Workspace, name: str, make: Callable[[Any], Any]) -> str:
    """An image derived from parrot.jpg by `make(PIL image) -> (PIL image or array, format)`."""
    from PIL import Image

    def build(path: Path) -> None:
        with Image.open(ws.shared_image("parrot.jpg")) as im:
            out = make(im.convert("RGB"))
        if isinstance(out, np.ndarray):
            import cv2

            cv2.imwrite(str(path), out)
        else:
            out.save(path)
    return ws.make(name, build)


def cut(data: bytes, fraction: float) -> bytes:
    return data[: int(len(data) * fraction)]


def _deref_field(buf: bytes, table: int, index: int) -> int:
    """Where the vector, string or table in field `index` of a flatbuffer table starts."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    pos = table + struct.unpack_from("<H", buf, vtable + 4 + 2 * index)[0]
    return pos + struct.unpack_from("<I", buf, pos)[0]


def huge_vector_count(data: bytes) -> bytes:
    """The model's buffers vector (Model field 4) claims 2**31 - 1 entries."""
    buf = bytearray(data)
    vec = _deref_field(buf, struct.unpack_from("<I", buf, 0)[0], 4)
    struct.pack_into("<I", buf, vec, 0x7FFFFFFF)
    return bytes(buf)


def rename_custom_op(data: bytes, old: bytes, new: bytes) -> bytes:
    """Rename the custom code of the operator code `old` in place (same length: nothing moves)."""
    buf = bytearray(data)
    codes = _deref_field(buf, struct.unpack_from("<I", buf, 0)[0], 1)
    for i in range(struct.unpack_from("<I", buf, codes)[0]):
        entry = codes + 4 + 4 * i
        table = entry + struct.unpack_from("<I", buf, entry)[0]
        text = _deref_field(buf, table, 1)
        if buf[text + 4:text + 4 + len(old)] == old:
            buf[text + 4:text + 4 + len(new)] = new
            return bytes(buf)
    raise ValueError(f"no custom op {old!r} in the model")


def seed_model(name: str, edit: Callable[[Any], None]) -> bytes:
    """One of the fuzz seed models (tests/fuzz/seeds.py) with `edit` applied before packing."""
    from tests.fuzz.seeds import SEEDS, pack

    model = SEEDS[name]()
    edit(model)
    return pack(model)


def set_fields(obj: Any, **values: Any) -> None:
    for k, v in values.items():
        setattr(obj, k, v)


def while_forever(m: Any) -> None:
    """The loop's limit becomes +inf: `i < inf` holds forever once i + 1 == i."""
    limit = m.subgraphs[1].tensors[1]
    m.buffers[limit.buffer].data = np.frombuffer(np.array([np.inf], np.float32).tobytes(), np.uint8)


def ssd_with_options(ws: Workspace, options: bytes) -> bytes:
    from tests.fuzz.seeds import pack, unpack

    m = unpack(ws.shared_model("ssd_mobilenet_v1_coco_quant.tflite").read_bytes())
    for op in m.subgraphs[0].operators:
        if op.customOptions is not None:
            op.customOptions = list(options)
    return pack(m)


def _serve(kind: str, jpeg: bytes) -> str:
    """A daemon-thread HTTP camera on 127.0.0.1: 'silent' accepts and never answers;
    'stalls' sends three MJPEG frames per connection, then nothing."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []  # keep connections open: a closed one is not a stall

    def handle(conn: socket.socket) -> None:
        held.append(conn)
        if kind == "stalls":
            conn.recv(65536)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: multipart/x-mixed-replace; boundary=frame\r\n\r\n")
            for _ in range(3):
                conn.sendall(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(jpeg)
                             + jpeg + b"\r\n")

    def accept() -> None:
        while True:
            conn, _ = sock.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True, name=f"bad-camera-{kind}").start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}/stream.mjpg"


def video_clip(ws: Workspace, name: str, keep: float) -> str:
    """A 30-frame MJPG .avi of kite_and_cold.jpg, cut to its first `keep` fraction of bytes."""
    def build(path: Path) -> None:
        import cv2

        frame = cv2.resize(cv2.imread(str(ws.shared_image("kite_and_cold.jpg"))), (320, 240))
        full = path.with_suffix(".full.avi")
        writer = cv2.VideoWriter(str(full), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 240))
        for _ in range(30):
            writer.write(frame)
        writer.release()
        data = full.read_bytes()
        path.write_bytes(data[:int(len(data) * keep)] if keep < 1 else data)
    return ws.make(name, build)


def keras_model(ws: Workspace) -> str:
    """A tiny untrained Keras classifier, saved by a child process (TensorFlow stays out of this one)."""
    def build(path: Path) -> None:
        code = ("import keras; i = keras.Input((32, 32, 3)); h = keras.layers.Rescaling(1 / 255.0)(i); "
                "h = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(h)); "
                f"keras.Model(i, keras.layers.Dense(3, activation='softmax')(h)).save({str(path)!r})")
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=300)
    return ws.make("tiny.keras", build)


def image_folder(ws: Workspace, name: str, sizes: list[tuple[int, int]], junk: bool = False) -> str:
    def build(path: Path) -> None:
        from PIL import Image

        path.mkdir()
        rng = np.random.default_rng(0)
        for k, (w, h) in enumerate(sizes):
            if junk:
                (path / f"{k}.jpg").write_text("not an image\n")
            else:
                Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path / f"{k}.png")
    return ws.make(name, build)


def config_file(ws: Workspace, name: str, edit: Callable[[str], str]) -> str:
    base = (f'device = "cell-4"\n[source]\npath = "{ws.shared_image("kite_and_cold.jpg")}"\nwidth = 640\n'
            f'height = 480\n[model]\npath = "{ws.shared_model("ssd_mobilenet_v1_coco_quant.tflite")}"\n'
            '[[zones]]\nname = "tray"\npolygon = [[100, 100], [500, 100], [500, 400], [100, 400]]\n'
            '[[rules]]\nzone = "tray"\nlabel = "person"\ncount = 4\n')
    return ws.make(name, lambda p: p.write_text(edit(base)))


# --- running ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CliResult:
    exit: int
    stderr: list[str]
    seconds: float
    peak_mb: float = 0.0  # the process's peak resident memory (VmHWM), 0 where /proc is missing

    @property
    def first_line(self) -> str:
        return self.stderr[0] if self.stderr else ""

    @property
    def message(self) -> str:
        """edgekit's own first line (native libraries may print before it), else the first line."""
        return next((ln for ln in self.stderr if ln.startswith("edgekit ")), self.first_line)


def run_cli(argv: list[str], *, timeout: float = 120.0, env: dict[str, str] | None = None) -> CliResult:
    """``python -m edgekit ARGV`` as a user runs it (no EDGEKIT_DEBUG); a timeout is exit -9."""
    import tempfile

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_ISOLATE") and k != "EDGEKIT_DEBUG"}
    full_env.update(env or {})
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "edgekit", *argv], stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, env=full_env, cwd=ROOT)
        status, peak, timed_out = _wait(proc, timeout)
        err.seek(0)
        lines = [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    seconds = time.perf_counter() - t0
    if timed_out:
        return CliResult(-9, [f"(no answer within {timeout:g} s)", *lines], seconds, peak)
    return CliResult(status, lines, seconds, peak)


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, float, bool]:
    """(exit status, peak MB, timed out). The peak is the child's VmHWM, read every 20 ms:
    its rusage would include the parent's memory, which the child inherits at fork."""
    deadline = time.monotonic() + timeout
    timed_out, peak = False, 0.0
    while proc.poll() is None:
        peak = max(peak, _vm_hwm_mb(proc.pid))
        if time.monotonic() > deadline and not timed_out:
            proc.kill()
            timed_out = True
        time.sleep(0.02)
    return proc.returncode, peak, timed_out


def _vm_hwm_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0
