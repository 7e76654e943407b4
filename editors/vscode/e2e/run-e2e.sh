#!/usr/bin/env bash
# `make e2e`: the .vsix in a real VS Code. Installs code-server 4.100.3 (npm registry) and
# Debian's chromium if missing, installs editors/vscode/*.vsix into a fresh profile, opens
# a workspace with a malformed dataset and a diverging HF run, and checks squiggles,
# Problems rows, the code lens, the status bar and the "Show run" webview (e2e.js).
# Screenshots, result.json and the code-server log go to test-artifacts/vscode-e2e/
# (gitignored).
#
# The server runs with /usr/bin/python3 (Debian's, with no pygls installed) so the check
# proves the bundled copy works without a pip install.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
EXT_DIR="$(dirname "$HERE")"
REPO="$(cd "$EXT_DIR/../.." && pwd)"
ART="$REPO/test-artifacts/vscode-e2e"
CS_DIR="${CS_DIR:-$HERE/.cache/code-server}"

VSIX="$(ls -t "$EXT_DIR"/*.vsix 2>/dev/null | head -1 || true)"
[ -n "$VSIX" ] || { echo "no .vsix in $EXT_DIR: run make vsix first" >&2; exit 2; }

"$HERE/install-code-server.sh"
(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)

rm -rf "$ART"
mkdir -p "$ART"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/trainproof-e2e.XXXXXX")"
WS="$WORK/workspace"
mkdir -p "$WS/data" "$WS/runs" "$WORK/ud/User" "$WORK/exts" "$WORK/xdg-config" "$WORK/xdg-data"
cp "$REPO/tests/lsp_fixtures/malformed_line_6.jsonl" "$WS/data/train.jsonl"
cp -r "$REPO/fixtures/hf_runs/lr_hot_diverges" "$WS/runs/"

PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"
cat > "$WORK/ud/User/settings.json" <<EOF
{
  "trainproof.interpreter": ["$PYTHON"],
  "security.workspace.trust.enabled": false,
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.welcomePage.walkthroughs.openOnInstall": false,
  "extensions.autoUpdate": false,
  "extensions.autoCheckUpdates": false,
  "telemetry.telemetryLevel": "off",
  "editor.codeLens": true,
  "window.commandCenter": false
}
EOF

CS=(node "$CS_DIR/package/out/node/entry.js" --extensions-dir "$WORK/exts" --user-data-dir "$WORK/ud")
export XDG_CONFIG_HOME="$WORK/xdg-config" XDG_DATA_HOME="$WORK/xdg-data"
echo "== installing $(basename "$VSIX") into code-server"
"${CS[@]}" --install-extension "$VSIX" | tail -2

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"${CS[@]}" --auth none --bind-addr "127.0.0.1:$PORT" --disable-telemetry --disable-update-check \
  --disable-workspace-trust --disable-getting-started-override "$WS" > "$ART/code-server.log" 2>&1 &
CS_PID=$!
cleanup() {
  kill "$CS_PID" 2>/dev/null || true
  wait "$CS_PID" 2>/dev/null || true
  # The extension host's log (with the trainproof output channel) is worth keeping.
  find "$WORK/ud/logs" -name '*trainproof*' -exec cp {} "$ART/" \; 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  kill -0 "$CS_PID" 2>/dev/null || { cat "$ART/code-server.log"; exit 1; }
  sleep 0.5
done
echo "== code-server $(grep -o 'Code [0-9.]*' "$ART/code-server.log" | head -1 || true) on 127.0.0.1:$PORT (pid $CS_PID)"

node "$HERE/e2e.js" "http://127.0.0.1:$PORT" "$WS" "$ART"
