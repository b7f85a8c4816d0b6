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
#   (unshare/nsenter come from util-linux, which is essential.)
# Not needed: krb5-user (tests use NTLM over SMB and simple binds over LDAP), bind9 (DNS disabled).
set -euo pipefail

PKGS=(samba samba-ad-dc samba-ad-provision samba-dsdb-modules samba-vfs-modules winbind
      smbclient ldb-tools attr acl openssl)

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
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-samba.sh: already installed: ${PKGS[*]}"
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
