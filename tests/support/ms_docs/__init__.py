"""Microsoft's own documentation, as the fake tenant (:mod:`support.fake_microsoft`) and the tests
read it: the JSON examples of the pages, verbatim, one file each (``*.json5``: a page's example as
printed there — some carry comments or a trailing comma, so they are read with JSON5 — headed by
the page's address and the commit of ``microsoftgraph/microsoft-graph-docs-contrib`` or
``SharePoint/sp-dev-docs`` it was taken from), and the rules the pages state, quoted in
:data:`RULES` with their page. Nothing here is derived from ancre's code.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import json5

HERE = Path(__file__).resolve().parent

PERMISSION = "https://learn.microsoft.com/graph/api/resources/permission"
LIST_PERMISSIONS = "https://learn.microsoft.com/graph/api/driveitem-list-permissions"
SHARING_LINK = "https://learn.microsoft.com/graph/api/resources/sharinglink"
IDENTITY_SET = "https://learn.microsoft.com/graph/api/resources/identityset"
SP_IDENTITY_SET = "https://learn.microsoft.com/graph/api/resources/sharepointidentityset"
SP_IDENTITY = "https://learn.microsoft.com/graph/api/resources/sharepointidentity"
DRIVE_ITEM = "https://learn.microsoft.com/graph/api/resources/driveitem"
DELTA = "https://learn.microsoft.com/graph/api/driveitem-delta"
BATCH = "https://learn.microsoft.com/graph/json-batching"
PACKAGE = "https://learn.microsoft.com/graph/api/resources/package"
OWNED_OBJECTS = "https://learn.microsoft.com/graph/api/user-list-ownedobjects"
GROUP_CLAIMS = "https://learn.microsoft.com/sharepoint/dev/transform/modernize-connect-to-office365-group-permissions"
ROLE_ASSIGNMENTS = "https://learn.microsoft.com/sharepoint/dev/sp-add-ins/set-custom-permissions-on-a-list-by-using-the-rest-interface"
HAS_UNIQUE = "https://learn.microsoft.com/dotnet/api/microsoft.sharepoint.client.securableobject.hasuniqueroleassignments"

RULES: dict[str, tuple[str, str]] = {
    "no-inherited-from": (PERMISSION, ("OneDrive for Business and SharePoint document libraries do not return the "
                          "inheritedFrom property.")),
    "effective": (LIST_PERMISSIONS, ("List the effective sharing permissions on a driveItem. [...] Effective sharing "
                  "permissions of a DriveItem can come from two sources: Sharing permissions applied directly on the "
                  "DriveItem itself; Sharing permissions inherited from the DriveItem's ancestors")),
    "expiration": (PERMISSION, ("expirationDateTime: A format of yyyy-MM-ddTHH:mm:ssZ of DateTimeOffset indicates the "
                   "expiration time of the permission. DateTime.MinValue indicates there is no expiration set for "
                   "this permission.")),
    "people-link": (PERMISSION, ("Specific people link: This link provides read and write access to the specific "
                    "people in the grantedToIdentities collection.")),
    "existing-access": (PERMISSION, ("Existing access link: This link does not grant any additional privileges to "
                        "the user.")),
    "link-scopes": (SHARING_LINK, ("scope: anonymous (anyone), organization (anyone signed into the same tenant), "
                    "existingAccess (only people who already have access), users (a specific list of people)")),
    "site-group": (SP_IDENTITY_SET, ("siteGroup: The SharePoint group associated with this action, identified by a "
                   "principal ID that is unique only within the site.")),
    "delta-deleted": (DELTA, ("Deleted items are returned with the deleted facet. [...] Delete: ctag, name "
                      "(properties omitted by delta query, OneDrive for Business)")),
    "delta-no-path": (DELTA, ("The parentReference property on items won't include a value for path. [...] When "
                      "using delta you should always track items by id.")),
    "delta-last": (DELTA, ("The same item may appear more than once in a delta feed [...] You should use the last "
                   "occurrence you see.")),
    "batch-order": (BATCH, ("Individual responses might appear in a different order than the requests. The id "
                    "property can be used to correlate individual requests and responses.")),
    "batch-limit": (BATCH, "JSON batch requests are currently limited to 20 individual requests."),
    "package": (PACKAGE, ("An example of a package is a OneNote notebook. [...] DriveItems with the package facet "
                "do not include a folder or file facet")),
    "owners-claim": (GROUP_CLAIMS, ("<group id>_o: this claim represents the Office 365 Group owners; <group id>: "
                     "this claim represents the Office 365 Group members")),
    "has-unique": (HAS_UNIQUE, ("HasUniqueRoleAssignments: whether the role assignments are uniquely defined for "
                   "this securable object or inherited from a parent securable object")),
}
"""Rules the fake follows: ``name -> (page, what the page says)``."""


@cache
def example(name: str) -> Any:
    """The JSON example ``<name>.json5`` of this folder, parsed (a fresh copy is the caller's to
    keep: callers must not mutate it — use :func:`copy_of`)."""
    return json5.loads((HERE / f"{name}.json5").read_text(encoding="utf-8"))


def copy_of(name: str) -> Any:
    """A deep copy of :func:`example` (to embed in a fake answer)."""
    import copy

    return copy.deepcopy(example(name))


def source_of(name: str) -> str:
    """The page address an example file cites (its first ``https://`` comment line)."""
    for line in (HERE / f"{name}.json5").read_text(encoding="utf-8").splitlines():
        if line.startswith("// https://"):
            return line[3:].strip()
    raise ValueError(f"{name}.json5 cites no page")


def names() -> list[str]:
    """Every example file's name (without ``.json5``)."""
    return sorted(p.stem for p in HERE.glob("*.json5"))


__all__ = ["RULES", "copy_of", "example", "names", "source_of"]
