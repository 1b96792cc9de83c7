#!/usr/bin/env bash
# Install Debian's chromium for the browser tests of the audit page (idempotent).
# Only as root with apt-get; elsewhere the browser tests skip with a reason.
set -uo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "amber setup: installing chromium (apt-get) for the browser tests..." >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
    >/tmp/amber-chromium-install.log 2>&1 \
    || echo "amber setup: chromium could not be installed (see /tmp/amber-chromium-install.log)" >&2
fi
exit 0
