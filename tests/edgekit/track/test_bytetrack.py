"""ByteTracker: the same tracks as the reference ByteTrack (supervision <= 0.30), ids that follow
objects through misses and crossings, the assignment solver, bad options."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.errors import InputError
from edgekit.results import Detections
from edgekit.track import ByteTracker, TrackerOptions
from edgekit.track.assign import box_iou, linear_assignment, solve_numpy


def _reference():
    sv = pytest.importorskip("supervision", reason="supervision (the reference ByteTrack) is not installed")
    if not hasattr(sv, "ByteTrack"):
        pytest.skip(f"supervision {sv.__version__} has no ByteTrack (removed in 0.31): pip install 'supervision<0.31'")
    return sv


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("min_frames", [1, 3])
def test_same_tracks_as_the_reference(make_belt, seed, min_frames):
    """Frame by frame the confirmed tracks agree with the reference: the same filtered boxes and the same
    grouping of boxes into tracks (ids may be numbered differently)."""
    sv = _reference()
    frames, _ = make_belt(seed, n_objects=10)
    ours = ByteTracker(TrackerOptions(min_frames=min_frames))
    ref = sv.ByteTrack(minimum_consecutive_frames=min_frames, frame_rate=30)
    ours_to_ref: dict[int, int] = {}
    ref_to_ours: dict[int, int] = {}
    compared = 0
    for i, dets in enumerate(frames):
        ours.update(dets)
        a = sorted((t.box, t.track_id) for t in ours.tracks())
        b = sorted((tuple(s.tlbr), s.external_track_id)
                   for s in ref.update_with_tensors(np.hstack([dets.xyxy, dets.scores[:, None]]).astype(np.float64)))
        assert len(a) == len(b), f"frame {i}: {len(a)} tracks here, {len(b)} in the reference"
        for (box_a, id_a), (box_b, id_b) in zip(a, b):
            np.testing.assert_allclose(box_a, box_b, atol=1e-3, err_msg=f"frame {i}")
            assert ours_to_ref.setdefault(id_a, id_b) == id_b and ref_to_ours.setdefault(id_b, id_a) == id_a, \
                f"frame {i}: track {id_a} here is track {id_b} in the reference, which was another track before"
        compared += len(a)
    assert compared > 300 and len(ours_to_ref) >= 8


@pytest.mark.parametrize("seed", range(6))
def test_confirmed_keeps_the_detections_the_reference_emits(make_belt, seed):
    """``update(d).confirmed()`` is what ``edgekit detect --track`` writes: as many rows each frame as the
    reference's ``update_with_detections``, which drops the boxes no confirmed track took instead of
    emitting them without an id, and the same rows but where two boxes overlap one track (the reference
    pairs rows with the tracks' filtered boxes afterwards, by IoU, and may name the other box; here a
    row is the box the track took)."""
    sv = _reference()
    frames, _ = make_belt(seed, n_objects=10)
    ours, ref = ByteTracker(), sv.ByteTrack(frame_rate=30)
    kept = dropped = other = 0
    for i, dets in enumerate(frames):
        mine = ours.update(dets).confirmed()
        theirs = ref.update_with_detections(sv.Detections(xyxy=dets.xyxy.astype(np.float64),
                                                          confidence=dets.scores.astype(np.float64),
                                                          class_id=dets.class_ids.astype(int)))
        a = {tuple(b.tolist()) for b in mine.detections.xyxy}
        b = {tuple(b.astype(np.float32).tolist()) for b in theirs.xyxy}
        assert len(a) == len(b), f"frame {i}: {len(a)} detections kept here, {len(b)} by the reference"
        kept, dropped, other = kept + len(a), dropped + len(dets) - len(a), other + len(a - b)
    assert kept > 800 and dropped > 0  # the reference too leaves boxes out
    assert other <= kept / 500, f"{other} of {kept} rows are another box than the reference's"


def _purity(frames, owners, tracker):
    """Each track id follows one object, and each object has few ids."""
    ids_of: dict[int, set[int]] = {}
    owner_of: dict[int, set[int]] = {}
    for dets, who in zip(frames, owners):
        tracked = tracker.update(dets)
        assert tracked.detections is dets and tracked.track_ids.shape == (len(dets),)
        for tid, obj in zip(tracked.track_ids.tolist(), who.tolist()):
            if tid >= 0 and obj >= 0:
                owner_of.setdefault(tid, set()).add(obj)
                ids_of.setdefault(obj, set()).add(tid)
    return ids_of, owner_of


@pytest.mark.parametrize("seed", [0, 5, 9])
def test_ids_follow_objects_through_misses_and_crossings(make_belt, seed):
    frames, owners = make_belt(seed, n_objects=8, miss=0.1)
    ids_of, owner_of = _purity(frames, owners, ByteTracker())
    assert all(len(objs) == 1 for objs in owner_of.values()), owner_of  # no id jumps to another object
    assert len(ids_of) >= 7
    assert sum(len(ids) for ids in ids_of.values()) <= len(ids_of) + 1  # at most one object split in two


def _ids(tracker, frames):
    """The track id of one box moving right, in the frames where ``frames`` is 1 (None elsewhere)."""
    box = np.array([[10, 10, 60, 60]], np.float32)
    out = []
    for t, on in enumerate(frames):
        tracked = tracker.update(Detections(box + [4 * t, 0, 4 * t, 0], [0.9], [0]) if on else Detections.empty())
        out.append(int(tracked.track_ids[0]) if on else None)
    return out


def test_min_frames_holds_back_ids_and_ended_reports_removed_tracks():
    assert _ids(ByteTracker(), [1, 1, 1]) == [1, 1, 1]  # the first frame confirms at once, as in ByteTrack
    assert _ids(ByteTracker(), [0, 1, 1]) == [None, -1, 1]  # later, a box needs a second frame
    tracker = ByteTracker(TrackerOptions(min_frames=3, lost_buffer=2))
    assert _ids(tracker, [1] * 6) == [-1, -1, -1, 1, 1, 1]
    ended = [tracker.update(Detections.empty()).ended for _ in range(5)]
    assert sum(ended, ()) == (1,)


def test_tracked_to_list_adds_track_id():
    tracker = ByteTracker()
    tracked = tracker.update(Detections([[0, 0, 10, 10], [50, 50, 60, 60]], [0.9, 0.05], [0, 1], ("part", "dent")))
    rows = tracked.to_list()
    assert [r["track_id"] for r in rows] == [1, None] and rows[0]["label"] == "part"
    assert len(tracked.confirmed()) == 1


def test_numpy_solver_is_optimal_like_scipy():
    scipy_opt = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(0)
    for t in range(300):
        n, m = rng.integers(1, 9, 2)
        cost = rng.random((n, m))
        if t % 3 == 0:
            cost = np.round(cost, 1)  # ties
        r1, c1 = scipy_opt.linear_sum_assignment(cost)
        r2, c2 = solve_numpy(cost)
        assert len(r2) == min(n, m) and len(set(c2.tolist())) == len(c2) and len(set(r2.tolist())) == len(r2)
        assert cost[r2, c2].sum() == pytest.approx(cost[r1, c1].sum())


def test_linear_assignment_refuses_costly_pairs():
    cost = np.array([[0.1, 0.9], [0.95, 0.99], [0.85, 0.2]])
    matches, rows, cols = linear_assignment(cost, 0.8)
    assert matches == [(0, 0), (2, 1)] and rows == [1] and cols == []
    assert linear_assignment(cost.tolist(), 0.8) == (matches, rows, cols)
    assert linear_assignment(np.zeros((0, 3)), 0.8) == ([], [], [0, 1, 2])
    assert linear_assignment([[], []], 0.8) == ([], [0, 1], [])
    assert linear_assignment([[0.9, 0.3, 0.3]], 0.8) == ([(0, 1)], [], [0, 2])  # the first of equal costs
    assert box_iou([[0, 0, 10, 10]], [[5, 0, 15, 10], [20, 20, 20, 30]]).tolist() == [[pytest.approx(1 / 3), 0.0]]


@pytest.mark.parametrize("kwargs, message", [
    ({"high_threshold": 1.5}, "high_threshold must be within 0..1"),
    ({"low_threshold": 0.5, "high_threshold": 0.3}, "must not exceed"),
    ({"lost_buffer": 0}, "must be >= 1"),
    ({"min_frames": 0}, "must be >= 1"),
])
def test_bad_options(kwargs, message):
    with pytest.raises(InputError, match=message):
        TrackerOptions(**kwargs)


def test_update_takes_detections_only():
    with pytest.raises(InputError, match="expects edgekit Detections, got ndarray"):
        ByteTracker().update(np.zeros((1, 5)))  # type: ignore[arg-type]


def _one_box(tracker, scores):
    """The track id of one box moving right with the given score per frame (None: no box that frame)."""
    out = []
    for t, score in enumerate(scores):
        box = np.array([[10 + 4 * t, 10, 60 + 4 * t, 60]], np.float32)
        dets = Detections(box, [score], [0]) if score is not None else Detections.empty()
        ids = tracker.update(dets).track_ids.tolist()
        out.append(ids[0] if ids else None)
    return out


@pytest.mark.parametrize("weak_start_frames, ids", [
    (0, [-1, -1, -1, -1]),  # ByteTrack: a box under new_track_threshold never starts a track
    (2, [-1, -1, 1, 1]),  # started weakly, confirmed after 2 more frames running
])
def test_weak_boxes_start_tracks_only_when_asked(weak_start_frames, ids):
    tracker = ByteTracker(TrackerOptions(high_threshold=0.5, low_threshold=0.1, weak_start_frames=weak_start_frames))
    assert _one_box(tracker, [None, 0.3, 0.2, 0.4, 0.3])[1:] == ids


@pytest.mark.parametrize("weak_refind_frames, last", [(0, -1), (3, 1)])
def test_weak_boxes_refind_a_recently_lost_track_only_when_asked(weak_refind_frames, last):
    tracker = ByteTracker(TrackerOptions(high_threshold=0.5, low_threshold=0.1, weak_refind_frames=weak_refind_frames))
    got = _one_box(tracker, [0.9, 0.9, None, None, 0.3])
    assert got[:2] == [1, 1] and got[-1] == last


def test_origin_is_where_a_tentative_track_started():
    tracker = ByteTracker(TrackerOptions(high_threshold=0.5, low_threshold=0.1, weak_start_frames=2))
    _one_box(tracker, [None, 0.3, 0.3, 0.3])
    assert tracker.origin(1) == pytest.approx((14, 10, 64, 60))  # the box of frame 1, two frames before its id
    assert tracker.origin(7) is None
