"""ONNX files read before conversion (bad ones stop with one line, exit 2, nothing written), the YOLO
head split on graphs written with onnx.helper, and detection data sets in the formats people have."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from edgekit.cli import main  # noqa: E402
from edgekit.converters.detection_data import find_detection_set, read_data_yaml  # noqa: E402
from edgekit.converters.yolo_head import mixed_head_levels, split_onnx_head  # noqa: E402


def _yolo_graph(h: int | str = 32, w: int | str = 32, classes: int = 3, op: str = "Sigmoid",
                domain: str = "", concat_last: bool = False) -> onnx.ModelProto:
    """[1, 3, H, W] -> conv -> boxes (pixels) and scores, Concat then Transpose to [1, 4+C, N] (as
    tf2onnx writes it), or each part transposed and Concat last (as Ultralytics' export writes it)."""
    rng = np.random.default_rng(0)
    weight = helper.make_tensor("w", TensorProto.FLOAT, (4 + classes, 3, 8, 8),
                                rng.normal(0, 0.1, (4 + classes, 3, 8, 8)).astype(np.float32).ravel())
    nodes = [
        helper.make_node("Conv", ["images", "w"], ["feat"], strides=[8, 8], name="head_conv"),
        helper.make_node("Reshape", ["feat", "shape"], ["rows"], name="rows"),  # [1, 4+C, N]
        helper.make_node("Transpose", ["rows"], ["cols"], perm=[0, 2, 1], name="cols"),  # [1, N, 4+C]
        helper.make_node("Slice", ["cols", "s0", "s4", "ax"], ["box_raw"], name="box_slice"),
        helper.make_node("Slice", ["cols", "s4", "send", "ax"], ["cls_raw"], name="cls_slice"),
        helper.make_node("Sigmoid", ["box_raw"], ["box_sig"], name="box_sig"),
        helper.make_node("Mul", ["box_sig", "size"], ["box_px"], name="box_px"),
        helper.make_node(op, ["cls_raw"], ["cls"], name="cls_act", domain=domain),
    ]
    if concat_last:
        nodes += [helper.make_node("Transpose", ["box_px"], ["dbox"], perm=[0, 2, 1], name="dbox"),
                  helper.make_node("Transpose", ["cls"], ["cls_t"], perm=[0, 2, 1], name="cls_t"),
                  helper.make_node("Concat", ["dbox", "cls_t"], ["output0"], axis=1, name="final_concat")]
    else:
        nodes += [helper.make_node("Concat", ["box_px", "cls"], ["cat"], axis=2, name="final_concat"),
                  helper.make_node("Transpose", ["cat"], ["output0"], perm=[0, 2, 1], name="final_transpose")]
    inits = [weight, helper.make_tensor("shape", TensorProto.INT64, (3,), [1, 4 + classes, -1]),
             helper.make_tensor("s0", TensorProto.INT64, (1,), [0]),
             helper.make_tensor("s4", TensorProto.INT64, (1,), [4]),
             helper.make_tensor("send", TensorProto.INT64, (1,), [1 << 30]),
             helper.make_tensor("ax", TensorProto.INT64, (1,), [2]),
             helper.make_tensor("size", TensorProto.FLOAT, (), [32.0])]
    graph = helper.make_graph(nodes, "yolo_like", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                                 [1, 3, h, w])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + classes, None])],
                              inits)
    opsets = [helper.make_opsetid("", 13)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, producer_name="edgekit-tests", ir_version=8)


@pytest.mark.parametrize("concat_last", [False, True], ids=["concat-then-transpose", "ultralytics-concat-last"])
def test_split_onnx_head_gives_the_same_values_as_two_outputs(concat_last) -> None:
    model = _yolo_graph(concat_last=concat_last)
    split, info = split_onnx_head(model)
    assert info.num_classes == 3 and info.axis == 1 and "final_concat" in info.where
    assert [o.name for o in split.graph.output] == ["boxes", "scores"]
    assert "final_concat" not in [n.name for n in split.graph.node]
    x = np.random.default_rng(1).random((1, 3, 32, 32), dtype=np.float32)
    whole = ort.InferenceSession(model.SerializeToString()).run(None, {"images": x})[0]
    boxes, scores = ort.InferenceSession(split.SerializeToString()).run(None, {"images": x})
    np.testing.assert_array_equal(boxes, whole[:, :4])
    np.testing.assert_array_equal(scores, whole[:, 4:])


def test_mixed_head_levels_counts_what_one_scale_leaves_the_scores() -> None:
    rng = np.random.default_rng(0)
    raw = np.concatenate([rng.uniform(0, 640, (2, 4, 100)), rng.uniform(0, 1, (2, 3, 100))], axis=1)
    levels, scale = mixed_head_levels(raw)
    assert scale == pytest.approx(640 / 255, rel=0.01) and levels <= 2
    normalized = np.concatenate([rng.uniform(0, 1, (2, 4, 100)), rng.uniform(0, 1, (2, 3, 100))], axis=1)
    assert mixed_head_levels(normalized) is None


def _convert(tmp_path: Path, model_path: Path, *extra: str) -> int:
    return main(["convert", str(model_path), "--mode", "float16", "-o", str(tmp_path / "out.tflite"), "-q", *extra])


@pytest.mark.needs_tf
@pytest.mark.parametrize("make, extra, words", [
    (lambda p: p.write_bytes(_yolo_graph().SerializeToString()[:700]), (), "not a complete ONNX model"),
    (lambda p: onnx.save_model(_yolo_graph("height", "width"), str(p)), (), "--imgsz"),
    (lambda p: onnx.save_model(_yolo_graph(op="FancyAct", domain="com.vendor"), str(p)), (),
     "op 'FancyAct' of domain 'com.vendor' (node 8 of 10, 'cls_act'"),
    (lambda p: onnx.save_model(_yolo_graph(op="NotAnOnnxOp"), str(p)), (), "op 'NotAnOnnxOp'"),
    (lambda p: onnx.save_model(_yolo_graph(), str(p)), ("--imgsz", "64"), "takes 32x32 images"),
], ids=["truncated", "dynamic-size", "custom-op", "unknown-op", "wrong-imgsz"])
def test_bad_onnx_files_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, make, extra, words) -> None:
    if importlib.util.find_spec("onnx2tf") is None:  # not imported here: it sets TF_USE_LEGACY_KERAS
        pytest.skip("onnx2tf is not installed (the convert extra)")
    path = tmp_path / "model.onnx"
    make(path)
    assert _convert(tmp_path, path, *extra) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


# --- detection data sets ---------------------------------------------------------------------------
def _image(path: Path, w: int = 40, h: int = 20) -> None:
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((h, w, 3), 90, np.uint8))


def _yolo(root: Path) -> Path:
    _image(root / "images" / "val" / "a.png")
    (root / "labels" / "val").mkdir(parents=True)
    (root / "labels" / "val" / "a.txt").write_text("1 0.5 0.5 0.5 0.5\n")
    return root


def _data_yaml(root: Path) -> Path:
    _yolo(root)
    (root / "data.yaml").write_text("# a data set\npath: .\ntrain: images/train  # calibration\nval: images/val\n"
                                    "names:\n  0: 'bolt'\n  1: nut\n")
    return root / "data.yaml"


def _coco(root: Path) -> Path:
    _image(root / "a.png")
    doc = {"images": [{"id": 7, "file_name": "a.png", "width": 40, "height": 20}],
           "annotations": [{"id": 1, "image_id": 7, "category_id": 12, "bbox": [10, 5, 20, 10]}],
           "categories": [{"id": 3, "name": "bolt"}, {"id": 12, "name": "nut"}]}
    (root / "instances.json").write_text(json.dumps(doc))
    return root / "instances.json"


def _edgekit(root: Path) -> Path:
    _image(root / "a.png")
    (root / "labels.json").write_text(json.dumps({"classes": ["bolt", "nut"], "box_format": "xyxy",
                                                  "images": [{"file": "a.png", "boxes": [[10, 5, 30, 15]],
                                                              "class_ids": [1]}]}))
    return root


@pytest.mark.parametrize("make, names", [
    (_yolo, None), (_data_yaml, ("bolt", "nut")), (_coco, ("bolt", "nut")), (_edgekit, ("bolt", "nut")),
], ids=["yolo-folder", "data-yaml", "coco", "labels-json"])
def test_detection_sets_give_boxes_in_image_pixels(tmp_path, make, names) -> None:
    found = find_detection_set(make(tmp_path))
    assert found is not None and len(found) == 1 and found.names == names
    np.testing.assert_allclose(found.boxes[0], [[10, 5, 30, 15]])
    assert found.classes[0].tolist() == [1]


def test_data_yaml_names_as_a_list_or_inline() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "data.yaml"
        p.write_text("val: images/val\nnames: ['a', \"b c\"]\nnc: 2\n")
        assert read_data_yaml(p)["names"] == ["a", "b c"]
        p.write_text("val: v\nnames:\n  - a\n  - b # the second\n")
        assert read_data_yaml(p) == {"val": "v", "names": ["a", "b"]}


def test_data_yaml_calibrates_on_train_and_validates_on_val(tmp_path) -> None:
    yaml = _data_yaml(tmp_path)
    assert [p.name for p in find_detection_set(yaml, "train").files] == ["a.png"]  # no train folder: val
    _image(tmp_path / "images" / "train" / "t1.png")
    _image(tmp_path / "images" / "train" / "t2.png")
    assert [p.name for p in find_detection_set(yaml, "val").files] == ["a.png"]
    train = find_detection_set(yaml, "train")
    assert [p.name for p in train.files] == ["t1.png", "t2.png"] and "train split" in train.origin
    assert [len(c) for c in train.classes] == [0, 0]  # no label file: an image without objects
    assert [p.name for p in find_detection_set(tmp_path / "images", "train").files] == ["t1.png", "t2.png"]


def test_convert_help_lists_the_input_kinds(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["convert", "--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0
    for words in ("Keras file (.keras/.h5)", "SavedModel folder", "ONNX file (.onnx)", "float32 .tflite", "--imgsz",
                  "--layout", "--no-split-head"):
        assert words in " ".join(out.split()), words


@pytest.mark.needs_tf
def test_a_missing_onnx_extra_is_one_sentence_naming_the_pip_command(tmp_path, capsys, monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnx2tf" else real(name, *a))
    path = tmp_path / "model.onnx"
    onnx.save_model(_yolo_graph(), str(path))
    assert _convert(tmp_path, path) == 2
    err = capsys.readouterr().err.strip()
    assert "needs onnx2tf" in err and "pip install 'edgekit-tflite[convert]'" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("op, value, expect", [
    ("Div", 255.0, (0.0, 1.0)), ("Mul", 1 / 255, (0.0, 1.0)), ("Sub", 127.5, (0.0, 1.0)),
    ("Mul", 2.0, None), ("Add", 1.0, None),
], ids=["div-255", "mul-1/255", "sub-mean", "mul-2", "add"])
def test_normalization_read_from_the_graph(op, value, expect) -> None:
    from edgekit.converters.sources.onnx import graph_normalization

    nodes = [helper.make_node("Transpose", ["images"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node(op, ["t", "c"], ["y"], name="norm")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 3])],
                              [helper.make_tensor("c", TensorProto.FLOAT, (), [value])])
    hint = graph_normalization(helper.make_model(graph), "images")
    assert (None if hint is None else (hint.mean[0], hint.std[0])) == expect
    if hint is not None:
        assert f"{op} by" in hint.description and "raw pixels" in hint.description


@pytest.mark.parametrize("doc_extra, boxes", [
    ({}, [[10, 5, 30, 15]]),                                                   # x1 y1 x2 y2 in pixels
    ({"box_format": "cxcywh"}, [[20, 10, 20, 10]]),                            # centre and size in pixels
    ({"box_format": "cxcywh", "normalized": True}, [[0.5, 0.25, 0.5, 0.25]]),  # the same, as fractions of 40x40
], ids=["xyxy", "cxcywh", "cxcywh-normalized"])
def test_edgekit_labels_json_box_formats(tmp_path, doc_extra, boxes) -> None:
    import cv2

    cv2.imwrite(str(tmp_path / "a.png"), np.zeros((40, 40, 3), np.uint8))
    doc = {"images": [{"file": "a.png", "boxes": boxes, "class_ids": [1]}], "classes": ["x", "y"], **doc_extra}
    (tmp_path / "labels.json").write_text(json.dumps(doc))
    found = find_detection_set(tmp_path)
    assert found is not None and found.names == ("x", "y")
    np.testing.assert_allclose(found.boxes[0], [[10, 5, 30, 15]], atol=1e-4)
    assert found.classes[0].tolist() == [1]


@pytest.mark.skipif(importlib.util.find_spec("onnxsim") is None or os.name != "posix", reason="needs onnxsim, POSIX")
def test_onnxsim_command_is_provided_when_only_its_package_is_importable(tmp_path) -> None:
    """onnx2tf runs the `onnxsim` command; a venv seeing its packages through a .pth file has the package but not
    the command, and onnx2tf then fails on Ultralytics' box decode (shapes left unknown)."""
    import subprocess

    from edgekit.converters.sources.onnx import _onnxsim_shim

    folders = _onnxsim_shim(str(tmp_path / "empty"), tmp_path)
    assert folders == [str(tmp_path / "bin")]
    done = subprocess.run([str(tmp_path / "bin" / "onnxsim"), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "input_model" in done.stdout
    assert _onnxsim_shim(folders[0], tmp_path / "again") == []  # found on the PATH: nothing written
    assert not (tmp_path / "again").exists()
