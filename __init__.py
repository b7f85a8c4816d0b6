"""ancre: permission-trimmed, grounded retrieval over Windows file shares and SharePoint.

The repository root is the ``ancre`` package: ``ancre.connectors``, ``ancre.acl``, ``ancre.index``,
``ancre.daemon``, ``ancre.query`` and ``ancre.api`` are its parts (see ``docs/ARCHITECTURE.md``).
"""

__version__ = "0.1.0"
