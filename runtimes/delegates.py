"""Delegates: where the model's operators run (XNNPACK on the CPU, or a Coral Edge TPU)."""

from __future__ import annotations

import contextlib
import enum
import gc
import os
import platform
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

from edgekit.errors import DelegateError, InputError

__all__ = [
    "Delegate",
    "DelegateSpec",
    "EdgeTPUDevice",
    "EDGETPU_LIBRARIES",
    "EDGETPU_INSTALL_HINT",
    "edgetpu_library_name",
    "list_edgetpu_devices",
    "load_edgetpu_delegate",
]


class Delegate(str, enum.Enum):
    """Where to run the model.

    AUTO: the Edge TPU when the model is compiled for it and the runtime is present, else XNNPACK.
    CPU: the reference CPU kernels, XNNPACK off (slower; for comparison and debugging).
    XNNPACK: the optimized CPU delegate (the default in ai-edge-litert for float and int8).
    EDGETPU: a Coral Edge TPU; fails clearly when its runtime or device is missing.
    """

    AUTO = "auto"
    CPU = "cpu"
    XNNPACK = "xnnpack"
    EDGETPU = "edgetpu"

    @classmethod
    def parse(cls, value: str | Delegate | DelegateSpec) -> tuple[Delegate, EdgeTPUDevice | None]:
        """Parse 'auto', 'cpu', 'xnnpack', 'edgetpu', 'edgetpu:usb:1', ... into (delegate, device)."""
        if isinstance(value, Delegate):
            return value, None
        if isinstance(value, DelegateSpec):
            return value.delegate, value.device
        text = str(value).strip().lower()
        head, _, rest = text.partition(":")
        try:
            delegate = cls(head)
        except ValueError:
            choices = ", ".join(d.value for d in cls)
            raise InputError(f"unknown delegate {value!r}; choose one of {choices} "
                             "(an Edge TPU device may follow: edgetpu:usb, edgetpu:usb:1, edgetpu:pci:0)") from None
        if rest and delegate is not Delegate.EDGETPU:
            raise InputError(f"delegate {delegate.value!r} takes no device, got {value!r}")
        return delegate, (EdgeTPUDevice.parse(rest) if rest else None)


# Coral's table: the Edge TPU runtime library name on each OS.
EDGETPU_LIBRARIES = {
    "Linux": "libedgetpu.so.1",
    "Darwin": "libedgetpu.1.dylib",
    "Windows": "edgetpu.dll",
}

EDGETPU_INSTALL_HINT = (
    "Install the Edge TPU runtime: on Debian/Raspberry Pi OS add Coral's apt repository "
    "(https://coral.ai/docs/accelerator/get-started/) and run `sudo apt-get install libedgetpu1-std` "
    "(or libedgetpu1-max for full clock), then unplug and replug the USB Accelerator."
)


def edgetpu_library_name(system: str | None = None) -> str:
    """The Edge TPU runtime library for this OS (or for `system`, as platform.system() names it)."""
    system = system or platform.system()
    try:
        return EDGETPU_LIBRARIES[system]
    except KeyError:
        raise DelegateError(f"the Edge TPU runtime is not available for {system}; "
                            f"Coral ships it for {', '.join(EDGETPU_LIBRARIES)}") from None


_DEVICE_RE = re.compile(r"^(?:(usb|pci)(?::(\d+))?|:(\d+))$")


@dataclass(frozen=True)
class EdgeTPUDevice:
    """An Edge TPU as Coral names it: 'usb', 'usb:N', 'pci', 'pci:N', or ':N' (the Nth of any kind)."""

    kind: str | None = None  # "usb", "pci" or None for any
    index: int | None = None

    @classmethod
    def parse(cls, text: str) -> EdgeTPUDevice:
        m = _DEVICE_RE.match(text.strip().lower())
        if not m:
            raise InputError(f"unknown Edge TPU device {text!r}; use usb, usb:N, pci, pci:N or :N")
        kind, kind_index, any_index = m.groups()
        if kind:
            return cls(kind, int(kind_index) if kind_index is not None else None)
        return cls(None, int(any_index))

    @property
    def option(self) -> str | None:
        """The value of libedgetpu's 'device' option, or None for the first device found."""
        if self.kind is None:
            return None if self.index is None else f":{self.index}"
        return self.kind if self.index is None else f"{self.kind}:{self.index}"

    def __str__(self) -> str:
        return self.option or "any"


class DelegateSpec(NamedTuple):
    """A delegate and, for the Edge TPU, which one: ``edgetpu:usb:1`` read once (:meth:`Delegate.parse`
    says what is wrong with a bad one); ``str()`` spells it back."""

    delegate: Delegate = Delegate.AUTO
    device: EdgeTPUDevice | None = None

    @classmethod
    def parse(cls, value: str | Delegate | DelegateSpec) -> DelegateSpec:
        """Raises InputError: an unknown delegate or device, or a device for a delegate that takes none."""
        if isinstance(value, DelegateSpec):
            return value
        return cls(*Delegate.parse(value))

    def __str__(self) -> str:
        option = self.device.option if self.device is not None else None
        return self.delegate.value + (f":{option}" if option else "")


def list_edgetpu_devices() -> list[str]:
    """Edge TPUs visible to this machine without the runtime: PCIe 'apex' nodes and Coral USB ids."""
    import glob  # only where an Edge TPU is looked for

    found = [f"pci:{p}" for p in sorted(glob.glob("/dev/apex_*"))]
    # 1a6e:089a before its firmware is loaded, 18d1:9302 after the first inference.
    for dev in sorted(glob.glob("/sys/bus/usb/devices/*")):
        try:
            with open(os.path.join(dev, "idVendor")) as v, open(os.path.join(dev, "idProduct")) as p:
                ids = (v.read().strip(), p.read().strip())
        except OSError:
            continue
        if ids in (("1a6e", "089a"), ("18d1", "9302")):
            found.append(f"usb:{os.path.basename(dev)}")
    return found


@contextlib.contextmanager
def _quiet_failed_delegate() -> Iterator[None]:
    """A Delegate whose library failed to load prints a traceback from its __del__ when
    collected ('no attribute _library'); collect it here, silently, instead of at random."""
    previous = sys.unraisablehook
    sys.unraisablehook = lambda _unraisable: None
    try:
        yield
    finally:
        gc.collect()
        sys.unraisablehook = previous


def load_edgetpu_delegate(load_delegate: Any, device: EdgeTPUDevice | None = None,
                          library: str | None = None) -> Any:
    """Load the Edge TPU delegate as Coral documents it: load_delegate(lib, {'device': ...}).

    Raises:
        DelegateError: the runtime library is missing (load_delegate raises OSError then,
            not ValueError), or no Edge TPU answers.
    """
    library = library or os.environ.get("EDGEKIT_EDGETPU_LIBRARY") or edgetpu_library_name()
    options = {"device": device.option} if device and device.option else {}
    failure: tuple[bool, str] | None = None
    with _quiet_failed_delegate():
        try:
            return load_delegate(library, options)
        except OSError as exc:  # the library itself is missing or unloadable
            failure = (True, str(exc))
        except (ValueError, RuntimeError) as exc:  # loaded, but no Edge TPU answered
            failure = (False, str(exc))
    missing, text = failure
    where = f" on device {device}" if device and device.option else ""
    devices = list_edgetpu_devices()
    seen = f"Edge TPUs seen: {', '.join(devices)}." if devices else "No Edge TPU is plugged in or visible."
    if missing:
        raise DelegateError(f"could not load the Edge TPU runtime {library!r}{where}: {text}. "
                            f"{EDGETPU_INSTALL_HINT} {seen}")
    raise DelegateError(f"the Edge TPU runtime {library!r} is installed but no Edge TPU answered{where} "
                        f"({text}). {seen} Check the USB cable (use a USB 3 port and a powered hub "
                        "on a Raspberry Pi) or the PCIe driver (gasket/apex).")
