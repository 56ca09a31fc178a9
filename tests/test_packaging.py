"""The package installs the way DEVELOPERS.md says: runtimes/ and converters/ become
edgekit.runtimes and edgekit.converters, both editable and from a built wheel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str, **env: str) -> str:
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
    return next(out.glob("edgekit_tflite-*.whl"))


def test_wheel_contains_the_mapped_packages(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ["edgekit/__init__.py", "edgekit/py.typed", "edgekit/cli.py",
                 "edgekit/runtimes/__init__.py", "edgekit/runtimes/model.py", "edgekit/runtimes/py.typed",
                 "edgekit/converters/__init__.py", "edgekit/inspect/dashboard/static/index.html",
                 "edgekit/inspect/dashboard/static/app.js", "edgekit/inspect/dashboard/static/app.css"]:
        assert must in names, f"{must} missing from {wheel.name}"
    assert not any(n.startswith(("runtimes/", "converters/", "tests/")) for n in names)
    for folder, target in (("edgekit", "edgekit"), ("runtimes", "edgekit/runtimes"), ("converters", "edgekit/converters")):
        for init in (ROOT / folder).rglob("__init__.py"):  # a package left out of pyproject's list is missing here
            packed = f"{target}/{init.relative_to(ROOT / folder).as_posix()}"
            assert packed in names, f"{packed} missing from {wheel.name}: add its package to pyproject.toml"
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "edgekit = edgekit._entry:main" in zipfile.ZipFile(wheel).read(entry).decode()


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


def test_the_distribution_has_a_name_of_its_own(wheel: Path) -> None:
    """`edgekit` on PyPI is another project (a Cloudflare Workers SDK); the import name stays edgekit."""
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    name = re.search(r"^Name: (.+)$", zipfile.ZipFile(wheel).read(meta).decode(), re.M)
    assert name is not None and name.group(1).strip() == "edgekit-tflite"
    assert wheel.name.startswith("edgekit_tflite-")


@pytest.mark.slow
def test_an_installed_wheel_runs_models_from_inside_the_clone(wheel: Path, tmp_path: Path, shared_models: Path,
                                                             shared_images: Path) -> None:
    """A new user installs the wheel (not editable) and runs edgekit in the clone, whose edgekit/ has no
    runtimes/: the model's isolation child must still import the installed package (it once ran
    `python -m edgekit.runtimes._probe`, found the checkout first, and called every model corrupt)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "EDGEKIT_ISOLATE")}
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert pip.returncode == 0, pip.stderr[-3000:]
    shadow = subprocess.run([str(venv / "bin" / "python"), "-c",
                             "import importlib.util; print(importlib.util.find_spec('edgekit').origin)"],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert shadow.stdout.strip() == str(ROOT / "edgekit" / "__init__.py")  # the situation: the clone shadows

    def edgekit(*args: object) -> str:
        proc = subprocess.run([str(venv / "bin" / "edgekit"), *map(str, args)], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    classifier = shared_models / "mobilenet_v2_1.0_224_quant.tflite"
    out = edgekit("classify", "-m", classifier, "--labels", shared_models / "imagenet_labels.txt",
                  shared_images / "parrot.jpg")
    assert "macaw" in out
    out = edgekit("detect", "-m", shared_models / "ssd_mobilenet_v1_coco_quant.tflite", "--labels",
                  shared_models / "coco_labels.txt", "--source", shared_images / "grace_hopper.png", "--json")
    assert '"person"' in out
    out = edgekit("info", "--load", classifier)
    assert "1001" in out and "isolation" not in out.lower()
