"""The ARM stage's verdicts (.ci/arm, .ci/arm_compare.py): a check is proven, differs, or was not run;
a stop by the time budget is no failure, a difference always is."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def arm_compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("arm_compare", ROOT / ".ci" / "arm_compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _doctor(work: Path, arch: str, status: str = "ok") -> None:
    from edgekit.runtimes.backends import resolve_backend

    checks = [{"name": "interpreter", "status": "ok", "detail": f"edgekit uses {resolve_backend().name}"},
              {"name": "Pillow version", "status": status, "detail": "Pillow 9.4.0 from /usr/lib/python3/dist-packages"}]
    (work / f"{arch}-doctor.json").write_text(json.dumps({"checks": checks}))


def test_a_stage_stopped_by_its_budget_reports_what_it_proved_and_what_it_did_not_run(
        arm_compare: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _doctor(tmp_path, "armhf")
    (tmp_path / "armhf-check.txt").write_text("/etc/edgekit/inspection.toml: config OK\n")
    assert arm_compare.compare(tmp_path, tmp_path, "armhf", partial=True) == 3
    out = capsys.readouterr().out
    assert "armhf:   proven: doctor as the service user" in out and "armhf:   proven: inspect --check" in out
    assert "armhf:  not run: classify (2 models, 4 photos)" in out and "README install" not in out
    figures = json.loads((tmp_path / "armhf-figures.json").read_text())
    assert figures["checks"]["golden self-tests of x86 releases"] == "not run"
    # Without a budget stop, a missing output is a failure: a step before it broke.
    assert arm_compare.compare(tmp_path, tmp_path, "armhf") == 1


@pytest.mark.parametrize("broken, said", [
    ("doctor", "DIFFERS: doctor: Pillow version"),
    ("check", "DIFFERS: inspect --check: config: no [source]"),
    ("unreadable", "DIFFERS: classify (2 models, 4 photos): unreadable output"),
])
def test_a_difference_fails_even_when_the_budget_stopped_the_rest(
        arm_compare: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str, said: str) -> None:
    _doctor(tmp_path, "arm64", "fail" if broken == "doctor" else "ok")
    (tmp_path / "arm64-check.txt").write_text("config: no [source]\n" if broken == "check" else "config OK\n")
    if broken == "unreadable":  # x86's reference is missing: the check cannot be read, never passes
        for m in arm_compare.MODELS:
            (tmp_path / f"arm64-classify-{m}.jsonl").write_text("")
    assert arm_compare.compare(tmp_path, tmp_path, "arm64", partial=True) == 1
    assert said in capsys.readouterr().out


def test_the_arm_stage_stops_at_once_when_its_deadline_has_passed(tmp_path: Path) -> None:
    """A deadline already gone (CI spent its minutes elsewhere): loud, no work, and CI stays green."""
    for require in ("0", "1"):
        r = subprocess.run(["env", "EDGEKIT_ARM_DEADLINE=1", f"EDGEKIT_REQUIRE_ARM={require}",
                            f"EDGEKIT_ARM_WORK={tmp_path}", "bash", str(ROOT / ".ci" / "arm")],
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        assert "ARM STAGE STOPPED BY ITS TIME BUDGET (EDGEKIT_ARM_DEADLINE) before it started" in r.stderr
        assert list(tmp_path.iterdir()) == []


def test_the_largest_top1_gap_is_measured_in_steps_and_named_with_its_photo(arm_compare: ModuleType) -> None:
    step = arm_compare.STEP
    x86 = [{"image": "/x/cat.png", "classes": [{"id": 3, "score": 200 * step}, {"id": 5, "score": 10 * step}]},
           {"image": "/x/kite.jpg", "classes": [{"id": 7, "score": 90 * step}, {"id": 8, "score": 88 * step}]}]
    arm = [{"image": "/r/cat.png", "classes": [{"id": 3, "score": 189 * step}, {"id": 5, "score": 10 * step}]},
           {"image": "/r/kite.jpg", "classes": [{"id": 8, "score": 90 * step}, {"id": 7, "score": 89 * step}]}]
    notes, problems, identical, gap, at = arm_compare._classes(x86, arm, "m", 12)
    assert (problems, identical, round(gap, 6)) == ([], 0, 11.0) and at.startswith("cat.png: 0.7383 against 0.7812")
    assert notes == ["m kite.jpg: top-1 8 (0.3516) against x86's 7 (0.3516): a near-tie"]
    # at 8 steps the same 11-step gap is a difference
    assert arm_compare._classes(x86, arm, "m", 8)[1] == ["m cat.png: top-1 score 0.7383 against x86's 0.7812"]
