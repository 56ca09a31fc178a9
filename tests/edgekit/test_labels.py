"""Label files in the formats people have, and matching them to a model's outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgekit.errors import InputError
from edgekit.labels import align_labels, label_for, load_labels


@pytest.mark.parametrize(("text", "expected"), [
    ("person\nbicycle\ncar\n", ["person", "bicycle", "car"]),
    ("person\r\nbicycle\r\n\r\n\n", ["person", "bicycle"]),  # CRLF, trailing blank lines
    ("\ufeffbackground\ntench, Tinca tinca\n", ["background", "tench, Tinca tinca"]),  # BOM
    ("a\n\nc\n", ["a", "", "c"]),  # a blank line keeps its id
    ("0  person\n1  bicycle\n3  motorcycle\n", ["person", "bicycle", "", "motorcycle"]),  # pycoral coco
    ("0: cat\n1: dog\n", ["cat", "dog"]),
    ("2 two\n0 zero\n", ["zero", "", "two"]),  # any order
    ("1st place\n2nd place\n", ["1st place", "2nd place"]),  # not pairs: a label starting with a digit
    ("0 zero\nnot a pair\n", ["0 zero", "not a pair"]),  # mixed: read as plain lines
    ("7 up\n", ["", "", "", "", "", "", "", "up"]),
])
def test_load_labels(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = tmp_path / "labels.txt"
    path.write_text(text, encoding="utf-8")
    assert load_labels(path) == expected


@pytest.mark.parametrize(("content", "fragment"), [
    (None, "does not exist"),
    ("", "holds no labels"),
    ("\n\n", "holds no labels"),
    (b"\xff\xfe\x00bad", "is not UTF-8"),
    ("0 cat\n0 dog\n", "gives id 0 twice"),
    ("4000000000 cat\n", "ids above 1000000"),
])
def test_bad_label_files(tmp_path: Path, content: Any, fragment: str) -> None:
    path = tmp_path / "labels.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(InputError) as err:
        load_labels(path)
    assert fragment in str(err.value)


def test_label_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        load_labels(tmp_path)


@pytest.mark.parametrize(("labels", "i", "expected"), [
    (["a", "b"], 1, "b"), (["a", "b"], 2, "2"), (["a", ""], 1, "1"), (None, 5, "5"), (["a"], -1, "-1"),
])
def test_label_for(labels: list[str] | None, i: int, expected: str) -> None:
    assert label_for(labels, i) == expected


@pytest.mark.parametrize(("n_labels", "classes", "first", "shift", "note"), [
    (1001, 1001, "l0", 0, False),  # imagenet_labels.txt with its "background" line
    (1000, 1001, "background", 1, False),  # a 1000-line file for a 1001-output model
    (90, 90, "l0", 0, False),
    (10, 1001, "l0", 0, True),
])
def test_align_labels(n_labels: int, classes: int, first: str, shift: int, note: bool) -> None:
    labels = [f"l{i}" for i in range(n_labels)]
    aligned, message = align_labels(labels, classes)
    assert aligned[0] == first
    assert aligned[5] == f"l{5 - shift}"
    assert (message is not None) is note


def test_real_label_files(shared_models: Path) -> None:
    imagenet = load_labels(shared_models / "imagenet_labels.txt")
    coco = load_labels(shared_models / "coco_labels.txt")
    assert (len(imagenet), imagenet[0], imagenet[653]) == (1001, "background", "military uniform")
    assert (len(coco), coco[0]) == (90, "person")


def test_a_detectors_labels_are_checked_against_its_class_count() -> None:
    from edgekit.labels import detector_labels_note

    assert detector_labels_note(["x"] * 90, 90) is None and detector_labels_note(["x"] * 91, 90) is None
    assert detector_labels_note(["x"] * 5, None) is None  # the file does not say how many classes
    note = detector_labels_note(["x"] * 1001, 90)
    assert note is not None and "1001" in note and "90 classes" in note


def test_imagenet_labels_on_the_coco_ssd_are_one_warning(shared_models: Path, shared_images: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from edgekit.cli import main
    from tests.conftest import shared_model

    ssd = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    assert main(["detect", "-m", str(ssd), "--labels", str(shared_models / "imagenet_labels.txt"),
                 "--source", str(shared_images / "grace_hopper.png"), "--json"]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "note:" in ln]
    assert len(notes) == 1 and "1001 entries" in notes[0] and "90 classes" in notes[0]
    assert main(["detect", "-m", str(ssd), "--labels", str(shared_models / "coco_labels.txt"),
                 "--source", str(shared_images / "grace_hopper.png"), "--json"]) == 0
    assert "note:" not in capsys.readouterr().err


@pytest.mark.parametrize(("shapes", "layout", "split", "transposed", "objectness", "classes"), [
    ([(1, 84, 8400)], "V8", False, False, False, 80),  # Ultralytics YOLOv8/11: [1, 4+C, N]
    ([(1, 25200, 85)], "V5", False, False, False, 80),  # YOLOv5: [1, N, 5+C]
    ([(1, 4, 8400), (1, 80, 8400)], "V8", True, False, False, 80),  # boxes and scores, [1, 4, N] + [1, C, N]
    ([(1, 8400, 4), (1, 8400, 3)], "V8", True, True, False, 3),  # the same, transposed
    ([(1, 25200, 4), (1, 25200, 81)], "V8", True, True, True, 80),  # YOLOv5 split after its boxes
])
def test_a_yolo_heads_class_count(shapes: list[tuple[int, ...]], layout: str, split: bool, transposed: bool,
                                  objectness: bool, classes: int) -> None:
    from edgekit.contract import Decoder, OutputFormat, YoloLayout, YoloOutputs

    outputs = [type("T", (), {"shape": s, "name": ""})() for s in shapes]
    where = YoloOutputs(0, 1 if split else 0, YoloLayout[layout], transposed, objectness)
    assert Decoder(OutputFormat.YOLO, yolo=where).class_count(outputs) == classes
    assert Decoder(OutputFormat.SSD).class_count(outputs) is None  # an SSD's count is its op's


def test_a_yolo_label_file_takes_exactly_one_label_per_class() -> None:
    from edgekit.labels import detector_labels_note

    assert detector_labels_note(["x"] * 80, 80, background=False) is None
    for n in (79, 81, 1000):  # one more is a shifted file for a YOLO head (class i is label i)
        note = detector_labels_note(["x"] * n, 80, background=False)
        assert note is not None and f"{n} entries" in note and "80 classes" in note


def test_wrong_labels_on_a_yolo_detector_are_one_warning(tmp_path: Path, shared_models: Path) -> None:
    tf = pytest.importorskip("tensorflow", reason="building the test YOLO head needs TensorFlow (the convert extra)")
    import warnings

    import numpy as np

    from edgekit.tasks import Detector, DetectorOptions

    w = tf.constant(np.random.default_rng(0).normal(0, 0.05, (3, 4 + 3)).astype(np.float32))

    def head(x):  # type: ignore[no-untyped-def]  # [1, 32, 32, 3] -> [1, 4 + 3, 64]: boxes in pixels, 3 scores
        raw = tf.reshape(tf.tensordot(tf.nn.avg_pool2d(x / 255.0, 4, 4, "VALID"), w, 1), (1, 64, 7))
        return tf.transpose(tf.concat([tf.sigmoid(raw[..., :4]) * 32, tf.sigmoid(raw[..., 4:])], -1), (0, 2, 1))

    fn = tf.function(head, input_signature=[tf.TensorSpec((1, 32, 32, 3), tf.float32)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()]).convert()
    model = tmp_path / "yolo.tflite"
    model.write_bytes(data)
    with Detector(DetectorOptions(model=model, labels=shared_models / "imagenet_labels.txt")) as det:
        assert det.labels_note is not None and "1001 entries" in det.labels_note and "3 classes" in det.labels_note
    for labels, note in ((["a", "b", "c"], False), (["background", "a", "b", "c"], True)):
        with Detector(DetectorOptions(model=model, labels=labels)) as det:
            assert (det.labels_note is not None) == note, det.labels_note


def test_classify_without_labels_says_how_to_name_the_ids(tiny_models: Any, shared_images: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from edgekit.cli import main
    from edgekit.labels import NO_LABELS_NOTE

    # A classifier with no labels anywhere (no edgekit metadata, no TFLite label file): ids, and the hint.
    assert main(["classify", "-m", str(tiny_models.int8_path), "-k", "1", str(shared_images / "parrot.jpg")]) == 0
    assert f"edgekit classify: note: {NO_LABELS_NOTE}" in capsys.readouterr().err


def test_classify_takes_the_labels_the_file_carries_without_a_hint(shared_models: Path, shared_images: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from edgekit.cli import main
    from tests.conftest import shared_model

    # Coral's MobileNet carries imagenet_labels.txt in its TFLite Support metadata: names, no hint.
    model = shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite")
    assert main(["classify", "-m", str(model), "-k", "1", str(shared_images / "parrot.jpg")]) == 0
    out, err = capsys.readouterr()
    assert "macaw" in out and "note:" not in err
