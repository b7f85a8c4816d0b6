"""The ``smb`` source kind: a Windows (or Samba) file share read over SMB2/3, NT ACLs from the
server.

Split as watchdog splits ``inotify_c`` (the wire) from ``inotify`` (the observer):

- :mod:`~ancre.connectors.smb.wire` — the SMB calls; the only module that touches smbclient's
  and smbprotocol's private interfaces (directory listing with file ids, the compound security
  descriptor read, the CHANGE_NOTIFY handle and requests);
- :mod:`~ancre.connectors.smb.session` — a source's session arguments, the classification of SMB
  errors and the retry / fail-fast policy;
- :mod:`~ancre.connectors.smb.dfs` — DFS referrals and whether a link is followed;
- :mod:`~ancre.connectors.smb.rpc` — MS-RPC on ``IPC$``: share permissions, local groups;
- :mod:`~ancre.connectors.smb.rights` — the server's token rules and the share permissions, cached
  per source;
- :mod:`~ancre.connectors.smb.names` — the server's spelling of NFC paths (names written NFD);
- :mod:`~ancre.connectors.smb.listing` — the listing and walk (listing rules, links reported, DFS
  links followed inside the share);
- :mod:`~ancre.connectors.smb.descriptors` — descriptors and rights: a file's DACL (and its
  parent's) walked with the token rules, joined with the share permissions;
- :mod:`~ancre.connectors.smb.notify` — SMB2 CHANGE_NOTIFY as change events;
- :mod:`~ancre.connectors.smb.connector` — :class:`SmbConnector`, composed of those parts (the
  live check, ``check``, ``explain_*``), and the kind's factory.

Each part is an object the connector holds, with a narrow interface; no module imports the
connector back (the watcher gets a :class:`~ancre.connectors.smb.notify.WatchTarget`).

:data:`KIND` is what :data:`ancre.connectors.registry.REGISTRY` loads.
"""

from __future__ import annotations

from ancre.connectors.smb.connector import KIND, SmbConnector, SmbSourceConfig, build
from ancre.connectors.smb.dfs import DfsTarget, dfs_referral, dfs_target_inside, host_addresses
from ancre.connectors.smb.session import is_auth_error, is_connection_error, is_not_found
from ancre.connectors.smb.wire import list_dir, read_security_descriptor

__all__ = [
    "KIND",
    "DfsTarget",
    "SmbConnector",
    "SmbSourceConfig",
    "build",
    "dfs_referral",
    "dfs_target_inside",
    "host_addresses",
    "is_auth_error",
    "is_connection_error",
    "is_not_found",
    "list_dir",
    "read_security_descriptor",
]
