#!/usr/bin/env bash
# Log-based metrics, alert policies, their e-mail channel and the dashboard, from the files
# beside this script. Idempotent: what exists is updated in place, the rest is created.
#
#   PROJECT_ID=my-project SERVICE_PREFIX=saas TOPIC=payment-events ALERT_EMAIL=ops@example.com \
#     ops/monitoring/apply.sh
#
# cloudbuild.yaml runs it after the deploy; it needs roles/logging.configWriter and
# roles/monitoring.editor. Alert policies and channels are only in gcloud's alpha commands.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${PROJECT_ID:?set PROJECT_ID}" "${SERVICE_PREFIX:?set SERVICE_PREFIX}" "${TOPIC:?set TOPIC}"
ALERT_EMAIL="${ALERT_EMAIL:-}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export CLOUDSDK_CORE_PROJECT="$PROJECT_ID" CLOUDSDK_CORE_DISABLE_PROMPTS=1

# A file with this deployment's names in place of the placeholders.
render() {
  local folder target
  folder="$(dirname "$1")"
  target="$out/${folder##*/}-${1##*/}"
  sed -e "s/__PROJECT__/$PROJECT_ID/g" -e "s/__SERVICE_PREFIX__/$SERVICE_PREFIX/g" \
      -e "s/__TOPIC__/$TOPIC/g" "$1" > "$target"
  echo "$target"
}
# The value of a top-level `key: value` line of a rendered file.
top_level() { sed -n "s/^$1: //p" "$2" | head -n 1; }

channel=""
if [[ -n "$ALERT_EMAIL" ]]; then
  channel_name="$SERVICE_PREFIX alerts"
  wanted="displayName=\"$channel_name\" AND type=\"email\""
  channel="$(gcloud alpha monitoring channels list --filter="$wanted" --format='value(name)' |
    head -n 1)"
  if [[ -z "$channel" ]]; then
    content="{\"type\": \"email\", \"displayName\": \"$channel_name\", \"labels\": {\"email_address\": \"$ALERT_EMAIL\"}}"
    channel="$(gcloud alpha monitoring channels create --channel-content="$content" \
      --format='value(name)')"
  fi
  echo "notification channel: $channel ($ALERT_EMAIL)"
else
  echo "ALERT_EMAIL is not set: alerts open incidents in the console but notify nobody" >&2
fi

for file in "$here"/metrics/*.yaml; do
  config="$(render "$file")"
  name="$(top_level name "$config")"
  if gcloud logging metrics describe "$name" >/dev/null 2>&1; then
    gcloud logging metrics update "$name" --config-from-file="$config" --format=none
  else
    gcloud logging metrics create "$name" --config-from-file="$config" --format=none
  fi
  echo "log-based metric: $name"
done

for file in "$here"/alerts/*.yaml; do
  policy="$(render "$file")"
  if [[ -n "$channel" ]]; then
    printf 'notificationChannels:\n  - %s\n' "$channel" >> "$policy"
  fi
  display="$(top_level displayName "$policy")"
  wanted="displayName=\"$display\""
  existing="$(gcloud alpha monitoring policies list --filter="$wanted" --format='value(name)' |
    head -n 1)"
  if [[ -n "$existing" ]]; then
    gcloud alpha monitoring policies update "$existing" --policy-from-file="$policy" --format=none
  else
    gcloud alpha monitoring policies create --policy-from-file="$policy" --format=none
  fi
  echo "alert policy: $display"
done

dashboard="$(render "$here/dashboard.yaml")"
id="$(top_level name "$dashboard")"
id="${id##*/}"
if etag="$(gcloud monitoring dashboards describe "$id" --format='value(etag)' 2>/dev/null)"; then
  # An update names the version it replaces.
  printf 'etag: %s\n' "$etag" >> "$dashboard"
  gcloud monitoring dashboards update "$id" --config-from-file="$dashboard" --format=none
else
  gcloud monitoring dashboards create --config-from-file="$dashboard" --format=none
fi
echo "dashboard: https://console.cloud.google.com/monitoring/dashboards/builder/$id?project=$PROJECT_ID"
