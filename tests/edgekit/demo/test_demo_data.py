"""The synthetic inspection data: deterministic, labels on the drawn objects, splits and video round-trip."""

from __future__ import annotations

import json
import subprocess
import sys

import cv2
import numpy as np
import pytest

from edgekit.demo.conveyor import make_video
from edgekit.demo.dataset import ROW_SHARE, CLASS_NAMES, Sample, generate, load_split, make_splits, render_sample
from edgekit.errors import InputError

PART = CLASS_NAMES.index("part")


@pytest.fixture(scope="module")
def with_masks() -> list[Sample]:
    return generate(40, seed=3, size=160, with_masks=True)


def test_same_seed_same_bytes_and_image_i_independent_of_n() -> None:
    a, b, longer = generate(4, seed=7), generate(4, seed=7), generate(6, seed=7)
    for x, y, z in zip(a, b, longer):
        assert x.image.tobytes() == y.image.tobytes() == z.image.tobytes()
        assert x.boxes.tobytes() == y.boxes.tobytes() == z.boxes.tobytes()
        assert x.class_ids.tolist() == z.class_ids.tolist()
    other = generate(4, seed=8)
    assert all(x.image.tobytes() != o.image.tobytes() for x, o in zip(a, other))


@pytest.mark.parametrize("size", [96, 160, 192, 320])
def test_image_size_dtype_and_boxes_inside(size: int) -> None:
    for s in generate(12, seed=1, size=size):
        assert s.image.shape == (size, size, 3) and s.image.dtype == np.uint8
        assert s.boxes.dtype == np.float32 and s.boxes.shape == (len(s.class_ids), 4)
        assert np.all(s.boxes[:, :2] >= 0) and np.all(s.boxes[:, 2:] <= size)
        assert np.all(s.boxes[:, 2:] > s.boxes[:, :2])
        assert set(s.class_ids.tolist()) <= set(range(len(CLASS_NAMES)))


def test_a_share_of_images_holds_parts_side_by_side() -> None:
    # Parts bunched up on a belt touch; the training images must show the detector such rows, or it boxes
    # two touching parts as one. The other images are those of the layout with parts apart.
    samples = generate(200, seed=9)
    in_row = [np.random.default_rng((9, i, 1)).random() < ROW_SHARE for i in range(200)]
    assert 0.2 < np.mean(in_row) < 0.4
    touching = 0
    for i, (s, row) in enumerate(zip(samples, in_row)):
        boxes = s.boxes[s.class_ids == PART]
        if row:
            order = boxes[np.argsort(boxes[:, 0])]
            touching += bool(len(order) > 1 and np.any(order[1:, 0] - order[:-1, 2] <= 8))
        else:
            apart = render_sample(np.random.default_rng((9, i)), 160)
            assert apart.image.tobytes() == s.image.tobytes() and apart.boxes.tobytes() == s.boxes.tobytes()
    assert touching >= 0.35 * sum(in_row)  # boxes are tight on the shapes, which do not fill their squares


def test_every_class_appears_in_a_small_set() -> None:
    counts = np.bincount(np.concatenate([s.class_ids for s in generate(60, seed=0)]), minlength=len(CLASS_NAMES))
    assert np.all(counts >= 10), dict(zip(CLASS_NAMES, counts.tolist()))


def test_boxes_are_tight_around_the_drawn_masks(with_masks: list[Sample]) -> None:
    for s in with_masks:
        assert s.masks is not None and len(s.masks) == len(s.boxes)
        for box, mask in zip(s.boxes, s.masks):
            rows, cols = np.nonzero(mask.any(1))[0], np.nonzero(mask.any(0))[0]
            assert box.tolist() == [cols[0], rows[0], cols[-1] + 1, rows[-1] + 1]


def test_defects_lie_on_a_part(with_masks: list[Sample]) -> None:
    checked = 0
    for i, s in enumerate(with_masks):
        parts = s.masks[s.class_ids == PART] > 0
        in_row = np.random.default_rng((3, i, 1)).random() < ROW_SHARE
        for mask, box in zip(s.masks[s.class_ids != PART] > 0, s.boxes[s.class_ids != PART]):
            # A defect sits on a part's surface (a missing hole where the part is solid); in a row of
            # parts the frame's edge may leave less than half a part in view (not labelled), and its defect.
            on_part = any((mask & p).sum() == mask.sum() for p in parts) or not len(parts)
            assert on_part or (in_row and (box[0] < 48 or box[2] > 160 - 48))
            checked += 1
    assert checked > 20


def _ring(mask: np.ndarray, width: int) -> np.ndarray:
    return cv2.dilate(mask, np.ones((2 * width + 1, 2 * width + 1), np.uint8)) > 0


def test_objects_are_visible_where_they_are_labelled(with_masks: list[Sample]) -> None:
    """Pixels under a mask differ from the pixels just around it: the label marks something drawn."""
    contrasts = []
    for s in with_masks:
        img = s.image.astype(np.float32)
        solid = np.zeros(s.image.shape[:2], bool)
        for cls, mask in zip(s.class_ids, s.masks):
            if cls == PART:
                solid |= mask > 0
        for cls, mask in zip(s.class_ids, s.masks):
            inside = mask > 0
            around = _ring(mask, 3) & ~inside
            if cls != PART:
                around &= solid  # a defect is compared with the part's surface next to it
            if around.sum() < 5:
                continue
            contrasts.append(np.abs(img[inside].mean(0) - img[around].mean(0)).max())
    contrasts = np.array(contrasts)
    assert len(contrasts) > 60
    assert np.median(contrasts) > 20 and np.mean(contrasts > 6) > 0.95


@pytest.mark.parametrize("image, boxes, ids", [
    (np.zeros((8, 8, 3), np.float32), np.zeros((0, 4), np.float32), np.zeros(0, np.int64)),
    (np.zeros((8, 8), np.uint8), np.zeros((0, 4), np.float32), np.zeros(0, np.int64)),
    (np.zeros((8, 8, 3), np.uint8), np.zeros((2, 4), np.float32), np.zeros(1, np.int64)),
])
def test_sample_rejects_inconsistent_arrays(image: np.ndarray, boxes: np.ndarray, ids: np.ndarray) -> None:
    with pytest.raises(InputError, match="Sample"):
        Sample(image, boxes, ids)


@pytest.mark.parametrize("kwargs, message", [
    ({"n": -1}, "whole number"),
    ({"n": 2, "size": 64}, "at least 96"),
    ({"n": 2.5}, "whole number"),
])
def test_generate_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        generate(**kwargs)


def test_splits_round_trip(tmp_path) -> None:
    splits = make_splits(tmp_path / "data", n_train=3, n_cal=2, n_val=2, seed=5)
    assert splits.labels.read_text().split() == list(CLASS_NAMES)
    doc = json.loads((splits.validation / "labels.json").read_text())
    assert doc["classes"] == list(CLASS_NAMES) and doc["box_format"] == "xyxy" and doc["normalized"] is False
    train, cal, val = (load_split(d) for d in splits[:3])
    assert (len(train), len(cal), len(val)) == (3, 2, 2)
    assert len(list(splits.train.glob("*.png"))) == 3
    # PNG is lossless and the boxes are whole pixels: reading back gives what was generated.
    again = make_splits(tmp_path / "again", 3, 2, 2, seed=5)
    for a, b in zip(train, load_split(again.train)):
        assert np.array_equal(a.image, b.image) and np.array_equal(a.boxes, b.boxes)
    # The three splits are different streams.
    assert not np.array_equal(train[0].image, cal[0].image) and not np.array_equal(cal[0].image, val[0].image)


def test_load_split_without_labels_says_what_to_do(tmp_path) -> None:
    with pytest.raises(InputError, match="make_splits"):
        load_split(tmp_path)


def test_video_parts_move_left_to_right_with_truth(tmp_path) -> None:
    truth = make_video(tmp_path / "belt.avi", n_frames=24, fps=12, seed=2, size=160)
    cap = cv2.VideoCapture(str(tmp_path / "belt.avi"))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    cap.release()
    assert len(frames) == len(truth.frames) == 24 and frames[0].shape == (160, 160, 3)
    assert truth.fps == 12 and truth.parts
    moves = []
    for t in range(23):
        a, b = truth.frames[t], truth.frames[t + 1]
        for pid in set(a.part_ids[a.class_ids == PART]) & set(b.part_ids[b.class_ids == PART]):
            xa = a.boxes[(a.part_ids == pid) & (a.class_ids == PART)][0]
            xb = b.boxes[(b.part_ids == pid) & (b.class_ids == PART)][0]
            if 0 < xa[0] and xb[2] < 160:  # wholly in view: the box moves by the belt speed
                moves.append(xb[0] - xa[0])
    assert moves and np.allclose(moves, 160 / (4 * 12), atol=1.0)
    for p in truth.parts:
        assert p.passed == (not p.defects) and p.first_frame <= p.last_frame
    assert json.loads(json.dumps(truth.to_dict()))["classes"] == list(CLASS_NAMES)


def test_video_same_seed_same_truth(tmp_path) -> None:
    a = make_video(tmp_path / "a.avi", n_frames=6, fps=10, seed=4, size=160)
    b = make_video(tmp_path / "b.avi", n_frames=6, fps=10, seed=4, size=160)
    assert a.to_dict()["frames"] == b.to_dict()["frames"]
    assert (tmp_path / "a.avi").read_bytes() == (tmp_path / "b.avi").read_bytes()


def test_parts_abreast_enter_together_one_along_each_rail(tmp_path) -> None:
    truth = make_video(tmp_path / "b.avi", n_frames=60, seed=3, speed=12, gap=(0.02, 0.08), abreast=1.0)
    pairs = 0
    for f in truth.frames:
        boxes = {pid: box for pid, box, c in zip(f.part_ids.tolist(), f.boxes, f.class_ids) if c == PART}
        for a, b in zip(sorted(boxes), sorted(boxes)[1:]):
            (ax1, ay1, ax2, ay2), (bx1, by1, bx2, by2) = boxes[a], boxes[b]
            if min(ax2, bx2) - max(ax1, bx1) > 0:  # side by side across the belt: one above the other
                assert ay2 <= by1 or by2 <= ay1
                pairs += 1
    assert pairs > 20
    single = make_video(tmp_path / "s.avi", n_frames=4, seed=3, speed=12, gap=(0.02, 0.08))
    again = make_video(tmp_path / "z.avi", n_frames=4, seed=3, speed=12, gap=(0.02, 0.08), abreast=0.0)
    assert single.to_dict()["frames"] == again.to_dict()["frames"]  # 0 draws nothing: the old clips stay


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_defect_share_sets_the_mix(tmp_path, share: float) -> None:
    truth = make_video(tmp_path / "b.avi", n_frames=40, seed=5, speed=16, gap=(0.0, 0.02), defect_share=share)
    defective = [not p.passed for p in truth.parts]
    assert len(defective) >= 6
    assert (not any(defective)) if share == 0 else np.mean(defective) >= 0.8  # a drawn defect may not fit


@pytest.mark.parametrize("kwargs, message", [
    ({"path": "clip.mp4"}, r"\.avi"),
    ({"path": "clip.avi", "n_frames": 0}, "n_frames"),
    ({"path": "clip.avi", "fps": 0}, "fps"),
    ({"path": "clip.avi", "abreast": 1.5}, "abreast"),
    ({"path": "clip.avi", "defect_share": -0.1}, "defect_share"),
])
def test_video_rejects_bad_arguments(tmp_path, kwargs: dict, message: str) -> None:
    kwargs["path"] = tmp_path / kwargs["path"]
    with pytest.raises(InputError, match=message):
        make_video(**kwargs)


def test_data_side_never_imports_tensorflow() -> None:
    code = ("import sys, edgekit.demo, edgekit.demo.dataset, edgekit.demo.conveyor;"
            "edgekit.demo.dataset.generate(2);"
            "print([m for m in ('tensorflow', 'keras') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
