"""Bad inputs end to end: every row of tests/bad_inputs.py through the CLI and the API.

No Python traceback reaches a CLI user: a bad input is exit 2 and one line on stderr; an
odd but valid input (grayscale, RGBA, 16-bit, 1x1 and 100-megapixel images, a video cut
in half, calibration images of mixed sizes) just works (exit 0). The same table prints
as Markdown with benchmarks/bad_inputs_table.py.
"""

from __future__ import annotations

import pytest

from tests.bad_inputs import CASES, Case, CliResult, Missing, Workspace, run_cli
from tests.conftest import SHARED_IMAGES, SHARED_MODELS

# A 100-megapixel PNG decodes to 300 MB of pixels; Pillow holds them at 4 bytes each plus
# one copy into numpy. Anything far above that is a copy too many.
PEAK_MB_100_MEGAPIXELS = 1300

_results: dict[str, CliResult] = {}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("bad_inputs"), SHARED_MODELS, SHARED_IMAGES)


def _param(c: Case) -> object:
    return pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else [])


def _run(case: Case, ws: Workspace) -> CliResult:
    """The case through the CLI, once per session."""
    if case.id not in _results:
        try:
            argv = case.argv(ws)
        except Missing as exc:
            pytest.skip(str(exc))
        _results[case.id] = run_cli(argv, env=case.env, timeout=case.timeout)
    return _results[case.id]


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_cli(case: Case, workspace: Workspace) -> None:
    result = _run(case, workspace)
    text = "\n".join(result.stderr)
    assert "Traceback" not in text, text
    assert result.exit == case.exit, text
    assert case.matches(result), f"stderr {result.message!r} does not match {case.stderr!r}"
    if case.id == "image-10000":
        assert result.peak_mb < PEAK_MB_100_MEGAPIXELS, f"peak memory {result.peak_mb:.0f} MB"


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.exit == 2])
def test_cli_error_is_one_line(case: Case, workspace: Workspace) -> None:
    result = _run(case, workspace)
    assert len(result.stderr) == 1, "expected one line on stderr, got:\n" + "\n".join(result.stderr)


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.api is not None])
def test_api(case: Case, workspace: Workspace) -> None:
    try:
        case.argv(workspace)  # builds the input
    except Missing as exc:
        pytest.skip(str(exc))
    assert case.api is not None
    if case.api_error is None:
        case.api(workspace)
        return
    with pytest.raises(case.api_error) as info:
        case.api(workspace)
    assert str(info.value), "an error without a message"


def test_the_table_is_well_formed() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    for c in CASES:
        assert c.exit in (0, 2), c.id
        assert c.exit == 0 or c.stderr, f"{c.id}: an error row names its message"
