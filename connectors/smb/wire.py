"""The SMB wire calls of the SMB source: the only module that uses smbclient's and smbprotocol's
private interfaces (``smbclient._io``, ``smbclient._os``, ``smbclient._pool``, a
``FileSystemWatcher``'s ``_t_exc``), as watchdog's ``inotify_c`` is the only one that calls
inotify. A smbprotocol upgrade that changes them breaks this module alone
(``tests/unit/test_smb_package.py`` checks that no other module imports them).

Every function takes smbclient's session keyword arguments (``username``, ``password``,
``port``, ``connection_cache`` …: :meth:`ancre.connectors.smb.session.SmbSession.kwargs`) and
raises ``SMBOSError`` (file-level: ACCESS_DENIED, OBJECT_NAME_NOT_FOUND, …) or connection errors
as smbprotocol raises them; :mod:`ancre.connectors.smb.session` tells them apart.
"""

from __future__ import annotations

from typing import Any

import smbclient
from smbclient._io import SMBDirectoryIO, SMBFileTransaction, SMBRawIO
from smbclient._os import SMBDirEntryInformation
from smbclient._pool import get_smb_tree
from smbprotocol import MAX_PAYLOAD_SIZE
from smbprotocol.change_notify import ChangeNotifyFlags, FileSystemWatcher
from smbprotocol.file_info import FileInformationClass, InfoType
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    DirectoryAccessMask,
    FileAttributes,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
    SMB2QueryInfoRequest,
    SMB2QueryInfoResponse,
)
from smbprotocol.tree import TreeConnect

# Security information of the QUERY_INFO ([MS-SMB2] 2.2.37, [MS-DTYP] 2.4.7)
OWNER_SECURITY_INFORMATION = 0x1
GROUP_SECURITY_INFORMATION = 0x2
DACL_SECURITY_INFORMATION = 0x4

# Reparse tags ([MS-FSCC] 2.1.2.1); FILE_ID_FULL_DIRECTORY_INFORMATION carries the tag in EaSize
IO_REPARSE_TAG_MOUNT_POINT = 0xA0000003
IO_REPARSE_TAG_SYMLINK = 0xA000000C
IO_REPARSE_TAG_DFS = 0x8000000A

DirEntry = SMBDirEntryInformation
"""One entry of :func:`list_dir`: ``file_name``, ``file_id``, ``end_of_file`` (bytes),
``last_write_time`` (datetime), ``file_attributes``, ``ea_size`` (the reparse tag of a reparse
point) …"""


def list_dir(unc_path: str, search_pattern: str = "*", **kwargs: Any) -> list[SMBDirEntryInformation]:
    """The entries of the folder ``unc_path`` matching ``search_pattern`` (``.``/``..`` left out),
    from SMB2 QUERY_DIRECTORY with FILE_ID_FULL_DIRECTORY_INFORMATION ([MS-FSCC] 2.4.18; EaSize
    holds the reparse tag of a reparse point). ``kwargs``: smbclient session arguments.

    Unlike ``smbclient.scandir``, which opens a tree for every entry's path (and so, once a DFS
    referral to a dead server is cached, fails on the folder holding the link), only the folder
    itself is opened (its own referral, if any, is followed). Raises ``SMBOSError`` or
    connection errors."""
    out: list[SMBDirEntryInformation] = []
    with SMBDirectoryIO(unc_path, share_access="rwd", **kwargs) as fd:
        for raw in fd.query_directory(search_pattern, FileInformationClass.FILE_ID_FULL_DIRECTORY_INFORMATION):
            name = raw["file_name"].get_value().decode("utf-16-le")
            if name in (".", ".."):
                continue
            out.append(
                SMBDirEntryInformation(
                    creation_time=raw["creation_time"].get_value(),
                    last_access_time=raw["last_access_time"].get_value(),
                    last_write_time=raw["last_write_time"].get_value(),
                    change_time=raw["change_time"].get_value(),
                    end_of_file=raw["end_of_file"].get_value(),
                    allocation_size=raw["allocation_size"].get_value(),
                    file_attributes=raw["file_attributes"].get_value(),
                    ea_size=raw["ea_size"].get_value(),
                    file_id=raw["file_id"].get_value(),
                    file_name=name,
                )
            )
    return out


def read_security_descriptor(
    unc_path: str,
    *,
    security_information: int = OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
    **kwargs: Any,
) -> bytes:
    """The raw self-relative SECURITY_DESCRIPTOR (``security_information``, by default
    OWNER|GROUP|DACL; the SACL would need ACCESS_SYSTEM_SECURITY) of a file or folder, in one
    compound CREATE (READ_CONTROL; opens files and folders alike) + QUERY_INFO
    (SMB2_0_INFO_SECURITY, [MS-SMB2] 2.2.37) + CLOSE. ``kwargs``: smbclient session arguments.
    Output buffer 65536 bytes (the single-credit payload; an ACL is at most 65535 bytes).
    Raises ``SMBOSError`` (ACCESS_DENIED, OBJECT_NAME_NOT_FOUND, ...) or connection errors."""
    raw = SMBRawIO(
        unc_path,
        mode="r",
        share_access="rwd",
        desired_access=FilePipePrinterAccessMask.READ_CONTROL,
        create_options=0,
        **kwargs,
    )
    request = SMB2QueryInfoRequest()
    request["info_type"] = InfoType.SMB2_0_INFO_SECURITY
    request["output_buffer_length"] = MAX_PAYLOAD_SIZE
    request["additional_information"] = security_information
    request["file_id"] = raw.fd.file_id

    def receive(sent: Any) -> bytes:
        response = raw.fd.connection.receive(sent)
        answer = SMB2QueryInfoResponse()
        answer.unpack(response["data"].get_value())
        return bytes(answer["buffer"].get_value())

    with SMBFileTransaction(raw) as transaction:
        transaction += (request, receive)  # noqa: PLW2901 - smbprotocol's idiom: += queues a request on the transaction
    return transaction.results[0]


def read_file(unc_path: str, **kwargs: Any) -> bytes:
    """The whole content of the file ``unc_path`` (opened for reading, sharing read, write and
    delete so that an open document does not block it). Raises ``SMBOSError`` or connection
    errors."""
    with smbclient.open_file(unc_path, mode="rb", share_access="rwd", **kwargs) as fh:
        return bytes(fh.read())


def stat(unc_path: str, **kwargs: Any) -> None:
    """Stat ``unc_path`` (a cheap "does the share still answer" probe). Raises ``SMBOSError`` or
    connection errors."""
    smbclient.stat(unc_path, **kwargs)


def register_session(server: str, **kwargs: Any) -> Any:
    """The pooled smbprotocol ``Session`` to ``server`` (made and authenticated if needed)."""
    return smbclient.register_session(server, **kwargs)


def tree_connect(server: str, share: str, **kwargs: Any) -> TreeConnect:
    """The pooled tree connect of ``\\\\server\\share`` on the pooled session (made if needed).
    Raises connection errors."""
    session = register_session(server, **kwargs)
    name = f"\\\\{server}\\{share}"
    tree = next((t for t in list(session.tree_connect_table.values()) if t.share_name == name), None)
    if tree is None:
        tree = TreeConnect(session, name)
        tree.connect()
    return tree


def share_tree(unc: str, **kwargs: Any) -> TreeConnect:
    """The tree connect of the share ``\\\\server\\share`` as smbclient's pool makes it (DFS
    referrals followed). Raises connection errors."""
    tree, _ = get_smb_tree(unc, **kwargs)
    return tree


def open_share_root(tree: TreeConnect) -> Open:
    """A handle on the root folder of ``tree`` for CHANGE_NOTIFY: FILE_LIST_DIRECTORY |
    SYNCHRONIZE, sharing read, write and delete ([MS-SMB2] 2.2.13, 3.3.5.19: the server checks
    FILE_LIST_DIRECTORY on the handle)."""
    op = Open(tree, "")
    op.create(
        ImpersonationLevel.Impersonation,
        DirectoryAccessMask.FILE_LIST_DIRECTORY | DirectoryAccessMask.SYNCHRONIZE,
        FileAttributes.FILE_ATTRIBUTE_DIRECTORY,
        ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
        CreateDisposition.FILE_OPEN,
        CreateOptions.FILE_DIRECTORY_FILE,
    )
    return op


def arm_notify(op: Open, completion_filter: int, buffer_size: int) -> FileSystemWatcher:
    """One SMB2 CHANGE_NOTIFY request with SMB2_WATCH_TREE on ``op`` ([MS-SMB2] 2.2.35) for
    ``completion_filter``; the server may answer up to ``buffer_size`` bytes of
    FILE_NOTIFY_INFORMATION records."""
    w = FileSystemWatcher(op)
    w.start(completion_filter, flags=ChangeNotifyFlags.SMB2_WATCH_TREE, output_buffer_length=buffer_size)
    return w


def notify_failure(w: FileSystemWatcher) -> BaseException | None:
    """The exception smbprotocol's receiving thread met for the request ``w`` (kept in its
    private ``_t_exc``: a lost session), ``None`` when there was none."""
    exc = getattr(w, "_t_exc", None)
    return exc if isinstance(exc, BaseException) else None


__all__ = [
    "DACL_SECURITY_INFORMATION",
    "GROUP_SECURITY_INFORMATION",
    "IO_REPARSE_TAG_DFS",
    "IO_REPARSE_TAG_MOUNT_POINT",
    "IO_REPARSE_TAG_SYMLINK",
    "OWNER_SECURITY_INFORMATION",
    "DirEntry",
    "arm_notify",
    "list_dir",
    "notify_failure",
    "open_share_root",
    "read_file",
    "read_security_descriptor",
    "register_session",
    "share_tree",
    "stat",
    "tree_connect",
]
