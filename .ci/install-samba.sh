#!/usr/bin/env bash
# Install, from Debian packages, what the integration tests need to run a real Samba Active
# Directory DC on loopback (tests/support/samba.py). Idempotent; run as root (.ci/run does).
#
# Packages (Debian 12 "bookworm", Samba 4.17):
#   samba samba-ad-dc samba-ad-provision samba-dsdb-modules samba-vfs-modules winbind
#     -> the `samba` AD DC binary, `samba-tool domain provision` and its setup data, the DSDB
#        ldb modules, and the acl_xattr VFS module (NT ACLs kept in security.NTACL xattrs);
#        the AD DC's smbd child needs winbindd for id mapping.
#   smbclient   -> `smbcacls` (apply acl.json, --propagate-inheritance) and `smbclient`.
#   ldb-tools   -> ldbsearch/ldbmodify on the provisioned sam.ldb (debugging aid).
#   attr acl    -> getfattr/setfattr, getfacl (check xattr support, debugging aid).
#   openssl     -> the fixture's own CA and LDAPS certificate (SAN IP:127.0.0.1).
#   libkrb5-dev gcc -> build the `gssapi` and `krb5` Python packages (the `kerberos` extra, no
#                  Linux wheels): SMB over Kerberos against the DC's KDC in
#                  tests/integration/test_smb_connector.py. Once they are here, the extra is
#                  installed into the repository's venv ($VENV, default .venv) if it exists.
#   krb5-user   -> kinit/klist (debugging aid; the test gets its ticket through gssapi).
#   (unshare/nsenter come from util-linux, which is essential.)
# Not needed: bind9 (DNS disabled). No /etc/krb5.conf is written (krb5-config is a recommend):
# the Kerberos test points KRB5_CONFIG at a file of its own.
set -euo pipefail

PKGS=(samba samba-ad-dc samba-ad-provision samba-dsdb-modules samba-vfs-modules winbind
      smbclient ldb-tools attr acl openssl libkrb5-dev gcc krb5-user)

if [ "$(id -u)" -ne 0 ]; then
    echo "install-samba.sh: must run as root" >&2
    exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
# The `kerberos` extra (gssapi, krb5) builds against libkrb5-dev: installed into the venv once
# the Debian packages are there (pip is a no-op when it is already satisfied).
install_kerberos_extra() {
    local repo venv
    repo="$(cd "$(dirname "$0")/.." && pwd)"
    venv="${VENV:-.venv}"
    case "$venv" in /*) ;; *) venv="$repo/$venv" ;; esac
    if [ -x "$venv/bin/pip" ]; then
        "$venv/bin/pip" install -q -e "$repo[kerberos]"
        echo "install-samba.sh: kerberos extra installed in $venv"
    fi
}

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-samba.sh: already installed: ${PKGS[*]}"
    install_kerberos_extra
    exit 0
fi

# Never let the package scripts start the system's smbd/nmbd/samba daemons: they would bind
# 445/389 on every interface with /etc/samba/smb.conf. The tests run their own DC on 127.0.0.1.
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    created_policy=1
fi
cleanup() { if [ "$created_policy" -eq 1 ]; then rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${PKGS[@]}"
echo "install-samba.sh: installed ${missing[*]}"
samba --version
install_kerberos_extra
