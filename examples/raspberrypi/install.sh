#!/usr/bin/env bash
# Install edgekit as an inspection service on Raspberry Pi OS Bookworm, or any Debian 12 based
# arm64/armhf board (see README.md beside it).
#
# Usage: sudo bash install.sh [options]
#
#   sudo bash install.sh            install from the clone this script sits in, enable the service
#   bash install.sh --dry-run       print every command, change nothing (no root needed)
#   sudo bash install.sh --start    also start the service now (if the config check passes)
#
# Options:
#   --package SPEC   what pip installs instead of this clone: a wheel file or a checkout path,
#                    e.g. ./edgekit_tflite-0.1.0-py3-none-any.whl[mqtt,metrics], or an index
#                    name such as "edgekit-tflite[mqtt,metrics]" (never the bare name "edgekit":
#                    on the package index that is another project)
#   --prefix DIR     virtual environment and model folder (default /opt/edgekit)
#   --user NAME      service user, and the group of the people who operate it (default edgekit)
#   --picamera2 WHEN camera-module support (apt's python3-picamera2): auto (default: where apt
#                    offers it, i.e. Raspberry Pi OS), yes (fail without it) or no (USB cameras,
#                    video files and streams only; other Debian boards)
#   --binaries FROM  32-bit Python only: where numpy, OpenCV and Pillow come from: piwheels
#                    (pip's armv7l wheels, as Raspberry Pi OS configures pip), apt (Debian's
#                    python3-numpy 1.24, python3-opencv 4.6 and python3-pil 9.4: for a device that
#                    cannot reach piwheels, e.g. behind a proxy), or auto (default: piwheels if it
#                    answers pip, else apt). tflite-runtime comes from PyPI or piwheels either way
#   --edgetpu        also Coral's Edge TPU runtime libedgetpu1-std from Coral's apt repository
#                    (installs curl and gnupg for its key)
#   --edgetpu-max    libedgetpu1-max instead (faster, hotter: cool the Coral)
#   --root DIR       install into DIR as if it were / (a staging tree; the test suite uses it):
#                    /etc, /var/lib, /run and /usr/local/bin go below DIR, and the unit and the
#                    config name those paths; the service user is still a real user
#   --dry-run        print the commands instead of running them
#   --start          start (restart) the service at the end, only if the config check passes
#                    and a model is there to serve (or the config follows a fleet channel)
#   -h, --help       this text
#
# 32-bit Python (armhf, also under a Pi 4/5's 64-bit kernel): PyPI has no armv7l wheels of numpy,
# OpenCV or Pillow (tflite-runtime 2.14 has one); they come from piwheels
# (https://www.piwheels.org/simple), which this script names with --extra-index-url as Raspberry
# Pi OS's /etc/pip.conf does, or, where piwheels does not answer, from apt (--binaries). pip is
# never left to build them from source, which fails on a Pi.
#
# The user who runs it through sudo joins the service's group: after logging in again they
# may touch the trigger file and read events. Other operators: sudo usermod -aG edgekit NAME.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXTRAS="mqtt,metrics"
# Debian's Python, the one apt's python3-venv and python3-picamera2 belong to (not whatever
# python3 comes first on root's PATH).
PYTHON=/usr/bin/python3

usage() {
    # The comment block at the top of this file, without the leading "# ".
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"
}

die() { echo "install.sh: $*" >&2; exit 2; }

PIWHEELS=https://www.piwheels.org/simple

run() {
    # Print each command as it would be typed; run it unless --dry-run.
    printf '+'; printf ' %q' "$@"; printf '\n'
    if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}

render() {
    # render TEMPLATE DEST MODE: copy a shipped file with its default paths and user replaced.
    printf '+ render %q -> %q\n' "$1" "$2"
    if [ "$DRY_RUN" = 1 ]; then return 0; fi
    local tmp
    tmp="$(mktemp "$2.XXXXXX")"
    sed -e "s|/opt/edgekit|$PREFIX|g" -e "s|/etc/edgekit|$ETC|g" -e "s|/var/lib/edgekit|$STATE|g" \
        -e "s|/run/edgekit|$RUNDIR|g" -e "s|^User=edgekit\$|User=$SERVICE_USER|" \
        -e "s|^Group=edgekit\$|Group=$SERVICE_USER|" "$1" > "$tmp"
    chmod "$3" "$tmp"
    mv -f "$tmp" "$2"
}

env_file_lines() {
    # env_file_lines FILE: its KEY=VALUE lines (no comments, blanks or surrounding quotes), as
    # systemd's EnvironmentFile= reads them, ready for `env`.
    local line key value
    while IFS= read -r line || [ -n "$line" ]; do
        line="${line#"${line%%[![:space:]]*}"}"
        case "$line" in ''|'#'*|';'*) continue ;; esac
        key="${line%%=*}"
        value="${line#*=}"
        if [[ "$value" =~ ^\"(.*)\"$ ]] || [[ "$value" =~ ^\'(.*)\'$ ]]; then value="${BASH_REMATCH[1]}"; fi
        printf '%s=%s\n' "${key%"${key##*[![:space:]]}"}" "$value"
    done < "$1"
}

pointer_bits() {
    # The word size of the Python the venv is made from: 32 on 32-bit Raspberry Pi OS even when
    # it runs a 64-bit kernel (uname -m and platform_machine then say aarch64).
    if [ -n "${EDGEKIT_BITS:-}" ]; then echo "$EDGEKIT_BITS"; return; fi
    "$PYTHON" -c 'import struct; print(struct.calcsize("P") * 8)' 2>/dev/null || getconf LONG_BIT
}

default_package() {
    # The clone this script sits in (examples/raspberrypi/ of it), with the service's extras.
    local repo
    repo="$(cd "$HERE/../.." && pwd)"
    if [ -f "$repo/pyproject.toml" ] && [ -d "$repo/edgekit" ]; then
        echo "${repo}[$EXTRAS]"
    fi
}

requirements_without_litert() {
    # requirements_without_litert PYTHON [NAME...]: the installed edgekit distribution's
    # dependencies (with the extras in $PACKAGE), markers evaluated, minus ai-edge-litert and the
    # NAMEs. For 32-bit Python on a 64-bit kernel, where the markers pick ai-edge-litert, which
    # has no 32-bit ARM wheels; NAME: what apt provides without pip metadata (Debian's OpenCV).
    local extras=""
    if [[ "$PACKAGE" =~ \[([A-Za-z0-9_,.-]+)\]$ ]]; then extras="${BASH_REMATCH[1]}"; fi
    "$1" - "$extras" "${@:2}" <<'EOF'
import sys
from importlib import metadata
from pip._vendor.packaging.requirements import Requirement  # pip is in every venv it made

dist = metadata.packages_distributions()["edgekit"][0]
extras = [e for e in sys.argv[1].split(",") if e]
skip = {"ai-edge-litert", *sys.argv[2:]}
for line in metadata.requires(dist) or []:
    req = Requirement(line)
    if req.name in skip:
        continue
    if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras or [""]):
        print(str(req).split(";")[0].strip())
EOF
}

piwheels_answers() {
    # Whether piwheels' numpy page answers within 20 s, through the proxy in https_proxy if one
    # is set (pip's own config may name other indexes that answer for it; they do not count).
    "$PYTHON" - "$PIWHEELS/numpy/" <<'EOF' >/dev/null 2>&1
import sys
import urllib.request

urllib.request.urlopen(sys.argv[1], timeout=20).read(64)
EOF
}

model_to_put() {
    # model_to_put CONFIG PYTHON...: where a model must go before the service can serve, when the
    # config's model is not there yet: DIR/1/model.tflite for a model folder with no version (as
    # the service counts them: edgekit's find_versions), the file itself for a fixed model path.
    # Nothing when a model is there, when the config follows a fleet channel (the cell fetches its
    # own at start), or when the config does not load (the check reports that). PYTHON... is the
    # command that runs the venv's python (as the service user, with the unit's secrets).
    "${@:2}" - "$1" <<'EOF'
import sys
from pathlib import Path

try:
    from edgekit.inspect.config import load_config
    from edgekit.inspect.modelwatch import find_versions

    config = load_config(sys.argv[1])
    if config.fleet is None and config.model.dir and not find_versions(Path(config.model.dir)):
        print(Path(config.model.dir) / "1" / "model.tflite")
    elif config.fleet is None and config.model.path and not Path(config.model.path).is_file():
        print(config.model.path)
except Exception:  # the check names what is wrong with the config
    pass
EOF
}

main() {
    DRY_RUN=0
    START=0
    EDGETPU=""
    PACKAGE=""
    PREFIX=""
    ROOT=""
    SERVICE_USER=edgekit
    PICAMERA2=auto
    BINARIES=auto
    while [ $# -gt 0 ]; do
        case "$1" in
            --dry-run) DRY_RUN=1 ;;
            --start) START=1 ;;
            --edgetpu) EDGETPU=libedgetpu1-std ;;
            --edgetpu-max) EDGETPU=libedgetpu1-max ;;
            --package|--prefix|--user|--root|--picamera2|--binaries)
                if [ $# -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value (see --help)"; fi
                case "$1" in
                    --package) PACKAGE="$2" ;;
                    --prefix) PREFIX="$2" ;;
                    --user) SERVICE_USER="$2" ;;
                    --root) ROOT="$(realpath -m "$2")" ;;
                    --picamera2) PICAMERA2="$2" ;;
                    --binaries) BINARIES="$2" ;;
                esac
                shift ;;
            -h|--help) usage; exit 0 ;;
            *) die "unknown option $1 (see --help)" ;;
        esac
        shift
    done

    PREFIX="$(realpath -m "${PREFIX:-$ROOT/opt/edgekit}")"
    ETC="$ROOT/etc/edgekit"
    STATE="$ROOT/var/lib/edgekit"
    RUNDIR="$ROOT/run/edgekit"
    BINDIR="$ROOT/usr/local/bin"
    UNITDIR="$ROOT/etc/systemd/system"
    for path in "$PREFIX" "$ROOT"; do
        case "$path" in *'|'*|*' '*) die "paths with '|' or spaces are not supported: $path" ;; esac
    done
    [[ "$SERVICE_USER" =~ ^[a-z_][a-z0-9_-]*$ ]] || die "--user $SERVICE_USER: not a valid user name"
    case "$PICAMERA2" in auto|yes|no) ;; *) die "--picamera2 $PICAMERA2: expected auto, yes or no" ;; esac
    case "$BINARIES" in auto|piwheels|apt) ;; *) die "--binaries $BINARIES: expected auto, piwheels or apt" ;; esac
    if [ -z "$PACKAGE" ]; then
        PACKAGE="$(default_package)"
        [ -n "$PACKAGE" ] || die "this script is not inside an edgekit clone; pass --package with a wheel, a \
checkout or \"edgekit-tflite[$EXTRAS]\""
    fi
    case "$PACKAGE" in
        edgekit|edgekit\[*|edgekit==*|edgekit\>*|edgekit\<*)
            die "--package $PACKAGE: on the package index, \"edgekit\" is another project; edgekit's \
distribution is edgekit-tflite" ;;
    esac
    if [ "$DRY_RUN" = 0 ] && [ "$(id -u)" != 0 ]; then
        die "run it as root (sudo bash install.sh), or see what it does with --dry-run"
    fi

    # Which interpreter: by the word size of Python, not by the kernel (see pointer_bits).
    # picamera2 comes from apt, built against Debian's numpy 1.24: a venv made with
    # --system-site-packages sees it, and numpy<2 with an OpenCV built for numpy 1.x (<4.11)
    # keeps it importable. tflite-runtime (32-bit) is built against numpy 1.x as well.
    local bits arch
    bits="$(pointer_bits)"
    arch="${EDGEKIT_ARCH:-$(dpkg --print-architecture 2>/dev/null || uname -m)}"
    local apt_packages=(python3-venv python3-pip v4l-utils)
    local pins=("numpy<2" "opencv-python-headless<4.11")
    local index=()
    # 32-bit: wheels only for what needs compiling, so that an unreachable piwheels is an error
    # now, not hours of building numpy 2's or OpenCV's source from PyPI.
    if [ "$bits" = 32 ]; then
        index=(--extra-index-url "$PIWHEELS" "--only-binary=numpy,opencv-python-headless,pillow,tflite-runtime")
    fi
    echo "# edgekit install: $arch, ${bits}-bit Python, prefix $PREFIX, user $SERVICE_USER, package $PACKAGE"
    if [ -n "$EDGETPU" ]; then apt_packages+=(curl gnupg ca-certificates); fi

    run apt-get update
    # picamera2 is Raspberry Pi OS's (archive.raspberrypi.com), not Debian's: other arm64/armhf
    # boards have no such package, and apt-get would stop at it.
    local picamera2=0
    case "$PICAMERA2" in
        yes) picamera2=1 ;;
        auto)
            printf '+ %s\n' "apt-cache show python3-picamera2  (auto: install it where apt offers it)"
            case "$arch" in
                arm64|armhf|aarch64|armv7l|armv6l)
                    if apt-cache show python3-picamera2 >/dev/null 2>&1; then picamera2=1; fi ;;
            esac ;;
    esac
    if [ "$picamera2" = 1 ]; then
        apt_packages+=(python3-picamera2)
    else
        echo "# note: no python3-picamera2 ($arch, --picamera2 $PICAMERA2): USB cameras, files and streams only" >&2
    fi
    # No Recommends: what they add here (python3-pip's compiler and headers; a camera preview's GUI
    # libraries) a headless service never uses, and every wheel it installs is prebuilt.
    run apt-get install -y --no-install-recommends "${apt_packages[@]}"

    # 32-bit: numpy, OpenCV and Pillow as piwheels' wheels or as Debian's packages (--binaries).
    local binaries="" skip=()
    if [ "$bits" = 32 ]; then
        binaries="$BINARIES"
        if [ "$binaries" = auto ]; then
            printf '+ %s\n' "$PYTHON: GET $PIWHEELS/numpy/  (auto: piwheels if it answers, else apt)"
            if piwheels_answers; then
                binaries=piwheels
            else
                binaries=apt
                echo "# note: piwheels ($PIWHEELS) does not answer here: numpy, OpenCV and Pillow come from" \
                     "apt (Debian's python3-numpy, python3-opencv, python3-pil); --binaries piwheels insists" >&2
            fi
        fi
        if [ "$binaries" = apt ]; then
            run apt-get install -y --no-install-recommends python3-numpy python3-opencv python3-pil
            # The venv sees them (--system-site-packages). Debian's OpenCV has no pip metadata:
            # pip must not look for opencv-python-headless, which has no armv7l wheel on PyPI.
            pins=("numpy<2")
            index=("--only-binary=numpy,pillow,tflite-runtime")
            skip=(opencv-python-headless)
        fi
    fi

    if [ -n "$EDGETPU" ]; then
        # Coral's apt repository, its key in a keyring that only this source trusts (signed-by);
        # apt-key is deprecated. The Edge TPU *compiler* is not here: it runs on x86_64 only.
        run install -d -m 0755 /usr/share/keyrings
        printf '+ %s\n' "curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | gpg --dearmor --yes -o /usr/share/keyrings/coral-edgetpu.gpg"
        if [ "$DRY_RUN" = 0 ]; then
            curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg \
                | gpg --dearmor --yes -o /usr/share/keyrings/coral-edgetpu.gpg
        fi
        printf '+ %s\n' "echo 'deb [signed-by=/usr/share/keyrings/coral-edgetpu.gpg] https://packages.cloud.google.com/apt coral-edgetpu-stable main' > /etc/apt/sources.list.d/coral-edgetpu.list"
        if [ "$DRY_RUN" = 0 ]; then
            echo 'deb [signed-by=/usr/share/keyrings/coral-edgetpu.gpg] https://packages.cloud.google.com/apt coral-edgetpu-stable main' \
                > /etc/apt/sources.list.d/coral-edgetpu.list
        fi
        run apt-get update
        run apt-get install -y "$EDGETPU"
    fi

    # The service user; its group is the operators' group (trigger file, events).
    if ! id "$SERVICE_USER" >/dev/null 2>&1 || [ "$DRY_RUN" = 1 ]; then
        run useradd --system --user-group --home-dir "$STATE" --no-create-home --shell /usr/sbin/nologin \
            "$SERVICE_USER"
    fi
    local group groups=()
    for group in video plugdev; do
        if getent group "$group" >/dev/null; then groups+=("$group"); fi
    done
    if [ ${#groups[@]} -gt 0 ]; then
        run usermod -aG "$(IFS=,; echo "${groups[*]}")" "$SERVICE_USER"
    fi
    # The person installing joins the operators' group; a dry run without sudo shows it for $USER.
    local operator="${SUDO_USER:-}"
    if [ -z "$operator" ] && [ "$DRY_RUN" = 1 ]; then operator="${USER:-$(id -un)}"; fi
    if [ -n "$operator" ] && [ "$operator" != root ]; then
        run usermod -aG "$SERVICE_USER" "$operator"
    fi

    run install -d -m 0755 "$PREFIX" "$PREFIX/models" "$PREFIX/models/inspection" "$ETC" "$BINDIR" "$UNITDIR"
    # setgid folders: what the service and the operators create there belongs to the group.
    run install -d -m 2750 -o "$SERVICE_USER" -g "$SERVICE_USER" "$STATE"
    run install -d -m 2770 -o "$SERVICE_USER" -g "$SERVICE_USER" "$RUNDIR"
    # /run is empty after a reboot: systemd-tmpfiles makes the folder again at boot, so the
    # trigger file works for foreground runs before (or without) the service.
    run install -d -m 0755 "$ROOT/etc/tmpfiles.d"
    printf '+ echo "%s" > %s\n' "d $RUNDIR 2770 $SERVICE_USER $SERVICE_USER -" "$ROOT/etc/tmpfiles.d/edgekit.conf"
    if [ "$DRY_RUN" = 0 ]; then
        echo "d $RUNDIR 2770 $SERVICE_USER $SERVICE_USER -" > "$ROOT/etc/tmpfiles.d/edgekit.conf"
    fi

    run "$PYTHON" -m venv --system-site-packages "$PREFIX/venv"
    local pip=("$PREFIX/venv/bin/python" -m pip --disable-pip-version-check)
    if [ "$bits" = 32 ]; then
        # The package's markers see platform_machine "aarch64" under a 64-bit kernel and would
        # ask for ai-edge-litert: install it without its dependency list, then that list
        # without ai-edge-litert, with tflite-runtime instead.
        # numpy<2 first, from piwheels, so that no later step ever fetches numpy 2's source.
        if [ "$binaries" = apt ]; then
            run "${pip[@]}" install "${index[@]}" "${pins[@]}" tflite-runtime \
                || die "pip could not install tflite-runtime beside apt's numpy (above): its armv7l wheel is on \
PyPI (tflite-runtime 2.14, Python 3.11). Check that pip reaches its index here"
        else
            run "${pip[@]}" install "${index[@]}" "${pins[@]}" tflite-runtime \
                || die "pip could not install numpy<2, OpenCV and tflite-runtime for 32-bit ARM (above). They come \
from piwheels ($PIWHEELS): PyPI has no armv7l wheels of them. Check this device reaches it \
(curl -sI $PIWHEELS/numpy/), or take Debian's with --binaries apt"
        fi
        run "${pip[@]}" install --no-deps "$PACKAGE"
        printf '+ %s\n' "pip install ${index[*]} ${pins[*]} \$(requirements of the installed edgekit distribution without ai-edge-litert${skip[*]:+ and ${skip[*]}})"
        if [ "$DRY_RUN" = 0 ]; then
            local listed reqs
            listed="$(requirements_without_litert "$PREFIX/venv/bin/python" "${skip[@]}")"  # set -e stops on a failure
            mapfile -t reqs <<< "$listed"
            "${pip[@]}" install "${index[@]}" "${pins[@]}" "${reqs[@]}"
        fi
    else
        run "${pip[@]}" install "${pins[@]}" "$PACKAGE"
    fi
    run ln -sfn "$PREFIX/venv/bin/edgekit" "$BINDIR/edgekit"

    # Never overwrite a config or secrets someone already edited.
    if [ ! -e "$ETC/inspection.toml" ] || [ "$DRY_RUN" = 1 ]; then
        render "$HERE/inspection.toml" "$ETC/inspection.toml" 0644
    fi
    if [ ! -e "$ETC/edgekit.env" ] || [ "$DRY_RUN" = 1 ]; then
        run install -m 0600 "$HERE/edgekit.env.example" "$ETC/edgekit.env"
    fi
    render "$HERE/edgekit.service" "$UNITDIR/edgekit.service" 0644
    run systemctl daemon-reload
    run systemctl enable edgekit.service

    # What is missing on this device, with the command that fixes each (always exits 0).
    run runuser -u "$SERVICE_USER" -- "$PREFIX/venv/bin/edgekit" doctor --path "$STATE"
    # The config as the service will read it: as its user, with its secrets file loaded the
    # way systemd's EnvironmentFile= does. A failure is reported; it does not undo the install.
    # The check opens the cell as the service does, so it refuses a config whose model is not
    # there yet (a fresh install's empty model folder) as the service would at start; that is
    # told apart by looking for the model itself, not by reading the check's message.
    local checked=1 missing="" report=""
    printf '+ %s\n' "runuser -u $SERVICE_USER -- env \$(secrets of $ETC/edgekit.env) $PREFIX/venv/bin/edgekit inspect --config $ETC/inspection.toml --check"
    printf '+ %s\n' "runuser -u $SERVICE_USER -- env \$(secrets of $ETC/edgekit.env) $PREFIX/venv/bin/python - $ETC/inspection.toml  (is its model there yet? see model_to_put)"
    if [ "$DRY_RUN" = 0 ]; then
        local secrets=()
        mapfile -t secrets < <(env_file_lines "$ETC/edgekit.env")
        local as_service=(runuser -u "$SERVICE_USER" -- env "${secrets[@]}")
        if ! report="$("${as_service[@]}" "$PREFIX/venv/bin/edgekit" inspect --config "$ETC/inspection.toml" \
                --check)"; then
            checked=0
        fi
        if [ -n "$report" ]; then printf '%s\n' "$report"; fi
        missing="$(model_to_put "$ETC/inspection.toml" "${as_service[@]}" "$PREFIX/venv/bin/python")" || missing=""
        if [ -n "$missing" ]; then
            # The service cannot run without a model either: it would restart every 10 s.
            echo "# there is no model to serve yet: put one at $missing (README.md section 4). Until then" >&2
            echo "# the check (above) refuses the config, as the service would at start; check it again" >&2
            echo "# then, as README.md section 5 shows (it goes on to the labels, trigger and camera)" >&2
        elif [ "$checked" = 0 ]; then
            echo "# the config check failed (above): fix $ETC/inspection.toml (or $ETC/edgekit.env) and" >&2
            echo "# check it again as README.md section 5 shows" >&2
        fi
    fi

    if [ "$START" = 1 ] && [ "$checked" = 1 ] && [ -z "$missing" ]; then
        run systemctl restart edgekit.service
        run systemctl --no-pager status edgekit.service
    elif [ "$START" = 1 ] && [ -n "$missing" ]; then
        echo "install.sh: installed and enabled, but not started: there is no model to serve yet." >&2
        echo "install.sh: put a model at $missing (README.md section 4), check the config again as" >&2
        echo "install.sh: README.md section 5 shows, then: sudo systemctl start edgekit" >&2
        exit 1
    elif [ "$START" = 1 ]; then
        echo "install.sh: installed and enabled, but not started: the config check failed (above)." >&2
        echo "install.sh: fix $ETC/inspection.toml (or $ETC/edgekit.env), check it again as README.md" >&2
        echo "install.sh: section 5 shows, then: sudo systemctl start edgekit" >&2
        exit 1
    elif [ -n "$missing" ] || [ "$DRY_RUN" = 1 ]; then
        echo "# next: put a model at ${missing:-$PREFIX/models/inspection/1/model.tflite}, edit $ETC/inspection.toml,"
        echo "#       check it, then: sudo systemctl start edgekit && journalctl -u edgekit -f"
    else
        echo "# next: edit $ETC/inspection.toml for your line, check it (README.md section 5),"
        echo "#       then: sudo systemctl start edgekit && journalctl -u edgekit -f"
    fi
    if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
        echo "# $SUDO_USER joined the group $SERVICE_USER (trigger file, events): log in again for it to count"
    fi
    if [ "$DRY_RUN" = 1 ]; then
        echo "# dry run: nothing was changed"
    fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
