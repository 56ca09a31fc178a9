"""The workstation side and the documents: keys, immutable versions, the signed channel, the
manifest's checks, the rollout hash, the health rules and the commands' one-line errors."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from edgekit.cli import main
from edgekit.errors import ConfigError, InputError
from edgekit.fleet.health import Health, HealthThresholds, HealthTracker
from edgekit.fleet.keys import SignatureError, load_signing_key, parse_public_key
from edgekit.fleet.manifest import Channel, ManifestError, ReleaseManifest, canonical_json, selected
from edgekit.fleet.release import parse_fraction, set_rollout, write_release
from tests.edgekit.fleet.conftest import Kit
from tests.fixtures_models import vision_models  # noqa: F401 - a fixture


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keygen", "--out", str(tmp_path / "k" / "signing.key")]) == 0
    out = capsys.readouterr().out
    private = tmp_path / "k" / "signing.key"
    assert os.stat(private).st_mode & 0o777 == 0o600
    public = parse_public_key((tmp_path / "k" / "signing.pub").read_text())
    assert public.text in out and private.read_text().split("\n")[1] not in out
    assert load_signing_key(private).public == public
    assert main(["keygen", "--out", str(private)]) == 2
    assert "never overwritten" in capsys.readouterr().err


def test_a_release_is_immutable_signed_and_widened_in_place(kit: Kit, tmp_path: Path) -> None:
    folder = tmp_path / "rel"
    r1 = write_release(kit.model, 1, folder, kit.key, rollout=0.1, golden=kit.golden)
    assert r1.created and r1.channel.serial == 1 and r1.channel.rollout == 0.1
    manifest = ReleaseManifest.parse((folder / "versions" / "1" / "manifest.json").read_bytes())
    assert manifest.model.sha256 == hashlib.sha256(kit.model.read_bytes()).hexdigest()
    assert [f.path for f in manifest.files] == ["model.tflite", "golden/hopper.npy", "golden/hopper.npz"]
    assert manifest.metadata["inputs"][0]["shape"] == [1, 128, 128, 3]
    data = (folder / "channel.json").read_bytes()
    assert data == canonical_json(json.loads(data))
    kit.public.verify((folder / "channel.json.sig").read_bytes(), data, "channel.json")
    with pytest.raises(SignatureError):
        kit.public.verify((folder / "channel.json.sig").read_bytes(), data.replace(b"0.1", b"1.0"), "channel.json")
    again = write_release(kit.model, 1, folder, kit.key, rollout=0.5)  # same model: only the channel changes
    assert not again.created and again.channel.serial == 2 and again.channel.rollout == 0.5
    with pytest.raises(ConfigError, match="immutable"):
        write_release(kit.bad_model, 1, folder, kit.key)
    assert set_rollout(folder, 1, kit.key, halted=True).halted
    with pytest.raises(ConfigError, match="rolls out version 1"):
        set_rollout(folder, 2, kit.key, rollout=1.0)
    write_release(kit.model, 3, folder, kit.key)
    with pytest.raises(ConfigError, match="lower than"):
        write_release(kit.bad_model, 2, folder, kit.key)


def test_a_conversion_report_beside_the_model_is_summarized(kit: Kit, tmp_path: Path) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(kit.model.read_bytes())
    (tmp_path / "report.json").write_text(json.dumps({"mode": "int8", "gate": {"passed": True}, "layers": [1] * 50}))
    r = write_release(model, 1, tmp_path / "rel", kit.key)
    assert r.manifest.report == {"mode": "int8", "gate": {"passed": True}}


def test_the_release_reads_the_report_where_the_converter_wrote_it(kit: Kit, tmp_path: Path) -> None:
    """`edgekit convert --report-dir DIR` writes outputs.report_json(DIR); `edgekit release --report DIR` reads it."""
    from edgekit.outputs import report_json

    (tmp_path / "reports").mkdir()
    report_json(tmp_path / "reports").write_text(json.dumps({"mode": "float16", "size_ratio": 0.5}))
    r = write_release(kit.model, 1, tmp_path / "rel", kit.key, report_dir=tmp_path / "reports")
    assert r.manifest.report == {"mode": "float16", "size_ratio": 0.5}
    assert write_release(kit.model, 2, tmp_path / "rel2", kit.key, report_dir=tmp_path).manifest.report is None


@pytest.mark.parametrize("text, expected", [("10%", 0.1), ("0.25", 0.25), ("100%", 1.0), ("0", 0.0),
                                            ("150%", InputError), ("ten", InputError), ("-0.1", InputError)])
def test_rollout_fractions(text: str, expected: float | type) -> None:
    if isinstance(expected, type):
        with pytest.raises(expected):
            parse_fraction(text)
    else:
        assert parse_fraction(text) == pytest.approx(expected)


def test_widening_keeps_every_device_already_selected() -> None:
    names = [f"dev-{i}" for i in range(500)]
    previous: set[str] = set()
    for fraction in (0.0, 0.1, 0.25, 0.5, 1.0):
        now = {n for n in names if selected(n, fraction, 3)}
        assert previous <= now
        assert abs(len(now) - fraction * len(names)) < 0.06 * len(names) + 1
        previous = now
    assert previous == set(names)


def test_each_version_draws_its_own_canaries() -> None:
    names = [f"dev-{i}" for i in range(500)]
    canaries = {v: {n for n in names if selected(n, 0.1, v)} for v in (3, 4)}
    assert 30 < len(canaries[3]) < 70 and 30 < len(canaries[4]) < 70
    assert len(canaries[3] & canaries[4]) < 0.3 * len(canaries[3])  # about 10 % overlap, by chance
    # the formula README states: SHA-256("<device>/<version>"), first 8 bytes big-endian, over 2**64
    assert all((int.from_bytes(hashlib.sha256(f"{n}/4".encode()).digest()[:8], "big") / 2.0**64 < 0.1)
               == (n in canaries[4]) for n in names)


def _channel(**over: object) -> bytes:
    doc = {"schema": "edgekit-channel/1", "channel": "c", "serial": 1, "version": 1, "rollout": 1.0, "halted": False,
           "key_id": "k", "issued": "t", "releases": {"1": {"path": "versions/1/manifest.json", "size": 10,
                                                            "sha256": "a" * 64}}}
    doc.update(over)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("data, message", [
    (b"not json", "not JSON"),
    (_channel(schema="other"), "not an edgekit-channel/1"),
    (_channel(rollout=2), "rollout must be in 0..1"),
    (_channel(version=2), "not among its releases"),
    (_channel(releases={"1": {"path": "../../etc/passwd", "size": 1, "sha256": "a" * 64}}), "unsafe path"),
    (_channel(releases={"1": {"path": "/abs/manifest.json", "size": 1, "sha256": "a" * 64}}), "unsafe path"),
    (_channel(releases={"1": {"path": "versions/1/manifest.json", "size": 1, "sha256": "xyz"}}), "bad size or sha256"),
    (_channel(serial="1"), "'serial' is missing or not a int"),
    (b" " * (2 << 20), "more than"),
])
def test_malformed_channels_are_refused_with_the_reason(data: bytes, message: str) -> None:
    with pytest.raises(ManifestError, match=message.replace("(", r"\(").replace(".", r"\.")):
        Channel.parse(data)


def _frames(tracker: HealthTracker, n: int, score: float | None, failed: bool | None, error: bool = False):
    out = None
    for _ in range(n):
        out = tracker.observe(score, failed, error) or out
    return out


@pytest.mark.parametrize("trial, expected, reason", [
    ((0.80, False, False), Health.HEALTHY, "within the thresholds"),
    ((0.70, False, False), Health.HEALTHY, "within the thresholds"),  # a shift of 0.1 is allowed
    ((0.50, False, False), Health.REGRESSED, "mean top score 0.800 -> 0.500"),
    ((0.99, False, False), Health.REGRESSED, "mean top score 0.800 -> 0.990"),  # either way
    ((0.80, True, False), Health.REGRESSED, "FAIL rate 0.0% -> 100.0%"),
    ((None, None, True), Health.REGRESSED, "inference errors"),
])
def test_health_of_a_version_on_trial_against_the_one_before(trial: tuple, expected: Health, reason: str) -> None:
    tracker = HealthTracker(HealthThresholds(window=40, baseline=40, max_score_shift=0.15, max_errors=2))
    tracker.switched(1, trial=False)
    assert _frames(tracker, 60, 0.8, False) is None  # no trial: nothing to judge
    tracker.switched(2, trial=True)
    verdict = _frames(tracker, 40, *trial)
    assert verdict is not None and verdict.version == 2 and verdict.health is expected and reason in verdict.reason
    assert verdict.baseline.frames == 40 and tracker.on_trial is None


def test_commands_say_what_is_wrong_in_one_line(kit: Kit, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = str(kit.root / "keys" / "signing.key")
    cases = [
        (["release", str(kit.model), "--version", "0", "--to", str(tmp_path / "r"), "--key", key], "whole number >= 1"),
        (["release", str(tmp_path / "none.tflite"), "--version", "1", "--to", str(tmp_path / "r"), "--key", key],
         "does not exist"),
        (["release", str(kit.model), "--version", "1", "--to", str(tmp_path / "r"), "--key", str(kit.golden)],
         "not an unencrypted PEM private key"),
        (["release", "--version", "1", "--to", str(tmp_path / "r"), "--key", key], "give --rollout to widen, --halt"),
        (["release", "--version", "1", "--to", str(tmp_path / "empty"), "--key", key, "--halt"], "no channel.json"),
        (["fleet", "status", "--broker", "127.0.0.1:1"], "cannot reach the MQTT broker"),
        (["fleet", "status", "--broker", "host:port"], "HOST:PORT"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (argv, err)


def test_a_cell_judging_parts_has_its_fail_rate_watched() -> None:
    # Per-part mode gives no per-frame decisions: the parts that crossed in a frame are its verdicts.
    from types import SimpleNamespace

    import numpy as np

    from edgekit.fleet.cellhook import frame_health
    from edgekit.inspect.parts import PartVerdict
    from edgekit.inspect.verdict import Verdict
    from edgekit.results import Detections, FrameResult

    def part(outcome: Verdict) -> PartVerdict:
        return PartVerdict(1, 1, "part", outcome, ("dent",) if outcome is Verdict.FAIL else (), (), 0, 9, 10, 0.0,
                           1.0, 9, 1.0, 0.0, "line", (0, 0, 1, 1), 3, 0.9)

    frame = FrameResult(0, 0.0, 0.0, 0.0, Detections(np.array([[0, 0, 1, 1], [0, 0, 2, 2]]), np.array([0.25, 0.75]),
                                                     np.array([0, 0])))
    assert frame_health(frame, []) == (0.75, None)  # no part crossed: no verdict
    assert frame_health(frame, [], [part(Verdict.PASS)]) == (0.75, False)
    assert frame_health(frame, [], [part(Verdict.PASS), part(Verdict.FAIL)]) == (0.75, True)
    failed_frame = SimpleNamespace(verdict=SimpleNamespace(passed=False))
    assert frame_health(frame, [failed_frame], [part(Verdict.PASS)]) == (0.75, True)

    tracker = HealthTracker(HealthThresholds(window=40, baseline=40))
    tracker.switched(1, trial=False)
    for i in range(40):  # a part crosses every 4th frame; 1 in 10 fails
        tracker.observe(*frame_health(frame, [], [part(Verdict.FAIL if i % 40 == 0 else Verdict.PASS)] if i % 4 == 0
                                      else []))
    tracker.switched(2, trial=True)
    verdict = None
    for i in range(40):  # the new version fails every part
        verdict = tracker.observe(*frame_health(frame, [], [part(Verdict.FAIL)] if i % 4 == 0 else [])) or verdict
    assert verdict is not None and verdict.health is Health.REGRESSED and "FAIL rate" in verdict.reason


def test_a_uint8_photo_is_a_golden_input_of_an_int8_model(kit: Kit, vision_models, shared_images: Path,  # noqa: F811
                                                          tmp_path: Path) -> None:
    """The photo is preprocessed as the device does (resize, normalization, quantization) on the
    workstation and on the device alike, so the device reproduces the release's outputs."""
    from PIL import Image

    from edgekit.fleet.verify import local_problem
    from edgekit.inspect.selftest import golden_inputs, golden_tensor, self_test
    from edgekit.runtimes import load_model

    model = vision_models.seg_scores_int8
    photo = np.asarray(Image.open(shared_images / "parrot.jpg").convert("RGB").resize((128, 128)), dtype=np.uint8)
    np.savez(tmp_path / "golden.npz", parrot=photo)
    result = write_release(model, 1, tmp_path / "rel", kit.key, golden=tmp_path / "golden.npz")
    version = tmp_path / "rel" / "versions" / "1"
    assert {f.path for f in result.manifest.files} >= {"golden/parrot.npy", "golden/parrot.npz"}
    assert local_problem(version, parse_public_key(kit.public.text)) is None
    with load_model(model) as m:
        assert m.inputs[0].dtype == np.int8 and golden_tensor(m, photo).dtype == np.int8
        assert self_test(m, version, golden_inputs(version))[0] == 1  # the device's own check passes


def test_fleet_settings_from_the_config(tmp_path: Path) -> None:
    from edgekit.inspect.config import parse_config

    text = f"""
[source]
path = "line.avi"
[model]
dir = "models"
channel = "file://{tmp_path}/rel/channel.json"
trust = "unsigned-local"
[fleet]
notify_spread = 30
health_window = 200
"""
    s = parse_config(text, name="cell.toml", base=tmp_path).fleet
    assert s is not None and s.notify_spread == 30.0 and s.health.window == 200
    assert s.health.baseline == HealthThresholds().baseline == 900  # collected before a trial begins
    with pytest.raises(ConfigError, match="notify_spread"):
        parse_config(text.replace("notify_spread = 30", "notify_spread = 0"), name="cell.toml", base=tmp_path)
