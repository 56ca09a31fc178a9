"""The package installs the way DEVELOPERS.md says: runtimes/ and converters/ become
edgekit.runtimes and edgekit.converters, both editable and from a built wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str, **env: str) -> str:
    import os

    full_env = {**os.environ, **env}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                         cwd="/", timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_editable_install_maps_package_dirs() -> None:
    where = _run("import edgekit.runtimes, edgekit.converters, edgekit;"
                 "print(edgekit.runtimes.__file__); print(edgekit.converters.__file__)").splitlines()
    if not where[0].startswith(str(ROOT)):
        pytest.skip("edgekit is installed from elsewhere, not editable from this checkout")
    assert Path(where[0]) == ROOT / "runtimes" / "__init__.py"
    assert Path(where[1]) == ROOT / "converters" / "__init__.py"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"building the wheel failed: {proc.stderr[-2000:]}")
    return next(out.glob("edgekit-*.whl"))


def test_wheel_contains_the_mapped_packages(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ["edgekit/__init__.py", "edgekit/py.typed", "edgekit/cli.py",
                 "edgekit/runtimes/__init__.py", "edgekit/runtimes/model.py", "edgekit/runtimes/py.typed",
                 "edgekit/converters/__init__.py"]:
        assert must in names, f"{must} missing from {wheel.name}"
    assert not any(n.startswith(("runtimes/", "converters/", "tests/")) for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "edgekit = edgekit.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_wheel_imports_runtimes_without_tensorflow(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    # Only the unpacked wheel is on the path for edgekit itself (cwd is /, the checkout is not).
    code = ("import sys; sys.path.insert(0, %r);"
            "import edgekit, edgekit.runtimes, edgekit.cli;"
            "print(edgekit.runtimes.__file__); print('tensorflow' in sys.modules)") % str(target)
    where, tf_loaded = _run(code).splitlines()[-2:]
    assert where == str(target / "edgekit" / "runtimes" / "__init__.py")
    assert tf_loaded == "False"
