"""Inspection config (errors name key and line), zones and rules, triggers and the Inspector."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import ConfigError, InputError
from edgekit.inspect import (Anchor, Inspector, PublishMode, Rule, TriggerMode, Triggers, TriggerTimeout, Zone,
                             evaluate, load_config, parse_config)

ROOT = Path(__file__).resolve().parents[3]

BASE = """\
device = "cell-4"
[source]
camera = 0
width = 640
height = 480
[model]
path = "model.tflite"
[[zones]]
name = "tray"
polygon = [[100, 100], [500, 100], [500, 400], [100, 400]]
[[rules]]
zone = "tray"
label = "screw"
count = 4
"""


def test_base_config(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(BASE)
    c = load_config(tmp_path / "c.toml")
    assert c.device == "cell-4" and c.source.camera == 0 and c.model.path == str(tmp_path / "model.tflite")
    assert c.rules == (Rule("screw", "tray", 4, 4, where=f"{tmp_path / 'c.toml'}:11"),)
    assert c.zones[0].where.endswith("c.toml:8") and c.trigger.mode is TriggerMode.CONTINUOUS
    assert c.sinks.mqtt is None and not c.metrics.enabled


# (text appended to or replacing part of BASE, line, key, words of the message)
ERRORS = [
    ("[[rules]]\nlabel = 'defect'\ncount = 'four'\n", 17, "rules[1].count", "expected an integer >= 0, got 'four'"),
    ("[[rules]]\nlabel = 'defect'\ncont = 0\n", 17, "rules[1].cont", "unknown key; did you mean 'count'?"),
    ("[[rules]]\nlabel = 'defect'\n", 15, "rules[1]", "needs count"),
    ("[[rules]]\nlabel = 'x'\ncount = 1\nmin = 1\n", 17, "rules[1].count", "not both"),
    ("[[rules]]\nlabel = 'x'\nmin = 3\nmax = 1\n", 17, "rules[1].min", "above max 1"),
    ("[[rules]]\nlabel = 'x'\nzone = 'bin'\ncount = 1\n", 17, "rules[1].zone", "a zone defined in [[zones]] (tray)"),
    ("[[zones]]\nname = 'tray'\npolygon = [[0, 0], [1, 0], [1, 1]]\n", 16, "zones[1].name", "defined twice"),
    ("[[zones]]\nname = 'line'\npolygon = [[0, 0], [5, 5], [9, 9]]\n", 17, "zones[1].polygon", "no area"),
    ("[[zones]]\nname = 'z'\npolygon = [[0, 0],\n  [5, 'a'],\n  [9, 9]]\n", 17, "zones[1].polygon",
     "at least 3 [x, y] pixel points"),
    ("[[zones]]\nname = 'big'\npolygon = [[0, 0], [700, 0], [700, 10]]\n", 15, "zone 'big'", "outside the 640x480"),
    ("[[zones]]\nname = 'z'\npolygon = [[0, 0], [5, 0], [5, 5]]\nanchor = 'middle'\n", 18, "zones[1].anchor",
     "one of 'center', 'bottom_center', 'all_corners'"),
    ("[trigger]\nmode = 'sometimes'\n", 16, "trigger.mode", "one of 'continuous', 'on-demand'"),
    ("[trigger]\nmode = 'on-demand'\n", 16, "trigger.mode", "on-demand needs a trigger"),
    ("[trigger]\nhttp_port = 70000\n", 16, "trigger.http_port", "a port number 1-65535"),
    ("[sinks.mqtt]\nport = 1883\npassword = 'x'\n", 15, "sinks.mqtt", "password given without username"),
    ("[sinks.mqtt]\npassword_env = 'NOPE_NOT_SET'\nusername = 'u'\n", 16, "sinks.mqtt.password_env", "is not set"),
    ("[sinks.mqtt]\nhots = 'broker'\n", 16, "sinks.mqtt.hots", "did you mean 'host'?"),
    ("[sinks.webhook]\nurl = 'ftp://x'\n", 15, "sinks.webhook", "http:// or https://"),
    ("[sinks.jsonl]\nmax_bytes = 0\n", 16, "sinks.jsonl.max_bytes", "an integer >= 1024 (bytes), got 0"),
    ("[metrics]\nport = '9100'\n", 16, "metrics.port", "got '9100' (a string)"),
    ("[metrics]\nenabled = 1\n", 16, "metrics.enabled", "expected bool, got 1 (an integer)"),
    ("[sinks]\nkafka = {}\n", 16, "sinks.kafka", "unknown key"),
    ("devise = 'x'\n", 15, "rules[0].devise", "unknown key"),  # TOML: it belongs to the last [[rules]]
]


@pytest.mark.parametrize("extra, line, key, words", ERRORS, ids=[e[2] + ":" + e[3][:20] for e in ERRORS])
def test_errors_name_key_and_line(extra: str, line: int, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(BASE + extra, name="cell.toml", env={})
    msg = str(err.value)
    assert msg.startswith(f"cell.toml:{line}: "), msg
    assert key in msg and words in msg, msg


@pytest.mark.parametrize("replace, by, line, key, words", [
    ('device = "cell-4"', 'device = "cell/4"', 1, "device", "without '/'"),
    ("camera = 0", "camera = -1", 3, "source.camera", "a camera index >= 0"),
    ("camera = 0", "url = 'rtsp://cam'\ncamera = 0", 2, "source", "exactly one of camera, path, url, picamera"),
    ('path = "model.tflite"', 'path = "m.tflite"\ndelegate = "tpu"', 8, "model.delegate", "unknown delegate 'tpu'"),
    ('path = "model.tflite"', 'threshold = 1.5\npath = "m"', 7, "model.threshold", "a number in 0..1"),
    ('path = "model.tflite"', "", 6, "model", "exactly one of path"),
    ("[source]\ncamera = 0\nwidth = 640\nheight = 480\n", "", 0, "source", "missing"),
    ('device = "cell-4"', 'devise = "cell-4"', 1, "devise", "did you mean 'device'?"),
])
def test_more_errors(replace: str, by: str, line: int, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(BASE.replace(replace, by), name="c.toml", env={})
    msg = str(err.value)
    assert msg.startswith(f"c.toml:{line}: " if line else "c.toml: "), msg
    assert key in msg and words in msg, msg


def test_not_toml_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"c\.toml: not valid TOML: .*line 3"):
        parse_config("device = 'a'\n[source]\ncamera = = 0\n", name="c.toml")


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("/nonexistent/inspection.toml")


def test_password_from_environment_and_relative_paths(tmp_path: Path) -> None:
    text = BASE.replace('device = "cell-4"', 'device = "c"\nstate_dir = "st"')
    text += "[sinks.mqtt]\nusername = 'u'\npassword_env = 'PW'\nca_certs = 'ca.pem'\ntls = true\n[sinks.jsonl]\n"
    c = parse_config(text, base=tmp_path, env={"PW": "s3cret"})
    assert c.sinks.mqtt is not None and c.sinks.mqtt.password == "s3cret"
    assert c.sinks.mqtt.ca_certs == str(tmp_path / "ca.pem")
    assert c.sinks.mqtt.queue_path == str(tmp_path / "st" / "mqtt-queue.db")
    assert c.sinks.jsonl is not None and c.sinks.jsonl.directory == str(tmp_path / "st" / "events")
    assert "s3cret" not in repr(c.sinks.mqtt)


def test_check_labels_and_frame() -> None:
    c = parse_config(BASE)
    c.check_labels(["screw", "defect"])
    with pytest.raises(ConfigError, match=r"^<config>:11: rules label 'scerw' is not a label of the model\. "
                                          r"Did you mean 'screw'\?$"):
        parse_config(BASE.replace("label = \"screw\"", "label = \"scerw\"")).check_labels(["screw", "nut"])
    with pytest.raises(ConfigError, match="reaches outside the 320x240 frame"):
        c.check_frame(320, 240)


def test_example_config_loads() -> None:
    c = load_config(ROOT / "examples" / "raspberrypi" / "inspection.toml", env={"EDGEKIT_MQTT_PASSWORD": "x"})
    assert c.trigger.mode is TriggerMode.ON_DEMAND and len(c.rules) == 3
    # MQTT ships commented out (a fresh install has no password); tests/examples enables it
    assert c.sinks.mqtt is None and c.sinks.jsonl is not None and c.metrics.host == "127.0.0.1"


# --- zones and rules ---------------------------------------------------------------------------

TRAY = Zone("tray", [(100, 100), (500, 100), (500, 400), (100, 400)])
TRIANGLE = Zone("tri", [(0, 0), (200, 0), (0, 200)])


def _box(cx: float, cy: float, w: float = 20, h: float = 20) -> list[float]:
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


@pytest.mark.parametrize("boxes, labels, scores, passed, counts", [
    ([_box(150, 150)] * 4, ["screw"] * 4, None, True, [4, 0]),
    ([_box(150, 150)] * 3, ["screw"] * 3, None, False, [3, 0]),
    ([_box(150, 150)] * 4 + [_box(50, 50)], ["screw"] * 5, None, True, [4, 0]),  # 5th outside the tray
    ([_box(150, 150)] * 4 + [_box(600, 450)], ["screw"] * 4 + ["defect"], None, False, [4, 1]),
    ([_box(150, 150)] * 4 + [_box(600, 450)], ["screw"] * 4 + ["defect"], [0.9] * 4 + [0.2], True, [4, 0]),
    ([_box(150, 150)] * 4, ["screw"] * 4, [0.9, 0.9, 0.9, 0.4], False, [3, 0]),  # below threshold 0.5
    (np.zeros((0, 4)), [], None, False, [0, 0]),
])
def test_evaluate(boxes: list[list[float]], labels: list[str], scores: list[float] | None, passed: bool,
                  counts: list[int]) -> None:
    rules = [Rule("screw", "tray", 4, 4), Rule("defect", max=0)]
    v = evaluate(boxes, labels, [TRAY], rules, scores=scores, threshold=0.5)
    assert v.passed is passed and [r.count for r in v.results] == counts
    assert v.to_dict()["verdict"] == ("PASS" if passed else "FAIL")


@pytest.mark.parametrize("anchor, box, inside", [
    (Anchor.CENTER, [10, 10, 60, 60], True),
    (Anchor.CENTER, [120, 120, 160, 160], False),  # centre beyond the hypotenuse
    (Anchor.BOTTOM_CENTER, [20, 60, 60, 120], True),  # bottom centre (40, 120)
    (Anchor.BOTTOM_CENTER, [100, 20, 140, 120], False),  # centre (120, 70) inside, bottom (120, 120) not
    (Anchor.ALL_CORNERS, [10, 10, 60, 60], True),
    (Anchor.ALL_CORNERS, [10, 10, 150, 60], False),  # corner (150, 60) outside
])
def test_anchors(anchor: Anchor, box: list[float], inside: bool) -> None:
    zone = Zone("tri", TRIANGLE.polygon, anchor)
    assert zone.contains(np.array([box], dtype=float)).tolist() == [inside]


@pytest.mark.parametrize("boxes, labels, scores, message", [
    (np.zeros((2, 3)), ["a", "b"], None, r"\(N, 4\)"),
    (np.zeros((2, 4)), ["a"], None, "2 boxes, 1 labels"),
    (np.zeros((2, 4)), ["a", "b"], [0.1], "1 scores"),
])
def test_evaluate_rejects_mismatched_arrays(boxes: np.ndarray, labels: list[str], scores: list[float] | None,
                                            message: str) -> None:
    with pytest.raises(InputError, match=message):
        evaluate(boxes, labels, [TRAY], [Rule("a", max=0)], scores=scores)


def test_rule_and_zone_constructor_errors() -> None:
    with pytest.raises(ConfigError, match="needs count, min or max"):
        Rule("screw")
    with pytest.raises(ConfigError, match="at least 3"):
        Zone("z", [(0, 0), (1, 1)])
    with pytest.raises(ConfigError, match="not defined"):
        Inspector([TRAY], [Rule("screw", "bin", max=1)])


# --- triggers and the Inspector ---------------------------------------------------------------

SCREWS = np.array([_box(150, 150)] * 4), ["screw"] * 4


def test_continuous_publishes_changes_only_when_asked() -> None:
    insp = Inspector([TRAY], [Rule("screw", "tray", 4, 4)], publish=PublishMode.CHANGE)
    seq = [SCREWS, SCREWS, (SCREWS[0][:3], SCREWS[1][:3]), SCREWS]
    decisions = [insp.process(b, lab, frame=i, captured_at=float(i))[0] for i, (b, lab) in enumerate(seq)]
    assert [(d.passed, d.publish) for d in decisions] == [(True, True), (True, False), (False, True), (True, True)]


def test_on_demand_answers_with_a_frame_captured_after_the_trigger() -> None:
    clock = [100.0]
    insp = Inspector([TRAY], [Rule("screw", "tray", 4, 4)], mode=TriggerMode.ON_DEMAND,
                     triggers=Triggers(clock=lambda: clock[0], timeout=5))
    assert insp.process(*SCREWS, frame=1, captured_at=99.0) == []  # no trigger yet: no verdict
    req = insp.trigger("part-7")
    stale = insp.process(SCREWS[0][:2], SCREWS[1][:2], frame=2, captured_at=99.5)  # captured before the trigger
    fresh = insp.process(*SCREWS, frame=3, captured_at=100.1)
    assert stale == [] and [(d.frame, d.trigger_id, d.passed) for d in fresh] == [(3, "part-7", True)]
    assert req.result(0).passed
    late = insp.trigger("part-8")
    clock[0] = 106.0  # the camera stalled past the timeout
    [d] = insp.idle()
    assert d.trigger_id == "part-8" and "no frame captured within 5 s" in (d.error or "")
    with pytest.raises(TriggerTimeout):
        late.result(0)


def test_trigger_needs_on_demand_mode() -> None:
    with pytest.raises(ConfigError, match="on-demand"):
        Inspector([], [Rule("x", max=0)]).trigger()


def _answer_triggers(insp: Inspector, stop: threading.Event, decisions: list) -> None:
    frame = 0
    while not stop.is_set():
        frame += 1
        decisions += insp.process(*SCREWS, frame=frame, captured_at=time.perf_counter())
        time.sleep(0.01)


def test_file_and_http_triggers(tmp_path: Path) -> None:
    trigger_file = tmp_path / "trigger"
    triggers = Triggers(file=trigger_file, http_port=0, timeout=3)
    insp = Inspector([TRAY], [Rule("screw", "tray", 4, 4)], mode=TriggerMode.ON_DEMAND, triggers=triggers)
    stop = threading.Event()
    decisions: list = []
    with insp:
        worker = threading.Thread(target=_answer_triggers, args=(insp, stop, decisions))
        worker.start()
        try:
            url = f"http://127.0.0.1:{triggers.http_port}/trigger?wait=1"
            req = urllib.request.Request(url, data=json.dumps({"id": "part-42"}).encode(), method="POST")
            with urllib.request.urlopen(req, timeout=5) as resp:
                body = json.loads(resp.read())
            assert resp.status == 200 and body["trigger"] == "part-42" and body["verdict"] == "PASS"
            with urllib.request.urlopen(urllib.request.Request(url.split("?")[0], data=b"", method="POST")) as resp:
                assert resp.status == 202
            trigger_file.write_text("part-43\n")
            deadline = time.monotonic() + 3
            while not any(d.trigger_id == "part-43" for d in decisions) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not trigger_file.exists()
            assert [(d.trigger_id, d.trigger_source, d.passed) for d in decisions] == [
                ("part-42", "http", True), ("t2", "http", True), ("part-43", "file", True)]
        finally:
            stop.set()
            worker.join()
    assert triggers._server is None  # closed with the inspector


def test_trigger_file_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Triggers(file=tmp_path / "missing" / "trigger").start()


def test_the_delegate_is_read_once_into_a_typed_value() -> None:
    """[model] delegate = "edgetpu:usb:1" is the enum and the device, parsed in the config; the cell
    hands the typed value to load_model, which reads it as the CLI's --delegate text."""
    from edgekit.runtimes.delegates import Delegate, DelegateSpec, EdgeTPUDevice

    cfg = parse_config(BASE.replace('path = "model.tflite"', 'path = "m.tflite"\ndelegate = "EdgeTPU:usb:1"'),
                       name="c.toml", env={})
    assert cfg.model.delegate == DelegateSpec(Delegate.EDGETPU, EdgeTPUDevice("usb", 1))
    assert str(cfg.model.delegate) == "edgetpu:usb:1" and Delegate.parse(cfg.model.delegate) == (
        Delegate.EDGETPU, EdgeTPUDevice("usb", 1))
    assert parse_config(BASE, name="c.toml", env={}).model.delegate == DelegateSpec(Delegate.AUTO)
    with pytest.raises(ConfigError, match=r"c.toml:8: model.delegate: delegate 'cpu' takes no device"):
        parse_config(BASE.replace('path = "model.tflite"', 'path = "m.tflite"\ndelegate = "cpu:usb"'),
                     name="c.toml", env={})
    for text in ("auto", "cpu", "xnnpack", "edgetpu", "edgetpu:pci:0", "edgetpu::2"):
        assert str(DelegateSpec.parse(text)) == text
