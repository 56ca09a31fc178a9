"""Print edgekit's figures against MediaPipe's own graphs, before (edgekit's old guesses: stretch or
gray-114 letterbox, [-1, 1], AUTO resampling) and after (the file's TFLite metadata and its family's
preset). Run in the reference venv: ``.venv-ref/bin/python -m tests.reference.figures``."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.contract.enums import BoxMapping, Interpolation, ResizeMode
from edgekit.contract.preprocessing import PreprocessingSpec
from edgekit.engine import ModelEngine
from edgekit.preprocess import load_image
from tests.reference import _mediapipe as ref

# What edgekit fed these files before it read their metadata and presets.
BEFORE_DETECT = PreprocessingSpec(ResizeMode.STRETCH, 114, Interpolation.AUTO, None, BoxMapping.EXACT)
BEFORE_SEGMENT = PreprocessingSpec(ResizeMode.LETTERBOX, 114, Interpolation.AUTO, None, BoxMapping.EXACT)


def with_spec(task: Any, spec: PreprocessingSpec | None) -> Any:
    """``task`` fed with ``spec`` instead of what it resolved (None: as it resolved)."""
    if spec is not None:
        old = task._engine
        task._engine = ModelEngine(old.model, spec, old._decode, old.labels, old.note)
    return task


def face_figures(mp: Any, models: dict[str, Path], key: str, selection: int, spec: PreprocessingSpec | None
                 ) -> dict[str, Any]:
    from edgekit import Detector

    ious: list[float] = []
    errs: list[float] = []
    extra: list[float] = []
    with Detector.create_from_model_path(models[key], threshold=0.5, isolate=False) as det:
        with_spec(det, spec)
        for photo in ref.photos():
            image = load_image(photo)
            r = ref.reference_faces(mp, image, selection)
            g = ref.edgekit_faces(det, image)
            i, e, x = ref.match_faces(r, g, (image.shape[1], image.shape[0]))
            ious += i
            errs += e
            extra += x
    return {"faces": len(ious), "min_iou": min(ious, default=1.0), "max_kp_err": max(errs, default=0.0),
            "extra": extra}


def selfie_figures(mp: Any, models: dict[str, Path], spec: PreprocessingSpec | None) -> dict[str, Any]:
    from edgekit import Segmenter

    ious = []
    with Segmenter.create_from_model_path(models["selfie"], isolate=False) as seg:
        with_spec(seg, spec)
        for photo in ref.photos():
            image = load_image(photo)
            want = ref.reference_selfie(mp, image, 0)
            if want.mean() < 0.01:
                continue  # no person for the reference: nothing to compare
            got = seg.segment(image).mask.class_map == 1
            ious.append(ref.mask_iou(want, got))
    return {"photos": len(ious), "min_iou": min(ious, default=1.0), "mean_iou": float(np.mean(ious)) if ious else 1.0}


def palm_figures(mp: Any, models: dict[str, Path], key: str, complexity: int, spec: PreprocessingSpec | None
                 ) -> dict[str, Any]:
    from edgekit import Detector

    ious: list[float] = []
    extra: list[float] = []
    with Detector.create_from_model_path(models[key], threshold=0.5, isolate=False) as det:
        with_spec(det, spec)
        for photo in ref.photos():
            image = load_image(photo)
            want, _ = ref.reference_palms_and_hands(mp, image, complexity)
            got = det.detect(image)
            used = set()
            for _, box, _ in want:
                best = max(range(len(got)), key=lambda i: ref.iou(box, got.xyxy[i]), default=None)
                ious.append(ref.iou(box, got.xyxy[best]) if best is not None else 0.0)
                used.add(best)
            extra += [round(float(s), 2) for i, s in enumerate(got.scores) if i not in used and s >= 0.5]
    return {"palms": len(ious), "min_iou": min(ious, default=1.0), "extra": extra}


def hand_figures(mp: Any, models: dict[str, Path], key: str, complexity: int) -> dict[str, Any]:
    import cv2

    from edgekit import PoseEstimator

    errors = []
    with PoseEstimator.create_from_model_path(models[key], threshold=0.5, isolate=False) as est:
        for photo in ref.photos():
            image = load_image(photo)
            palms, hands = ref.reference_palms_and_hands(mp, image, complexity)
            for want in hands:
                best = 1.0
                for _, _, m in palms:
                    poses = est.estimate(cv2.warpAffine(image, m, (224, 224), flags=cv2.INTER_LINEAR))
                    if len(poses):
                        inv = cv2.invertAffineTransform(m)
                        back = poses.keypoints[0] @ inv[:, :2].T + inv[:, 2]
                        best = min(best, float(np.abs(back - want).max() / max(image.shape[:2])))
                errors.append(best)
    return {"hands": len(errors), "max_err": max(errors, default=0.0)}


def main() -> None:
    mp, why = ref.mediapipe_or_reason()
    if mp is None:
        raise SystemExit(why)
    with tempfile.TemporaryDirectory() as tmp:
        models = ref.extract_models(mp, Path(tmp))
        for label, spec_d, spec_s in (("before", BEFORE_DETECT, BEFORE_SEGMENT), ("after", None, None)):
            for key, sel in (("face-short", 0), ("face-full", 1)):
                print(label, key, face_figures(mp, models, key, sel, spec_d))
            print(label, "selfie", selfie_figures(mp, models, spec_s))
            for key, cx in (("palm-lite", 0), ("palm-full", 1)):
                print(label, key, palm_figures(mp, models, key, cx, spec_d))
        for key, cx in (("hand-landmark-lite", 0), ("hand-landmark-full", 1)):
            print("after", key, hand_figures(mp, models, key, cx))


if __name__ == "__main__":
    main()
