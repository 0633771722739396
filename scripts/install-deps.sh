#!/usr/bin/env bash
# Installs the Debian packages natter builds and tests against, skipping what is already there.
# Uses sudo when not root. Safe to run repeatedly; CI runs it on every clean clone.
set -euo pipefail

# yggdrasil: the overlay scripts/overlay-test.sh runs natter over (its own instances, in namespaces).
packages=(libsodium-dev libedit-dev libsqlite3-dev sqlite3 pkg-config nftables iproute2 tcpdump tmux yggdrasil)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
    as_root=(sudo)
fi
echo "installing: ${missing[*]}" >&2
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq "${missing[@]}"

# Debian starts a freshly installed yggdrasil as a system service whose default configuration peers by multicast on
# every interface: the tests need only the program, so a service this script brought in is stopped and disabled
# (an yggdrasil that was installed before is left as it was).
if [[ " ${missing[*]} " == *" yggdrasil "* ]] && [ -d /run/systemd/system ]; then
    "${as_root[@]}" systemctl disable --now yggdrasil.service >/dev/null 2>&1 \
        || echo "warning: could not stop the yggdrasil service: run systemctl disable --now yggdrasil" >&2
fi
