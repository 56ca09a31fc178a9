"""Faults while running (issue 7, part 3) and security basics (part 5).

Faults: the disk fills while ``edgekit detect --save --json`` writes (a file size limit,
RLIMIT_FSIZE, with SIGXFSZ ignored so writes fail with EFBIG), SIGTERM at random moments,
and an HTTP MJPEG camera that vanishes and comes back. Whatever was written before the fault must
stay whole: every JSON line parses and the video opens and yields frames.

Covered elsewhere and not repeated here: a stream that vanishes and is reopened with backoff,
and a replaced video file (tests/edgekit/sources/test_video.py); the MQTT broker stopping and restarting,
and username/password and TLS against a real mosquitto (tests/edgekit/sinks/test_mqtt.py).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np
import pytest

from edgekit.errors import ModelError
from edgekit.inspect.modelwatch import ModelWatcher, find_versions
from tests.conftest import shared_model, write_mjpg

ROOT = Path(__file__).resolve().parents[2]
SSD = "ssd_mobilenet_v1_coco_quant.tflite"
SMALL = "mobilenet_v1_0.25_128_quant.tflite"
W, H, FRAMES = 320, 240, 90


@pytest.fixture(scope="module")
def ssd(shared_models: Path) -> Path:
    return shared_model(shared_models, SSD)


@pytest.fixture(scope="module")
def noisy_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """90 frames of noise at 15 fps: about 58 kB of MJPG a frame, so the video reaches a size
    limit long before the JSON lines (about 80 bytes a frame) do."""
    path = tmp_path_factory.mktemp("video") / "noise.avi"
    rng = np.random.default_rng(7)
    return write_mjpg(path, (rng.integers(0, 256, (H, W, 3), dtype=np.uint8) for _ in range(FRAMES)), 15)


def _file_size_limit(limit: int) -> Callable[[], None]:
    def pre() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


def _detect(*args: str) -> list[str]:
    return [sys.executable, "-m", "edgekit", "detect", *args]


def _json_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), f"a cut-off last line: {text[-80:]!r}"
    return [json.loads(line) for line in text.splitlines()]


def _video_frames(path: Path) -> int:
    cap = cv2.VideoCapture(str(path))
    assert cap.isOpened(), f"{path} does not open"
    n = 0
    while True:
        ok, image = cap.read()
        if not ok:
            break
        assert image.shape == (H, W, 3)
        n += 1
    cap.release()
    return n


# --- the disk fills ------------------------------------------------------------------------
# (file size limit, JSON lines kept, video frames that play, words of each one-line error)
VIDEO_CUT = "was cut short (only {limit} bytes reached the disk, its end and index are missing)"
JSON_CUT = "cannot write JSON lines (File too large; disk full or file size limit?): stopped after"
DISK_FULL = [
    # The video reaches the limit, the JSON log does not: every line is there, the video plays
    # its first frames, and the run says the video was cut short (OpenCV's writer reports no
    # write error; VideoWriterSink.close finds it from the finished file).
    (300_000, range(FRAMES, FRAMES + 1), range(1, FRAMES), [VIDEO_CUT]),
    # The JSON log reaches it too: the run stops there, every line kept is whole, and both
    # errors are told (the video holds no whole frame at this size).
    (3_000, range(1, FRAMES), None, [VIDEO_CUT, JSON_CUT]),
]


@pytest.mark.parametrize("limit, kept, plays, messages", DISK_FULL)
def test_disk_full_keeps_what_was_written_whole(ssd: Path, noisy_video: Path, tmp_path: Path, limit: int,
                                                kept: range, plays: range | None, messages: list[str]) -> None:
    log, saved = tmp_path / "log.jsonl", tmp_path / "out.avi"
    with log.open("w") as out:
        proc = subprocess.run(_detect("-m", str(ssd), "--source", str(noisy_video), "--save", str(saved), "--json",
                                      "-q"), stdout=out, stderr=subprocess.PIPE, text=True, timeout=60,
                              preexec_fn=_file_size_limit(limit), env={**os.environ, "DISPLAY": ""})
    assert proc.returncode == 2, proc.stderr
    lines = _json_lines(log)
    assert len(lines) in kept and [x["frame"] for x in lines] == list(range(len(lines)))
    err = proc.stderr.splitlines()
    assert len(err) == len(messages) and "Traceback" not in proc.stderr
    for line, words in zip(err, messages):
        assert line.startswith("edgekit detect: error: ") and words.format(limit=limit) in line
    assert saved.stat().st_size == limit
    if plays is not None:
        assert _video_frames(saved) in plays


def test_jsonl_sink_failure_leaves_no_half_line(tmp_path: Path) -> None:
    """In process: a write that fails part way is taken back, and the sink writes no more."""
    path = tmp_path / "log.jsonl"
    code = f"""
import dataclasses, resource, signal
from edgekit.results import Detections, FrameResult
from edgekit.sinks.jsonl import JsonlSink
from edgekit.errors import InputError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
sink = JsonlSink({str(path)!r})
fr = FrameResult(index=0, timestamp=1.0, capture_ts=1.0, latency_ms=1.0, result=Detections.empty())
n = 0
try:
    while True:
        sink.write(dataclasses.replace(fr, index=n)); n += 1
except InputError as exc:
    print(n, exc)
try:
    sink.write(fr)
except InputError as exc:
    print("again:", exc)
sink.close(); sink.close()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    first, again = out.stdout.splitlines()
    n = int(first.split()[0])
    assert len(_json_lines(path)) == n > 0 and path.stat().st_size <= 1000
    assert "stopped after" in first and again.startswith("again: cannot write JSON lines")


def test_a_reader_that_leaves_ends_the_run_quietly(ssd: Path, noisy_video: Path) -> None:
    """`edgekit detect --json | head -3`: a closed pipe is the reader's choice, not an error."""
    proc = subprocess.Popen(_detect("-m", str(ssd), "--source", str(noisy_video), "--json", "-q"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = [json.loads(proc.stdout.readline()) for _ in range(3)]  # type: ignore[union-attr]
    proc.stdout.close()  # type: ignore[union-attr]
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert proc.wait(timeout=30) == 0 and err == "" and [x["frame"] for x in head] == [0, 1, 2]


# --- SIGTERM at random moments -----------------------------------------------------------------
def test_sigterm_at_random_moments_leaves_whole_outputs(ssd: Path, noisy_video: Path, tmp_path: Path) -> None:
    """tests/edgekit/test_detect.py sends one signal after five lines; here it comes at random times,
    also before the first frame and while frames are being written."""
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    for attempt in range(4):
        saved = tmp_path / f"out{attempt}.avi"
        proc = subprocess.Popen(_detect("-m", str(ssd), "--source", str(noisy_video), "--realtime", "--save",
                                        str(saved), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "DISPLAY": ""})
        first = proc.stdout.readline()  # type: ignore[union-attr]  # the loop is running
        delay = rng.uniform(0.0, 2.5)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=30)
        where = f"seed {seed}, attempt {attempt}, SIGTERM after {delay:.2f} s"
        assert proc.returncode == 0 and "Traceback" not in err, f"{where}: {err}"
        lines = [json.loads(line) for line in (first + rest).splitlines()]
        assert lines and [x["frame"] for x in lines] == sorted({x["frame"] for x in lines}), where
        assert _video_frames(saved) >= len(lines), where


# --- the source vanishes and returns ---------------------------------------------------------
class MjpegServer:
    """An HTTP MJPEG camera on 127.0.0.1 (multipart/x-mixed-replace, 15 fps of grey frames):
    stop() drops its clients and its port, start() brings it back on the same port."""

    def __init__(self) -> None:
        self.port = 0
        self.jpeg = cv2.imencode(".jpg", np.full((H, W, 3), 128, np.uint8))[1].tobytes()
        self.alive = threading.Event()
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> MjpegServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                self.send_response(200)
                self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
                self.end_headers()
                part = b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(outer.jpeg)
                with contextlib.suppress(OSError):
                    while outer.alive.is_set():
                        self.wfile.write(part + outer.jpeg + b"\r\n")
                        time.sleep(1 / 15)

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.alive.set()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.alive.clear()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def test_a_live_source_that_vanishes_and_returns(ssd: Path, tmp_path: Path) -> None:
    """The camera goes away for 1.5 s mid-run: the run waits, reopens it and goes on; the JSON
    lines from before and after are all there and whole."""
    camera = MjpegServer().start()
    summary = tmp_path / "summary.json"
    try:
        proc = subprocess.Popen(_detect("-m", str(ssd), "--source", f"http://127.0.0.1:{camera.port}/stream.mjpg",
                                        "--json", "--duration", "6", "--summary-json", str(summary)),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline()  # type: ignore[union-attr]  # frames are flowing
        time.sleep(1.0)
        camera.stop()
        down = time.time()
        time.sleep(1.5)
        camera.start()
        up = time.time()
        rest, err = proc.communicate(timeout=30)
    finally:
        camera.stop()
    assert proc.returncode == 0 and "Traceback" not in err, err
    lines = [json.loads(line) for line in (first + rest).splitlines()]
    frames = [x["frame"] for x in lines]
    assert frames == sorted(set(frames))
    assert sum(x["timestamp"] < down for x in lines) >= 5 and sum(x["timestamp"] > up for x in lines) >= 5
    figures = json.loads(summary.read_text())
    assert figures["stopped_by"] == "duration" and figures["frames"]["processed"] == len(lines)
    assert "stopped delivering frames; reopening it" in err and "reopened stream" in err
    assert "1 reopens" in err


# --- security: data only, confined folders, local endpoints -----------------------------------------
CODE_DIRS = ("edgekit", "runtimes", "converters")
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "yaml"}


def _unsafe_uses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"import {n}" for n in names if n.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            # bare eval()/exec()/compile(), or builtins.eval(); model.compile() and re.compile() are fine
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
            if (name in FORBIDDEN_CALLS and (isinstance(f, ast.Name) or owner == "builtins")) \
                    or name in {"unsafe_load", "full_load"}:
                found.append(f"{name}()")
            found += [f"{name}(allow_pickle=True)" for k in node.keywords
                      if k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and k.value.value is False)]
    return found


def test_the_unsafe_scan_finds_what_it_looks_for() -> None:
    code = ("import pickle\nimport yaml\neval('1')\nnp.load(p, allow_pickle=True)\nyaml.unsafe_load(s)\n"
            "builtins.exec(c)\nmodel.compile()\nre.compile('x')\nnp.load(p, allow_pickle=False)\n")
    assert sorted(_unsafe_uses(ast.parse(code))) == ["eval()", "exec()", "import pickle", "import yaml",
                                                     "load(allow_pickle=True)", "unsafe_load()"]


def test_no_eval_exec_pickle_or_yaml_in_the_code() -> None:
    """Models, metadata, configs and golden files are parsed as data only."""
    files = [p for d in CODE_DIRS for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 30
    bad = {str(p.relative_to(ROOT)): u for p in files if (u := _unsafe_uses(ast.parse(p.read_text(), str(p))))}
    assert bad == {}


class _Boom:
    """Unpickling this would create the marker file: proof that a golden file was not executed."""

    marker = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path(self.marker).touch, ())


@pytest.fixture()
def model_dir(shared_models: Path, tmp_path: Path) -> Path:
    root = tmp_path / "models" / "inspection"
    (root / "1").mkdir(parents=True)
    (root / "1" / "model.tflite").write_bytes(shared_model(shared_models, SMALL).read_bytes())
    return root


def _outside(tmp_path: Path, shared_models: Path) -> Path:
    outside = tmp_path / "elsewhere" / "7"
    outside.mkdir(parents=True)
    (outside / "model.tflite").write_bytes(shared_model(shared_models, SMALL).read_bytes())
    return outside


@pytest.mark.parametrize("link", ["version folder", "model file"])
def test_a_version_leading_outside_the_model_folder_is_refused(model_dir: Path, tmp_path: Path,
                                                               shared_models: Path, link: str) -> None:
    outside = _outside(tmp_path, shared_models)
    if link == "version folder":
        (model_dir / "2").symlink_to(outside, target_is_directory=True)
    else:
        (model_dir / "2").mkdir()
        (model_dir / "2" / "model.tflite").symlink_to(outside / "model.tflite")
    (model_dir / "3").symlink_to(model_dir / "1", target_is_directory=True)  # inside: fine
    assert find_versions(model_dir) == {1: model_dir / "1" / "model.tflite", 3: model_dir / "3" / "model.tflite"}
    with ModelWatcher(model_dir, delegate="cpu", warmup=0).start(background=False) as w:
        assert w.current is not None and w.current.version == 3


def test_a_pickled_golden_file_is_refused_not_run(model_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    _Boom.marker = str(marker)
    (model_dir / "golden").mkdir()
    np.save(model_dir / "golden" / "case.npy", np.array([_Boom()], dtype=object), allow_pickle=True)
    with pytest.raises(ModelError, match="no version .* can serve"):
        ModelWatcher(model_dir, delegate="cpu", warmup=0).start(background=False)
    assert not marker.exists()


CONFIG = """\
device = "cell-1"
[source]
camera = 0
[model]
path = {model!r}
[sinks.jsonl]
directory = {events!r}
"""


@pytest.mark.parametrize("model, events, want_model, want_events", [
    ("m.tflite", "ev", "cfg/m.tflite", "cfg/ev"),  # relative: from the config's folder, not the cwd
    ("../../shared/m.tflite", "../ev", "cfg/../../shared/m.tflite", "cfg/../ev"),  # '..' kept, as written
    ("/opt/models/m.tflite", "/var/lib/edgekit/ev", "/opt/models/m.tflite", "/var/lib/edgekit/ev"),  # absolute
])
def test_config_paths_are_the_operators_choice_from_the_configs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       model: str, events: str, want_model: str,
                                                                       want_events: str) -> None:
    """The rule: a config is written by the operator, so an absolute path or '..' in it is an
    explicit choice and kept; a relative path never depends on the folder edgekit started in.
    (Model *folders* are different: what appears in them is not trusted, see above.)"""
    from edgekit.inspect import load_config

    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    (cfg_dir / "c.toml").write_text(CONFIG.format(model=model, events=events))
    monkeypatch.chdir(tmp_path)
    c = load_config(cfg_dir / "c.toml")

    def expect(p: str) -> str:
        return p if p.startswith("/") else str(tmp_path / p)
    assert c.model.path == expect(want_model)
    assert c.sinks.jsonl is not None and c.sinks.jsonl.directory == expect(want_events)


def test_network_endpoints_listen_on_localhost_unless_configured(tmp_path: Path) -> None:
    from edgekit.inspect import Triggers, parse_config
    from edgekit.inspect.metrics import CellMetrics

    metrics = CellMetrics()
    metrics.serve(port=0)
    triggers = Triggers(http_port=0).start()
    try:
        assert metrics._server.server_address[0] == "127.0.0.1"
        assert triggers._server is not None and triggers._server.server_address[0] == "127.0.0.1"
    finally:
        metrics.close()
        triggers.close()
    text = CONFIG.format(model="m.tflite", events="ev") + "[sinks.mqtt]\n[metrics]\nenabled = true\n[trigger]\n" \
        "mode = 'on-demand'\nhttp_port = 8089\n"
    c = parse_config(text, base=tmp_path)
    assert (c.metrics.host, c.trigger.http_host, c.sinks.mqtt.host) == ("127.0.0.1",) * 3  # type: ignore[union-attr]
    wide = text.replace("enabled = true", "enabled = true\nhost = '0.0.0.0'").replace(
        "http_port = 8089", "http_port = 8089\nhttp_host = '0.0.0.0'")
    c = parse_config(wide, base=tmp_path)
    assert (c.metrics.host, c.trigger.http_host) == ("0.0.0.0", "0.0.0.0")
