"""examples/raspberrypi without root: install.sh's choices (dry run), its help and refusals, the
unit, the example config, the guide's structure, and app.py against `edgekit inspect` on the
same video and config (same verdicts), on one photo, and on a stand-in camera module.

The install itself, run for real as root, is in test_raspberrypi_install.py."""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from edgekit import cli
from edgekit.inspect import TriggerMode, load_config
from tests.examples.conftest import VIDEO_FRAMES, VIDEO_SIZE, CellConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "raspberrypi"
INSTALL = EXAMPLE / "install.sh"


def dry_run(*args: str, arch: str = "arm64", bits: str = "64", offers_picamera2: bool = True,
            tmp: Path | None = None, **env_extra: str) -> subprocess.CompletedProcess[str]:
    """install.sh --dry-run as on `arch` with `bits`-bit Python; `offers_picamera2`: whether apt has
    python3-picamera2 (Raspberry Pi OS's archive), answered by a stand-in `apt-cache` first on PATH."""
    env = {**os.environ, "EDGEKIT_ARCH": arch, "EDGEKIT_BITS": bits, **env_extra}
    standin = Path(tempfile.mkdtemp(prefix="aptcache-", dir=tmp))
    (standin / "apt-cache").write_text(f"#!/bin/sh\nexit {0 if offers_picamera2 else 100}\n")
    (standin / "apt-cache").chmod(0o755)
    env["PATH"] = f"{standin}:{env.get('PATH', '/usr/bin:/bin')}"
    try:
        return subprocess.run(["bash", str(INSTALL), "--dry-run", *args], capture_output=True, text=True, env=env,
                              timeout=30, check=False)
    finally:
        shutil.rmtree(standin, ignore_errors=True)


def commands(r: subprocess.CompletedProcess[str]) -> list[str]:
    return [x[2:] for x in r.stdout.splitlines() if x.startswith("+ ")]


PINS = r"numpy\<2 opencv-python-headless\<4.11"
PIWHEELS = r"--extra-index-url https://www.piwheels.org/simple --only-binary=numpy\,opencv-python-headless\,pillow\,tflite-runtime"
APT = "apt-get install -y --no-install-recommends python3-venv python3-pip v4l-utils curl gnupg ca-certificates"


@pytest.mark.parametrize("arch, bits, pip_lines", [
    ("arm64", "64", [rf"install {PINS} {ROOT}\[mqtt\,metrics\]"]),
    # 32-bit Pi OS under a 64-bit kernel: the pointer size decides, whatever the kernel says;
    # numpy<2 first, from piwheels (PyPI has no armv7l wheels), before edgekit's own list
    ("arm64", "32", [rf"install {PIWHEELS} {PINS} tflite-runtime", rf"install --no-deps {ROOT}\[mqtt\,metrics\]",
                     "pip install --extra-index-url https://www.piwheels.org/simple "
                     "--only-binary=numpy,opencv-python-headless,pillow,tflite-runtime numpy<2 "
                     "opencv-python-headless<4.11 $(requirements of the installed edgekit distribution without "
                     "ai-edge-litert)"]),
    ("armhf", "32", [rf"install {PIWHEELS} {PINS} tflite-runtime"]),
    ("amd64", "64", [rf"install {PINS} {ROOT}\[mqtt\,metrics\]"]),
])
def test_install_dry_run_chooses_by_pointer_size(arch: str, bits: str, pip_lines: list[str]) -> None:
    existed = Path("/etc/edgekit").exists()
    r = dry_run("--edgetpu", "--binaries", "piwheels", arch=arch, bits=bits)
    assert r.returncode == 0, r.stderr
    cmds = commands(r)
    for line in pip_lines:
        assert any(c.endswith(line) for c in cmds), (line, cmds)
    assert any("piwheels" in c for c in cmds) is (bits == "32")
    i = next(n for n, c in enumerate(cmds) if "tflite-runtime" in c or "install numpy" in c)
    assert not any("[mqtt" in c and "--no-deps" not in c for c in cmds[:i])  # nothing of edgekit's before numpy<2
    assert "/usr/bin/python3 -m venv --system-site-packages /opt/edgekit/venv" in cmds
    # Raspberry Pi OS offers picamera2 (the stand-in apt-cache says so) on its arm architectures
    assert (APT + " python3-picamera2" in cmds) == arch.startswith("arm")
    assert "apt-get install -y libedgetpu1-std" in cmds
    assert not any("apt-key add" in c for c in cmds) and any("signed-by=" in c for c in cmds)
    assert "ln -sfn /opt/edgekit/venv/bin/edgekit /usr/local/bin/edgekit" in cmds
    assert "systemctl enable edgekit.service" in cmds
    assert r.stdout.splitlines()[-1] == "# dry run: nothing was changed"
    assert Path("/etc/edgekit").exists() == existed


@pytest.mark.parametrize("arch, offers, option, picamera2", [
    ("arm64", False, [], False),  # a Rock, Orange Pi or Jetson: Debian has no python3-picamera2
    ("armhf", False, [], False),
    ("arm64", True, [], True),  # Raspberry Pi OS
    ("arm64", True, ["--picamera2", "no"], False),
    ("arm64", False, ["--picamera2", "yes"], True),  # asked for: apt-get then says if it is missing
    ("amd64", True, [], False),
])
def test_install_installs_picamera2_only_where_raspberry_pi_os_offers_it(arch: str, offers: bool, option: list[str],
                                                                        picamera2: bool) -> None:
    r = dry_run(*option, arch=arch, offers_picamera2=offers)
    assert r.returncode == 0, r.stderr
    [apt] = [c for c in commands(r) if c.startswith("apt-get install -y --no-install-recommends python3-venv")]
    assert apt.endswith("python3-picamera2") is picamera2
    assert ("no python3-picamera2" in r.stderr) is not picamera2


def test_install_edgetpu_brings_curl_and_gpg() -> None:
    cmds = commands(dry_run("--edgetpu", arch="arm64"))
    apt = next(c for c in cmds if c.startswith("apt-get install -y --no-install-recommends python3-venv"))
    assert {"curl", "gnupg"} <= set(apt.split())
    assert cmds.index(apt) < next(i for i, c in enumerate(cmds) if c.startswith("curl "))
    assert "curl" not in next(c for c in commands(dry_run(arch="arm64")) if c.startswith("apt-get install"))


def test_install_dry_run_without_sudo_shows_the_operator_joining_the_group() -> None:
    """A dry run as a normal user (no sudo, no SUDO_USER) lists the usermod the real run does."""
    env = {k: v for k, v in os.environ.items() if k != "SUDO_USER"}
    r = subprocess.run(["bash", "-c", f"unset SUDO_USER; USER=alice EDGEKIT_ARCH=arm64 bash {INSTALL} --dry-run"],
                       capture_output=True, text=True, env=env, timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    assert "usermod -aG edgekit alice" in commands(r)


def test_install_dry_run_writes_prefix_and_user_into_what_it_installs() -> None:
    r = dry_run("--prefix", "/srv/cell", "--user", "inspector")
    cmds = commands(r)
    assert "render " + str(EXAMPLE / "edgekit.service") + " -> /etc/systemd/system/edgekit.service" in cmds
    assert "render " + str(EXAMPLE / "inspection.toml") + " -> /etc/edgekit/inspection.toml" in cmds
    assert "install -d -m 2770 -o inspector -g inspector /run/edgekit" in cmds
    assert "runuser -u inspector -- /srv/cell/venv/bin/edgekit doctor --path /var/lib/edgekit" in cmds


@pytest.mark.parametrize("args, message", [
    (["--frobnicate"], "unknown option --frobnicate"),
    (["--package", "edgekit[mqtt,metrics]"], '"edgekit" is another project'),
    (["--package", "edgekit"], "edgekit-tflite"),
    (["--prefix"], "--prefix needs a value"),
    (["--user", "Bad User"], "not a valid user name"),
    (["--picamera2", "maybe"], "expected auto, yes or no"),
    (["--binaries", "pypi"], "--binaries pypi: expected auto, piwheels or apt"),
])
def test_install_refuses(args: list[str], message: str) -> None:
    r = dry_run(*args)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_install_help_is_usage_not_source() -> None:
    r = subprocess.run(["bash", str(INSTALL), "--help"], capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0
    assert "Usage: sudo bash install.sh" in r.stdout and "--prefix DIR" in r.stdout and "--root DIR" in r.stdout
    assert "--picamera2 WHEN" in r.stdout and "https://www.piwheels.org/simple" in r.stdout
    assert "--binaries FROM" in r.stdout and "python3-opencv" in r.stdout
    assert "set -euo" not in r.stdout and "#" not in r.stdout


@pytest.mark.parametrize("script", [INSTALL, ROOT / ".ci" / "arm"], ids=["install.sh", "ci-arm"])
def test_install_sh_passes_shellcheck(script: Path) -> None:
    exe = shutil.which("shellcheck")
    if exe is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    r = subprocess.run([exe, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_arm_stage_says_loudly_when_it_cannot_run_and_fails_only_when_required(tmp_path: Path) -> None:
    """Not root here (runuser to nobody): it cannot build roots; a skip is loud, and an error with
    EDGEKIT_REQUIRE_ARM=1."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root to run the stage as another user")
    for require, rc in (("0", 0), ("1", 1)):
        r = subprocess.run(["runuser", "-u", "nobody", "--", "env", f"EDGEKIT_REQUIRE_ARM={require}",
                            f"EDGEKIT_ARM_WORK={tmp_path}", "bash", str(ROOT / ".ci" / "arm")],
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == rc and "ARM STAGE NOT RUN: needs root" in r.stderr, r.stderr


APT_BINARIES = "apt-get install -y --no-install-recommends python3-numpy python3-opencv python3-pil"


@pytest.mark.parametrize("args, env", [
    (["--binaries", "apt"], {}),
    # auto where piwheels does not answer: a proxy that refuses (nothing listens on port 9)
    ([], {"https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}),
])
def test_install_32bit_takes_numpy_opencv_pillow_from_apt_without_piwheels(args: list[str],
                                                                          env: dict[str, str]) -> None:
    """32-bit without piwheels (issue 25): Debian's python3-numpy, python3-opencv and python3-pil,
    seen through the --system-site-packages venv; pip fetches tflite-runtime (PyPI has its armv7l
    wheel) and never opencv-python-headless, which apt's OpenCV does not register."""
    r = dry_run(*args, arch="armhf", bits="32", **env)
    assert r.returncode == 0, r.stderr
    cmds = commands(r)
    assert APT_BINARIES in cmds
    assert cmds.index(APT_BINARIES) < cmds.index("/usr/bin/python3 -m venv --system-site-packages /opt/edgekit/venv")
    assert not any("piwheels.org/simple" in c and "install" in c for c in cmds)
    [first] = [c for c in cmds if c.endswith(" tflite-runtime")]
    assert "opencv" not in first and first.endswith(r"numpy\<2 tflite-runtime")
    assert any(c.endswith("without ai-edge-litert and opencv-python-headless)") for c in cmds)
    assert ("does not answer" in r.stderr) is (not args)


def test_install_64bit_ignores_binaries() -> None:
    """--binaries is for 32-bit Python: 64-bit ARM has every wheel on PyPI."""
    cmds = commands(dry_run("--binaries", "apt", arch="arm64", bits="64"))
    assert APT_BINARIES not in cmds and any(c.endswith(rf"install {PINS} {ROOT}\[mqtt\,metrics\]") for c in cmds)


def test_32bit_requirements_without_apt_opencv() -> None:
    """The list after `--no-deps` when apt provides OpenCV: without opencv-python-headless."""
    script = (f'source {INSTALL}; PACKAGE="x[mqtt,metrics]"; '
              f'requirements_without_litert {sys.executable} opencv-python-headless')
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    names = {re.split(r"[<>=!~ ]", line)[0] for line in r.stdout.split()}
    assert {"numpy", "pillow", "paho-mqtt"} <= names and not names & {"opencv-python-headless", "ai-edge-litert"}


def test_the_arm_stage_skips_loudly_where_arm_programs_cannot_run(tmp_path: Path) -> None:
    """Root, but no binfmt_misc (a container without it; here a folder that does not exist): the
    stage says why before any work, and fails only with EDGEKIT_REQUIRE_ARM=1."""
    if os.geteuid() != 0:
        pytest.skip("the binfmt_misc check comes after the root check")
    for require, rc in (("0", 0), ("1", 1)):
        r = subprocess.run(["env", f"EDGEKIT_REQUIRE_ARM={require}", f"EDGEKIT_BINFMT={tmp_path / 'none'}",
                            f"EDGEKIT_ARM_WORK={tmp_path}", "bash", str(ROOT / ".ci" / "arm")],
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == rc and "ARM STAGE NOT RUN: binfmt_misc cannot be mounted" in r.stderr, r.stderr
        assert "building the wheel" not in r.stderr and list(tmp_path.iterdir()) == []


def test_32bit_requirements_are_the_package_list_without_ai_edge_litert() -> None:
    """What install.sh installs on 32-bit after `--no-deps`: read from the installed package."""
    script = f'source {INSTALL}; PACKAGE="x[mqtt,metrics]"; requirements_without_litert {sys.executable}'
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    names = {re.split(r"[<>=!~ ]", line)[0] for line in r.stdout.split()}
    assert {"numpy", "pillow", "opencv-python-headless", "paho-mqtt", "prometheus-client"} <= names
    assert "ai-edge-litert" not in names and "tensorflow-cpu" not in names


@pytest.mark.parametrize("case, expect", [
    ("empty folder", "{models}/1/model.tflite"),
    ("a version", ""),
    ("a non-numeric folder only", "{models}/1/model.tflite"),  # .3, new: not versions, as the run counts them
    ("fleet", ""),  # the cell fetches its own version at start
    ("fixed path missing", "{tmp}/part.tflite"),
    ("broken config", ""),  # the check names what is wrong
])
def test_install_finds_the_model_to_put_by_looking_not_by_the_checks_wording(case: str, expect: str,
                                                                             tmp_path: Path) -> None:
    """What `--start` refuses on (issue 25) now that the check itself refuses an empty model folder
    (issue 26): install.sh's model_to_put, which looks at the config's model with edgekit's own
    find_versions."""
    models = tmp_path / "models" / "inspection"
    models.mkdir(parents=True)
    model = f'dir = "{models}"'
    extra = ""
    if case == "a version":
        (models / "1").mkdir()
        (models / "1" / "model.tflite").write_bytes(b"not read")
    elif case == "a non-numeric folder only":
        (models / ".3").mkdir()
        (models / ".3" / "model.tflite").write_bytes(b"not read")
    elif case == "fleet":
        model += f'\nchannel = "file://{tmp_path}/rel/channel.json"\ntrust = "unsigned-local"'
    elif case == "fixed path missing":
        model = f'path = "{tmp_path}/part.tflite"'
    elif case == "broken config":
        extra = "\n[sourse]\n"
    config = tmp_path / "inspection.toml"
    config.write_text(f'[source]\npath = "line.avi"\n[model]\n{model}\n{extra}')
    script = f"source {INSTALL}; model_to_put {config} {sys.executable}"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == expect.format(models=models, tmp=tmp_path), r.stderr


def test_guide_by_hand_32bit_lists_every_dependency() -> None:
    """The guide's 32-bit `pip install` by hand names what pyproject asks for (bar the interpreter)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["mqtt"],
              *project["optional-dependencies"]["metrics"]]
    names = {re.split(r"[<>=!~;\[ ]", d)[0] for d in wanted if "python_version <" not in d}
    names -= {"ai-edge-litert", "tflite-runtime"}
    block = next(b for _, b in guide_blocks() if "--no-deps" in b)
    missing = [n for n in sorted(names) if n not in block]
    assert not missing, f"README's 32-bit install by hand misses {missing}"


# --- the guide --------------------------------------------------------------------------------

SKIP = re.compile(r"<!-- not run in CI: (.+?) -->")


def guide_blocks() -> list[tuple[str | None, str]]:
    """(reason it is not run, or None; text) of each ```bash block of the guide, in order."""
    lines = (EXAMPLE / "README.md").read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            prev = next((x.strip() for x in reversed(lines[:i]) if x.strip()), "")
            m = SKIP.fullmatch(prev)
            j = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == "```")
            out.append((m.group(1) if m else None, textwrap.dedent("\n".join(lines[i + 1:j]))))
            i = j
        i += 1
    return out


def test_guide_marks_say_why_and_precede_a_bash_block() -> None:
    text = (EXAMPLE / "README.md").read_text()
    blocks = guide_blocks()
    assert len([1 for reason, _ in blocks if reason is None]) >= 10
    assert text.count("<!-- not run in CI:") == len([1 for reason, _ in blocks if reason])
    assert all(len(reason) > 10 for reason, _ in blocks if reason)


def test_guide_commands_use_options_that_exist() -> None:
    """Each `edgekit SUB ... --flag` of the guide's blocks: SUB exists and has --flag."""
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices  # noqa: SLF001
    seen = 0
    for _, block in guide_blocks():
        for m in re.finditer(r"\bedgekit (?!edgekit\b)(\w+)((?: [^|&;#\n]*)?)", block):
            sub, rest = m.group(1), m.group(2)
            if sub not in subs:
                continue
            flags = {s for a in subs[sub]._actions for s in a.option_strings}  # noqa: SLF001
            for flag in re.findall(r"(?<!\S)(--?[a-z][\w-]*)", rest):
                assert flag in flags, f"`edgekit {sub}` has no {flag} (guide: {m.group(0)!r})"
            seen += 1
    assert seen >= 8


# --- the unit and the config ------------------------------------------------------------------

def _unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    unit.read(EXAMPLE / "edgekit.service")
    return unit


def test_unit_has_what_a_headless_service_needs() -> None:
    unit = _unit()
    service = unit["Service"]
    assert service["ExecStart"].split() == ["/opt/edgekit/venv/bin/edgekit", "inspect", "--config",
                                            "/etc/edgekit/inspection.toml"]
    assert service["Restart"] == "on-failure"
    assert service["Type"] == "notify", "WatchdogSec needs the service to notify"
    assert int(service["WatchdogSec"]) > 0
    assert service["User"] == service["Group"] == "edgekit"
    assert service["RuntimeDirectory"] == "edgekit" and service["StateDirectory"] == "edgekit"
    # the operators' group may touch the trigger file and read events; the folder outlives a stop
    assert service["RuntimeDirectoryMode"] == "2770" and service["RuntimeDirectoryPreserve"] == "yes"
    assert service["StateDirectoryMode"] == "2750"
    assert service["EnvironmentFile"] == "-/etc/edgekit/edgekit.env"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert unit["Unit"]["StartLimitIntervalSec"] == "0"


def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze not installed (apt-get install systemd)")
    # verify checks that ExecStart exists and the user is known: this checkout's script, root.
    here = shutil.which("edgekit") or str(Path(sys.executable).parent / "edgekit")
    if not os.access(here, os.X_OK):
        pytest.skip("no edgekit console script in this environment")
    text = (EXAMPLE / "edgekit.service").read_text().replace("/opt/edgekit/venv/bin/edgekit", here)
    copy = tmp_path / "edgekit.service"
    copy.write_text(text)
    r = subprocess.run([exe, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False)
    problems = [line for line in (r.stdout + r.stderr).splitlines() if "edgekit.service" in line]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr


def test_example_config_needs_no_secret() -> None:
    """A fresh install checks the shipped config without /etc/edgekit/edgekit.env."""
    config = load_config(EXAMPLE / "inspection.toml", env={})
    assert config.device == "cell-4" and config.trigger.mode is TriggerMode.ON_DEMAND
    assert config.trigger.file == "/run/edgekit/trigger"  # the unit's RuntimeDirectory
    assert config.state_dir == "/var/lib/edgekit"  # the unit's StateDirectory, the one writable path
    assert config.model.dir == "/opt/edgekit/models/inspection"
    assert config.sinks.mqtt is None
    assert {r.label for r in config.rules} == {"screw", "defect", "label"}
    config.check_frame(config.source.width or 0, config.source.height or 0)


def test_example_config_mqtt_block_works_once_uncommented() -> None:
    text = (EXAMPLE / "inspection.toml").read_text()
    block = text[text.index("# [sinks.mqtt]"):].split("\n\n")[0]
    enabled = text.replace(block, "\n".join(line[2:] for line in block.splitlines()))
    from edgekit.inspect import parse_config

    config = parse_config(enabled, env={"EDGEKIT_MQTT_PASSWORD": "s3cret"})
    assert config.sinks.mqtt is not None and config.sinks.mqtt.password == "s3cret" and config.sinks.mqtt.tls


def test_readme_lists_the_files_that_exist() -> None:
    readme = (EXAMPLE / "README.md").read_text()
    for name in ("install.sh", "edgekit.service", "inspection.toml", "edgekit.env.example", "app.py"):
        assert f"`{name}`" in readme and (EXAMPLE / name).exists()


# --- app.py -------------------------------------------------------------------------------------

def _app() -> Any:
    spec = importlib.util.spec_from_file_location("rpi_app", EXAMPLE / "app.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture
def model_dir(tmp_path: Path, ssd_model: tuple[Path, Path]) -> Path:
    d = tmp_path / "models" / "inspection"
    (d / "1").mkdir(parents=True)
    shutil.copy(ssd_model[0], d / "1" / "model.tflite")
    return d


def _decisions(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_app_and_edgekit_inspect_give_the_same_verdicts(tmp_path: Path, kites_video: Path, model_dir: Path,
                                                        ssd_model: tuple[Path, Path], cell_config: CellConfig,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cell.toml"
    config.write_text(cell_config(source=f'path = "{kites_video}"', model_dir=str(model_dir),
                                  labels=str(ssd_model[1]), state_dir=str(tmp_path / "state")))
    assert cli.main(["inspect", "--config", str(config), "--json"]) == 0
    by_cli = _decisions(capsys.readouterr().out)
    assert _app().main(["--config", str(config), "--state-dir", str(tmp_path / "app"), "--json"]) == 0
    by_app = _decisions(capsys.readouterr().out)
    assert len(by_cli) == len(VIDEO_FRAMES)
    assert [d["verdict"] for d in by_cli] == ["PASS" if keep else "FAIL" for keep in VIDEO_FRAMES]
    assert by_app == by_cli  # frame, verdict and every rule's count
    # the min_score = 0.3 rule counts persons the 0.5 threshold leaves out
    counts = [(d["rules"][0]["count"], d["rules"][2]["count"]) for d in by_cli]
    assert any(low > high for high, low in counts)
    # each kept its own state: the app's events went to --state-dir, not the config's folder
    events = [json.loads(line) for p in sorted((tmp_path / "app" / "events").glob("*.jsonl"))
              for line in p.read_text().splitlines()]
    assert [e["payload"] for e in events if e["kind"] == "inspection"] == by_app
    assert (tmp_path / "app" / "sequence.json").exists() and (tmp_path / "state" / "sequence.json").exists()


@pytest.mark.slow
def test_app_inspects_one_photo_whatever_the_trigger_mode(tmp_path: Path, shared_images: Path, model_dir: Path,
                                                          ssd_model: tuple[Path, Path], cell_config: CellConfig,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import cv2

    photo = tmp_path / "part.jpg"
    cv2.imwrite(str(photo), cv2.resize(cv2.imread(str(shared_images / "kite_and_cold.jpg")), VIDEO_SIZE))
    text = cell_config(source="camera = 0", model_dir=str(model_dir), labels=str(ssd_model[1]),
                       state_dir=str(tmp_path / "state"))
    text = text.replace('mode = "continuous"', f'mode = "on-demand"\nfile = "{tmp_path / "trigger"}"')
    (tmp_path / "cell.toml").write_text(text)
    assert _app().main(["--config", str(tmp_path / "cell.toml"), "--state-dir", str(tmp_path / "app"),
                        "--image", str(photo)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "PASS" and report["image"] == str(photo)
    assert [r["passed"] for r in report["rules"]] == [True, True, True]


FAKE_PICAMERA2 = '''
import json, os
import numpy as np

class Picamera2:
    def create_video_configuration(self, main, controls):
        return {"main": main, "controls": controls}
    def configure(self, config):
        self.size = tuple(config["main"]["size"])
        with open(os.environ["FAKE_PICAMERA_LOG"], "w") as f:
            json.dump(config, f)
    def start(self):
        import cv2
        w, h = self.size if os.environ.get("FAKE_PICAMERA_OBEYS") else (640, 480)
        self.frame = cv2.resize(cv2.imread(os.environ["FAKE_PICAMERA_PHOTO"]), (w, h))[:, :, ::-1].copy()
    def capture_array(self, name):
        return self.frame
    def stop(self):
        pass
    def close(self):
        pass
'''


@pytest.mark.slow
@pytest.mark.parametrize("obeys", [True, False])
def test_app_asks_the_camera_module_for_the_configs_size_and_checks_zones(
        obeys: bool, tmp_path: Path, shared_images: Path, model_dir: Path, ssd_model: tuple[Path, Path],
        cell_config: CellConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """picamera = true: width, height and fps reach picamera2; a frame of another size than the
    zones were drawn for stops the cell with an error instead of counting wrongly."""
    (tmp_path / "fake" / "picamera2").mkdir(parents=True)
    (tmp_path / "fake" / "picamera2" / "__init__.py").write_text(FAKE_PICAMERA2)
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    monkeypatch.delitem(sys.modules, "picamera2", raising=False)
    monkeypatch.setenv("FAKE_PICAMERA_LOG", str(tmp_path / "camera.json"))
    monkeypatch.setenv("FAKE_PICAMERA_PHOTO", str(shared_images / "kite_and_cold.jpg"))
    if obeys:
        monkeypatch.setenv("FAKE_PICAMERA_OBEYS", "1")
    w, h = VIDEO_SIZE
    (tmp_path / "cell.toml").write_text(cell_config(
        source=f"picamera = true\nwidth = {w}\nheight = {h}\nfps = 15", model_dir=str(model_dir),
        labels=str(ssd_model[1]), state_dir=str(tmp_path / "state")))
    code = _app().main(["--config", str(tmp_path / "cell.toml"), "--max-frames", "2", "--json"])
    asked = json.loads((tmp_path / "camera.json").read_text())
    assert asked["main"]["size"] == [w, h] and asked["controls"] == {"FrameRate": 15.0}
    captured = capsys.readouterr()
    if obeys:
        assert code == 0 and [d["verdict"] for d in _decisions(captured.out)] == ["PASS", "PASS"]
    else:
        assert code == 2 and "reaches outside the 640x480 frame" in captured.err
        assert _decisions(captured.out) == []


@pytest.mark.parametrize("with_labels", [True, False])
def test_check_says_when_the_rules_labels_cannot_be_known(with_labels: bool, tmp_path: Path, model_dir: Path,
                                                          kites_video: Path, ssd_model: tuple[Path, Path],
                                                          cell_config: CellConfig,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The SSD model has no labels in its metadata: without `[model] labels` the check fails
    (before, it said "config OK" and every count stayed 0)."""
    text = cell_config(source=f'path = "{kites_video}"', model_dir=str(model_dir), labels=str(ssd_model[1]),
                       state_dir=str(tmp_path / "state"))
    if not with_labels:
        text = text.replace(f'labels = "{ssd_model[1]}"\n', "")
    (tmp_path / "cell.toml").write_text(text)
    code = cli.main(["inspect", "--config", str(tmp_path / "cell.toml"), "--check"])
    out = capsys.readouterr()
    if with_labels:
        assert code == 0 and "config OK" in out.out
    else:
        assert code == 2 and "the model has no labels" in out.err and 'labels = "labels.txt"' in out.err


def test_doctor_on_32bit_pi_os_under_a_64bit_kernel() -> None:
    """What the guide promises `edgekit doctor` says there: 32-bit ARM, and the fix (tflite-runtime first)."""
    from edgekit.doctor import PIWHEELS, Status, check_interpreters

    checks = {c.name: c for c in check_interpreters("1.24.2", [], set(), 32, "aarch64")}
    assert checks["32-bit ARM"].status is Status.WARN and "64-bit kernel" in checks["32-bit ARM"].detail
    assert "tflite-runtime" in (checks["32-bit ARM"].fix or "")
    assert checks["interpreter"].status is Status.FAIL
    assert checks["interpreter"].detail == "no TFLite interpreter can be used"
    fix = checks["interpreter"].fix or ""
    assert fix.startswith(f"pip install --extra-index-url {PIWHEELS} tflite-runtime") and "ai-edge-litert" not in \
        fix.split("(")[0]
    assert "32-bit ARM" not in {c.name for c in check_interpreters("1.24.2", [], set(), 64, "aarch64")}


def test_doctor_on_32bit_with_tflite_runtime_working_has_no_32bit_warning() -> None:
    """install.sh's 32-bit branch done right: nothing left to warn about."""
    from edgekit.doctor import Status, check_interpreters

    checks = check_interpreters("1.24.2", [("tflite_runtime", "2.14.0", None)], {"tflite_runtime"}, 32, "armv7l")
    assert all(c.status is Status.OK for c in checks) and "32-bit ARM" not in {c.name for c in checks}
