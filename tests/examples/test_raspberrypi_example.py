"""examples/raspberrypi: what can be checked off the Pi. The install script's dry run, the systemd
unit (systemd-analyze verify where present, and a parse of its keys), the example config, the
example app on a real photo, and the sd_notify client the unit relies on."""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from edgekit.inspect import TriggerMode, load_config
from edgekit.inspect.systemd import Watchdog, notify
from tests.conftest import shared_model

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "raspberrypi"


def dry_run(*args: str, arch: str = "arm64") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EDGEKIT_ARCH": arch}
    return subprocess.run(["bash", str(EXAMPLE / "install.sh"), "--dry-run", *args], capture_output=True,
                          text=True, env=env, timeout=30, check=False)


@pytest.mark.parametrize("arch, pip_line", [
    ("arm64", r"pip install numpy\<2 edgekit\[mqtt\,metrics\]"),
    ("armhf", r"pip install numpy\<2 tflite-runtime edgekit\[mqtt\,metrics\]"),
])
def test_install_dry_run_prints_the_commands(arch: str, pip_line: str) -> None:
    existed = Path("/etc/edgekit").exists()
    r = dry_run("--edgetpu", arch=arch)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    commands = [x[2:] for x in lines if x.startswith("+ ")]
    assert "apt-get install -y python3-venv python3-pip v4l-utils python3-picamera2" in commands
    assert "python3 -m venv --system-site-packages /opt/edgekit/venv" in commands
    assert any(c.endswith(pip_line) for c in commands), commands
    assert "apt-get install -y libedgetpu1-std" in commands
    assert "install -m 0644 " + str(EXAMPLE / "edgekit.service") + " /etc/systemd/system/edgekit.service" in commands
    assert "systemctl enable edgekit.service" in commands
    assert lines[-1] == "# dry run: nothing was changed"
    assert Path("/etc/edgekit").exists() == existed


def test_install_rejects_unknown_options() -> None:
    r = dry_run("--frobnicate")
    assert r.returncode == 2 and "unknown option --frobnicate" in r.stderr


def test_install_help() -> None:
    r = dry_run("--help")
    assert r.returncode == 0 and "--dry-run" in r.stdout and "--edgetpu" in r.stdout


def _unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    unit.read(EXAMPLE / "edgekit.service")
    return unit


def test_unit_has_what_a_headless_service_needs() -> None:
    unit = _unit()
    service = unit["Service"]
    assert service["ExecStart"].split()[1:] == ["inspect", "--config", "/etc/edgekit/inspection.toml"]
    assert Path(service["ExecStart"].split()[0]).is_absolute()
    assert service["Restart"] == "on-failure"
    assert service["Type"] == "notify", "WatchdogSec needs the service to notify"
    assert int(service["WatchdogSec"]) > 0
    assert service["User"] == "edgekit" and service["User"] != "root"
    assert service["RuntimeDirectory"] == "edgekit" and service["StateDirectory"] == "edgekit"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert unit["Unit"]["StartLimitIntervalSec"] == "0"


def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze not installed (apt-get install systemd)")
    # verify checks that ExecStart exists: point it at this checkout's edgekit script.
    here = shutil.which("edgekit") or str(Path(sys.executable).parent / "edgekit")
    if not os.access(here, os.X_OK):
        pytest.skip("no edgekit console script in this environment")
    text = (EXAMPLE / "edgekit.service").read_text().replace("/opt/edgekit/venv/bin/edgekit", here)
    copy = tmp_path / "edgekit.service"
    copy.write_text(text)
    r = subprocess.run([exe, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False)
    problems = [line for line in (r.stdout + r.stderr).splitlines() if "edgekit.service" in line]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr


def test_example_config_loads() -> None:
    config = load_config(EXAMPLE / "inspection.toml", env={"EDGEKIT_MQTT_PASSWORD": "x"})
    assert config.device == "cell-4" and config.trigger.mode is TriggerMode.ON_DEMAND
    assert config.trigger.file == "/run/edgekit/trigger"  # the unit's RuntimeDirectory
    assert config.state_dir == "/var/lib/edgekit"  # the unit's StateDirectory, the one writable path
    assert {r.label for r in config.rules} == {"screw", "defect", "label"}
    config.check_frame(config.source.width or 0, config.source.height or 0)


def test_readme_lists_the_files_that_exist() -> None:
    readme = (EXAMPLE / "README.md").read_text()
    for name in ("install.sh", "edgekit.service", "inspection.toml", "edgekit.env.example", "app.py"):
        assert f"`{name}`" in readme and (EXAMPLE / name).exists()


def _app() -> Any:
    spec = importlib.util.spec_from_file_location("rpi_app", EXAMPLE / "app.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_app_inspects_a_real_photo(tmp_path: Path, shared_models: Path, shared_images: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    config = tmp_path / "kites.toml"
    config.write_text(f"""
[source]
path = "{shared_images / 'kite_and_cold.jpg'}"
[model]
path = "{model}"
labels = "{shared_models / 'coco_labels.txt'}"
threshold = 0.4
[[zones]]
name = "sky"
polygon = [[0, 0], [1352, 0], [1352, 450], [0, 450]]
[[rules]]
label = "person"
min = 2
[[rules]]
zone = "sky"
label = "kite"
min = 1
[[rules]]
label = "car"
max = 0
""")
    assert _app().main(["--config", str(config), "--model", str(model), "--image",
                        str(shared_images / "kite_and_cold.jpg")]) == 0
    report = json.loads(capsys.readouterr().out)
    counts = {r["label"]: r["count"] for r in report["rules"]}
    assert report["verdict"] == "PASS" and counts["person"] >= 2 and counts["kite"] >= 1 and counts["car"] == 0


# --- sd_notify --------------------------------------------------------------------------------

@pytest.fixture
def notify_socket(tmp_path: Path) -> Any:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.settimeout(1)
    yield sock, str(tmp_path / "notify")
    sock.close()


def test_notify_sends_datagrams(notify_socket: Any) -> None:
    sock, path = notify_socket
    assert notify("READY=1\nSTATUS=warming up", env={"NOTIFY_SOCKET": path})
    assert sock.recv(100) == b"READY=1\nSTATUS=warming up"


def test_notify_abstract_socket() -> None:
    name = f"edgekit-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(1)
        assert notify("WATCHDOG=1", env={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(100) == b"WATCHDOG=1"


@pytest.mark.parametrize("env", [{}, {"NOTIFY_SOCKET": "/nonexistent/socket"}, {"NOTIFY_SOCKET": "vsock:2:9"}])
def test_notify_outside_systemd_is_a_no_op(env: dict[str, str]) -> None:
    assert notify("READY=1", env=env) is False


def test_watchdog_pings_at_half_the_interval(notify_socket: Any) -> None:
    sock, path = notify_socket
    now = [100.0]
    wd = Watchdog(env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"}, clock=lambda: now[0])
    assert wd.enabled and wd.interval == 2.0
    for t in (100.0, 100.5, 100.99, 101.0, 101.5, 102.1):  # called per frame
        now[0] = t
        wd.ping()
    assert wd.sent == 3  # at 100.0, 101.0 and 102.1
    assert [sock.recv(100) for _ in range(3)] == [b"WATCHDOG=1"] * 3


@pytest.mark.parametrize("env", [
    {"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"},  # meant for another process
    {"NOTIFY_SOCKET": "/x"},
    {"WATCHDOG_USEC": "2000000"},
    {"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "soon"},
])
def test_watchdog_disabled(env: dict[str, str]) -> None:
    assert not Watchdog(env=env).enabled
