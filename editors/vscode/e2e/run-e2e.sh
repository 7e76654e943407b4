#!/usr/bin/env bash
# `make e2e`: the .vsix in a real VS Code. Installs code-server 4.100.3 (npm registry) and
# Debian's chromium if missing, installs editors/vscode/*.vsix into a fresh profile, opens
# a workspace with a malformed dataset, a diverging HF run and a run whose log holds bare
# NaN, and checks squiggles, Problems rows (trainproof's only: no JSON-validator noise), the
# code lens, the status bar and the "Show run" webview (e2e.js); a chat dataset with the
# run's tokenizer folder (the trained-tokens map's hover and code lens) and a training
# script whose finding has a quick fix (applied from the Quick Fix menu). Then a second code-server
# with workspace trust on opens a hostile folder (modules that leave a marker file when
# imported, settings that aim at files) in an untrusted window: static diagnostics show,
# no marker appears (e2e.js --untrusted).
# Screenshots, result.json and the code-server log go to test-artifacts/vscode-e2e/
# (gitignored).
#
# The server runs with /usr/bin/python3 (Debian's, with no pygls installed) so the check
# proves the bundled copy works without a pip install. The token map's tokenizer folder is
# made by fixtures/tokenizers/make_chat_map_tokenizer.py run by that python with only the
# installed extension's bundled/libs on its path: the bundled tokenizers trains and
# writes it, and the server reads it with the same copy.
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
cp -r "$REPO/fixtures/hf_runs/nan_loss" "$WS/runs/"
# The token map: a chat dataset of three rows (14, 18 and 10 tokens with the tokenizer made
# below; the first two over the max length of 12, their responses cut), and the settings a
# project would keep beside it: the run's tokenizer folder, max length and loss.
cat > "$WS/data/chat.jsonl" <<'EOF'
{"messages": [{"role": "user", "content": "what is two plus two"}, {"role": "assistant", "content": "two plus two is four"}]}
{"messages": [{"role": "user", "content": "say hello to the cat"}, {"role": "assistant", "content": "hello cat, the cat sat on the mat"}]}
{"messages": [{"role": "user", "content": "what is two plus two"}, {"role": "assistant", "content": "four"}]}
EOF
mkdir -p "$WS/.vscode"
cat > "$WS/.vscode/settings.json" <<EOF
{
  "trainproof.tokenizer": "$WS/tokenizer",
  "trainproof.maxLen": 12,
  "trainproof.loss": "assistant-only"
}
EOF
# The quick fix: load_best_model_at_end with save_strategy "steps" and eval_strategy
# "epoch" (TP-SCRIPT-BEST-STRATEGY-MISMATCH, read with ast: no transformers needed).
cat > "$WS/train.py" <<'EOF'
from transformers import Trainer, TrainingArguments

args = TrainingArguments(
    output_dir="out",
    eval_strategy="epoch",
    save_strategy="steps",
    load_best_model_at_end=True,
)
trainer = Trainer(model=None, args=args)
trainer.train()
EOF

# The hostile folder for the untrusted window: each module writes a marker when imported.
HOSTILE="$WORK/hostile"
MARKERS="$WORK/markers"
mkdir -p "$HOSTILE/data" "$HOSTILE/runs" "$HOSTILE/.vscode" "$MARKERS" "$WORK/ud-untrusted/User"
for module in pygls/__init__.py lsprotocol/__init__.py cattrs/__init__.py trainproof_lsp/__init__.py \
    trainproof_lsp/__main__.py dataclasses.py json.py typing_extensions.py msgspec/__init__.py uuid.py; do
  mkdir -p "$(dirname "$HOSTILE/$module")"
  printf 'open(%s, "w").close()\n' "'$MARKERS/${module//\//.}'" > "$HOSTILE/$module"
done
cp "$REPO/tests/lsp_fixtures/malformed_line_6.jsonl" "$HOSTILE/data/train.jsonl"
cp -r "$REPO/fixtures/hf_runs/nan_loss" "$HOSTILE/runs/"
printf 'import json\nfrom transformers import Trainer\n' > "$HOSTILE/train.py"
printf '#!/bin/sh\ntouch %s\n' "'$MARKERS/fake-python'" > "$HOSTILE/fake-python"
chmod +x "$HOSTILE/fake-python"
# The workspace's own settings aim at files and interpreters: all restricted when untrusted.
cat > "$HOSTILE/.vscode/settings.json" <<EOF
{
  "trainproof.baseline": "--html=$MARKERS/baseline-setting",
  "trainproof.interpreter": ["$HOSTILE/fake-python"],
  "trainproof.checkEnvironment": true,
  "trainproof.python": "$HOSTILE/fake-python"
}
EOF

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
BUNDLED="$(find "$WORK/exts" -maxdepth 3 -type d -path '*/bundled/libs' | head -1)"
[ -n "$BUNDLED" ] || { echo "no bundled/libs in the installed extension" >&2; exit 1; }
echo "== the token map's tokenizer, made with the bundled tokenizers ($BUNDLED)"
PYTHONPATH="$BUNDLED" "$PYTHON" -S "$REPO/fixtures/tokenizers/make_chat_map_tokenizer.py" "$WS/tokenizer"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT="$(free_port)"
"${CS[@]}" --auth none --bind-addr "127.0.0.1:$PORT" --disable-telemetry --disable-update-check \
  --disable-workspace-trust --disable-getting-started-override "$WS" > "$ART/code-server.log" 2>&1 &
CS_PID=$!
CS2_PID=
cleanup() {
  kill "$CS_PID" 2>/dev/null || true
  wait "$CS_PID" 2>/dev/null || true
  if [ -n "$CS2_PID" ]; then
    kill "$CS2_PID" 2>/dev/null || true
    wait "$CS2_PID" 2>/dev/null || true
    mkdir -p "$ART/untrusted-logs"
    find "$WORK/ud-untrusted/logs" -name '*trainproof*' -exec cp {} "$ART/untrusted-logs/" \; 2>/dev/null || true
  fi
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

status=0
node "$HERE/e2e.js" "http://127.0.0.1:$PORT" "$WS" "$ART" || status=$?

# The untrusted window: workspace trust on and no startup prompt, so the folder stays
# untrusted (Restricted Mode); the same installed extension, a profile of its own.
cat > "$WORK/ud-untrusted/User/settings.json" <<EOF
{
  "security.workspace.trust.enabled": true,
  "security.workspace.trust.startupPrompt": "never",
  "security.workspace.trust.banner": "never",
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "extensions.autoUpdate": false,
  "extensions.autoCheckUpdates": false,
  "telemetry.telemetryLevel": "off",
  "editor.codeLens": true,
  "window.commandCenter": false
}
EOF
CS2=(node "$CS_DIR/package/out/node/entry.js" --extensions-dir "$WORK/exts" --user-data-dir "$WORK/ud-untrusted")
PORT2="$(free_port)"
"${CS2[@]}" --auth none --bind-addr "127.0.0.1:$PORT2" --disable-telemetry --disable-update-check \
  --disable-getting-started-override "$HOSTILE" > "$ART/code-server-untrusted.log" 2>&1 &
CS2_PID=$!
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$PORT2/healthz" >/dev/null 2>&1 && break
  kill -0 "$CS2_PID" 2>/dev/null || { cat "$ART/code-server-untrusted.log"; exit 1; }
  sleep 0.5
done
echo "== untrusted window on 127.0.0.1:$PORT2 (pid $CS2_PID): a hostile folder"
node "$HERE/e2e.js" "http://127.0.0.1:$PORT2" "$HOSTILE" "$ART" --untrusted "$MARKERS" || status=$?
exit $status
