"""YOLOv8/11 outputs read as Ultralytics' `predict` reads them: Detector on a real photo against a
direct numpy re-implementation of Ultralytics' LetterBox, AutoBackend's TFLite read-out,
ops.non_max_suppression and ops.scale_boxes, for float32, float16 and int8 files, and for a head
split into boxes and scores outputs. The model is untrained, so hundreds of overlapping
candidates put NMS to the test; everything the device needs comes from the file's metadata.

Two deliberate differences, applied to the reference too: an int8 input is quantized with
rounding (Ultralytics' AutoBackend truncates, `(im / scale + zero_point).astype(int8)`), and a
box clipped to nothing (wholly in the letterbox padding) is not reported.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SIZE, CLASSES, CELLS = 64, 3, 16  # a 64x64 input, 3 classes, 16x16 = 256 candidates
META = {"task": "detect", "output_format": "yolo", "labels": ["a", "b", "c"],
        "preprocessing": {"input_size": [SIZE, SIZE], "resize": "letterbox", "interpolation": "linear",
                          "box_mapping": "ultralytics", "mean": [0.0] * 3, "std": [255.0] * 3, "color": "RGB"},
        "detection": {"box_format": "cxcywh", "normalized": True, "score_threshold": 0.25, "iou_threshold": 0.7,
                      "max_det": 300}}


# --- the reference: Ultralytics' predict, in numpy ------------------------------------------------
def letterbox(img: np.ndarray, new: int) -> np.ndarray:
    """ultralytics.data.augment.LetterBox(auto=False, center=True, interpolation=cv2.INTER_LINEAR)."""
    import cv2

    h, w = img.shape[:2]
    r = min(new / h, new / w)
    unpad = int(round(w * r)), int(round(h * r))
    dw, dh = (new - unpad[0]) / 2, (new - unpad[1]) / 2
    if (w, h) != unpad:
        img = cv2.resize(img, unpad, interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))


def nms_torchvision(boxes: np.ndarray, scores: np.ndarray, iou_thres: float) -> np.ndarray:
    """torchvision.ops.nms: by score, drop boxes whose IoU with a kept one is above the threshold."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1) * (y2 - y1)
    order, keep = np.argsort(-scores, kind="stable"), []
    while order.size:
        i, rest = order[0], order[1:]
        keep.append(i)
        inter = (np.clip(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0, None)
                 * np.clip(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0, None))
        order = rest[inter / (areas[i] + areas[rest] - inter) <= iou_thres]
    return np.array(keep, dtype=np.int64)


def non_max_suppression(pred: np.ndarray, conf: float, iou: float, max_det: int = 300) -> np.ndarray:
    """ops.non_max_suppression for one image of (4 + nc, N), multi_label=False: rows x1 y1 x2 y2 conf cls."""
    max_wh, max_nms = 7680, 30000
    xc = pred[4:].max(0) > conf
    x = pred.T.copy()
    xy, wh = x[:, :2].copy(), x[:, 2:4].copy()
    x[:, :2], x[:, 2:4] = xy - wh / 2, xy + wh / 2
    x = x[xc]
    c, j = x[:, 4:].max(1), x[:, 4:].argmax(1)
    x = np.concatenate([x[:, :4], c[:, None], j[:, None].astype(np.float32)], 1)[c > conf]
    if len(x) > max_nms:
        x = x[np.argsort(-x[:, 4])[:max_nms]]
    i = nms_torchvision(x[:, :4] + x[:, 5:6] * max_wh, x[:, 4], iou)[:max_det]
    return x[i]


def scale_boxes(img1_shape: tuple[int, int], boxes: np.ndarray, img0_shape: tuple[int, ...]) -> np.ndarray:
    """ops.scale_boxes (ratio_pad None, padding True) then clip_boxes."""
    gain = min(img1_shape[0] / img0_shape[0], img1_shape[1] / img0_shape[1])
    pad = (round((img1_shape[1] - img0_shape[1] * gain) / 2 - 0.1),
           round((img1_shape[0] - img0_shape[0] * gain) / 2 - 0.1))
    boxes[:, [0, 2]] -= pad[0]
    boxes[:, [1, 3]] -= pad[1]
    boxes[:, :4] /= gain
    boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, img0_shape[1])
    boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, img0_shape[0])
    return boxes


def ultralytics_predict(path: Path, image: np.ndarray, split: bool) -> np.ndarray:
    """AutoBackend's TFLite path on the letterboxed image, then the postprocess above."""
    from ai_edge_litert.interpreter import Interpreter

    im = letterbox(image, SIZE)[None].astype(np.float32) / 255
    interp = Interpreter(model_path=str(path))
    interp.allocate_tensors()
    d = interp.get_input_details()[0]
    scale, zp = d["quantization"]
    if d["dtype"] == np.int8:
        im = np.clip(np.round(im / scale) + zp, -128, 127)  # (AutoBackend truncates; see the module note)
    interp.set_tensor(d["index"], im.astype(d["dtype"]))
    interp.invoke()
    outs = []
    for o in interp.get_output_details():
        x = interp.get_tensor(o["index"])
        s, z = o["quantization"]
        outs.append((x.astype(np.float32) - z) * s if x.dtype == np.int8 else x.astype(np.float32))
    if split:  # boxes [1, 4, N] then scores [1, C, N], in whatever order the file lists them
        outs.sort(key=lambda o: o.shape[1] != 4)
    x = np.concatenate(outs, axis=1) if split else outs[0]
    x[:, [0, 2]] *= SIZE  # TFLite exports keep xywh normalized; AutoBackend scales them by the input size
    x[:, [1, 3]] *= SIZE
    det = non_max_suppression(x[0], 0.25, 0.7)
    det[:, :4] = scale_boxes((SIZE, SIZE), det[:, :4], image.shape)
    return det[(det[:, 2] > det[:, 0]) & (det[:, 3] > det[:, 1])]


# --- the models ----------------------------------------------------------------------------------
def _heads(keras: Any) -> tuple[Any, Any]:
    """One untrained head, as one output [1, 4+C, N] and as boxes [1, 4, N] + scores [1, C, N]."""
    inp = keras.Input((SIZE, SIZE, 3), batch_size=1)
    h = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(inp)
    h = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(h)
    h = keras.layers.Conv2D(4 + CLASSES, 3, padding="same")(h)
    raw = keras.layers.Reshape((CELLS * CELLS, 4 + CLASSES))(h)
    xy = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., :2]), output_shape=(CELLS * CELLS, 2))(raw)
    wh = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., 2:4]) * 0.15, output_shape=(CELLS * CELLS, 2))(raw)
    scores = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., 4:] * 3), output_shape=(CELLS * CELLS, CLASSES))(raw)
    boxes = keras.layers.Permute((2, 1))(keras.layers.Concatenate()([xy, wh]))  # [1, 4, N], normalized
    scores = keras.layers.Permute((2, 1))(scores)  # [1, C, N]
    return keras.Model(inp, keras.layers.Concatenate(axis=1)([boxes, scores])), keras.Model(inp, [boxes, scores])


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tf = pytest.importorskip("tensorflow", reason="building test models needs TensorFlow (the convert extra)")
    from edgekit.converters.metadata_writer import write_metadata

    tf.keras.utils.set_random_seed(3)
    folder = tmp_path_factory.mktemp("ultralytics")
    rng = np.random.default_rng(0)
    out = {}
    heads = _heads(tf.keras)
    for name, split, mode in (("float32", False, None), ("float16", False, "float16"), ("int8", False, "int8"),
                              ("split-int8", True, "int8")):
        conv = tf.lite.TFLiteConverter.from_keras_model(heads[split])
        if mode == "float16":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.target_spec.supported_types = [tf.float16]
        elif mode == "int8":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.representative_dataset = lambda: ([rng.uniform(0, 1, (1, SIZE, SIZE, 3)).astype(np.float32)]
                                                   for _ in range(16))
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            conv.inference_input_type = conv.inference_output_type = tf.int8
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            data = conv.convert()
        meta = META
        if split:
            from edgekit.runtimes.tflite_file import parse_tflite

            sg = parse_tflite(data).subgraphs[0]
            roles = ["boxes" if sg.tensors[i].shape[1] == 4 else "scores" for i in sg.outputs]
            meta = {**META, "detection": {**META["detection"], "outputs": roles}}
        out[name] = folder / f"{name}.tflite"
        out[name].write_bytes(write_metadata(data, meta))
        if name == "float32":  # as Ultralytics' exporter leaves it: its metadata zipped after the flatbuffer
            out["ultralytics-zip"] = folder / "ultralytics.tflite"
            out["ultralytics-zip"].write_bytes(data + _zip("metadata.json", json.dumps(ULTRALYTICS_META)))
    return out


ULTRALYTICS_META = {"description": "Ultralytics YOLO11n model", "stride": 32, "task": "detect", "batch": 1,
                    "imgsz": [SIZE, SIZE], "names": {"0": "a", "1": "b", "2": "c"}, "args": {"nms": False}}


def _zip(name: str, text: str) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(name, text)
    return buf.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["float32", "float16", "int8", "split-int8", "ultralytics-zip"])
def test_detector_reads_yolo_as_ultralytics_predict(models: dict[str, Path], shared_images: Path, name: str) -> None:
    from edgekit import Detector, load_image

    image = load_image(shared_images / "kite_and_cold.jpg")
    ref = ultralytics_predict(models[name], image, split=name.startswith("split"))
    with Detector.create_from_model_path(models[name]) as det:  # no flags: the metadata (ours or theirs) says it all
        assert (det.threshold, det.resize.value, det.labels) == (0.25, "letterbox", ["a", "b", "c"])
        got = det.detect(image)
    assert len(ref) > 10  # enough overlapping candidates survive to make NMS matter
    assert len(got) == len(ref)
    order = np.lexsort((got.class_ids, -got.scores))
    ref_order = np.lexsort((ref[:, 5], -ref[:, 4]))
    np.testing.assert_array_equal(got.class_ids[order], ref[ref_order, 5].astype(np.int32))
    np.testing.assert_allclose(got.scores[order], ref[ref_order, 4], rtol=1e-6)
    np.testing.assert_allclose(got.xyxy[order], ref[ref_order, :4], atol=1e-3)


def test_reference_nms_matches_the_contract_on_random_boxes() -> None:
    """The two NMS implementations agree on many random candidate sets (class-wise, IoU 0.7)."""
    from edgekit.contract import batched_nms

    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 200))
        xy = rng.uniform(0, 60, (n, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(1, 30, (n, 2))], 1).astype(np.float32)
        scores = rng.uniform(0, 1, n).astype(np.float32)
        ids = rng.integers(0, 3, n)
        ref = nms_torchvision(boxes + ids[:, None] * 7680.0, scores, 0.7)
        np.testing.assert_array_equal(batched_nms(boxes, scores, ids, 0.7), ref)
