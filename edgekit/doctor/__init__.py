"""The checks behind `edgekit doctor`: pure functions of what was probed on a machine.

Each takes plain values (versions, device lists, build information) and returns
:class:`Check` results, each problem with the command that fixes it, so every branch can be
tested with inputs this machine does not have. :mod:`edgekit.doctor.probes` probes the
machine (``gather()``); :mod:`edgekit.commands.doctor` prints them.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Status", "Check", "check_python", "check_interpreters", "check_edgetpu", "check_cameras",
           "check_opencv", "check_extras", "check_power", "check_disk", "check_floors", "parse_floors",
           "FLOOR_MODULES", "PIWHEELS"]

# The distributions whose oldest allowed version pyproject.toml states (read back from the installed
# metadata, so the floors are written once), each with the module that is really imported. On a Pi
# that can be Debian's (python3-numpy, python3-pil, python3-opencv), seen through a venv made with
# --system-site-packages, whatever pip installed.
FLOOR_MODULES = {"numpy": ("numpy", "numpy"), "pillow": ("PIL", "Pillow"),
                 "opencv-python-headless": ("cv2", "OpenCV")}
# Where 32-bit ARM gets numpy, OpenCV, Pillow and tflite-runtime wheels (PyPI has none for armv7l);
# Raspberry Pi OS configures it in /etc/pip.conf, other Debian boards need it said.
PIWHEELS = "https://www.piwheels.org/simple"
_TFLITE_RUNTIME_32 = f"pip install --extra-index-url {PIWHEELS} tflite-runtime 'numpy<2'"


class Status(str, enum.Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str | None = None  # the command (or step) that fixes a warn/fail

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status.value, "detail": self.detail, "fix": self.fix}


def check_python(info: Sequence[int], bits: int, machine: str) -> list[Check]:
    text = ".".join(map(str, info[:3]))
    checks = [Check("python", Status.OK, f"Python {text}, {bits}-bit, {machine}") if tuple(info[:2]) >= (3, 10)
              else Check("python", Status.FAIL, f"Python {text} is too old; edgekit needs 3.10+",
                         "install Python 3.10 or newer (Raspberry Pi OS Bookworm ships 3.11)")]
    return checks


def check_interpreters(numpy_version: str, backends: list[tuple[str, str | None, str | None]],
                       installed: set[str], bits: int = 64, machine: str = "") -> list[Check]:
    """numpy against each installed interpreter, and whether any interpreter works.

    On 32-bit ARM (``bits`` is the pointer size: 32-bit Raspberry Pi OS under a Pi 4/5's 64-bit
    kernel says aarch64) the interpreter is tflite-runtime; ai-edge-litert has no wheels there.
    """
    numpy_major = int(numpy_version.split(".")[0])
    checks = [Check("numpy", Status.OK, f"numpy {numpy_version} (C ABI of numpy {numpy_major}.x)")]
    working = []
    for name, ver, problem in backends:
        if name not in installed:
            continue
        if problem is None and name == "tensorflow":
            # Not imported: it takes seconds and edgekit uses it only as a last resort.
            ver = ver if ver and ver != "unknown" else "(version unknown)"
            working.append(name)
            checks.append(Check(f"interpreter {name}", Status.OK, f"tensorflow {ver} installed (tf.lite: the "
                                "workstation fallback, deprecated for devices)"))
        elif problem is None:
            working.append(name)
            checks.append(Check(f"interpreter {name}", Status.OK, f"{name} {ver} loads with numpy {numpy_version}"))
        elif name == "tflite_runtime" and numpy_major >= 2:
            checks.append(Check(f"interpreter {name}", Status.FAIL,
                                f"tflite_runtime is built against numpy 1.x and fails with numpy {numpy_version}",
                                "pip install 'numpy<2'  (or, on 64-bit: pip uninstall -y tflite-runtime && "
                                "pip install ai-edge-litert)"))
        else:
            checks.append(Check(f"interpreter {name}", Status.FAIL, problem or "unusable",
                                f"pip install --force-reinstall {name.replace('_', '-')}"))
    arm32 = bits == 32 and machine.startswith(("arm", "aarch"))
    if arm32 and "tflite_runtime" not in working:
        # 32-bit Raspberry Pi OS on a Pi 4/5 runs a 64-bit kernel: machine says aarch64, and so
        # do pip's markers, which then ask for ai-edge-litert; the pointer size tells the truth.
        kernel = " under a 64-bit kernel (machine aarch64)" if machine.startswith("aarch") else ""
        checks.append(Check("32-bit ARM", Status.WARN,
                            f"32-bit Python{kernel}: ai-edge-litert has no wheels for it; use tflite-runtime",
                            f"{_TFLITE_RUNTIME_32}  (examples/raspberrypi/install.sh does this; "
                            "or move to 64-bit Raspberry Pi OS)"))
    if not working:
        checks.append(Check("interpreter", Status.FAIL, "no TFLite interpreter can be used",
                            _TFLITE_RUNTIME_32 + "  (32-bit ARM: ai-edge-litert has no wheels for it)" if arm32
                            else "pip install ai-edge-litert  (32-bit Raspberry Pi OS: pip install tflite-runtime "
                            "'numpy<2')"))
    else:
        chosen = os.environ.get("EDGEKIT_BACKEND") or working[0]
        checks.append(Check("interpreter", Status.OK, f"edgekit uses {chosen}"
                            + (" (EDGEKIT_BACKEND)" if os.environ.get("EDGEKIT_BACKEND") else "")))
        if working[0] != "tensorflow":
            checks.append(Check("xnnpack", Status.OK, f"XNNPACK is built into {working[0]} and on by default "
                                "(`edgekit doctor -m MODEL` shows how much of a model it takes)"))
    return checks


def parse_floors(requirements: Sequence[str]) -> dict[str, str]:
    """``{distribution: oldest version}`` of the unconditional ``name>=version`` requirements.

    ``requirements`` as ``importlib.metadata.requires`` gives them; markers (an extra, a machine)
    make a requirement conditional and it is left out.
    """
    floors = {}
    for req in requirements:
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)\s*$", req)
        if m:
            floors[m.group(1).lower()] = m.group(2)
    return floors


def _release(text: str) -> tuple[int, ...]:
    m = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(p) for p in m.group(0).split(".")) if m else ()


def check_floors(imported: dict[str, tuple[str | None, str | None]], floors: dict[str, str]) -> list[Check]:
    """The numpy, Pillow and OpenCV really imported against the floors edgekit declares.

    ``imported`` maps a distribution of :data:`FLOOR_MODULES` to the ``__version__`` and the folder
    of its module as imported here (``(None, None)``: not importable; OpenCV's absence is
    :func:`check_opencv`'s to report).
    """
    checks = []
    for dist, (module, label) in FLOOR_MODULES.items():
        found, where = imported.get(dist, (None, None))
        floor = floors.get(dist)
        if found is None:
            if module != "cv2":
                checks.append(Check(f"{label} version", Status.FAIL, f"{label} ({module}) is not importable",
                                    f"pip install '{dist}>={floor}'" if floor else f"pip install {dist}"))
            continue
        origin = f" from {where}" if where else ""
        if floor is None:
            checks.append(Check(f"{label} version", Status.OK, f"{label} {found}{origin}"))
        elif _release(found) < _release(floor):
            checks.append(Check(f"{label} version", Status.FAIL,
                                f"{label} {found}{origin} is older than the {floor} edgekit needs",
                                f"pip install -U '{dist}>={floor}' in edgekit's venv (it takes precedence over "
                                "Debian's package)"))
        else:
            checks.append(Check(f"{label} version", Status.OK, f"{label} {found}{origin} (edgekit needs >= {floor})"))
    return checks


def check_edgetpu(library: str | None, devices: list[str], usb_speeds: dict[str, str]) -> list[Check]:
    from edgekit.runtimes.delegates import EDGETPU_INSTALL_HINT

    if library is None and not devices:
        return [Check("edge tpu", Status.OK, "no Edge TPU runtime or device (needed only with a Coral)")]
    if library is None:
        return [Check("edge tpu", Status.FAIL, f"Edge TPU found ({', '.join(devices)}) but no runtime library",
                      EDGETPU_INSTALL_HINT)]
    if not devices:
        return [Check("edge tpu", Status.WARN, f"runtime {library} installed but no Edge TPU is visible",
                      "plug the Coral USB Accelerator into a USB 3 (blue) port, or check the PCIe driver: "
                      "lsmod | grep apex")]
    checks = [Check("edge tpu", Status.OK, f"runtime {library}; devices: {', '.join(devices)}")]
    for dev, speed in usb_speeds.items():
        if speed and float(speed) < 5000:
            checks.append(Check("edge tpu usb", Status.WARN, f"{dev} runs at {speed} Mbit/s (USB 2): several "
                                "times slower", "move the Coral to a USB 3 (blue) port; on a Raspberry Pi use "
                                "a powered hub if it resets under load"))
    return checks


def check_cameras(devices: list[tuple[str, str, bool]], is_pi: bool, picamera2: bool) -> list[Check]:
    checks = []
    if devices:
        listed = ", ".join(f"{p} ({n})" if n else p for p, n, _ in devices)
        checks.append(Check("cameras", Status.OK, f"V4L2 devices: {listed}"))
        denied = [p for p, _, ok in devices if not ok]
        if denied:
            checks.append(Check("camera access", Status.WARN, f"no permission to open {', '.join(denied)}",
                                "sudo usermod -aG video $USER  (then log out and back in)"))
    elif not (is_pi and picamera2):
        checks.append(Check("cameras", Status.WARN, "no V4L2 camera (/dev/video*) found",
                            "plug in a USB camera (ls /dev/video*), or on a Raspberry Pi with a camera module "
                            "use --picamera"))
    if is_pi:
        checks.append(Check("picamera2", Status.OK, "picamera2 importable (--picamera)") if picamera2 else
                      Check("picamera2", Status.WARN, "picamera2 is not importable from this Python",
                            "sudo apt install -y python3-picamera2, and create the venv with "
                            "python3 -m venv --system-site-packages"))
    return checks


def check_opencv(cv_version: str | None, build_info: str | None, dists: dict[str, str | None],
                 display: bool) -> list[Check]:
    if cv_version is None:
        return [Check("opencv", Status.FAIL, "OpenCV (cv2) is not importable",
                      "pip install opencv-python-headless  (or opencv-python for --show)")]
    m = re.search(r"^\s*GUI:\s*(\S.*)$", build_info or "", re.MULTILINE)
    gui = m.group(1).strip() if m else "unknown"
    checks = []
    both = [d for d, v in dists.items() if v]
    if len(both) > 1:
        checks.append(Check("opencv packages", Status.WARN, f"{' and '.join(both)} are both installed; they "
                            "overwrite each other's cv2", "pip uninstall -y " + " ".join(both)
                            + " && pip install opencv-python"))
    if gui.upper() == "NONE":
        checks.append(Check("opencv", Status.WARN if display else Status.OK,
                            f"OpenCV {cv_version} without GUI support: --show cannot open a window"
                            + ("" if display else " (no display here anyway; headless is right for a service)"),
                            "pip uninstall -y opencv-python-headless && pip install opencv-python"
                            if display else None))
    else:
        checks.append(Check("opencv", Status.OK, f"OpenCV {cv_version}, GUI: {gui}"
                            + ("" if display else "; no display ($DISPLAY unset): --show will not work here")))
    return checks


def check_extras(versions: dict[str, str | None]) -> list[Check]:
    checks = []
    paho = versions.get("paho-mqtt")
    if paho and int(paho.split(".")[0]) < 2:
        checks.append(Check("paho-mqtt", Status.WARN, f"paho-mqtt {paho}: the MQTT sink needs 2.x",
                            "pip install -U 'paho-mqtt>=2'"))
    else:
        checks.append(Check("paho-mqtt", Status.OK, f"paho-mqtt {paho}" if paho else
                            "not installed (only for [sinks.mqtt]: pip install 'edgekit-tflite[mqtt]')"))
    prom = versions.get("prometheus-client")
    checks.append(Check("prometheus-client", Status.OK, f"prometheus-client {prom}" if prom else
                        "not installed (only for [metrics]: pip install 'edgekit-tflite[metrics]')"))
    return checks


def check_power(throttled: int | None) -> list[Check]:
    """`vcgencmd get_throttled` on a Raspberry Pi: bit 0 under-voltage now, bit 16 since boot."""
    if throttled is None:
        return []
    if throttled & 0x1 or throttled & 0x10000:
        return [Check("power", Status.WARN, f"under-voltage detected (get_throttled=0x{throttled:x}): the Pi "
                      "slows down and USB devices (a Coral) reset", "use the official supply (5 V 3 A for a "
                      "Pi 4, 5 V 5 A for a Pi 5) and a powered USB hub for the Coral")]
    return [Check("power", Status.OK, f"no under-voltage (get_throttled=0x{throttled:x})")]


def check_disk(path: str, free_bytes: int) -> Check:
    gb = free_bytes / 1e9
    if free_bytes < 100e6:
        status = Status.FAIL
    elif free_bytes < 1e9:
        status = Status.WARN
    else:
        return Check("disk", Status.OK, f"{gb:.1f} GB free at {path}")
    return Check("disk", status, f"only {free_bytes / 1e6:.0f} MB free at {path}: event files and queues need room",
                 "delete old event files and videos; sudo journalctl --vacuum-size=100M; sudo apt-get clean")
