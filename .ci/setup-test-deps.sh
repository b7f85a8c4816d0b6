#!/usr/bin/env bash
# System packages the integration tests need (Samba AD DC for the SMB/LDAP tests).
# Installed only when running as root; otherwise those tests skip with an explicit message.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = "0" ] && [ -x .ci/install-samba.sh ]; then
  bash .ci/install-samba.sh
fi
# systemd-analyze, for the unit's verify/security test (tests/integration/test_daemon.py; it skips
# with a message without it). Debian ships it in the `systemd` package.
if [ "$(id -u)" = "0" ] && ! command -v systemd-analyze >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends systemd
fi
# Other Debian packages the tests use; without them those tests skip with a message:
# - OCR of scanned PDF pages (Tesseract with French and English data), Word 97 .doc text (antiword),
#   and the DejaVu font the scan builders draw French text with (tests/support/office_builders.py);
# - Chromium, for the Open WebUI end-to-end test's screenshots and rendering checks
#   (tests/integration/test_openwebui.py; it installs Open WebUI itself, in a cached venv);
# - rsyslog, the syslog daemon the audit witness tests start on a socket of their own
#   (tests/support/rsyslog.py; never the system's).
EXTRA_PKGS="tesseract-ocr tesseract-ocr-fra tesseract-ocr-eng antiword fonts-dejavu-core chromium rsyslog"
if [ "$(id -u)" = "0" ] && ! dpkg -s $EXTRA_PKGS >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends $EXTRA_PKGS
fi
