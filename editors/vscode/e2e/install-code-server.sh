#!/usr/bin/env bash
# Builds a real VS Code host for the end-to-end test: code-server 4.100.3 (VS Code 1.100.3,
# the last release that runs on Node 20) from the npm registry, into $CS_DIR (default:
# editors/vscode/e2e/.cache/code-server, gitignored) — nothing outside the repo but Debian
# packages. Takes ~7 minutes on 2 cores the first time; a later run finds the stamp and
# returns at once.
#
# Why by hand: code-server's postinstall downloads prebuilt binaries (node headers,
# ripgrep) from outside the package registries. Here the native modules are rebuilt
# against the local Node headers (/usr/include/node) and ripgrep comes from Debian.
# The install sequence follows the project's working notes for code-server 4.100.3.
set -euo pipefail
VERSION=4.100.3
HERE="$(cd "$(dirname "$0")" && pwd)"
CS_DIR="${CS_DIR:-$HERE/.cache/code-server}"
STAMP="$CS_DIR/.installed-$VERSION"

if [ -f "$STAMP" ]; then
  echo "code-server $VERSION already installed in $CS_DIR"
  exit 0
fi

need_apt=()
[ -e /usr/include/krb5.h ] || [ -e /usr/include/gssapi/gssapi.h ] || need_apt+=(libkrb5-dev)
command -v rg >/dev/null || need_apt+=(ripgrep)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
command -v g++ >/dev/null || need_apt+=(g++ make)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

rm -rf "$CS_DIR"
mkdir -p "$CS_DIR"
cd "$CS_DIR"
npm pack --silent "code-server@$VERSION" >/dev/null
tar xzf "code-server-$VERSION.tgz"
rm "code-server-$VERSION.tgz"
cd package
# Top-level dependencies; its postinstall fails here (it downloads) and is redone below.
npm install --omit=dev --no-audit --no-fund --loglevel=error >/dev/null 2>&1 || true
cd lib/vscode
npm_config_nodedir=/usr npm install --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
npm_config_nodedir=/usr npm_config_yes=true npm rebuild --unsafe-perm --loglevel=error \
  node-pty @vscode/spdlog @parcel/watcher kerberos native-watchdog @vscode/deviceid >/dev/null
mkdir -p node_modules/@vscode/ripgrep/bin
ln -sf "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
ln -sfn node_modules node_modules.asar     # what postinstall.sh's symlink_asar does
(cd bin/remote-cli && ln -sf code-linux.sh code-server)
(cd bin/helpers && ln -sf browser-linux.sh browser.sh)
(cd extensions && npm install --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
cd "$CS_DIR/package"
XDG_CONFIG_HOME="$CS_DIR/.config" XDG_DATA_HOME="$CS_DIR/.data" node out/node/entry.js --version
touch "$STAMP"
