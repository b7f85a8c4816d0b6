"""A real Samba Active Directory domain controller on 127.0.0.1, for the integration tests.

:class:`SambaDC` provisions the domain ``AXONIX`` (realm ``AXONIX.TEST``) in a directory of its own
(never ``/etc/samba`` nor ``/var/lib/samba``), creates the corpus users and groups of
``examples/axonix/directory.json`` (with the nesting), a share ``Partage`` holding the corpus
``share/`` tree written over SMB, and applies ``examples/axonix/acl.json`` with ``smbcacls``
(inheritance, protected folders and the explicit deny included). It serves LDAP (389), LDAPS (636,
certificate signed by a CA of its own, see :attr:`SambaDC.tls_ca_file`), Kerberos (88) and SMB2/3
(445), bound to 127.0.0.1 only.

How it runs (Samba 4.17, Debian 12; packages from ``.ci/install-samba.sh``):

- ``samba-tool domain provision --targetdir=<root> --dns-backend=NONE`` (about 4 s), then our own
  ``smb.conf`` (:func:`_smb_conf`): every directory under ``<root>``, DNS/NetBIOS/print services off,
  ``ldap server require strong auth = no`` so that a simple bind over plain ldap:// works (LDAPS and
  StartTLS work too), and ``[Partage]`` with ``vfs objects = acl_xattr`` (the NT ACL is kept in the
  ``security.NTACL`` xattr), ``acl_xattr:ignore system acls = yes`` (the NT ACL alone decides) and
  ``acl flag inherited canonicalization = no`` (a plain ``smbcacls -a`` keeps the auto-inherited
  control bit, so files created later get ACEs flagged INHERITED) and ``msdfs root = yes`` (a test
  makes a DFS link with ``ln -s 'msdfs:<server>\\<share>' <share_path>/<link>``).
- The ``samba`` master runs in a private mount namespace where ``<root>/run`` is bind-mounted on
  ``/run/samba``: the winbind client library only looks for winbindd's socket in the compiled-in
  ``/run/samba/winbindd`` (the ``WINBINDD_SOCKET_DIR`` variable is honoured only under nss_wrapper),
  and smbd needs winbindd to map domain SIDs to uids. Nothing is mounted in the host namespace.
- ``smbd`` is *not* a child of ``samba`` (``server services`` lacks ``s3fs``): when the smbd that
  ``samba`` spawns dies, ``samba`` terminates the whole DC. Ours is started with ``nsenter`` into
  samba's mount namespace, in a process group of its own, so :meth:`SambaDC.stop_smbd` /
  :meth:`SambaDC.start_smbd` cut and restore SMB alone (LDAP stays up).

Everything is addressed by SID (read back from LDAP: they differ from ``directory.json``'s).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import ldap3
import pytest
import smbclient
from ldap3.core.exceptions import LDAPException
from ldap3.protocol.formatters.formatters import format_sid

from ancre.connectors.smb import read_security_descriptor

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "examples" / "axonix"

HOST = "127.0.0.1"
DOMAIN = "AXONIX"
REALM = "AXONIX.TEST"
DNS_DOMAIN = "axonix.test"
BASE_DN = "DC=axonix,DC=test"
NETBIOS_NAME = "DC1"
SHARE = "Partage"
SCRATCH_SHARES = ("Essais", "EssaisA", "EssaisB")
"""Three shares over one scratch folder (``SambaDC.scratch_path``), free for tests that write raw
descriptors and share permissions (the ACL differential test); ``Partage`` stays the corpus."""
ADMIN_USER = "Administrator"
ADMIN_PASSWORD = "Ancre-Admin-2026!"
USER_PASSWORD = "Ancre-User-2026!"

SMB_PORT = 445
LDAP_PORT = 389
LDAPS_PORT = 636
KDC_PORT = 88
#: TCP ports the DC binds on 127.0.0.1 (a foreign listener on one of them makes start() fail).
DC_PORTS = (KDC_PORT, 135, LDAP_PORT, SMB_PORT, 464, LDAPS_PORT, 3268, 3269)

#: acl.json right names -> NT access masks ([MS-DTYP] 2.4.3; the masks Windows' "Read & execute"
#: and "Full control" write, and smbcacls' READ / FULL).
RIGHTS: Mapping[str, int] = {"READ": 0x001200A9, "CHANGE": 0x001301BF, "FULL": 0x001F01FF}

#: Well-known SIDs ([MS-DTYP] 2.4.2.4) by the names acl.json and directory.json use.
WELL_KNOWN: Mapping[str, str] = {
    "Everyone": "S-1-1-0",
    "Authenticated Users": "S-1-5-11",
    "Administrators": "S-1-5-32-544",
}

# Security information flags of an SMB2 QUERY_INFO for a security descriptor ([MS-SMB2] 2.2.37).
OWNER_SECURITY_INFORMATION = 0x1
GROUP_SECURITY_INFORMATION = 0x2
DACL_SECURITY_INFORMATION = 0x4

_SAMBA_BINARIES = ("samba", "samba-tool", "smbd", "smbcacls", "smbclient", "sharesec", "unshare", "nsenter")
_BUILTIN_DNS = frozenset({"Remote Desktop Users", "Users", "Administrators", "Pre-Windows 2000 Compatible Access"})
_STARTUP_TIMEOUT = 45.0  # seconds, for LDAP and SMB to answer after the processes start


class SambaFixtureError(RuntimeError):
    """The test domain controller could not be set up or driven (the message says which step)."""


def missing_samba_reason() -> str | None:
    """Why a real Samba DC cannot run here (not root, binaries missing), or ``None`` if it can."""
    if os.geteuid() != 0:
        return "the Samba AD DC fixture needs root (samba binds 389/445 and stores NT ACLs in xattrs)"
    missing = [b for b in _SAMBA_BINARIES if shutil.which(b) is None]
    if missing:
        return f"Samba is not installed (missing {', '.join(missing)}): run .ci/install-samba.sh as root"
    return None


def read_sd_raw(
    unc_path: str,
    *,
    username: str,
    password: str,
    port: int = SMB_PORT,
    security_information: int = OWNER_SECURITY_INFORMATION
    | GROUP_SECURITY_INFORMATION
    | DACL_SECURITY_INFORMATION,
) -> bytes:
    """Read a file's or folder's security descriptor over SMB2, as the raw self-relative bytes.

    The connector's own reader (:func:`ancre.connectors.smb.read_security_descriptor`): one
    compound request through smbprotocol's ``smbclient`` layer: CREATE (desired access
    READ_CONTROL, any share mode, neither directory nor non-directory option, so it opens both),
    QUERY_INFO with InfoType SMB2_0_INFO_SECURITY and ``security_information`` as
    AdditionalInformation ([MS-SMB2] 2.2.37; OWNER|GROUP|DACL by default: the SACL would need
    ACCESS_SYSTEM_SECURITY), CLOSE. The answer is a SECURITY_DESCRIPTOR in self-relative form
    ([MS-DTYP] 2.4.6), returned unparsed (``smbprotocol.security_descriptor.SMB2CreateSDBuffer``
    parses it). Output buffer: 65536 bytes, the SMB2 single-credit payload and the largest ACL the
    16-bit AclSize allows.

    ``unc_path`` is ``\\\\server\\share\\dir\\file``; the session (NTLM, signed) is cached by
    smbclient's connection pool. Raises ``smbprotocol.exceptions.SMBOSError`` (e.g. ACCESS_DENIED
    when READ_CONTROL is refused, OBJECT_NAME_NOT_FOUND) or ``SMBException`` on connection errors.
    """
    return read_security_descriptor(
        unc_path, username=username, password=password, port=port, security_information=security_information
    )


def _run(cmd: list[str], *, what: str, timeout: float = 60.0, cwd: Path | None = None) -> str:
    """Run ``cmd``; return its stdout. Raises :class:`SambaFixtureError` with its output on failure."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        raise SambaFixtureError(f"{what}: timed out after {timeout:.0f} s: {' '.join(cmd)}") from exc
    if done.returncode != 0:
        raise SambaFixtureError(
            f"{what}: exit {done.returncode}: {' '.join(cmd)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return done.stdout


@contextlib.contextmanager
def _service_umask() -> Iterator[None]:
    """umask 022 while the DC's folders are made and its servers start: an ancre ``Runtime``
    built earlier in the same test process made the umask 077 (ancre's files are private), which
    would leave the share's folders unreadable to the users smbd impersonates."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _port_open(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _runs_from(pid: int, root: Path) -> bool:
    """Whether process ``pid`` is alive and ours: its working directory (samba keeps ``root``) or its
    command line (smbd and winbindd chdir to / but name ``<root>/etc/smb.conf``) lies under ``root``."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return cwd.startswith(str(root)) or str(root) + "/" in cmdline


def _smb_conf(root: Path) -> str:
    """The DC's smb.conf: all state under ``root``, loopback only, share ``Partage`` with NT ACLs."""
    return f"""# written by tests/support/samba.py
[global]
	netbios name = {NETBIOS_NAME}
	workgroup = {DOMAIN}
	realm = {REALM}
	server role = active directory domain controller
	# no s3fs: smbd runs on its own (SambaDC.start_smbd); no dns, nbt, dnsupdate, ntp_signd, kcc, drepl
	server services = rpc, ldap, cldap, kdc, winbindd
	interfaces = {HOST}
	bind interfaces only = yes
	smb ports = {SMB_PORT}
	disable netbios = yes
	prefork children = 2
	ldap server require strong auth = no
	tls enabled = yes
	tls keyfile = {root}/tls/key.pem
	tls certfile = {root}/tls/cert.pem
	tls cafile = {root}/tls/ca.pem
	private dir = {root}/private
	state directory = {root}/state
	lock directory = {root}/lock
	cache directory = {root}/cache
	binddns dir = {root}/bind-dns
	pid directory = {root}/run
	ncalrpc dir = {root}/run/ncalrpc
	ntp signd socket directory = {root}/run/ntp_signd
	usershare path = {root}/usershares
	smb passwd file = {root}/private/smbpasswd
	log file = {root}/log/log.%m
	max log size = 0
	log level = 1
	panic action =
	load printers = no
	printcap name = /dev/null
	disable spoolss = yes

[sysvol]
	path = {root}/state/sysvol
	read only = no

[netlogon]
	path = {root}/state/sysvol/{DNS_DOMAIN}/scripts
	read only = no

[{SHARE}]
	path = {root}/share
	read only = no
	# a DFS root: msdfs links (symlinks to "msdfs:server\\share") answer with referrals
	msdfs root = yes
	vfs objects = acl_xattr
	acl_xattr:ignore system acls = yes
	acl flag inherited canonicalization = no
{"".join(_scratch_share(root, name) for name in SCRATCH_SHARES)}"""


def _scratch_share(root: Path, name: str) -> str:
    """One of the shares over ``<root>/essais`` (the differential ACL test's tree): the same
    folder, each share with share permissions of its own (:meth:`SambaDC.sharesec`)."""
    return f"""
[{name}]
	path = {root}/essais
	read only = no
	vfs objects = acl_xattr
	acl_xattr:ignore system acls = yes
	acl flag inherited canonicalization = no
"""


def _client_conf(root: Path) -> str:
    """smb.conf for smbclient/smbcacls: NTLM only, client state kept apart from the DC's."""
    return f"""[global]
	workgroup = {DOMAIN}
	realm = {REALM}
	client use kerberos = off
	lock directory = {root}/client
	state directory = {root}/client
	cache directory = {root}/client
	private dir = {root}/client
	log file = {root}/log/client.log
"""


class SambaDC:
    """A running Samba AD DC for domain AXONIX on 127.0.0.1, with the corpus share and directory.

    Use as a context manager (``with SambaDC() as dc:``) or ``start()`` / ``close()``; the pytest
    fixture :func:`samba_dc` shares one per test session. Needs root and Samba (see
    :func:`missing_samba_reason`); ``start()`` raises :class:`SambaFixtureError` on any failure
    (a foreign listener on a DC port included) after cleaning up what it started.

    ``root`` (default ``$ANCRE_SAMBA_DIR`` or ``<tmp>/ancre-samba-dc``) must hold user and security
    xattrs (ext4, xfs, btrfs do). A previous run's leftovers there are killed (by the pids recorded
    under ``root``, checked against their working directory) and removed first.
    """

    host = HOST
    smb_port = SMB_PORT
    ldap_port = LDAP_PORT
    ldaps_port = LDAPS_PORT
    domain = DOMAIN
    realm = REALM
    base_dn = BASE_DN
    share = SHARE
    admin_user = ADMIN_USER
    admin_password = ADMIN_PASSWORD
    user_password = USER_PASSWORD

    def __init__(self, root: Path | str | None = None, corpus: Path = CORPUS) -> None:
        base = root or os.environ.get("ANCRE_SAMBA_DIR") or Path(tempfile.gettempdir()) / "ancre-samba-dc"
        self.root = Path(base).resolve()
        self.corpus = corpus
        self._mnt_ns: str | None = None
        """The mount namespace samba runs in (``mnt:[inode]``): every process the DC starts —
        smbd through ``nsenter``, samba-dcerpcd and its rpcd_* workers, which leave smbd's session
        and process group — lives in it, and :meth:`close` ends them all."""
        self._samba: subprocess.Popen[bytes] | None = None
        self._smbd: subprocess.Popen[bytes] | None = None
        self._sids: dict[str, str] = {}
        self._upns: dict[str, str] = {}
        self.timings: dict[str, float] = {}
        """Seconds spent per start-up step (provision, directory, start, share), for reports."""

    # ---------------------------------------------------------------- paths and names

    @property
    def smb_conf(self) -> Path:
        """The DC's smb.conf (pass it with ``-s`` to Samba's own tools)."""
        return self.root / "etc" / "smb.conf"

    @property
    def share_path(self) -> Path:
        """Local filesystem path of the share ``Partage`` (its files carry ``security.NTACL``)."""
        return self.root / "share"

    @property
    def scratch_path(self) -> Path:
        """Local filesystem path of the folder behind :data:`SCRATCH_SHARES`."""
        return self.root / "essais"

    @property
    def unc_root(self) -> str:
        """``\\\\127.0.0.1\\Partage``: the share's UNC root, as smbprotocol's smbclient takes it."""
        return f"\\\\{self.host}\\{self.share}"

    @property
    def tls_ca_file(self) -> Path:
        """PEM CA that signed the LDAPS/StartTLS certificate (SAN: IP:127.0.0.1 and
        dc1.axonix.test, not localhost: reached as ``localhost`` it names another host)."""
        return self.root / "tls" / "ca.pem"

    @property
    def admin_principal(self) -> str:
        """``AXONIX\\Administrator``: the admin account in down-level form (SMB, NTLM)."""
        return f"{self.domain}\\{self.admin_user}"

    @property
    def admin_bind_dn(self) -> str:
        """The admin account's DN, for an LDAP simple bind."""
        return f"CN={self.admin_user},CN=Users,{self.base_dn}"

    @property
    def sids(self) -> Mapping[str, str]:
        """sAMAccountName -> SID string of every AD user and group (corpus ones included, builtin
        groups as ``S-1-5-32-*``), plus Everyone and Authenticated Users."""
        return dict(self._sids)

    @property
    def domain_sid(self) -> str:
        """The domain SID (``S-1-5-21-a-b-c``), new at each provisioning."""
        return self.sid_of("Domain Users").rsplit("-", 1)[0]

    def sid_of(self, name: str) -> str:
        """SID string of a corpus user/group (``chloe``, ``GG_RH``), ``Domain Users`` or a well-known
        name (``Everyone``, ``Authenticated Users``, ``Administrators``). Raises ``KeyError``."""
        try:
            return self._sids[name]
        except KeyError:
            raise KeyError(f"no SID known for {name!r}") from None

    def user_dn(self, name: str) -> str:
        """DN of a corpus user or group (all live in CN=Users)."""
        return f"CN={name},CN=Users,{self.base_dn}"

    # ---------------------------------------------------------------- lifecycle

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> SambaDC:
        """Provision, start samba and smbd, wait for LDAP and SMB, build directory and share.

        Takes about 10-20 s. Raises :class:`SambaFixtureError` (after :meth:`close`) on failure.
        """
        reason = missing_samba_reason()
        if reason:
            raise SambaFixtureError(reason)
        try:
            with _service_umask():
                self._clean_leftovers()
                self._prepare_root()
                self._timed("provision", self._provision)
                self._timed("directory", self._create_directory)
                self._timed("start", self._start_servers)
                self._timed("share", self._build_share)
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)
        return self

    def close(self) -> None:
        """Stop smbd and samba (TERM, then KILL of their process groups), then every other process
        the DC started (:meth:`processes`: samba-dcerpcd and its rpcd_* workers, which leave smbd's
        session and process group, were orphaned before), and remove ``root``. Idempotent."""
        atexit.unregister(self.close)
        self._stop_process(self._smbd)
        self._smbd = None
        self._stop_process(self._samba)
        self._samba = None
        _end_processes(self.processes)
        self._mnt_ns = None
        shutil.rmtree(self.root, ignore_errors=True)
        smbclient.reset_connection_cache(fail_on_error=False)

    def processes(self) -> list[int]:
        """The pids of every process in the DC's mount namespace — exactly the processes it
        started and their descendants, whatever session or process group they moved to (``[]``
        before samba started and after :meth:`close`)."""
        ns = self._mnt_ns
        if ns is None or ns == os.readlink("/proc/self/ns/mnt"):
            return []
        out = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(entry / "ns" / "mnt") == ns:
                        out.append(int(entry.name))
        return out

    # ---------------------------------------------------------------- smbd on/off

    @property
    def smbd_running(self) -> bool:
        """Whether our smbd process is alive."""
        return self._smbd is not None and self._smbd.poll() is None

    def stop_smbd(self) -> None:
        """Stop smbd and all its connection children (SMB goes away; LDAP and Kerberos stay).

        A killed smbd leaves its notifyd registered as ``notify-daemon`` in ``lock/names.tdb``;
        a restarted smbd would look that dead process up before its own notifyd registers, and
        every CHANGE_NOTIFY would then fail with OBJECT_NAME_NOT_FOUND. The entry is dropped
        here, while smbd is down."""
        self._stop_process(self._smbd)
        self._smbd = None
        deadline = time.monotonic() + 10
        while _port_open(self.smb_port) and time.monotonic() < deadline:
            time.sleep(0.1)
        subprocess.run(
            ["tdbtool", str(self.root / "lock" / "names.tdb"), "delete", "notify-daemon\\00"],
            capture_output=True, check=False,
        )

    def start_smbd(self) -> None:
        """Start smbd again (no-op if running) and wait until an authenticated SMB call succeeds."""
        if self.smbd_running:
            return
        if self._samba is None or self._samba.poll() is not None:
            raise SambaFixtureError("samba is not running: cannot start smbd in its mount namespace")
        with _service_umask():
            self._start_smbd()

    def _start_smbd(self) -> None:
        log = open(self.root / "log" / "smbd.out", "ab")  # noqa: SIM115 - owned by the child
        try:
            self._smbd = subprocess.Popen(
                [
                    "nsenter",
                    f"--mount=/proc/{self._samba.pid}/ns/mnt",
                    "--",
                    "smbd",
                    "--foreground",
                    "--no-process-group",
                    "--option=server role check:inhibit=yes",
                    f"--configfile={self.smb_conf}",
                ],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        self._record_pids()
        self._wait_smb()

    # ---------------------------------------------------------------- directory

    def add_to_group(self, member: str, group: str) -> None:
        """Add a user or group (by sAMAccountName) to ``group`` in AD (effective at once in tokenGroups)."""
        self._samba_tool("group", "addmembers", group, member)

    def remove_from_group(self, member: str, group: str) -> None:
        """Remove a user or group from ``group`` in AD."""
        self._samba_tool("group", "removemembers", group, member)

    def ldap_connection(self, *, tls: bool = False) -> ldap3.Connection:
        """A bound ``ldap3.Connection`` as Administrator: simple bind over ldap://127.0.0.1:389, or
        over LDAPS (636, certificate checked against :attr:`tls_ca_file`) when ``tls``."""
        if tls:
            server = ldap3.Server(
                self.host,
                port=self.ldaps_port,
                use_ssl=True,
                tls=ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=str(self.tls_ca_file)),
                connect_timeout=5,
            )
        else:
            server = ldap3.Server(self.host, port=self.ldap_port, connect_timeout=5)
        return ldap3.Connection(
            server, user=self.admin_bind_dn, password=self.admin_password, auto_bind=True, receive_timeout=10
        )

    # ---------------------------------------------------------------- SMB tools

    def smbcacls(self, path: str, *args: str) -> str:
        """Run ``smbcacls //127.0.0.1/Partage <path> <args>`` as Administrator; return its stdout.

        ``path`` is relative to the share (``/`` or ``""`` for its root, ``/`` or ``\\`` separators).
        E.g. ``dc.smbcacls("DOCUMENTATION", "--add", f"ACL:{sid}:ALLOWED/OI|CI/READ",
        "--propagate-inheritance")``. Raises :class:`SambaFixtureError` on a non-zero exit.
        """
        target = path.replace("/", "\\").strip("\\") or "\\"
        return _run(
            ["smbcacls", f"//{self.host}/{self.share}", target, *self._client_args(), *args],
            what=f"smbcacls {path!r}",
        )

    def sharesec(self, share: str, *args: str) -> str:
        """Run Samba's ``sharesec <share> <args>`` on the DC's configuration (share permissions,
        kept in ``share_info.tdb``; ``--setsddl`` keeps the ACEs in the order given)."""
        return _run(["sharesec", "-s", str(self.smb_conf), share, *args], what=f"sharesec {share}")

    def ldap_add_group(self, name: str, scope: str = "global") -> str:
        """Create a security group (``scope``: ``global``, ``domainlocal`` or ``universal``) in
        CN=Users over LDAP; return its SID."""
        group_type = {"global": -2147483646, "domainlocal": -2147483644, "universal": -2147483640}[scope]
        dn = self.user_dn(name)
        self._ldap_do("add", dn, ["top", "group"], {"sAMAccountName": name, "groupType": group_type})
        sid = self._ldap_sid(dn)
        self._sids[name] = sid
        return sid

    def ldap_add_user(self, name: str, password: str | None = None) -> str:
        """Create an enabled user in CN=Users over LDAPS (``password``: default :data:`USER_PASSWORD`);
        return its SID."""
        dn = self.user_dn(name)
        pwd = f'"{password or USER_PASSWORD}"'.encode("utf-16-le")
        self._ldap_do("add", dn, ["top", "person", "organizationalPerson", "user"],
                      {"sAMAccountName": name, "userPrincipalName": f"{name}@{DNS_DOMAIN}", "unicodePwd": pwd,
                       "userAccountControl": 512})
        sid = self._ldap_sid(dn)
        self._sids[name] = sid
        return sid

    def ldap_add_member(self, group: str, member: str) -> None:
        """Add ``member`` (a sAMAccountName in CN=Users, or a well-known SID such as ``S-1-5-11``,
        added as its foreign security principal) to ``group`` (a name in CN=Users, or a BUILTIN
        group such as ``Remote Desktop Users``)."""
        value = (f"CN={member},CN=ForeignSecurityPrincipals,{self.base_dn}" if member.startswith("S-1-")
                 else self.user_dn(member))
        self._ldap_do("modify", self._group_dn(group), {"member": [(ldap3.MODIFY_ADD, [value])]})

    def ldap_remove_member(self, group: str, member: str) -> None:
        """Remove ``member`` (sAMAccountName) from ``group`` (see :meth:`ldap_add_member`)."""
        self._ldap_do("modify", self._group_dn(group), {"member": [(ldap3.MODIFY_DELETE, [self.user_dn(member)])]})

    def ldap_set_primary_group(self, user: str, group: str) -> None:
        """Make ``group`` (a global group ``user`` is a member of) ``user``'s primary group
        (primaryGroupID); AD then lists the previous one in memberOf."""
        rid = self._ldap_sid(self._group_dn(group)).rsplit("-", 1)[1]
        self._ldap_do("modify", self.user_dn(user), {"primaryGroupID": [(ldap3.MODIFY_REPLACE, [rid])]})

    def ldap_delete(self, name: str) -> None:
        """Delete the user or group ``name`` of CN=Users (no error when it does not exist)."""
        conn = self.ldap_connection(tls=True)
        try:
            conn.delete(self.user_dn(name))
        finally:
            conn.unbind()
        self._sids.pop(name, None)

    def _group_dn(self, group: str) -> str:
        return self.user_dn(group) if group not in _BUILTIN_DNS else f"CN={group},CN=Builtin,{self.base_dn}"

    def _ldap_do(self, op: str, dn: str, *args: Any) -> None:
        conn = self.ldap_connection(tls=True)
        try:
            getattr(conn, op)(dn, *args)
            if conn.result["result"] != 0:
                raise SambaFixtureError(f"LDAP {op} {dn}: {conn.result['description']} {conn.result.get('message')}")
        finally:
            conn.unbind()

    def _ldap_sid(self, dn: str) -> str:
        conn = self.ldap_connection()
        try:
            conn.search(dn, "(objectClass=*)", search_scope=ldap3.BASE, attributes=["objectSid"])
            return format_sid(conn.response[0]["raw_attributes"]["objectSid"][0])
        finally:
            conn.unbind()

    def smbclient(self, *commands: str) -> str:
        """Run ``smbclient //127.0.0.1/Partage -c "<commands joined by ;>"`` as Administrator."""
        return _run(
            ["smbclient", f"//{self.host}/{self.share}", *self._client_args(), "-c", "; ".join(commands)],
            what="smbclient",
        )

    # ---------------------------------------------------------------- internals

    def _timed(self, step: str, func: Callable[[], None]) -> None:
        began = time.monotonic()
        func()
        self.timings[step] = round(time.monotonic() - began, 2)

    def _client_args(self) -> list[str]:
        return ["-s", str(self.root / "etc" / "client.conf"), "-A", str(self.root / "etc" / "admin.auth")]

    def _samba_tool(self, *args: str) -> str:
        return _run(["samba-tool", *args, "-s", str(self.smb_conf)], what=f"samba-tool {' '.join(args[:2])}")

    def _clean_leftovers(self) -> None:
        pids_file = self.root / "run" / "fixture.pids"
        candidates: set[int] = set()
        if pids_file.exists():
            candidates.update(int(p) for p in pids_file.read_text().split() if p.isdigit())
        for pid_file in (self.root / "run").glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                candidates.add(int(pid_file.read_text().split()[0]))
        mine = [pid for pid in candidates if _runs_from(pid, self.root)]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in mine:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, sig)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 5
            while any(_runs_from(pid, self.root) for pid in mine) and time.monotonic() < deadline:
                time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)
        busy = [port for port in DC_PORTS if _port_open(port)]
        if busy:
            raise SambaFixtureError(
                f"ports {busy} on {HOST} are already in use by another process (another Samba or "
                "directory server?): the test DC cannot bind them"
            )

    def _prepare_root(self) -> None:
        for sub in ("etc", "log", "run", "tls", "client", "share", "essais", "usershares"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        probe = self.root / "xattr-probe"
        probe.write_bytes(b"")
        try:
            os.setxattr(probe, "user.DOSATTRIB", b"1")
            os.setxattr(probe, "security.NTACL", b"1")
        except OSError as exc:
            raise SambaFixtureError(
                f"{self.root} does not store user/security xattrs ({exc}); acl_xattr needs them: "
                "set ANCRE_SAMBA_DIR to a directory on ext4/xfs/btrfs"
            ) from exc
        finally:
            probe.unlink()
        (self.root / "etc" / "admin.auth").write_text(
            f"username = {self.admin_user}\npassword = {self.admin_password}\ndomain = {self.domain}\n"
        )
        os.chmod(self.root / "etc" / "admin.auth", 0o600)
        (self.root / "etc" / "client.conf").write_text(_client_conf(self.root))
        Path("/run/samba").mkdir(parents=True, exist_ok=True)  # mount point inside our namespace

    def _provision(self) -> None:
        self.smb_conf.write_text("")  # provision writes its smb.conf here; we then replace it
        _run(
            [
                "samba-tool",
                "domain",
                "provision",
                f"--configfile={self.smb_conf}",
                f"--targetdir={self.root}",
                f"--realm={REALM}",
                f"--domain={DOMAIN}",
                f"--host-name={NETBIOS_NAME}",
                "--server-role=dc",
                "--dns-backend=NONE",
                f"--adminpass={ADMIN_PASSWORD}",
                f"--option=interfaces={HOST}",
                "--option=bind interfaces only=yes",
            ],
            what="samba-tool domain provision",
            timeout=180,
            cwd=self.root,
        )
        (self.root / "lock").mkdir(exist_ok=True)
        self.smb_conf.write_text(_smb_conf(self.root))
        self._make_tls()

    def _make_tls(self) -> None:
        tls = self.root / "tls"
        ext = tls / "san.ext"
        ext.write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            # not "localhost": the tests reach the DC by that other name to exercise tls_server_name
            f"subjectAltName=IP:{HOST},DNS:{NETBIOS_NAME.lower()}.{DNS_DOMAIN}\n"
        )
        common = ["-days", "30", "-nodes"]
        _run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", *common, "-subj", "/CN=ancre test CA",
             "-keyout", str(tls / "ca.key"), "-out", str(tls / "ca.pem")],
            what="openssl CA",
        )
        _run(
            ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={HOST}",
             "-keyout", str(tls / "key.pem"), "-out", str(tls / "cert.csr")],
            what="openssl CSR",
        )
        _run(
            ["openssl", "x509", "-req", "-in", str(tls / "cert.csr"), "-CA", str(tls / "ca.pem"),
             "-CAkey", str(tls / "ca.key"), "-CAcreateserial", "-days", "30", "-extfile", str(ext),
             "-out", str(tls / "cert.pem")],
            what="openssl sign",
        )
        os.chmod(tls / "key.pem", 0o600)  # samba refuses a key others can read

    def _create_directory(self) -> None:
        """Groups and users of directory.json, offline on sam.ldb (samba is not running yet)."""
        directory = json.loads((self.corpus / "directory.json").read_text())
        groups: dict[str, dict[str, Any]] = directory["groups"]
        users: dict[str, dict[str, Any]] = directory["users"]
        for group in groups:
            self._samba_tool("group", "add", group)
        for user, info in users.items():
            self._samba_tool("user", "create", user, USER_PASSWORD, f"--mail-address={info['upn']}")
        members: dict[str, list[str]] = {group: [] for group in groups}
        for group, info in groups.items():
            for parent in info["member_of"]:
                members[parent].append(group)
        for user, info in users.items():
            for group in info["groups"]:
                members[group].append(user)
        for group, names in members.items():
            if names:
                self._samba_tool("group", "addmembers", group, ",".join(names))
        self._upns = {user: str(info["upn"]) for user, info in users.items()}

    def _start_servers(self) -> None:
        log = open(self.root / "log" / "samba.out", "ab")  # noqa: SIM115 - owned by the child
        try:
            self._samba = subprocess.Popen(
                [
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    'mount --bind "$1" /run/samba && exec samba --foreground --no-process-group -s "$2"',
                    "sh",
                    str(self.root / "run"),
                    str(self.smb_conf),
                ],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        self._record_pids()
        self._wait_ldap()
        ns = os.readlink(f"/proc/{self._samba.pid}/ns/mnt")  # samba answers: unshare has run
        self._mnt_ns = ns if ns != os.readlink("/proc/self/ns/mnt") else None
        # smbd joins samba's mount namespace: wait for the bind mount (winbindd's socket shows in it)
        deadline = time.monotonic() + _STARTUP_TIMEOUT
        while not (self.root / "run" / "winbindd" / "pipe").exists():
            self._check_samba_alive()
            if time.monotonic() > deadline:
                raise SambaFixtureError("winbindd did not start (no run/winbindd/pipe)")
            time.sleep(0.1)
        self.start_smbd()
        self._load_sids_and_upns()

    def _record_pids(self) -> None:
        pids = [str(p.pid) for p in (self._samba, self._smbd) if p is not None]
        (self.root / "run" / "fixture.pids").write_text("\n".join(pids) + "\n")

    def _check_samba_alive(self) -> None:
        if self._samba is None or self._samba.poll() is not None:
            tail = (self.root / "log" / "samba.out").read_text(errors="replace")[-3000:]
            raise SambaFixtureError(f"samba exited during start-up:\n{tail}")

    def _wait_ldap(self) -> None:
        deadline = time.monotonic() + _STARTUP_TIMEOUT
        while True:
            self._check_samba_alive()
            try:
                self.ldap_connection().unbind()
                return
            except LDAPException as exc:
                if time.monotonic() > deadline:
                    raise SambaFixtureError(f"LDAP did not answer on {HOST}:{LDAP_PORT}: {exc}") from exc
                time.sleep(0.2)

    def _wait_smb(self) -> None:
        deadline = time.monotonic() + _STARTUP_TIMEOUT
        while True:
            if not self.smbd_running:
                tail = (self.root / "log" / "smbd.out").read_text(errors="replace")[-3000:]
                raise SambaFixtureError(f"smbd exited during start-up:\n{tail}")
            try:
                self.smbclient("ls")
                return
            except SambaFixtureError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _load_sids_and_upns(self) -> None:
        conn = self.ldap_connection()
        try:
            for user, upn in self._upns.items():
                conn.modify(self.user_dn(user), {"userPrincipalName": [(ldap3.MODIFY_REPLACE, [upn])]})
                if conn.result["result"] != 0:
                    raise SambaFixtureError(f"setting the UPN of {user}: {conn.result}")
            conn.search(
                self.base_dn,
                "(|(objectClass=group)(objectClass=user))",
                attributes=["sAMAccountName", "objectSid"],
            )
            sids = {
                str(e["attributes"]["sAMAccountName"]): format_sid(e["raw_attributes"]["objectSid"][0])
                for e in conn.response
                if e.get("type") == "searchResEntry"
            }
        finally:
            conn.unbind()
        sids.update(WELL_KNOWN)
        self._sids = sids

    def _build_share(self) -> None:
        """Write the corpus share/ tree over SMB and apply acl.json top-down with smbcacls.

        Folders are created one by one after their parent's ACL is final, and files are written
        last, so Samba itself computes every inherited ACE (flagged INHERITED thanks to the
        auto-inherited bit set on the root with ``D:PARAI``). Each acl.json entry: protected ->
        ``--set`` of the whole DACL in SDDL with the P (protected) flag; otherwise ``--add`` of its
        explicit ACEs (smbcacls keeps the DACL canonical: explicit deny, explicit allow, inherited).
        """
        acl = json.loads((self.corpus / "acl.json").read_text())
        entries: dict[str, dict[str, Any]] = acl["entries"]
        src = self.corpus / "share"
        self._apply_entry("", entries.get("", {}))
        folders = sorted((p for p in src.rglob("*") if p.is_dir()), key=lambda p: (len(p.parts), str(p)))
        for folder in folders:
            rel = folder.relative_to(src).as_posix()
            self.smbclient(f'mkdir "{rel}"')
            if rel in entries:
                self._apply_entry(rel, entries[rel])
        puts = [
            f'put "{f}" "{f.relative_to(src).as_posix()}"' for f in sorted(src.rglob("*")) if f.is_file()
        ]
        self.smbclient(*puts)
        for rel, entry in entries.items():
            if rel and (src / rel).is_file():
                self._apply_entry(rel, entry)

    def _apply_entry(self, rel: str, entry: Mapping[str, Any]) -> None:
        aces = "".join(self._sddl_ace(*ace) for ace in entry.get("aces", []))
        if entry.get("protected"):
            # P: protected, AR+AI: auto-inherited (so children's inherited ACEs carry the I flag)
            self.smbcacls(rel, "--sddl", "--set", f"D:PARAI{aces}")
        elif aces:
            self.smbcacls(rel, "--sddl", "--add", f"D:{aces}")

    def _sddl_ace(self, kind: str, who: str, right: str, flags: str) -> str:
        """One acl.json ACE ``[ALLOW|DENY, name, READ|CHANGE|FULL, "OI|CI"|""]`` as an SDDL ACE string."""
        ace_type = {"ALLOW": "A", "DENY": "D"}[kind]
        sddl_flags = "".join(flag for flag in flags.split("|") if flag)
        return f"({ace_type};{sddl_flags};0x{RIGHTS[right]:08x};;;{self.sid_of(who)})"

    def _stop_process(self, proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None or proc.poll() is not None:
            if proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)  # stray children of a dead leader
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _end_processes(members: Callable[[], list[int]]) -> None:
    """TERM, then (after at most 5 s) KILL the processes ``members()`` names, asked again before
    each signal (a pid that ended is never signalled: it may be another process's by then)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(process_alive(p) for p in members()):
            time.sleep(0.05)
        if not any(process_alive(p) for p in members()):
            return


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped by its parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# -------------------------------------------------------------------- pytest fixture

_shared: SambaDC | None = None
_shared_users = 0
_shared_lock = threading.Lock()


def require_samba() -> None:
    """Skip the calling test when Samba can't run here (not root, packages missing), saying why;
    under ``CI`` as root, fail instead (CI must install it)."""
    reason = missing_samba_reason()
    if reason is None:
        return
    if os.environ.get("CI") and os.geteuid() == 0:
        pytest.fail(f"{reason} (CI must install Samba: .ci/run calls .ci/install-samba.sh)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def samba_dc() -> Iterator[SambaDC]:
    """Session-wide :class:`SambaDC` (one per process even if several test modules import this fixture).

    Skips with the reason when not root or Samba is absent (fails instead under ``CI`` as root).
    Tests that change the directory or ACLs must restore them.
    """
    global _shared, _shared_users  # noqa: PLW0603 - one DC per test session, started on first use
    require_samba()
    with _shared_lock:
        if _shared is None:
            _shared = SambaDC().start()
        _shared_users += 1
        dc = _shared
    try:
        yield dc
    finally:
        with _shared_lock:
            _shared_users -= 1
            if _shared_users == 0 and _shared is not None:
                _shared.close()
                _shared = None
