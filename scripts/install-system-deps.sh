#!/usr/bin/env bash
# Install Debian packages the project needs, when run as root; otherwise check they exist.
# Usage: install-system-deps.sh [--optional] PACKAGE...
#   --optional: a package that cannot be installed is reported, not fatal.
set -euo pipefail
optional=0
if [[ "${1:-}" == "--optional" ]]; then optional=1; shift; fi

declare -A probe=( [chromium]=/usr/bin/chromium [kcat]=/usr/bin/kcat [zookeeper]=/usr/share/java/zookeeper.jar [prometheus]=/usr/bin/prometheus [systemd]=/usr/bin/systemd-analyze )
missing=()
for pkg in "$@"; do
  path="${probe[$pkg]:-}"
  if [[ -n "$path" && -e "$path" ]]; then continue; fi
  if [[ -z "$path" ]] && dpkg -s "$pkg" >/dev/null 2>&1; then continue; fi
  missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "Installing Debian packages: ${missing[*]}"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    if [[ $optional -eq 1 ]]; then echo "note: could not install ${missing[*]}; continuing without them"; exit 0; fi
    echo "error: apt-get could not install ${missing[*]}" >&2; exit 1
  fi
  exit 0
fi
if [[ $optional -eq 1 ]]; then
  echo "note: ${missing[*]} not installed (run as root to install); continuing without them"
  exit 0
fi
echo "error: missing Debian packages: ${missing[*]}. Run as root, or: sudo apt-get install ${missing[*]}" >&2
exit 1
