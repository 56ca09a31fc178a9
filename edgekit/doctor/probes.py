"""What `edgekit doctor` reads off this machine: its interpreters, the numpy, Pillow and OpenCV
really imported, the Edge TPU library and devices, cameras, a Pi's power, free disk, and one model
run here. :func:`gather` gives every check (:mod:`edgekit.doctor` judges each reading), for the
CLI, a service's health page or a test.
"""

from __future__ import annotations

import ctypes.util
import glob
import importlib.util
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from edgekit.doctor import (FLOOR_MODULES, Check, Status, check_cameras, check_disk, check_edgetpu, check_extras,
                            check_floors, check_interpreters, check_opencv, check_power, check_python,
                            parse_floors)

__all__ = ["gather", "check_model"]


def _dist(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def check_model(path: str) -> list[Check]:
    """Load a model here and run it once: the interpreter, delegate and latency it gets."""
    import time

    from edgekit.errors import EdgekitError
    from edgekit.runtimes import load_model

    try:
        with load_model(path) as model:
            for i in range(len(model.inputs)):
                model.input_view(i)[...] = 0
            t0 = time.perf_counter()
            model.invoke()
            ms = (time.perf_counter() - t0) * 1e3
            d = model.describe()
            notes = model.notes
    except EdgekitError as exc:
        return [Check("model", Status.FAIL, str(exc), f"edgekit info {path}")]
    detail = (f"{path}: {d['backend']} {d['backend_version']}, delegate {d['delegate']} "
              f"({d['delegate_nodes']} delegated partition(s)), {d['num_threads']} threads, "
              f"first inference {ms:.1f} ms")
    if notes:
        return [Check("model", Status.WARN, detail + ". " + " ".join(notes), None)]
    return [Check("model", Status.OK, detail)]


# --- probes: read this machine ------------------------------------------------------------

def _edgetpu_library() -> str | None:
    from edgekit.runtimes.delegates import edgetpu_library_name

    explicit = os.environ.get("EDGEKIT_EDGETPU_LIBRARY")
    if explicit:
        return explicit if os.path.exists(explicit) else None
    found = ctypes.util.find_library("edgetpu")
    if found:
        return found
    try:
        name = edgetpu_library_name()
    except Exception:  # noqa: BLE001 - an OS without the runtime
        return None
    hits = [p for d in ("/usr/lib", "/usr/local/lib", "/usr/lib/aarch64-linux-gnu", "/usr/lib/arm-linux-gnueabihf",
                        "/usr/lib/x86_64-linux-gnu") if os.path.exists(p := os.path.join(d, name))]
    return hits[0] if hits else None


def _usb_speeds(devices: list[str]) -> dict[str, str]:
    out = {}
    for dev in devices:
        if dev.startswith("usb:"):
            try:
                out[dev] = Path(f"/sys/bus/usb/devices/{dev[4:]}/speed").read_text().strip()
            except OSError:
                pass
    return out


def _cameras() -> list[tuple[str, str, bool]]:
    out = []
    for dev in sorted(glob.glob("/dev/video*"), key=lambda p: int(re.sub(r"\D", "", p) or 0)):
        try:
            name = Path(f"/sys/class/video4linux/{os.path.basename(dev)}/name").read_text().strip()
        except OSError:
            name = ""
        out.append((dev, name, os.access(dev, os.R_OK | os.W_OK)))
    return out


def _is_pi() -> bool:
    try:
        return "raspberry pi" in Path("/proc/device-tree/model").read_text(errors="replace").lower()
    except OSError:
        return False


def _throttled() -> int | None:
    exe = shutil.which("vcgencmd")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "get_throttled"], capture_output=True, text=True, timeout=5, check=False).stdout
        return int(out.strip().split("=")[1], 16)
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


def _opencv() -> tuple[str | None, str | None]:
    try:
        import cv2
    except ImportError:
        return None, None
    return cv2.__version__, cv2.getBuildInformation()


def _imported(module: str) -> tuple[str | None, str | None]:
    """The version of ``module`` as Python imports it here, and the folder it comes from."""
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None, None
    where = getattr(mod, "__file__", None)
    return str(getattr(mod, "__version__", "unknown")), os.path.dirname(os.path.dirname(where)) if where else None


def _floors() -> dict[str, str]:
    try:
        from importlib.metadata import requires

        return parse_floors(requires("edgekit-tflite") or [])
    except PackageNotFoundError:  # run from a checkout that is not installed
        return {}


def gather(disk_path: str = ".", model: str | None = None) -> list[Check]:
    """Every check, on this machine."""
    import numpy as np

    from edgekit.runtimes.backends import available_backends
    from edgekit.runtimes.delegates import list_edgetpu_devices

    # tensorflow-cpu is the distribution of the `tensorflow` module on x86 workstations
    backends = [(n, _dist("tensorflow-cpu") if n == "tensorflow" and v in (None, "unknown") and p is None else v, p)
                for n, v, p in available_backends()]
    installed = {n for n, _, _ in backends if importlib.util.find_spec(n) is not None}
    devices = list_edgetpu_devices()
    cv_version, build = _opencv()
    is_pi = _is_pi()
    checks = [*check_python(tuple(sys.version_info[:3]), struct.calcsize("P") * 8, platform.machine()),
              *check_interpreters(np.__version__, backends, installed, struct.calcsize("P") * 8, platform.machine()),
              *check_floors({d: _imported(m) for d, (m, _) in FLOOR_MODULES.items()}, _floors()),
              *check_edgetpu(_edgetpu_library(), devices, _usb_speeds(devices)),
              *check_cameras(_cameras(), is_pi, is_pi and importlib.util.find_spec("picamera2") is not None),
              *check_opencv(cv_version, build, {d: _dist(d) for d in ("opencv-python", "opencv-python-headless",
                                                                       "opencv-contrib-python")},
                            bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))),
              *check_extras({d: _dist(d) for d in ("paho-mqtt", "prometheus-client")}),
              *check_power(_throttled() if is_pi else None),
              check_disk(os.path.abspath(disk_path), shutil.disk_usage(disk_path).free)]
    if model is not None:
        checks.extend(check_model(model))
    return checks
