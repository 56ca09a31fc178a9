"""edgekit metadata written into real .tflite files: every interpreter still loads them, the
outputs do not change, the runtime reads the document back, `edgekit classify` uses its labels.

Uses the real models in ../shared/models (skipped when absent); no TensorFlow needed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from edgekit.cli import main
from edgekit.converters.metadata_writer import encode_metadata, write_metadata, write_metadata_file
from edgekit.errors import ConversionError, ModelError
from edgekit.preprocess import fit, load_image
from edgekit.runtimes import inspect_model, load_model, parse_tflite
from tests.conftest import shared_model

MOBILENET = "mobilenet_v1_0.25_128_quant.tflite"
DOC = {"edgekit_version": "0.1.0", "task": "classify", "output_format": "classes",
       "preprocessing": {"input_size": [128, 128], "resize": "stretch", "color": "RGB",
                         "mean": [127.5, 127.5, 127.5], "std": [127.5, 127.5, 127.5]},
       "quantization": {"mode": "uint8"}, "source": {"name": "mobilenet", "sha256": "0" * 64},
       "accuracy": {"top1_agreement": 0.99, "gate": "PASS"}}


def _metadata_entries(data: bytes) -> list[str]:
    from ai_edge_litert import schema_py_generated as schema

    model = schema.Model.GetRootAs(data, 0)
    return [model.Metadata(i).Name().decode() for i in range(model.MetadataLength())]


def _pixels(path: Path, size: tuple[int, int]) -> np.ndarray:
    img, _ = fit(load_image(path), size)
    return img[np.newaxis]


@pytest.fixture(scope="module")
def labelled_mobilenet(shared_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = shared_model(shared_models, MOBILENET)
    labels = (shared_models / "imagenet_labels.txt").read_text().splitlines()
    out = tmp_path_factory.mktemp("meta") / "mobilenet_meta.tflite"
    write_metadata_file(src, {**DOC, "labels": labels}, out)
    return out


def test_round_trip_and_outputs_unchanged(shared_models: Path, shared_images: Path, labelled_mobilenet: Path) -> None:
    info = inspect_model(labelled_mobilenet)
    assert info.metadata is not None
    assert info.metadata["task"] == "classify"
    assert info.metadata["preprocessing"] == DOC["preprocessing"]
    assert len(info.metadata["labels"]) == 1001
    # TFLite's own entries survive beside ours
    assert set(info.other_metadata) >= {"min_runtime_version"}
    x = _pixels(shared_images / "parrot.jpg", (128, 128))
    with load_model(shared_model(shared_models, MOBILENET)) as a, load_model(labelled_mobilenet) as b:
        ya, yb = a.run(x, dequantize=False)[0], b.run(x, dequantize=False)[0]
    np.testing.assert_array_equal(ya, yb)
    assert info.metadata["labels"][int(yb.argmax())] == "macaw"


def test_every_backend_here_loads_it(labelled_mobilenet: Path) -> None:
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(labelled_mobilenet))
    interp.allocate_tensors()
    interp.invoke()
    assert interp.get_output_details()[0]["shape"].tolist() == [1, 1001]


def test_classify_uses_the_labels_inside(labelled_mobilenet: Path, shared_images: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["classify", "-m", str(labelled_mobilenet), "-k", "1", "--json",
                 str(shared_images / "parrot.jpg")])
    assert code == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["classes"][0]["label"] == "macaw"


def test_info_shows_it(labelled_mobilenet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--json", str(labelled_mobilenet)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metadata"]["quantization"] == {"mode": "uint8"}


def test_replaces_an_existing_entry(shared_models: Path) -> None:
    data = shared_model(shared_models, MOBILENET).read_bytes()
    once = write_metadata(data, DOC)
    twice = write_metadata(once, {"task": "detect"})
    assert _metadata_entries(twice).count("edgekit") == 1
    parsed = parse_tflite(twice)
    assert len(parsed.buffers) == len(parse_tflite(once).buffers)  # the old buffer was reused
    buf = parsed.buffers[parsed.metadata["edgekit"]]
    assert json.loads(twice[buf.start:buf.start + buf.size]) == {"task": "detect"}


@pytest.mark.parametrize("name", ["mobilenet_v1_0.25_128_quant.tflite", "ssd_mobilenet_v1_coco_quant.tflite",
                                  "mobilenet_v1_0.25_128_quant_edgetpu.tflite"])
def test_buffers_stay_16_byte_aligned_and_ops_intact(shared_models: Path, name: str) -> None:
    src = shared_model(shared_models, name).read_bytes()
    out = write_metadata(src, DOC)
    before, after = parse_tflite(src), parse_tflite(out)
    assert all(b.start % 16 == 0 for b in after.buffers if b.size)
    assert after.opcodes == before.opcodes
    assert after.edgetpu_compiled == before.edgetpu_compiled
    assert [t.shape for t in after.subgraphs[0].tensors] == [t.shape for t in before.subgraphs[0].tensors]


def test_ssd_detections_unchanged(shared_models: Path, shared_images: Path, tmp_path: Path) -> None:
    src = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    out = write_metadata_file(src, {**DOC, "task": "detect", "output_format": "ssd"}, tmp_path / "ssd.tflite")
    x = _pixels(shared_images / "kite_and_cold.jpg", (300, 300))
    with load_model(src) as a, load_model(out) as b:
        for ya, yb in zip(a.run(x), b.run(x)):
            np.testing.assert_array_equal(ya, yb)


@pytest.mark.parametrize(
    ("doc", "error", "match"),
    [
        ({"accuracy": math.nan}, ConversionError, "not plain JSON"),
        ({"labels": np.array(["a"])}, ConversionError, "not plain JSON"),
        ({"x": {1, 2}}, ConversionError, "not plain JSON"),
    ],
)
def test_rejects_documents_that_are_not_json(doc: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        encode_metadata(doc)


@pytest.mark.parametrize(
    ("data", "match"),
    [(b"", "empty"), (b"\x89PNG\r\n\x1a\n" + b"\0" * 32, "not a TFLite model"), (b"\x18\0\0\0TFL3", "corrupt")],
)
def test_rejects_files_that_are_not_models(data: bytes, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        write_metadata(data, DOC)


def test_in_place_write_leaves_no_temporary_file(shared_models: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.tflite"
    path.write_bytes(shared_model(shared_models, MOBILENET).read_bytes())
    write_metadata_file(path, DOC)
    assert inspect_model(path).metadata == json.loads(encode_metadata(DOC))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tflite"]
