"""summary.md's sentences: what the gate measured and whether int8 was faster, said plainly."""

from __future__ import annotations

import pytest

from edgekit.demo.report import gate_explanation, speed_sentence


@pytest.mark.parametrize("float_ms, int8_ms, expected", [
    (1.22, 1.40, "**On this CPU (AMD EPYC) int8 is not faster than float32** (1.40 against 1.22 ms p50)"),
    (1.00, 1.00, "int8 is not faster than float32"),
    (0.81, 0.24, "On this CPU (AMD EPYC) int8 runs 3.4x as fast as float32 (0.24 against 0.81 ms p50)."),
    (float("nan"), 0.24, "Latency could not be measured on AMD EPYC."),
])
def test_speed_sentence(float_ms: float, int8_ms: float, expected: str) -> None:
    text = speed_sentence(float_ms, int8_ms, "AMD EPYC", 0.27)
    assert expected in text
    assert ("3.7x smaller" in text) == (int8_ms >= float_ms), "the size gain is named when speed is not"


@pytest.mark.parametrize("basis, expected", [
    # the flaw a new user hit: the gate failed on 4.82 points while the table showed 1.4
    ("map50", ["against the float model's detections taken as the truth", "(int8 lost 4.82 points there; "
               "1.40 points in the table's mAP row)", "not how accurate either model is",
               "can be larger than the table's difference"]),
    ("map50-truth", ["against the labelled objects of the validation split", "It is the table's measure"]),
    ("agreement", ["top-1 agreement with the float model"]),
])
def test_gate_explanation_names_the_measure_and_why_it_differs(basis: str, expected: list[str]) -> None:
    text = gate_explanation(basis, 4.82, -0.014)
    assert text.startswith("What the gate measures: ")
    for words in expected:
        assert words in text, text
