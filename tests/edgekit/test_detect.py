"""The real SSD model on real photos (boxes checked against regions read off the photos, in
original pixels, for stretch and letterbox), the Detector/Classifier API, and `edgekit detect`
end to end on a video made from those photos, including SIGTERM/SIGINT mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgekit.errors import InputError, ModelError
from edgekit.preprocess import ResizeMode, load_image
from edgekit.results import Detections
from edgekit.tasks import Classifier, Detector, DetectorOptions
from tests.conftest import shared_model, write_mjpg

SSD = "ssd_mobilenet_v1_coco_quant.tflite"

# Regions read off the photos by eye, (x1, y1, x2, y2) in the photos' own pixels.
GRACE_PERSON = (15, 20, 512, 600)  # grace_hopper.png, 512x600: her, cut by the bottom and right edges
KITE_PERSON = (217, 700, 270, 855)  # kite_and_cold.jpg, 1352x900: the crouching child in navy
KITE_GREEN = (593, 80, 670, 151)  # the big green kite, top centre
KITE_BLACK = (280, 238, 305, 281)  # the small black-and-white kite on the left


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union


def best_iou(dets: Detections, label: str, region: tuple[float, ...]) -> float:
    return max((iou(d.box, region) for d in dets if d.label == label), default=0.0)


@pytest.fixture(scope="module")
def ssd(shared_models: Path) -> Path:
    return shared_model(shared_models, SSD)


@pytest.fixture(scope="module", params=[ResizeMode.STRETCH, ResizeMode.LETTERBOX], ids=lambda m: m.value)
def detector(request: pytest.FixtureRequest, ssd: Path, shared_models: Path):
    with Detector.create_from_model_path(ssd, labels=shared_models / "coco_labels.txt", threshold=0.4,
                                         resize=request.param) as det:
        yield det


@pytest.mark.parametrize("image, label, region, min_iou", [
    ("grace_hopper.png", "person", GRACE_PERSON, 0.7),
    ("kite_and_cold.jpg", "person", KITE_PERSON, 0.5),
    ("kite_and_cold.jpg", "kite", KITE_GREEN, 0.5),
    ("kite_and_cold.jpg", "kite", KITE_BLACK, 0.4),
])
def test_ssd_finds_the_object_where_it_is(detector: Detector, shared_images: Path, image: str, label: str,
                                          region: tuple[int, ...], min_iou: float) -> None:
    dets = detector.detect(load_image(shared_images / image))
    assert best_iou(dets, label, region) >= min_iou, [(d.label, round(d.score, 2), d.box) for d in dets]


def test_ssd_sees_several_people_and_kites(detector: Detector, shared_images: Path) -> None:
    frame = load_image(shared_images / "kite_and_cold.jpg")
    dets = detector.detect(frame)
    labels = list(dets.labels)
    assert labels.count("person") >= 3 and labels.count("kite") >= 2
    assert (dets.xyxy >= 0).all() and (dets.xyxy[:, [0, 2]] <= 1352).all() and (dets.xyxy[:, [1, 3]] <= 900).all()
    assert (dets.scores >= 0.4).all()


def test_options_and_model_path_make_the_same_detector(ssd: Path, shared_models: Path,
                                                       shared_images: Path) -> None:
    frame = load_image(shared_images / "grace_hopper.png")
    labels = shared_models / "coco_labels.txt"
    with Detector.create_from_options(DetectorOptions(model=ssd, labels=labels, classes=["person"])) as a, \
            Detector.create_from_model_path(ssd, labels=labels, classes=["person"]) as b:
        da, db = a.detect(frame), b.detect(frame)
    assert len(da) >= 1 and set(da.labels) == {"person"}
    np.testing.assert_array_equal(da.xyxy, db.xyxy)


@pytest.mark.parametrize("frame, fragment", [
    (np.zeros((300, 300), np.uint8), "RGB uint8"),
    (np.zeros((300, 300, 3), np.float32), "RGB uint8"),
    (np.zeros((300, 300, 4), np.uint8), "RGB uint8"),
])
def test_detect_rejects_what_is_not_an_rgb_frame(ssd: Path, frame: np.ndarray, fragment: str) -> None:
    with Detector.create_from_model_path(ssd) as det, pytest.raises(InputError, match=fragment):
        det.detect(frame)


def test_unknown_class_suggests_the_label(ssd: Path, shared_models: Path) -> None:
    with pytest.raises(InputError, match="unknown class 'persn'.*Did you mean 'person'"):
        Detector.create_from_model_path(ssd, labels=shared_models / "coco_labels.txt", classes=["persn"])


def test_a_classifier_is_not_a_detector_and_the_reverse(shared_models: Path, ssd: Path,
                                                        shared_images: Path) -> None:
    mobilenet = shared_model(shared_models, "mobilenet_v2_1.0_224_quant.tflite")
    with pytest.raises(ModelError, match="not a detector.*Classifier"):
        Detector.create_from_model_path(mobilenet)
    with pytest.raises(ModelError, match="not a classifier.*Detector"):
        Classifier.create_from_model_path(ssd)
    with Classifier.create_from_model_path(mobilenet, labels=shared_models / "imagenet_labels.txt") as clf:
        top = clf.classify(load_image(shared_images / "grace_hopper.png")).top
    assert top is not None and top.label == "military uniform" and top.score > 0.8


def test_close_twice_then_using_it_is_a_clear_error(ssd: Path) -> None:
    det = Detector.create_from_model_path(ssd)
    det.close()
    det.close()
    with pytest.raises(ModelError, match="closed"):
        det.detect(np.zeros((10, 10, 3), np.uint8))


# --- `edgekit detect` end to end ------------------------------------------------------------
FRAME_W, FRAME_H = 676, 450  # kite_and_cold at half size; grace_hopper scaled to 450 high and centred


def _frames(images: Path) -> tuple[np.ndarray, np.ndarray, tuple[float, ...]]:
    kite = cv2.resize(cv2.imread(str(images / "kite_and_cold.jpg")), (FRAME_W, FRAME_H), interpolation=cv2.INTER_AREA)
    grace_img = cv2.resize(cv2.imread(str(images / "grace_hopper.png")), (384, 450), interpolation=cv2.INTER_AREA)
    grace = np.zeros((FRAME_H, FRAME_W, 3), np.uint8)
    grace[:, 146:146 + 384] = grace_img
    s = 0.75
    person = (GRACE_PERSON[0] * s + 146, GRACE_PERSON[1] * s, GRACE_PERSON[2] * s + 146, GRACE_PERSON[3] * s)
    return kite, grace, person


@pytest.fixture(scope="module")
def video(shared_images: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 frames at 15 fps: 30 of the kite beach, then 30 of Grace Hopper (MJPG .avi)."""
    kite, grace, _ = _frames(shared_images)
    path = write_mjpg(tmp_path_factory.mktemp("video") / "people.avi", (kite if i < 30 else grace for i in range(60)), 15)
    return path


def edgekit(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "edgekit", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DISPLAY": ""})


def test_cli_json_lines_on_a_video(ssd: Path, shared_models: Path, shared_images: Path, video: Path,
                                   tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    out = edgekit("detect", "-m", str(ssd), "--labels", str(shared_models / "coco_labels.txt"), "--source",
                  str(video), "--json", "-t", "0.4", "--summary-json", str(summary))
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [x["frame"] for x in lines] == list(range(60))
    assert all(set(x) == {"frame", "timestamp", "latency_ms", "detections"} for x in lines)
    _, _, grace_person = _frames(shared_images)
    green = tuple(v / 2 for v in KITE_GREEN)
    for x in lines:
        dets = x["detections"]
        assert all(set(d) == {"id", "label", "score", "box"} for d in dets)
        assert all(0 <= d["box"][0] < d["box"][2] <= FRAME_W and 0 <= d["box"][1] < d["box"][3] <= FRAME_H
                   for d in dets)
        people = [tuple(d["box"]) for d in dets if d["label"] == "person"]
        if x["frame"] < 30:
            kites = [tuple(d["box"]) for d in dets if d["label"] == "kite"]
            assert len(people) >= 3 and max(iou(k, green) for k in kites) >= 0.5
        else:
            assert max(iou(p, grace_person) for p in people) >= 0.7
    figures = json.loads(summary.read_text())
    assert figures["frames"] == {"captured": 60, "processed": 60, "dropped": 0, "undecodable": 0}
    assert figures["stopped_by"] == "end of source" and figures["latency_ms"]["p50"] > 0
    assert "60 frames processed" in out.stderr
    if (os.cpu_count() or 1) >= 2:  # THROUGHPUT: the task's own single-threaded interpreter is one of the two
        assert figures["interpreters"] == 2 and figures["runtime"]["num_threads"] == 1


@pytest.fixture(scope="module")
def long_video(shared_images: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 s at 15 fps: still playing when the signal comes."""
    kite, grace, _ = _frames(shared_images)
    return write_mjpg(tmp_path_factory.mktemp("video") / "long.avi", (kite if i % 2 else grace for i in range(150)), 15)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_signal_mid_run_leaves_complete_outputs(ssd: Path, long_video: Path, tmp_path: Path,
                                                  sig: signal.Signals, code: int) -> None:
    saved = tmp_path / "out.avi"
    proc = subprocess.Popen([sys.executable, "-m", "edgekit", "detect", "-m", str(ssd), "--source", str(long_video),
                             "--realtime", "--save", str(saved), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = [proc.stdout.readline() for _ in range(5)]  # type: ignore[union-attr]
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=20)
    assert proc.returncode == code, err
    lines = [json.loads(line) for line in first + rest.splitlines()]  # every line parses: none cut short
    assert len(lines) >= 5 and f"stopped by {sig.name}" in err
    cap = cv2.VideoCapture(str(saved))
    frames = 0
    while True:
        ok, image = cap.read()
        if not ok:
            break
        frames += 1
        assert image.shape == (FRAME_H, FRAME_W, 3)
    assert frames >= len(lines)  # dropped frames are filled in, so the video keeps its timing


def test_cli_camera_that_is_not_there(ssd: Path) -> None:
    out = edgekit("detect", "-m", str(ssd), "--camera", "7")
    assert out.returncode == 2
    assert out.stderr.startswith("edgekit detect: error: cannot open camera 7 (/dev/video7)")
    assert "video devices" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_cli_show_without_a_display_says_what_to_do(ssd: Path, video: Path) -> None:
    out = edgekit("detect", "-m", str(ssd), "--source", str(video), "--show")
    assert out.returncode == 2 and "--show cannot open a window" in out.stderr and "--save" in out.stderr


def test_cli_images_folder_skips_a_broken_image(ssd: Path, shared_models: Path, shared_images: Path,
                                                tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("grace_hopper.png", "kite_and_cold.jpg"):
        (folder / name).write_bytes((shared_images / name).read_bytes())
    (folder / "broken.jpg").write_bytes((shared_images / "kite_and_cold.jpg").read_bytes()[:200])
    summary = tmp_path / "s.json"
    out = edgekit("detect", "-m", str(ssd), "--labels", str(shared_models / "coco_labels.txt"), "--source",
                  str(folder), "--json", "--classes", "person", "--summary-json", str(summary))
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == 2 and all(d["label"] == "person" for x in lines for d in x["detections"])
    assert max(iou(tuple(d["box"]), GRACE_PERSON) for d in lines[0]["detections"]) >= 0.7  # original pixels
    assert json.loads(summary.read_text())["frames"]["undecodable"] == 1


def test_cli_takes_image_files_a_shell_expanded(ssd: Path, shared_images: Path) -> None:
    images = [str(shared_images / n) for n in ("grace_hopper.png", "kite_and_cold.jpg")]
    out = edgekit("detect", "-m", str(ssd), "--source", *images, "--json", "--classes", "0")
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["frame"] for line in out.stdout.splitlines()] == [0, 1]
    assert "no labels" in out.stderr  # ids only: the note says how to get names


def test_cli_runs_a_classifier_too(shared_models: Path, shared_images: Path) -> None:
    mobilenet = shared_model(shared_models, "mobilenet_v2_1.0_224_quant.tflite")
    out = edgekit("detect", "-m", str(mobilenet), "--labels", str(shared_models / "imagenet_labels.txt"),
                  "--source", str(shared_images / "grace_hopper.png"), "--json", "-t", "0")
    assert out.returncode == 0, out.stderr
    line = json.loads(out.stdout)
    assert line["classes"][0]["label"] == "military uniform"


def test_cli_damaged_video_is_one_line_without_opencvs_noise(ssd: Path, video: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.avi"
    cut.write_bytes(video.read_bytes()[:2048])  # the AVI header only: OpenCV's demuxer complains on fd 2
    out = edgekit("detect", "-m", str(ssd), "--source", str(cut))
    assert out.returncode == 2
    assert out.stderr.startswith("edgekit detect: error: cannot read video file") and out.stderr.count("\n") == 1


@pytest.mark.parametrize("args, fragment", [
    (["--classes", "persn"], "Did you mean 'person'"),
    (["--save", "/no/such/folder/out.avi"], "does not exist"),
    (["--save", "out.gif"], "use a .avi"),
    (["--source", "/no/such/video.mp4"], "does not exist"),
])
def test_cli_bad_arguments_are_one_line_errors(ssd: Path, shared_models: Path, video: Path, args: list[str],
                                               fragment: str) -> None:
    base = ["detect", "-m", str(ssd), "--labels", str(shared_models / "coco_labels.txt")]
    source = [] if "--source" in args else ["--source", str(video)]
    out = edgekit(*base, *source, *args)
    assert out.returncode == 2 and fragment in out.stderr and len(out.stderr.strip().splitlines()) == 1
