"""The dashboard: its [dashboard] table, the JSON API and live view of a running cell, the token on a
non-local bind, no secret in any response, `edgekit detect --serve`, and the page in a real browser
(headless Chromium through Selenium) checked against the cell's own events."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from edgekit.errors import ConfigError
from edgekit.inspect import Cell
from edgekit.inspect.config import parse_config
from edgekit.inspect.dashboard import Dashboard, DashboardConfig, DashboardStage, TokenSource, parse_serve
from edgekit.inspect.dashboard.state import Counters, shift_start
from edgekit.inspect.verdict import Verdict

TOKEN = "tok-" + "7f3a9c" * 5  # 34 characters
PASSWORD = "mqtt-pw-Zq81xv"
HOOK_SECRET = "hook-secret-81Lw"


def dashboard_of(cell: Cell) -> Dashboard:
    """The dashboard an open cell serves (its DashboardStage's)."""
    stage = cell.stage(DashboardStage)
    assert stage is not None and stage.dashboard is not None
    return stage.dashboard


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def belt_config(tmp_path: Path, video: Path, dashboard: str, extra: str = "") -> str:
    from edgekit.inspect.parts.report import parts_tables

    return (f'device = "cell-7"\nstate_dir = "{tmp_path / "state"}"\n[source]\npath = "{video}"\n'
            f'[model]\npath = "{tmp_path / "oracle.tflite"}"\n'
            + parts_tables(320, 320).replace("[parts]\n", "[parts]\ncrops = true\n")
            + f'[sinks.jsonl]\ndirectory = "{tmp_path / "events"}"\n' + extra + "[dashboard]\n" + dashboard)


class OracleEngine:
    """The loop's Engine protocol answering each frame of a belt video with its true boxes (in frame
    order: a file read whole by one worker), ``delay`` seconds per frame like a model would take."""

    def __init__(self, frames: list[Any], delay: float) -> None:
        from edgekit.demo.scene import CLASS_NAMES

        self.lock = threading.Lock()
        self.frames, self.delay, self.names = frames, delay, CLASS_NAMES
        self._n = 0

    def staging(self) -> np.ndarray:
        return np.zeros(1, np.uint8)

    def write(self, image: np.ndarray, dest: np.ndarray | None = None, *, bgr: bool = False) -> Any:
        self._n += 1
        return self._n - 1  # the frame's place in the file, handed to decode

    def load(self, staged: np.ndarray) -> None:
        pass

    def infer(self) -> list[np.ndarray]:
        time.sleep(self.delay)
        return []

    def decode(self, outputs: list[np.ndarray], transform: Any) -> Any:
        from edgekit.results import Detections

        f = self.frames[min(int(transform), len(self.frames) - 1)]
        return Detections(f.boxes, np.full(len(f.boxes), 0.9, np.float32), f.class_ids,
                          tuple(self.names[c] for c in f.class_ids))


class OracleDetector:
    """A CellDetector running the real loop and video reader with :class:`OracleEngine`."""

    def __init__(self, frames: list[Any], model: Path, delay: float = 0.0) -> None:
        from edgekit.demo.scene import CLASS_NAMES

        self.labels = list(CLASS_NAMES)
        self.engine = OracleEngine(frames, delay)
        model.write_bytes(b"the oracle reads no model")
        self.model = SimpleNamespace(path=str(model), backend=SimpleNamespace(name="oracle"),
                                     delegate=SimpleNamespace(value="cpu"))

    def stream(self, source: Any, *, max_frames: int | None = None, duration: float | None = None) -> Any:
        from edgekit.loop import LoopOptions, Stream

        return Stream(self.engine, source, LoopOptions(max_frames=max_frames, duration=duration))

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def belt_video(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from edgekit.demo.conveyor import make_video

    return make_video(tmp_path_factory.mktemp("belt") / "belt.avi", n_frames=150, fps=15.0, seed=0, size=320)


def read_events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


class Client:
    """Plain HTTP requests that keep every response (status, headers, body) for the secrets check."""

    def __init__(self, port: int) -> None:
        self.port, self.seen = port, []

    def request(self, path: str, *, method: str = "GET", headers: dict[str, str] | None = None,
                limit: int | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, headers=headers or {})
            resp = conn.getresponse()
            body = resp.read(limit) if limit else resp.read()
            got = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
        finally:
            conn.close()
        self.seen.append(got)
        return got

    def text_seen(self) -> str:
        return "\n".join(json.dumps(h) + "\n" + b.decode("latin-1") for _, h, b in self.seen)


# --- the [dashboard] table -------------------------------------------------------------------------
HEAD = '[source]\npath = "belt.avi"\n[model]\npath = "m.tflite"\n'


def test_config_reads_the_dashboard_table(tmp_path: Path) -> None:
    cfg = parse_config(HEAD + '[dashboard]\nport = 8080\nshifts = ["22:00", "06:00", "14:00"]\nmax_fps = 2\n',
                       base=tmp_path, env={})
    d = cfg.dashboard
    assert (d.port, d.host, d.token, d.shifts, d.max_fps) == (8080, "127.0.0.1", None, (360, 840, 1320), 2.0)
    assert parse_config(HEAD, base=tmp_path).dashboard is None
    env = parse_config(HEAD + '[dashboard]\nport = 8080\nhost = "0.0.0.0"\ntoken_env = "DASH"\n', base=tmp_path,
                       env={"DASH": TOKEN}).dashboard
    assert (env.token, env.token_source) == (TOKEN, TokenSource.ENVIRONMENT)
    made = parse_config(HEAD + '[dashboard]\nport = 8080\nhost = "0.0.0.0"\n', base=tmp_path, env={}).dashboard
    assert made.token_source == TokenSource.GENERATED and len(made.token) >= 30


@pytest.mark.parametrize("table, env, message", [
    ('[dashboard]\nhost = "0.0.0.0"\n', {}, r"<config>:5: dashboard.port: missing; expected a port"),
    ('[dashboard]\nport = 70000\n', {}, r"<config>:6: dashboard.port: expected a port number 1-65535"),
    ('[dashboard]\nport = 80\ntoken_env = "DASH"\n', {}, r"<config>:7: dashboard.token_env: environment variable "
                                                          r"DASH is not set"),
    ('[dashboard]\nport = 80\ntoken_env = "DASH"\n', {"DASH": "short"}, r":7: dashboard.token_env: .* 5 characters"),
    ('[dashboard]\nport = 80\ntrigger = true\n', {}, r':7: dashboard.trigger: needs \[trigger\] mode = "on-demand"'),
    ('[trigger]\nmode = "on-demand"\nfile = "t"\n[dashboard]\nport = 80\ntrigger = true\n', {},
     r":10: dashboard.trigger: the trigger endpoint needs a token"),
    ('[dashboard]\nport = 80\nshifts = ["6:00"]\n', {}, r':7: dashboard.shifts: expected an array of "HH:MM"'),
    ('[dashboard]\nport = 80\nmax_fps = 0\n', {}, r":7: dashboard.max_fps: expected frames per second"),
    ('[dashboard]\nport = 80\ntokn_env = "X"\n', {}, r":7: dashboard.tokn_env: unknown key; did you mean 'token_env'"),
])
def test_config_errors_name_line_and_key(tmp_path: Path, table: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(HEAD + table, base=tmp_path, env=env)


def test_the_pi_examples_dashboard_block_works_once_uncommented() -> None:
    example = Path(__file__).resolve().parents[4] / "examples" / "raspberrypi" / "inspection.toml"
    text = example.read_text()
    block = text[text.index("# [dashboard]"):].split("\n\n")[0]
    enabled = text.replace(block, "\n".join(line[2:] for line in block.splitlines()))
    config = parse_config(enabled, env={"EDGEKIT_DASHBOARD_TOKEN": TOKEN}).dashboard
    assert config is not None and (config.host, config.port, config.token) == ("0.0.0.0", 8080, TOKEN)
    assert config.shifts == (360, 840, 1320) and config.token_source == TokenSource.ENVIRONMENT


def test_a_non_local_bind_without_a_token_is_refused() -> None:
    with pytest.raises(ConfigError, match="binds 0.0.0.0, which other machines reach: it needs a token"):
        DashboardConfig(port=8080, host="0.0.0.0")


@pytest.mark.parametrize("text, expected", [("8080", ("127.0.0.1", 8080)), ("0.0.0.0:9000", ("0.0.0.0", 9000)),
                                            ("[::1]:81", ("::1", 81))])
def test_parse_serve(text: str, expected: tuple[str, int]) -> None:
    assert parse_serve(text) == expected


def test_shift_counters_roll_over_at_a_shift_start() -> None:
    import datetime as dt

    shifts = (360, 840, 1320)
    at = dt.datetime(2026, 5, 4, 5, 59)
    assert shift_start(at, shifts) == dt.datetime(2026, 5, 3, 22, 0)
    assert shift_start(at.replace(hour=14, minute=0), shifts) == dt.datetime(2026, 5, 4, 14, 0)
    now = [at.timestamp()]
    counters = Counters(shifts, clock=lambda: now[0])
    counters.add(Verdict.FAIL, "dent", now[0])
    now[0] = at.replace(hour=6, minute=1).timestamp()
    counters.add(Verdict.PASS, "none", now[0])
    doc = counters.to_dict()
    assert (doc["shift"]["label"], doc["shift"]["PASS"], doc["shift"]["FAIL"]) == ("06:00-14:00", 1, 0)
    assert (doc["since_start"]["PASS"], doc["since_start"]["FAIL"], doc["since_start"]["reasons"]) == (1, 1, {"dent": 1})


def test_frames_are_encoded_only_for_viewers_and_at_most_max_fps_however_many() -> None:
    """60 frames a second handed over: nothing is encoded while nobody looks; five viewers waiting
    for frame after frame get at most max_fps encodings a second between them, all shared."""
    from edgekit.inspect.dashboard.render import FrameEncoder, Overlay
    from edgekit.inspect.dashboard.state import ViewState
    from edgekit.results import Detections, FrameResult
    from edgekit.sources.frames import Frame

    state = ViewState()
    closing = threading.Event()
    encoder = FrameEncoder(state, Overlay(), max_fps=10, closing=closing)
    image = np.full((240, 320, 3), 90, np.uint8)
    dets = Detections(np.array([[10, 10, 80, 60]], np.float32), np.array([0.9], np.float32), np.array([0]), ("part",))

    def feed(seconds: float) -> None:
        t0 = time.perf_counter()
        i = 0
        while time.perf_counter() - t0 < seconds:
            now = time.perf_counter()
            state.observe(FrameResult(i, time.time(), now, 1.0, dets, captured=Frame(i, image, now, time.time(), 0.1)))
            i += 1
            time.sleep(1 / 60)

    feed(0.5)
    assert encoder.encoded == 0  # no viewer, no encoding
    got: list[list[int]] = [[] for _ in range(5)]

    def viewer(k: int) -> None:
        version = -1
        while not closing.is_set():
            e = encoder.wait_newer(version, 1.0)
            if e is not None and e.version != version:
                version = e.version
                got[k].append(version)

    threads = [threading.Thread(target=viewer, args=(k,)) for k in range(5)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    feed(1.5)
    elapsed = time.monotonic() - t0
    closing.set()
    encoder.wake_all()
    for t in threads:
        t.join(timeout=5)
    assert 5 <= encoder.encoded <= 10 * elapsed + 2
    assert all(len(g) >= 5 and g == sorted(g) for g in got)
    assert len({v for g in got for v in g}) <= encoder.encoded  # every viewer got the shared encodings


# --- a running cell over HTTP ------------------------------------------------------------------------
@pytest.mark.slow  # the MQTT and webhook sinks try their dead receivers for 2 s each when closing
def test_token_on_a_non_local_bind_and_no_secret_in_any_response(tmp_path: Path, belt_video: Any, modbus_server: Any,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    dead = free_port()  # an MQTT broker that is not there: events queue on disk
    extra = (f'[sinks.mqtt]\nhost = "127.0.0.1"\nport = {dead}\nusername = "line"\npassword_env = "MQTT_PW"\n'
             f'[sinks.webhook]\nurl = "http://127.0.0.1:{dead}/hook"\nheaders = {{ Authorization = "{HOOK_SECRET}" }}\n'
             f'[plc]\nhost = "127.0.0.1"\nport = {modbus_server.port}\ncoil = 4\ndelay = 0\n')
    text = belt_config(tmp_path, Path(belt_video.path), f'port = {port}\nhost = "0.0.0.0"\ntoken_env = "DASH_TOKEN"\n',
                       extra)
    config = parse_config(text, name="cell.toml", base=tmp_path, env={"DASH_TOKEN": TOKEN, "MQTT_PW": PASSWORD})
    client = Client(port)
    caplog.set_level("INFO", logger="edgekit.dashboard")
    with Cell(config, detector=OracleDetector(list(belt_video.frames), tmp_path / "oracle.tflite")) as cell:
        verdicts = list(cell.run())
        cell.events.flush()
        assert dashboard_of(cell).url == f"http://0.0.0.0:{port}"
        for path in ("/", "/api/status", "/api/parts", "/api/events?since=0", "/api/frame.jpg", "/stream.mjpg",
                     "/api/crops/1.jpg"):
            status, headers, _ = client.request(path)
            assert status == 401, path
            assert "bearer" in headers.get("www-authenticate", "").lower()
        assert client.request("/api/status", headers={"Authorization": "Bearer wrong-token"})[0] == 401
        assert client.request("/api/trigger", method="POST")[0] == 403  # triggers are off in this cell
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        status, _, body = client.request("/api/status", headers=bearer)
        doc = json.loads(body)
        assert status == 200 and doc["mode"] == "parts" and doc["model"]["file"] == "oracle.tflite"
        assert {s["name"] for s in doc["sinks"]} == {"rotatingjsonl", "mqtt", "webhook"}
        failed_parts = sum(not v.passed for v in verdicts)
        deadline = time.monotonic() + 10
        while doc["plc"].get("written", 0) < failed_parts and time.monotonic() < deadline:
            time.sleep(0.1)
            cell.events.flush()
            doc = json.loads(client.request("/api/status", headers=bearer)[2])
        assert doc["plc"]["state"] == "ok" and doc["plc"]["written"] == failed_parts > 0
        assert len(doc["plc"]["outputs"]) == 1 and str(modbus_server.port) in doc["plc"]["outputs"][0]
        # ?token= once: a cookie (HttpOnly, not the token) and a redirect that drops the token from the address
        status, headers, _ = client.request(f"/?token={TOKEN}")
        assert status == 303 and headers["location"] == "/"
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        jar = {"Cookie": cookie.split(";")[0]}
        for path in ("/", "/app.js", "/api/status", "/api/parts?since=0", "/api/events?since=0", "/api/frame.jpg"):
            assert client.request(path, headers=jar)[0] == 200, path
        parts = json.loads(client.request("/api/parts?since=0", headers=jar)[2])["parts"]
        failed = [p for p in parts if p["verdict"] == "FAIL"]
        assert [p["part"] for p in parts] == [v.sequence for v in verdicts] and failed
        status, headers, crop = client.request(failed[0]["crop_url"], headers=jar)
        assert status == 200 and headers["content-type"] == "image/jpeg" and crop[:2] == b"\xff\xd8"
        status, headers, chunk = client.request("/stream.mjpg", headers=bearer, limit=4096)
        assert status == 200 and headers["content-type"].startswith("multipart/x-mixed-replace")
        assert b"--edgekitframe" in chunk and b"\xff\xd8" in chunk
        assert client.request("/api/status?token=" + TOKEN)[0] == 200  # scripts may pass it in the query too
        assert client.request("/../../etc/passwd", headers=bearer)[0] == 404
    seen = client.text_seen()
    assert len(client.seen) > 20
    for secret in (TOKEN, PASSWORD, HOOK_SECRET):
        assert secret not in seen
    logged = caplog.text
    assert f"dashboard on http://0.0.0.0:{port} (token required)" in logged and TOKEN not in logged


def test_a_generated_token_is_printed_once_and_a_local_bind_needs_none(tmp_path: Path) -> None:
    made = DashboardConfig(port=0, host="0.0.0.0", token="generated-token-123456", token_source=TokenSource.GENERATED)
    with Dashboard(made) as dash:
        assert dash.announce().startswith(f"dashboard on http://0.0.0.0:{dash.port} (token required); open ")
        assert "?token=generated-token-123456" in dash.announce()
    with Dashboard(DashboardConfig(port=0)) as dash:
        assert dash.announce() == f"dashboard on http://127.0.0.1:{dash.port}"
        status, _, body = Client(dash.port).request("/api/status")
        assert status == 200 and json.loads(body)["loop"]["processed"] == 0
        # a web page elsewhere re-pointing its own DNS name at 127.0.0.1 gets nothing
        assert Client(dash.port).request("/api/status", headers={"Host": f"evil.example:{dash.port}"})[0] == 403
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{dash.port}"):
            Dashboard(DashboardConfig(port=dash.port)).start()


def test_trigger_endpoint_needs_the_token_and_fires_one_trigger(tmp_path: Path) -> None:
    fired: list[str] = []
    config = DashboardConfig(port=0, token=TOKEN, token_source=TokenSource.ENVIRONMENT, trigger=True)
    with Dashboard(config, trigger=lambda: fired.append(f"dashboard-{len(fired) + 1}") or fired[-1]) as dash:
        client = Client(dash.port)
        assert client.request("/api/trigger", method="POST")[0] == 401
        assert client.request(f"/api/trigger?token={TOKEN}", method="POST")[0] == 401  # not from a link
        status, _, body = client.request("/api/trigger", method="POST", headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 202 and json.loads(body) == {"trigger": "dashboard-1"} and fired == ["dashboard-1"]
        assert client.request("/api/trigger", method="GET", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 404
        assert client.request("/api/status", method="POST", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 404


def test_an_on_demand_cell_takes_a_trigger_from_the_dashboard_and_counts_frame_verdicts(tmp_path: Path,
                                                                                        belt_video: Any) -> None:
    """Per-frame rules without [parts]: the trigger endpoint fires the cell's own trigger; the frame
    counters match the cell's inspection events."""
    port = free_port()
    video = Path(belt_video.path)
    text = (f'device = "cell-8"\nstate_dir = "{tmp_path / "state"}"\n[source]\npath = "{video}"\n'
            f'[model]\npath = "{tmp_path / "oracle.tflite"}"\n[[rules]]\nlabel = "scratch"\nmax = 0\n'
            f'[trigger]\nmode = "on-demand"\nfile = "{tmp_path / "trigger"}"\n'
            f'[sinks.jsonl]\ndirectory = "{tmp_path / "events"}"\n'
            f'[dashboard]\nport = {port}\ntoken_env = "DASH_TOKEN"\ntrigger = true\n')
    config = parse_config(text, name="cell.toml", base=tmp_path, env={"DASH_TOKEN": TOKEN})
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    client = Client(port)
    with Cell(config, detector=OracleDetector(list(belt_video.frames), tmp_path / "oracle.tflite",
                                              delay=1 / 60)) as cell:
        runner = threading.Thread(target=lambda: list(cell.run()), daemon=True)
        runner.start()
        deadline = time.monotonic() + 20
        while dashboard_of(cell).state.processed < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.request("/api/trigger", method="POST")[0] == 401
        answers = [json.loads(client.request("/api/trigger", method="POST", headers=bearer)[2])["trigger"]
                   for _ in range(3)]
        deadline = time.monotonic() + 20  # each is answered by a frame captured after it
        while sum(e["kind"] == "inspection" for e in dashboard_of(cell).state.events_since(0)) < 3 \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        cell.stop("test done")
        runner.join(timeout=30)
        cell.events.flush()
        status = json.loads(client.request("/api/status", headers=bearer)[2])
    assert answers == ["dashboard-1", "dashboard-2", "dashboard-3"]
    decisions = [e["payload"] for e in read_events(tmp_path / "events") if e["kind"] == "inspection"]
    assert sorted(d["trigger"]["id"] for d in decisions) == answers
    counted = status["frame_counters"]["since_start"]
    assert status["mode"] == "frames" and counted["total"] == 3
    assert (counted["PASS"], counted["FAIL"]) == (sum(d["verdict"] == "PASS" for d in decisions),
                                                  sum(d["verdict"] == "FAIL" for d in decisions))
    assert TOKEN not in client.text_seen()


@pytest.mark.slow
def test_detect_serve_shows_the_live_view_of_a_plain_run(tmp_path: Path, shared_models: Path,
                                                         shared_images: Path) -> None:
    """`edgekit detect --serve` with the real SSD model on a video of the kites photo panning by."""
    import subprocess
    import sys

    import cv2

    from tests.conftest import shared_model

    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    photo = cv2.resize(cv2.imread(str(shared_images / "kite_and_cold.jpg")), (640, 426))
    video = tmp_path / "pan.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (640, 426))
    for i in range(40):
        writer.write(np.roll(photo, 6 * i, axis=1))
    writer.release()
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "edgekit", "detect", "-m", str(model), "--labels",
                             str(shared_models / "coco_labels.txt"), "--source", str(video), "--realtime", "--track",
                             "--json", "--serve", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env={**os.environ, "EDGEKIT_ISOLATE": "0"})
    client = Client(port)
    try:
        frames, deadline = [], time.monotonic() + 30
        while len(set(frames)) < 2 and time.monotonic() < deadline:
            try:
                status, headers, body = client.request("/api/frame.jpg")
            except OSError:
                time.sleep(0.2)
                continue
            if status == 200:
                frames.append(int(headers["x-edgekit-frame"]))
                assert cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR).shape == (426, 640, 3)
        assert len(set(frames)) >= 2, "the live view never changed"
        doc = json.loads(client.request("/api/status")[2])
        assert doc["mode"] == "detect" and doc["model"]["file"] == model.name and doc["loop"]["processed"] > 0
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"edgekit detect: dashboard on http://127.0.0.1:{port}\n" in err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) >= doc["loop"]["processed"] and any("track_id" in d for r in lines for d in r["detections"])


# --- the page in a real browser -----------------------------------------------------------------------
def _browser(tmp_path: Path) -> Any:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1100", f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.mark.slow
def test_the_page_in_a_browser_shows_what_the_cell_sent_to_its_sinks(tmp_path: Path, belt_video: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    text = belt_config(tmp_path, Path(belt_video.path), f"port = {port}\nmax_fps = 8\n")
    config = parse_config(text, name="cell.toml", base=tmp_path, env={})
    browser = _browser(tmp_path)
    try:
        # about 15 frames a second, like the camera the video stands for: 10 s for the 150 frames
        with Cell(config, detector=OracleDetector(list(belt_video.frames), tmp_path / "oracle.tflite",
                                                  delay=1 / 15)) as cell:
            verdicts: list[Any] = []
            runner = threading.Thread(target=lambda: verdicts.extend(cell.run()), daemon=True)
            runner.start()
            browser.get(f"http://127.0.0.1:{port}/")
            live = browser.find_element(By.ID, "live")
            wait = WebDriverWait(browser, 20, poll_frequency=0.1)
            first = wait.until(lambda b: int(live.get_attribute("data-frame")) >= 0 and live.get_attribute("data-frame"))
            pixels = "const c = document.createElement('canvas'); const i = document.getElementById('live');" \
                     "c.width = i.naturalWidth; c.height = i.naturalHeight; const x = c.getContext('2d');" \
                     "x.drawImage(i, 0, 0); const d = x.getImageData(0, 0, c.width, c.height).data;" \
                     "let h = 0; for (let k = 0; k < d.length; k += 97) h = (h * 31 + d[k]) >>> 0; return h;"
            before = browser.execute_script(pixels)
            wait.until(lambda b: live.get_attribute("data-frame") != first)
            wait.until(lambda b: b.execute_script(pixels) != before)  # the image itself changed
            assert browser.execute_script("return document.getElementById('live').naturalWidth") == 320
            runner.join(timeout=60)
            assert not runner.is_alive()
            cell.events.flush()
            events = read_events(tmp_path / "events")
            parts = [e["payload"] for e in events if e["kind"] == "part"]
            assert len(parts) == len(verdicts) >= 3
            passed = sum(p["verdict"] == "PASS" for p in parts)
            wait.until(lambda b: b.find_element(By.ID, "count-start-total").text == str(len(parts)))
            wait.until(lambda b: b.find_element(By.ID, "last-part").text == str(parts[-1]["part"]))
            # the file plays as a camera: under load the loop may skip a stale frame, so the page must show
            # what the loop itself counted, and that is (nearly) every frame of the video
            assert cell.summary is not None and cell.summary.processed >= len(belt_video.frames) - 5
            wait.until(lambda b: b.find_element(By.ID, "processed").text == str(cell.summary.processed))
            shot = tmp_path / "dashboard.png"
            browser.save_screenshot(str(shot))
            print(f"dashboard screenshot: {shot}")

            # each figure read in one script: the page re-renders its tables while it runs, and an element
            # found in one call may be gone by the next (StaleElementReferenceException)
            def read(element_id: str) -> str:
                return str(browser.execute_script("return document.getElementById(arguments[0]).innerText.trim()",
                                                  element_id))

            assert (read("count-start-pass"), read("count-start-fail")) == (str(passed), str(len(parts) - passed))
            assert (read("count-shift-pass"), read("count-shift-fail")) == (str(passed), str(len(parts) - passed))
            assert read("last-verdict") == parts[-1]["verdict"]
            assert read("last-reasons") == ", ".join(parts[-1]["reasons"])
            listed = browser.execute_script(
                "return [...document.querySelectorAll('#parts li')].map(li => li.dataset.part)")
            assert [int(n) for n in listed] == [p["part"] for p in reversed(parts)]
            reasons = dict(browser.execute_script(
                "return [...document.querySelectorAll('#reasons tr')]"
                ".map(tr => [tr.dataset.reason, tr.querySelectorAll('td')[1].innerText.trim()])"))
            expected: dict[str, int] = {}
            for p in parts:
                if p["verdict"] == "FAIL":
                    key = "+".join(sorted(p["reasons"]))
                    expected[key] = expected.get(key, 0) + 1
            assert reasons == {k: str(v) for k, v in expected.items()}
            crops = "return [...document.querySelectorAll('#parts li img')].map(img => img.naturalWidth)"
            assert len(browser.execute_script(crops)) == len(parts) - passed
            wait.until(lambda b: all(w > 0 for w in b.execute_script(crops)))
            assert read("model") == cell.events.model_version
            last_part_event = max(e["seq"] for e in events if e["kind"] == "part")

            def event_seqs(b: Any) -> list[int]:
                return [int(s) for s in b.execute_script(
                    "return [...document.querySelectorAll('#events li')].map(li => li.dataset.seq)")]

            wait.until(lambda b: max(event_seqs(b), default=0) >= last_part_event)
            seqs = event_seqs(browser)
            assert seqs == sorted(seqs, reverse=True) and set(seqs) <= {e["seq"] for e in events}
            browser.set_window_size(1920, 1080)  # a wall screen
            browser.save_screenshot(str(tmp_path / "dashboard-wall.png"))
            browser.set_window_size(390, 844)  # a phone
            browser.save_screenshot(str(tmp_path / "dashboard-phone.png"))
            width = browser.execute_script("return document.documentElement.scrollWidth")
            assert width <= 390, f"the page is {width} px wide on a 390 px phone"
    finally:
        browser.quit()
