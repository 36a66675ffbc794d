#!/usr/bin/env bash
# Send the traffic of the api, access and e-mail back to one earlier release's revisions, each
# deployed under the tag b-<build id> (docs/deploy/roll-back.md, "Roll back").
#   ops/rollback.sh PREFIX REGION [TAG]    TAG: default, the release before the one serving
set -euo pipefail
if (( $# < 2 )); then
  echo "usage: ops/rollback.sh PREFIX REGION [b-<build id>]" >&2
  exit 2
fi
prefix="$1" region="$2" tag="${3:-}"

if [[ -z "$tag" ]]; then
  # The api's release tags, oldest first by revision number; the one before the serving one.
  tag="$(gcloud run services describe "$prefix-api" --region="$region" --format=json |
    python3 -c '
import json, re, sys
traffic = json.load(sys.stdin)["status"]["traffic"]
tagged = sorted(
    (int(re.search(r"-(\d+)-[^-]+$", t["revisionName"])[1]), t["tag"], t.get("percent") or 0)
    for t in traffic
    if t.get("tag", "").startswith("b-") and t.get("revisionName")
)
serving = [i for i, (_, _, percent) in enumerate(tagged) if percent]
if not serving or serving[-1] == 0:
    sys.exit("no earlier release to roll back to")
print(tagged[serving[-1] - 1][1])
')"
fi

# The api first: nothing is published afterwards that the older subscribers do not know.
for target in api access emails; do
  gcloud run services update-traffic "$prefix-$target" --region="$region" --to-tags="$tag=100"
done
echo "rolled back to $tag; the next build releases forward again"
