#!/usr/bin/env bash
# Screenshot each rendered e-mail preview (<dir>/<kind>.html -> <dir>/<kind>.png) with headless
# Chromium. Run `python -m dev.previews` first. Usage: dev/screenshot_emails.sh [dir]
set -euo pipefail

out="${1:-docs/emails}"

if ! command -v chromium >/dev/null 2>&1; then
  echo "chromium not found; installing it with apt-get" >&2
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null
fi

shopt -s nullglob
pages=("$out"/*.html)
if [ ${#pages[@]} -eq 0 ]; then
  echo "no .html previews in $out; run 'python -m dev.previews --out $out' first" >&2
  exit 1
fi

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT

for page in "${pages[@]}"; do
  png="${page%.html}.png"
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --hide-scrollbars --window-size=700,1400 \
    --screenshot="$(realpath -m "$png")" "file://$(realpath "$page")" >/dev/null 2>&1
  echo "$png"
done
