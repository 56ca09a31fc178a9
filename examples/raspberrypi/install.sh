#!/usr/bin/env bash
# Install edgekit as an inspection service on Raspberry Pi OS Bookworm (64- or 32-bit).
#
#   sudo bash install.sh                 # install, enable the service (it starts on the next boot)
#   bash install.sh --dry-run            # print every command, change nothing (no root needed)
#   sudo bash install.sh --edgetpu       # also Coral's Edge TPU runtime (libedgetpu1-std)
#   sudo bash install.sh --start         # start the service now (edit /etc/edgekit/inspection.toml first)
#
# Options: --package SPEC  what pip installs (default "edgekit[mqtt,metrics]"; a wheel or a checkout works)
#          --prefix DIR    venv and models (default /opt/edgekit)
#          --user NAME     service user (default edgekit)
#          --edgetpu-max   libedgetpu1-max instead of -std (faster, hotter: cool the Coral)
set -euo pipefail

DRY_RUN=0
START=0
EDGETPU=""
PACKAGE="edgekit[mqtt,metrics]"
PREFIX=/opt/edgekit
SERVICE_USER=edgekit
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --start) START=1 ;;
        --edgetpu) EDGETPU=libedgetpu1-std ;;
        --edgetpu-max) EDGETPU=libedgetpu1-max ;;
        --package) PACKAGE="$2"; shift ;;
        --prefix) PREFIX="$2"; shift ;;
        --user) SERVICE_USER="$2"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

run() {
    # Print each command as it would be typed; run it unless --dry-run.
    printf '+'; printf ' %q' "$@"; printf '\n'
    if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}

run_sh() {
    # The same for a shell pipeline, printed as written.
    printf '+ %s\n' "$1"
    if [ "$DRY_RUN" = 0 ]; then bash -o pipefail -c "$1"; fi
}

if [ "$DRY_RUN" = 0 ] && [ "$(id -u)" != 0 ]; then
    echo "install.sh: run it as root (sudo bash install.sh), or see what it does with --dry-run" >&2
    exit 2
fi

# 64-bit Raspberry Pi OS (arm64) runs ai-edge-litert; 32-bit (armhf) only has tflite-runtime,
# which is built against numpy 1.x. picamera2 comes from apt, built against the system's
# numpy 1.x too: a venv with --system-site-packages sees it, and numpy<2 keeps it working.
ARCH="${EDGEKIT_ARCH:-$(dpkg --print-architecture 2>/dev/null || uname -m)}"  # EDGEKIT_ARCH: prepare for another board
APT_PACKAGES=(python3-venv python3-pip v4l-utils)
case "$ARCH" in
    arm64|aarch64) PIP_EXTRA=("numpy<2"); APT_PACKAGES+=(python3-picamera2) ;;
    armhf|armv7l|armv6l) PIP_EXTRA=("numpy<2" "tflite-runtime"); APT_PACKAGES+=(python3-picamera2) ;;
    *) echo "# note: $ARCH is not a Raspberry Pi OS architecture; installing the 64-bit way, without picamera2" >&2
       PIP_EXTRA=() ;;
esac
echo "# edgekit install: arch $ARCH, prefix $PREFIX, user $SERVICE_USER, package $PACKAGE"

run apt-get update
run apt-get install -y "${APT_PACKAGES[@]}"

if [ -n "$EDGETPU" ]; then
    # Coral's apt repository (signed-by keyring: apt-key is gone in Bookworm).
    run install -d -m 0755 /usr/share/keyrings
    run_sh "curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | gpg --dearmor --yes -o /usr/share/keyrings/coral-edgetpu.gpg"
    run_sh "echo 'deb [signed-by=/usr/share/keyrings/coral-edgetpu.gpg] https://packages.cloud.google.com/apt coral-edgetpu-stable main' > /etc/apt/sources.list.d/coral-edgetpu.list"
    run apt-get update
    run apt-get install -y "$EDGETPU"
fi

if ! id "$SERVICE_USER" >/dev/null 2>&1 || [ "$DRY_RUN" = 1 ]; then
    run useradd --system --home-dir /var/lib/edgekit --no-create-home --shell /usr/sbin/nologin "$SERVICE_USER"
fi
run usermod -aG video,plugdev "$SERVICE_USER"

run install -d -m 0755 "$PREFIX" "$PREFIX/models" /etc/edgekit
run install -d -m 0750 -o "$SERVICE_USER" -g "$SERVICE_USER" /var/lib/edgekit

run python3 -m venv --system-site-packages "$PREFIX/venv"
run "$PREFIX/venv/bin/pip" install --upgrade pip
run "$PREFIX/venv/bin/pip" install "${PIP_EXTRA[@]}" "$PACKAGE"

# Never overwrite a config or secrets someone already edited.
if [ ! -e /etc/edgekit/inspection.toml ] || [ "$DRY_RUN" = 1 ]; then
    run install -m 0644 "$HERE/inspection.toml" /etc/edgekit/inspection.toml
fi
if [ ! -e /etc/edgekit/edgekit.env ] || [ "$DRY_RUN" = 1 ]; then
    run install -m 0600 "$HERE/edgekit.env.example" /etc/edgekit/edgekit.env
fi

run install -m 0644 "$HERE/edgekit.service" /etc/systemd/system/edgekit.service
run systemctl daemon-reload
run systemctl enable edgekit.service

# What is missing on this device, with the command that fixes it.
run runuser -u "$SERVICE_USER" -- "$PREFIX/venv/bin/edgekit" doctor --path /var/lib/edgekit
run runuser -u "$SERVICE_USER" -- "$PREFIX/venv/bin/edgekit" inspect --config /etc/edgekit/inspection.toml --check

if [ "$START" = 1 ]; then
    run systemctl restart edgekit.service
    run systemctl --no-pager status edgekit.service
else
    echo "# next: put a model in $PREFIX/models/inspection/1/model.tflite, edit /etc/edgekit/inspection.toml,"
    echo "#       then: sudo systemctl start edgekit && journalctl -u edgekit -f"
fi
if [ "$DRY_RUN" = 1 ]; then
    echo "# dry run: nothing was changed"
fi
