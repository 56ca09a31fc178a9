"""Keypoint decoding against the mapping MoveNet's documentation uses: keypoints are normalized to
the image padded to a square (letterbox), so frame = normalized * side - padding."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.contract.keypoints import COCO_KEYPOINTS, PoseLayout, Poses, decode_poses, pose_layout
from edgekit.errors import InputError, ModelError
from edgekit.preprocess import ResizeMode, Transform, fit


def _letterbox(h: int, w: int, size: int) -> Transform:
    return fit(np.zeros((h, w, 3), np.uint8), (size, size), ResizeMode.LETTERBOX)[1]


def _normalized_in_square(frame_xy: np.ndarray, h: int, w: int) -> np.ndarray:
    """(x, y) frame pixels -> (y, x) normalized to the frame padded to a centred square."""
    side = max(h, w)
    x = (frame_xy[..., 0] + (side - w) / 2) / side
    y = (frame_xy[..., 1] + (side - h) / 2) / side
    return np.stack([y, x], axis=-1)


def _from_square(yx: np.ndarray, h: int, w: int) -> np.ndarray:
    side = max(h, w)
    return np.stack([yx[..., 1] * side - (side - w) / 2, yx[..., 0] * side - (side - h) / 2], axis=-1)


@pytest.mark.parametrize("h,w,size", [(480, 640, 192), (900, 1352, 256), (640, 480, 192), (333, 333, 256)])
def test_single_pose_within_one_pixel(h, w, size):
    rng = np.random.default_rng(h)
    truth = np.stack([rng.uniform(0, w, 17), rng.uniform(0, h, 17)], axis=1)
    out = np.zeros((1, 1, 17, 3), np.float32)
    out[0, 0, :, :2] = _normalized_in_square(truth, h, w)
    out[0, 0, :, 2] = rng.uniform(0.3, 1.0, 17)
    poses = decode_poses(out, _letterbox(h, w, size), threshold=0.1)
    assert len(poses) == 1
    ref = _from_square(out[0, 0, :, :2].astype(np.float64), h, w)
    assert np.abs(poses.keypoints[0] - ref).max() <= 1.0
    assert np.abs(poses.keypoints[0] - truth).max() <= 1.0
    assert poses.scores[0] == pytest.approx(out[0, 0, :, 2].mean())
    assert [k["name"] for k in poses.to_list()[0]["keypoints"]] == list(COCO_KEYPOINTS)


def test_single_pose_below_threshold_is_no_pose():
    out = np.zeros((1, 1, 17, 3), np.float32)
    out[..., 2] = 0.05
    assert len(decode_poses(out, _letterbox(480, 640, 192), threshold=0.2)) == 0


def test_multi_pose_people_best_first_with_boxes():
    h, w = 480, 640
    rng = np.random.default_rng(1)
    out = np.zeros((1, 6, 56), np.float32)
    truth = {}
    for person, score in ((0, 0.4), (2, 0.9), (4, 0.1)):
        kp = np.stack([rng.uniform(100, 500, 17), rng.uniform(50, 400, 17)], axis=1)
        truth[score] = kp
        out[0, person, :51] = np.concatenate([_normalized_in_square(kp, h, w), rng.uniform(0.5, 1, (17, 1))],
                                             axis=1).ravel()
        lo, hi = _normalized_in_square(kp.min(0), h, w), _normalized_in_square(kp.max(0), h, w)
        out[0, person, 51:55] = [lo[0], lo[1], hi[0], hi[1]]
        out[0, person, 55] = score
    poses = decode_poses(out, _letterbox(h, w, 256), threshold=0.2)
    assert np.allclose(poses.scores, [0.9, 0.4])
    for p in poses:
        assert np.abs(p.keypoints - truth[round(p.score, 1)]).max() <= 1.0
        x1, y1, x2, y2 = p.box
        assert np.allclose([x1, y1, x2, y2], [*truth[round(p.score, 1)].min(0), *truth[round(p.score, 1)].max(0)],
                           atol=1.0)
    assert set(poses.to_list()[0]) == {"score", "box", "keypoints"}


def test_keypoints_in_the_padding_land_on_the_frame_edge():
    out = np.zeros((1, 1, 17, 3), np.float32)
    out[0, 0, :, 2] = 1.0  # y = x = 0: the square's corner, inside the top padding of a wide frame
    poses = decode_poses(out, _letterbox(480, 640, 192))
    assert poses.keypoints.min() == 0.0 and np.all(poses.keypoints[0, :, 1] == 0.0)


@pytest.mark.parametrize("shape,expected", [
    ((1, 1, 17, 3), PoseLayout.SINGLE), ((1, 1, 33, 3), PoseLayout.SINGLE), ((1, 6, 56), PoseLayout.MULTI),
    ((1, 1, 17, 2), None), ((1, 84, 8400), None), ((1, 896, 16), None), ((1, 513, 513), None), ((2, 1, 17, 3), None),
])
def test_layout_table(shape, expected):
    assert pose_layout(shape) is expected


def test_errors_name_the_shapes():
    tf = _letterbox(10, 10, 8)
    with pytest.raises(ModelError, match=r"\[1, 84, 8400\]"):
        decode_poses(np.zeros((1, 84, 8400)), tf)
    with pytest.raises(InputError, match="keypoints"):
        Poses(np.zeros((2, 17, 2)), np.zeros((2, 16)), np.zeros(2))


def test_other_keypoint_sets_are_named_by_index():
    out = np.full((1, 1, 5, 3), 0.5, np.float32)
    poses = decode_poses(out, _letterbox(100, 100, 64))
    assert poses.names == ("0", "1", "2", "3", "4") and poses.skeleton == ()
