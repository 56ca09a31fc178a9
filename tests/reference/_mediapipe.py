"""The MediaPipe reference: its wheel's own .tflite files and its own graphs, side by side with edgekit.

Kept apart from the tests so that ``python -m tests.reference.figures`` prints the same figures
the tests check (before: edgekit's old guesses; after: what it reads from the file now).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
PHOTOS = HERE / "photos"
SHARED_IMAGES = HERE.parent / "data"  # tests/data: the real photos the suite uses (README there)

MODELS = {
    "face-short": "modules/face_detection/face_detection_short_range.tflite",
    "face-full": "modules/face_detection/face_detection_full_range_sparse.tflite",
    "palm-lite": "modules/palm_detection/palm_detection_lite.tflite",
    "palm-full": "modules/palm_detection/palm_detection_full.tflite",
    "pose-detector": "modules/pose_detection/pose_detection.tflite",
    "selfie": "modules/selfie_segmentation/selfie_segmentation.tflite",
    "selfie-landscape": "modules/selfie_segmentation/selfie_segmentation_landscape.tflite",
    "hand-landmark-lite": "modules/hand_landmark/hand_landmark_lite.tflite",
    "hand-landmark-full": "modules/hand_landmark/hand_landmark_full.tflite",
}


def mediapipe_or_reason() -> tuple[Any, str]:
    """(the mediapipe module, "") or (None, why it cannot be the reference here)."""
    try:
        import mediapipe as mp
    except ImportError:
        return None, ("mediapipe is not installed: the reference tests run in their own venv "
                      "(`.ci/reference` makes it: mediapipe==0.10.14, whose protobuf pin TensorFlow refuses)")
    if not hasattr(mp, "solutions"):
        return None, f"mediapipe {getattr(mp, '__version__', '?')} has no mp.solutions (0.10.14 has)"
    return mp, ""


def extract_models(mp: Any, dest: Path) -> dict[str, Path]:
    """Copy the wheel's .tflite files edgekit is compared on into ``dest`` (never into the repository)."""
    root = Path(mp.__file__).resolve().parent
    out = {}
    for key, rel in MODELS.items():
        src = root / rel
        if src.is_file():
            out[key] = Path(shutil.copy(src, dest / src.name))
    return out


def photos() -> list[Path]:
    """The photos committed for these tests, and the suite's real photos in tests/data."""
    found = sorted(PHOTOS.glob("*.jpg"))
    if SHARED_IMAGES.is_dir():
        found += [SHARED_IMAGES / n for n in ("grace_hopper.png", "kite_and_cold.jpg", "cat.png", "parrot.jpg")
                  if (SHARED_IMAGES / n).is_file()]
    return found


def iou(a: Any, b: Any) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def reference_faces(mp: Any, image: np.ndarray, model_selection: int) -> list[dict[str, Any]]:
    """MediaPipe's own face detection graph: boxes and 6 keypoints in pixels."""
    h, w = image.shape[:2]
    with mp.solutions.face_detection.FaceDetection(model_selection=model_selection,
                                                   min_detection_confidence=0.5) as fd:
        res = fd.process(image)
    faces = []
    for d in res.detections or []:
        b = d.location_data.relative_bounding_box
        faces.append({"score": float(d.score[0]),
                      "box": (b.xmin * w, b.ymin * h, (b.xmin + b.width) * w, (b.ymin + b.height) * h),
                      "keypoints": np.array([[k.x * w, k.y * h] for k in d.location_data.relative_keypoints])})
    return faces


def reference_selfie(mp: Any, image: np.ndarray, model_selection: int) -> np.ndarray:
    """MediaPipe's selfie segmentation graph: the person mask (probability > 0.5) at the image's size."""
    with mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=model_selection) as ss:
        return ss.process(image).segmentation_mask > 0.5


def reference_hands(mp: Any, image: np.ndarray, model_complexity: int) -> list[np.ndarray]:
    """MediaPipe's hands graph (palm detector, then landmarks on its rotated crops): 21 (x, y) a hand."""
    h, w = image.shape[:2]
    with mp.solutions.hands.Hands(static_image_mode=True, max_num_hands=2, model_complexity=model_complexity,
                                  min_detection_confidence=0.5) as hands:
        res = hands.process(image)
    return [np.array([[lm.x * w, lm.y * h] for lm in hl.landmark]) for hl in res.multi_hand_landmarks or []]


def edgekit_faces(detector: Any, image: np.ndarray) -> list[dict[str, Any]]:
    """edgekit's reading of a face detector: boxes from Detector, keypoints from the same decode."""
    from edgekit.contract.anchors import decode_anchors

    engine = detector._engine  # the test compares what the engine fed the model with the reference
    with engine.lock:
        transform = engine.write(image)
        outputs = engine.infer()
    decoder = engine._decode
    spec = getattr(decoder, "spec", None)
    d = decode_anchors(outputs[decoder.boxes_index], outputs[decoder.scores_index], spec, transform)
    return [{"score": float(s), "box": tuple(map(float, b)), "keypoints": k} for b, s, k in
            zip(d.xyxy, d.scores, d.keypoints)]


def match_faces(ref: list[dict[str, Any]], got: list[dict[str, Any]], size: tuple[int, int]
                ) -> tuple[list[float], list[float], list[float]]:
    """For each reference face: the best IoU among edgekit's and that face's worst keypoint error
    (fraction of the image's larger side); and the scores of edgekit's faces that match none."""
    ious, errs, extra = [], [], []
    used = set()
    for r in ref:
        best = max(range(len(got)), key=lambda i: iou(r["box"], got[i]["box"]), default=None)
        if best is None or iou(r["box"], got[best]["box"]) == 0:
            ious.append(0.0), errs.append(1.0)
            continue
        used.add(best)
        ious.append(iou(r["box"], got[best]["box"]))
        errs.append(float(np.abs(r["keypoints"] - got[best]["keypoints"]).max() / max(size)))
    extra = [g["score"] for i, g in enumerate(got) if i not in used]
    return ious, errs, extra


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


PALM_POINTS = (0, 1, 2, 5, 9, 13, 17)  # wrist, thumb base and the knuckles: what the palm detector boxes


def palm_box(landmarks: np.ndarray) -> tuple[float, float, float, float]:
    """The box of a reference hand's palm landmarks."""
    p = landmarks[list(PALM_POINTS)]
    return float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max())


def covers(box: Any, point: Any) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


def match_palms(hands: list[np.ndarray], boxes: Any, scores: Any) -> tuple[int, list[float]]:
    """How many reference hands have an edgekit palm over their palm (the box holds the wrist-to-
    knuckles centre and overlaps the palm landmarks' box), and the scores of palms over no hand."""
    found, used = 0, set()
    for lm in hands:
        centre = lm[[0, 5, 9, 13, 17]].mean(axis=0)
        hit = [i for i, b in enumerate(boxes) if covers(b, centre) and iou(b, palm_box(lm)) > 0.1]
        found += bool(hit)
        used.update(hit)
    return found, [float(s) for i, s in enumerate(scores) if i not in used]


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    """MediaPipe's rotation that turns a -> b upright (90 degrees less the vector's angle)."""
    angle = np.pi / 2 - np.arctan2(-(b[1] - a[1]), b[0] - a[0])
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


def _crop_map(centre: np.ndarray, side: float, angle: float, size: int) -> np.ndarray:
    """The 2 x 3 affine map of the frame onto a square crop of ``side`` pixels rotated by ``angle``
    around ``centre``: frame point p -> ((p - centre) @ rot) / side * size + size / 2."""
    c, s = np.cos(angle), np.sin(angle)
    rot = np.array([[c, -s], [s, c]])
    a = rot.T * (size / side)
    return np.hstack([a, (size / 2 - a @ centre)[:, None]])


def palm_crop(box: Any, wrist: np.ndarray, middle: np.ndarray, size: int = 224) -> np.ndarray:
    """The crop MediaPipe's hand tracking runs the landmark model on, from one palm detection
    (mediapipe/modules/hand_landmark/palm_detection_detection_to_roi.pbtxt: the box's centre,
    rotated so wrist -> middle finger base points up, shifted by -0.5 of its height along the hand,
    square on its longer side, scaled 2.6)."""
    angle = _angle(wrist, middle)
    w, h = box[2] - box[0], box[3] - box[1]
    centre = np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2])
    centre = centre + np.array([h * 0.5 * np.sin(angle), -h * 0.5 * np.cos(angle)])
    return _crop_map(centre, max(w, h) * 2.6, angle, size)


def reference_palms_and_hands(mp: Any, image: np.ndarray, complexity: int) -> tuple[list[Any], list[np.ndarray]]:
    """MediaPipe's own hands graph, static: its palm detections (score, box in pixels, crop map) and
    the 21 landmarks of each hand it kept."""
    from mediapipe.python.solution_base import SolutionBase
    from mediapipe.python.solutions import hands

    h, w = image.shape[:2]
    graph = SolutionBase(binary_graph_path=hands._BINARYPB_FILE_PATH,
                         side_inputs={"model_complexity": complexity, "num_hands": 2, "use_prev_landmarks": False},
                         calculator_params={"palmdetectioncpu__TensorsToDetectionsCalculator.min_score_thresh": 0.5,
                                            "handlandmarkcpu__ThresholdingCalculator.threshold": 0.5},
                         outputs=["palm_detections", "multi_hand_landmarks"])
    try:
        res = graph.process(image)
    finally:
        graph.close()
    palms = []
    for d in res.palm_detections or []:
        b = d.location_data.relative_bounding_box
        box = (b.xmin * w, b.ymin * h, (b.xmin + b.width) * w, (b.ymin + b.height) * h)
        kp = d.location_data.relative_keypoints
        palms.append((float(d.score[0]), box, palm_crop(box, np.array([kp[0].x * w, kp[0].y * h]),
                                                         np.array([kp[2].x * w, kp[2].y * h]))))
    hands_found = [np.array([[lm.x * w, lm.y * h] for lm in hl.landmark]) for hl in res.multi_hand_landmarks or []]
    return palms, hands_found


def reference_pose_detection(mp: Any, image: np.ndarray) -> dict[str, Any] | None:
    """MediaPipe's own pose detector, as its pose graph runs it (pose_landmark_cpu's DETECTION stream,
    static images, model_complexity 1: the wheel ships pose_landmark_full only): the box and 4 keypoints of the best person, in pixels, or None."""
    from mediapipe.python.solution_base import SolutionBase
    from mediapipe.python.solutions import pose

    h, w = image.shape[:2]
    graph = SolutionBase(binary_graph_path=pose._BINARYPB_FILE_PATH,
                         side_inputs={"model_complexity": 1, "smooth_landmarks": False, "enable_segmentation": False,
                                      "smooth_segmentation": False, "use_prev_landmarks": False},
                         outputs=["pose_detection"])
    try:
        res = graph.process(image)
    finally:
        graph.close()
    d = res.pose_detection
    if d is None:
        return None
    b = d.location_data.relative_bounding_box
    return {"score": float(d.score[0]) if d.score else None,
            "box": (b.xmin * w, b.ymin * h, (b.xmin + b.width) * w, (b.ymin + b.height) * h),
            "keypoints": np.array([[k.x * w, k.y * h] for k in d.location_data.relative_keypoints])}
