#!/usr/bin/env bash
# Installs pinned versions of the three agent CLIs Warden drives, under the Warden home's tools
# folder ($WARDEN_HOME/tools, default ~/.warden/tools), where `warden run --agent …` finds them:
#
#   aider        PyPI aider-chat               -> tools/aider-venv/bin/aider
#   codex        npm  @openai/codex            -> tools/npm/node_modules/.bin/codex
#   claude       npm  @anthropic-ai/claude-code -> tools/npm/node_modules/.bin/claude
#
# Idempotent: what is already installed at the pinned version is skipped. Needs python3
# (3.10 to 3.12; on Debian the python3-venv package, installed here with apt-get when run as
# root and missing) and Node.js with npm. Only the package registries are used.
#
# Usage: scripts/install-agent-clis.sh [aider] [codex] [claude]   (default: all three)
#   PYTHON=python3.11            the interpreter for aider's venv (default: python3)
#   WARDEN_TOOLS_DIR=/some/dir   install there instead of the Warden home's tools folder
set -euo pipefail

AIDER_VERSION=0.86.2
CODEX_VERSION=0.169.0
CLAUDE_VERSION=2.1.331

TOOLS="${WARDEN_TOOLS_DIR:-${WARDEN_HOME:-$HOME/.warden}/tools}"
VENV="$TOOLS/aider-venv"
NPM_PREFIX="$TOOLS/npm"
PYTHON="${PYTHON:-python3}"

log() { printf '[install-agent-clis] %s\n' "$*"; }
die() { printf '[install-agent-clis] ERROR: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
size_of() { du -sh "$1" 2>/dev/null | cut -f1; }

want_aider=0 want_codex=0 want_claude=0
if [ $# -eq 0 ]; then set -- aider codex claude; fi
for arg in "$@"; do
  case "$arg" in
    aider) want_aider=1 ;;
    codex) want_codex=1 ;;
    claude) want_claude=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) die "unknown CLI '$arg' (expected aider, codex or claude)" ;;
  esac
done

mkdir -p "$TOOLS" || die "cannot create $TOOLS"
SUMMARY=()

# ---------------------------------------------------------------------------------------------
# aider: a venv with aider-chat

aider_installed_version() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("aider-chat"))' 2>/dev/null
}

# Debian's python3 ships venv without ensurepip (that is the python3-venv package): `python3 -m
# venv` then fails with "ensurepip is not available".
ensure_venv_support() {
  if "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    local minor
    minor="$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    log "aider: $PYTHON has no venv/ensurepip; installing python3-venv (python$minor-venv) with apt-get"
    local t0; t0="$(now)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    apt-get install -y -qq python3-venv || apt-get install -y -qq "python$minor-venv" \
      || die "apt-get could not install python3-venv"
    log "aider: python3-venv installed in $(elapsed "$t0")"
    "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1 \
      || die "$PYTHON still has no ensurepip after installing python3-venv (is $PYTHON Debian's python3? set PYTHON=/usr/bin/python3)"
  else
    die "$PYTHON cannot create virtual environments (no ensurepip): install python3-venv (apt-get install python3-venv) and run again"
  fi
}

install_aider() {
  local have
  have="$(aider_installed_version || true)"
  if [ "$have" = "$AIDER_VERSION" ] && "$VENV/bin/aider" --version >/dev/null 2>&1; then
    log "aider: aider-chat $AIDER_VERSION already installed in $VENV (skipped)"
    SUMMARY+=("aider   $AIDER_VERSION  skipped (installed)  $(size_of "$VENV")  $VENV/bin/aider")
    return 0
  fi
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found: aider needs Python 3.10 to 3.12"
  "$PYTHON" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 12) else 1)' \
    || die "aider-chat $AIDER_VERSION needs Python 3.10 to 3.12; $PYTHON is $("$PYTHON" --version 2>&1) (set PYTHON=...)"
  ensure_venv_support

  local t0; t0="$(now)"
  if [ -n "$have" ]; then log "aider: found aider-chat $have in $VENV; installing $AIDER_VERSION over it"; fi
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pip' >/dev/null 2>&1; then
    log "aider: creating venv $VENV with $("$PYTHON" --version 2>&1)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV" || die "python3 -m venv $VENV failed"
  fi
  log "aider: pip install aider-chat==$AIDER_VERSION (about a minute)"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input --quiet "aider-chat==$AIDER_VERSION" \
    || die "pip install aider-chat==$AIDER_VERSION failed (see pip's output above)"
  have="$(aider_installed_version || true)"
  [ "$have" = "$AIDER_VERSION" ] || die "after pip install, aider-chat is '${have:-missing}', not $AIDER_VERSION"
  "$VENV/bin/aider" --version >/dev/null 2>&1 || die "$VENV/bin/aider --version failed"
  local took; took="$(elapsed "$t0")"
  log "aider: installed aider-chat $AIDER_VERSION in $took ($(size_of "$VENV"))"
  SUMMARY+=("aider   $AIDER_VERSION  installed in $took  $(size_of "$VENV")  $VENV/bin/aider")
}

# ---------------------------------------------------------------------------------------------
# codex and claude: one npm prefix

npm_installed_version() { # package name
  local manifest="$NPM_PREFIX/node_modules/$1/package.json"
  [ -f "$manifest" ] || return 1
  node -e 'process.stdout.write(String(require(process.argv[1]).version))' "$manifest" 2>/dev/null
}

install_npm_clis() {
  command -v npm >/dev/null 2>&1 || die "npm not found: codex and claude install with npm (Node.js 20 or later)"
  local specs=() names=()
  if [ "$want_codex" -eq 1 ]; then
    if [ "$(npm_installed_version @openai/codex || true)" = "$CODEX_VERSION" ] && "$NPM_PREFIX/node_modules/.bin/codex" --version >/dev/null 2>&1; then
      log "codex: @openai/codex $CODEX_VERSION already installed (skipped)"
      SUMMARY+=("codex   $CODEX_VERSION  skipped (installed)  $(size_of "$NPM_PREFIX/node_modules/@openai")  $NPM_PREFIX/node_modules/.bin/codex")
    else
      specs+=("@openai/codex@$CODEX_VERSION"); names+=(codex)
    fi
  fi
  if [ "$want_claude" -eq 1 ]; then
    if [ "$(npm_installed_version @anthropic-ai/claude-code || true)" = "$CLAUDE_VERSION" ] && "$NPM_PREFIX/node_modules/.bin/claude" --version >/dev/null 2>&1; then
      log "claude: @anthropic-ai/claude-code $CLAUDE_VERSION already installed (skipped)"
      SUMMARY+=("claude  $CLAUDE_VERSION skipped (installed)  $(size_of "$NPM_PREFIX/node_modules/@anthropic-ai")  $NPM_PREFIX/node_modules/.bin/claude")
    else
      specs+=("@anthropic-ai/claude-code@$CLAUDE_VERSION"); names+=(claude)
    fi
  fi
  [ ${#specs[@]} -gt 0 ] || return 0

  # Both are named on every install so that installing one never drops the other from the
  # prefix's package.json (npm prunes what package.json does not list).
  local all=()
  [ "$want_codex" -eq 1 ] || [ -z "$(npm_installed_version @openai/codex || true)" ] || all+=("@openai/codex@$CODEX_VERSION")
  [ "$want_claude" -eq 1 ] || [ -z "$(npm_installed_version @anthropic-ai/claude-code || true)" ] || all+=("@anthropic-ai/claude-code@$CLAUDE_VERSION")
  [ "$want_codex" -eq 0 ] || all+=("@openai/codex@$CODEX_VERSION")
  [ "$want_claude" -eq 0 ] || all+=("@anthropic-ai/claude-code@$CLAUDE_VERSION")

  local t0; t0="$(now)"
  log "${names[*]}: npm install --prefix $NPM_PREFIX ${all[*]}"
  mkdir -p "$NPM_PREFIX"
  # --prefix also moves npm's global config to <prefix>/etc/npmrc, so the machine's own (a
  # registry mirror, a cafile) would be ignored: name it explicitly.
  local config=() global
  global="$(cd / && npm config get globalconfig 2>/dev/null || true)"
  if [ -n "$global" ] && [ -f "$global" ]; then config=(--globalconfig "$global"); fi
  npm install --prefix "$NPM_PREFIX" "${config[@]}" --save-exact --no-audit --no-fund --loglevel=error "${all[@]}" \
    || die "npm install ${all[*]} failed (see npm's output above)"
  local took; took="$(elapsed "$t0")"
  for name in "${names[@]}"; do
    local pkg version bin dir
    case "$name" in
      codex) pkg=@openai/codex; version="$CODEX_VERSION"; dir="$NPM_PREFIX/node_modules/@openai" ;;
      claude) pkg=@anthropic-ai/claude-code; version="$CLAUDE_VERSION"; dir="$NPM_PREFIX/node_modules/@anthropic-ai" ;;
    esac
    bin="$NPM_PREFIX/node_modules/.bin/$name"
    [ "$(npm_installed_version "$pkg" || true)" = "$version" ] || die "after npm install, $pkg is not at $version"
    "$bin" --version >/dev/null 2>&1 || die "$bin --version failed after install"
    log "$name: installed $pkg $version ($(size_of "$dir"))"
    SUMMARY+=("$(printf '%-7s' "$name") $version  installed in $took (npm, ${names[*]})  $(size_of "$dir")  $bin")
  done
}

[ "$want_aider" -eq 0 ] || install_aider
[ "$want_codex" -eq 0 ] && [ "$want_claude" -eq 0 ] || install_npm_clis

log "done; tools under $TOOLS:"
for line in "${SUMMARY[@]}"; do log "  $line"; done
