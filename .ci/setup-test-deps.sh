#!/usr/bin/env bash
# System packages the integration tests need (Samba AD DC for the SMB/LDAP tests).
# Installed only when running as root; otherwise those tests skip with an explicit message.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = "0" ] && [ -x .ci/install-samba.sh ]; then
  bash .ci/install-samba.sh
fi
