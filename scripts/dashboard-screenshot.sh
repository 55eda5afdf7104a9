#!/usr/bin/env bash
# Regenerates docs/workshop-dashboard.png: the class server's dashboard for a seeded workshop
# morning, taken by headless chromium (TestDashboardInBrowser in internal/workshop/server).
# Needs chromium on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v chromium >/dev/null || { echo "dashboard-screenshot: chromium is not on PATH" >&2; exit 1; }
cd "$root"
MGPU_WORKSHOP_SCREENSHOT="$root/docs/workshop-dashboard.png" \
  go test -count=1 -run '^TestDashboardInBrowser$' ./internal/workshop/server/ >/dev/null
echo "wrote docs/workshop-dashboard.png" >&2
