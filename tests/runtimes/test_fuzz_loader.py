"""The model loader under fuzzing: no mutated file may crash the process that loads it.

A short hypothesis run of tests/fuzz (structural and byte mutations of built-in seed
models and the shared real ones) feeds the reader, `edgekit info` and `load_model` + one
invoke in forked children; the long run is ``python -m tests.fuzz --minutes 10``. The
graph checks the fuzzer motivated are pinned here row by row, and ``isolate=True`` is
shown to turn a file that does crash the interpreter into a ModelError.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("ai_edge_litert.schema_py_generated", reason="the fuzz seeds need ai-edge-litert's schema")
pytest.importorskip("flatbuffers", reason="the fuzz seeds need the flatbuffers package")

import edgekit.runtimes._probe as probe_mod  # noqa: E402
import edgekit.runtimes.tflite_file as tflite_file  # noqa: E402
from edgekit.errors import ConfigError, ModelError  # noqa: E402
from edgekit.runtimes import load_model, parse_tflite  # noqa: E402
from edgekit.runtimes.backends import resolve_backend  # noqa: E402
from tests.conftest import SHARED_MODELS, shared_model  # noqa: E402
from tests.fuzz.mutate import mutate  # noqa: E402
from tests.fuzz.runner import Kind, run_case  # noqa: E402
from tests.fuzz.seeds import SEEDS, build, pack, real_seeds, schema, unpack  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


_SEEDS: dict[str, tuple[bytes, Any]] = {}


def _seeds() -> dict[str, tuple[bytes, Any]]:
    """Seed bytes and their unpacked models, built once (not a fixture: hypothesis would
    print all of it with every failure)."""
    if not _SEEDS:
        resolve_backend()  # import the interpreter before any fork
        data = {name: build(name) for name in SEEDS}
        data.update(real_seeds(SHARED_MODELS, ("mobilenet_v1_0.25_128_quant.tflite",)))
        _SEEDS.update({name: (d, unpack(d)) for name, d in data.items()})
    return _SEEDS


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_models_load_and_run(name: str) -> None:
    outcome = run_case(build(name))
    assert outcome.kind is Kind.LOADED, outcome


@pytest.mark.slow
@settings(max_examples=500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), pick=st.integers(0, 10**6), delegate=st.sampled_from(["xnnpack", "cpu"]))
def test_mutated_models_never_crash_the_loader(seed: int, pick: int, delegate: str,
                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    seeds = _seeds()
    name = sorted(seeds)[pick % len(seeds)]
    data, model = seeds[name]
    mutated, what = mutate(random.Random(seed), data, model)
    outcome = run_case(mutated, delegate=delegate, timeout=5)
    assert outcome.kind not in (Kind.CRASH, Kind.PY_ERROR), f"{name}: {what}: {outcome}"
    if outcome.kind is Kind.HANG:
        # An endless loop is not a crash the reader can rule out: isolation stops it.
        path = tmp_path_factory.mktemp("hang") / "hang.tflite"
        path.write_bytes(mutated)
        with pytest.raises(ModelError, match="did not load and run"):
            load_model(path, delegate=delegate, isolate=True, isolate_timeout=2)


# --- the checks the fuzzer motivated, one row each ---------------------------------------------
def _edit(seed: str, change: Callable[[Any], None]) -> bytes:
    m = SEEDS[seed]()
    change(m)
    return pack(m)


def _sg(m: Any, i: int = 0) -> Any:
    return m.subgraphs[i]


def _set(obj: Any, **kw: Any) -> None:
    for k, v in kw.items():
        setattr(obj, k, v)


def _swap_first_ops(m: Any) -> None:
    ops = _sg(m).operators
    ops[0], ops[1] = ops[1], ops[0]


def _while_in_cond(m: Any) -> None:
    """The condition subgraph runs a WHILE of itself: 1 -> 1."""
    s = schema()
    m.operatorCodes[0].builtinCode = s.BuiltinOperator.WHILE  # subgraph 0's WHILE keeps its code
    cond = _sg(m, 1)
    cond.operators.append(s.OperatorT(opcodeIndex=0, inputs=[0], outputs=[len(cond.tensors)],
                                      builtinOptionsType=s.BuiltinOptions.WhileOptions,
                                      builtinOptions=s.WhileOptionsT(condSubgraphIndex=1, bodySubgraphIndex=2)))
    cond.tensors.append(s.TensorT(shape=[1], type=0, name="loop"))


def _detection_op(options: bytes) -> Callable[[Any], None]:
    def change(m: Any) -> None:
        s = schema()
        m.operatorCodes[0] = s.OperatorCodeT(builtinCode=32, deprecatedBuiltinCode=32,
                                             customCode="TFLite_Detection_PostProcess", version=1)
        _sg(m).operators[0].customOptions = list(options)
    return change


def _quant(scale: list[float], zero_point: list[int], dim: int = 0) -> Callable[[Any], None]:
    def change(m: Any) -> None:
        _sg(m).tensors[1].quantization = schema().QuantizationParametersT(
            scale=scale, zeroPoint=zero_point, quantizedDimension=dim)
    return change


REFUSED = [
    ("absent-input", "add", lambda m: _set(_sg(m).operators[0], inputs=[-1, 1]), r"leaves input 0 absent \(-1\)"),
    ("arity", "gather", lambda m: _set(_sg(m).operators[1], inputs=[2, 3]),
     r"STRIDED_SLICE\) of subgraph 0 has 2 inputs and 1 output; STRIDED_SLICE takes 4 inputs"),
    ("while-index", "while", lambda m: _set(_sg(m).operators[0].builtinOptions, condSubgraphIndex=7),
     r"calls subgraph 7; the model has 3"),
    ("while-main", "while", lambda m: _set(_sg(m).operators[0].builtinOptions, bodySubgraphIndex=0),
     r"calls subgraph 0"),
    ("while-no-options", "while", lambda m: _set(_sg(m).operators[0], builtinOptionsType=0, builtinOptions=None),
     r"calls subgraph 0"),
    ("while-cycle", "while", _while_in_cond, r"in a cycle \(1 -> 1\)"),
    ("while-arity", "while", lambda m: _set(_sg(m, 2), outputs=[]),
     r"its body takes 1 and gives 0"),
    ("if-arity", "if", lambda m: _set(_sg(m, 1), inputs=[0, 1]), r"then branch takes 2"),
    ("if-types", "if", lambda m: _set(_sg(m).tensors[2], type=5),
     r"its outputs are \['string'\] but the then branch's outputs are \['float32'\]"),
    ("while-types", "while", lambda m: _set(_sg(m, 2).tensors[2], type=2),
     r"the loop's inputs are \['float32'\] but the body's outputs are \['int32'\]"),
    ("call-once-inputs", "call_once", lambda m: _set(_sg(m, 1), inputs=[0], tensors=[schema().TensorT(shape=[1])]),
     r"an initializer has none"),
    ("read-before-write", "conv", _swap_first_ops, r"reads tensor 3 \('conv/out'\) before any operator writes it"),
    ("writes-constant", "add", lambda m: _set(_sg(m).operators[0], outputs=[1]),
     r"writes into tensor 1 \('c'\), a constant"),
    ("writes-input", "add", lambda m: _set(_sg(m).operators[0], outputs=[0]), r"an input of the subgraph"),
    ("huge-shape", "add", lambda m: _set(_sg(m).tensors[2], shape=[65536, 65536]),
     r"4,294,967,296 elements, more than an interpreter can hold"),
    ("negative-scale", "add", _quant([-0.5], [0]), r"quantization scale \(-0.5,\)"),
    ("nan-scale", "add", _quant([float("nan")], [0]), r"quantization scale \(nan,\)"),
    ("per-channel-count", "add", _quant([0.1, 0.1, 0.1], [0, 0, 0], dim=1),
     r"3 per-channel scales along dimension 1 of its shape \(1, 4\)"),
    ("zero-point-count", "add", _quant([0.1] * 4, [0, 0], dim=1), r"4 scales but 2 zero points"),
    ("opcode-version", "add", lambda m: _set(m.operatorCodes[0], version=0), r"has version 0"),
    ("split-count", "add", lambda m: _set(m.operatorCodes[0], builtinCode=49, deprecatedBuiltinCode=49),
     r"says num_splits=0 but has 1 outputs"),
    ("detection-garbage", "add", _detection_op(bytes(range(40)) + b"\x24\x01"), r"not a valid FlexBuffer map"),
    ("detection-empty", "add", _detection_op(b""), r"0 bytes are too few"),
    ("tensor-name", "add", lambda m: _set(_sg(m).tensors[0], name=b"\xff\xfe"), r"a tensor name is not UTF-8"),
    ("external-overlap", "add", lambda m: _set(m.buffers[1], data=None, offset=16, size=16),
     r"overlaps the model's own tables"),
]


@pytest.mark.parametrize("seed, change, message", [pytest.param(*r[1:], id=r[0]) for r in REFUSED])
def test_graph_checks_refuse(seed: str, change: Callable[[Any], None], message: str) -> None:
    with pytest.raises(ModelError, match=message):
        parse_tflite(_edit(seed, change))


def _aliased(copies: int, rank: int) -> bytes:
    """A model whose one subgraph lists the same tensor table `copies` times: a few bytes
    that decode to copies x rank shape entries (flatbuffer offsets may alias)."""
    import flatbuffers

    s, b = schema(), flatbuffers.Builder(1024)
    s.TensorStartShapeVector(b, rank)
    for _ in range(rank):
        b.PrependInt32(1)
    shape = b.EndVector()
    name = b.CreateString("t")
    s.TensorStart(b)
    s.TensorAddShape(b, shape)
    s.TensorAddName(b, name)
    tensor = s.TensorEnd(b)
    s.SubGraphStartTensorsVector(b, copies)
    for _ in range(copies):
        b.PrependUOffsetTRelative(tensor)
    tensors = b.EndVector()
    s.SubGraphStart(b)
    s.SubGraphAddTensors(b, tensors)
    subgraph = s.SubGraphEnd(b)
    s.ModelStartSubgraphsVector(b, 1)
    b.PrependUOffsetTRelative(subgraph)
    subgraphs = b.EndVector()
    s.ModelStart(b)
    s.ModelAddVersion(b, 3)
    s.ModelAddSubgraphs(b, subgraphs)
    b.Finish(s.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_aliased_tables_are_a_bounded_cost() -> None:
    parse_tflite(_aliased(100, 4))  # a little sharing is harmless
    data = _aliased(300_000, 16)  # 1.2 MB that would decode to 4.8 million shape entries
    with pytest.raises(ModelError, match="refer to the same data over and over"):
        parse_tflite(data)


def test_a_long_shape_is_refused_before_it_is_decoded() -> None:
    with pytest.raises(ModelError, match="a tensor shape has 17 entries, at most 16"):
        parse_tflite(_aliased(1, 17))


def test_detection_options_of_the_real_ssd_are_read(shared_models: Path) -> None:
    parsed = parse_tflite(shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite").read_bytes())
    op = next(op for op in parsed.subgraphs[0].operators if op.opcode == "TFLite_Detection_PostProcess")
    assert (op.option("num_classes"), op.option("max_detections"), op.option("y_scale")) == (90, 10, 10.0)


# --- isolation ---------------------------------------------------------------------------------
@pytest.fixture()
def crasher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A WHILE whose body is the main graph (endless recursion: a stack overflow in every
    process), with the graph check that refuses it switched off: a stand-in for a crash
    the reader does not foresee. (Crashes on stray reads, like an absent input, depend on
    memory layout and would not reproduce reliably in a child.)"""
    monkeypatch.setattr(tflite_file, "check_graph", lambda *_a, **_k: None)
    path = tmp_path / "crash.tflite"
    path.write_bytes(_edit("while", lambda m: _set(_sg(m).operators[0].builtinOptions, bodySubgraphIndex=0)))
    return path


def test_the_crasher_does_crash_an_unprotected_process(crasher: Path) -> None:
    resolve_backend()
    assert run_case(crasher.read_bytes()).kind is Kind.CRASH


def test_isolate_turns_a_crash_into_model_error(crasher: Path) -> None:
    be = resolve_backend()
    with pytest.raises(ModelError, match=r"interpreter crashed on model .*on this machine \(" + be.name
                       + r" .*SIGSEGV.*this one is unharmed"):
        load_model(crasher, isolate=True)
    with pytest.raises(ModelError, match="crashed"):  # remembered: no second child
        load_model(crasher, isolate=True)


def test_isolate_is_on_with_the_environment_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def forever(m: Any) -> None:
        limit = _sg(m, 1).tensors[1]
        m.buffers[limit.buffer].data = np.frombuffer(np.array([np.inf], np.float32).tobytes(), np.uint8)

    path = tmp_path / "forever.tflite"
    path.write_bytes(_edit("while", forever))
    monkeypatch.setenv("EDGEKIT_ISOLATE", "1")
    monkeypatch.setenv("EDGEKIT_ISOLATE_TIMEOUT", "2")
    with pytest.raises(ModelError, match="within 2 s"):
        load_model(path)
    monkeypatch.setenv("EDGEKIT_ISOLATE_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="must be a number of seconds"):
        load_model(path)


def test_isolated_load_of_a_good_model_probes_once(shared_models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite")
    probe_mod._passed.clear()
    calls: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(cmd: list[str], **kw: Any) -> Any:
        calls.append(cmd)
        return real_run(cmd, **kw)

    monkeypatch.setattr(probe_mod.subprocess, "run", counting_run)
    for _ in range(2):
        with load_model(path, isolate=True, num_threads=1) as m:
            out = m.run(np.zeros((1, 128, 128, 3), np.uint8))[0]
            assert out.shape == (1, 1001) and m.notes == []
    assert len(calls) == 1 and calls[0][1:3] == ["-I", probe_mod.__file__]  # by path: never the cwd's edgekit


def test_isolated_edgetpu_model_gives_the_usual_delegate_error(shared_models: Path) -> None:
    path = shared_model(shared_models, "mobilenet_v1_0.25_128_quant_edgetpu.tflite")
    with pytest.raises(ModelError, match="compiled for the Edge TPU .* needs the Edge TPU delegate") as info:
        load_model(path, isolate=True)
    assert "crashed" not in str(info.value)


def test_the_long_fuzz_script_runs(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz", "--minutes", "0.05", "--findings", str(tmp_path),
                           "--models", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inputs in" in proc.stdout and "crash" in proc.stdout
