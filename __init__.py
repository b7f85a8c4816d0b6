"""ancre: permission-trimmed, grounded retrieval over Windows file shares and SharePoint.

The repository root is the ``ancre`` package: ``ancre.connectors``, ``ancre.acl``, ``ancre.index``,
``ancre.daemon``, ``ancre.query`` and ``ancre.api`` are its parts (see ``docs/ARCHITECTURE.md``).
"""

__version__ = "0.1.0"


def _unshadow_smbclient() -> None:
    """Keep smbprotocol's ``smbclient`` package importable under a console script.

    impacket (MS-RPC: SAMR, SRVSVC) installs its example scripts, ``smbclient.py`` among them, in
    the environment's ``bin/``; a console script (``ancre``, ``pytest``) runs with that folder
    first on ``sys.path``, where ``smbclient.py`` would hide the package. The folder is moved to
    the end of the path (nothing of ancre is imported from it)."""
    import os
    import sys

    head = sys.path[0] if sys.path else ""
    if head and "smbclient" not in sys.modules and os.path.isfile(os.path.join(head, "smbclient.py")):
        sys.path.append(sys.path.pop(0))


_unshadow_smbclient()
