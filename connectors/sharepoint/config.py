"""``[[sources]] kind = "sharepoint"``: one SharePoint Online tenant read through Microsoft Graph
(docs/SHAREPOINT.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ancre.connectors.sharepoint.permissions import LinkPolicy
from ancre.settings.locations import HTTPS, PathRole
from ancre.settings.secrets import Secret, legacy_env
from ancre.settings.sources import SourceSettings


class SharePointSourceConfig(SourceSettings):
    """A SharePoint Online tenant (one source = one tenant), read with an Entra app registration
    (client credentials, msal).

    Credential — exactly one of:

    * ``certificate_path`` (PEM with the private key) + ``certificate_thumbprint`` (SHA-1 hex of
      the certificate uploaded to the app registration): the documented way, accepted by Graph
      *and* SharePoint REST;
    * ``pfx_path`` + ``pfx_passphrase``: the same certificate as PKCS#12;
    * ``client_secret``: **Graph only**. SharePoint REST refuses app-only
      tokens obtained with a client secret ("Unsupported app only token"), so the site and
      library role assignments (site groups, "Everyone except external users" on a site) can't
      be read with it: use a certificate for a real tenant.

    Which content: ``sites`` (site URLs, ``https://axonix.sharepoint.com/sites/Direction``; empty
    = every site Graph lists), per site the document libraries whose name matches ``libraries``
    (globs; empty = all) and none of ``libraries_exclude``; then the common ``include`` /
    ``exclude`` globs on the item path ``<site>/<library>/<folders>/<file>``.
    """

    kind: Literal["sharepoint"] = "sharepoint"
    """``sharepoint``: one SharePoint Online tenant read through Microsoft Graph."""
    tenant_id: str = Field(min_length=1)
    """Entra tenant id (GUID) or its primary domain."""
    client_id: str = Field(min_length=1)
    """Application (client) id of the app registration."""
    certificate_path: Annotated[Path | None, PathRole.READ] = None
    """PEM file holding the app registration's certificate and its private key."""
    certificate_thumbprint: str | None = None
    """SHA-1 thumbprint (hex) of that certificate as uploaded to the app registration; required with ``certificate_path``."""
    pfx_path: Annotated[Path | None, PathRole.READ] = None
    """The certificate and its private key as a PKCS#12 (``.pfx``) file instead of a PEM."""
    pfx_passphrase: Secret = None
    """Passphrase of ``pfx_path`` (best ``{ env = "…" }`` or a systemd ``credential``)."""
    client_secret: Secret = None
    """The app registration's client secret (Graph only, see above; best ``{ env = "ANCRE_SP_SECRET" }``)."""
    authority: Annotated[str, HTTPS] = "https://login.microsoftonline.com"
    """Entra authority host (sovereign clouds: ``https://login.microsoftonline.us`` …; tests)."""
    graph_url: Annotated[str, HTTPS] = "https://graph.microsoft.com/v1.0"
    """Graph endpoint with its version (``https://graph.microsoft.us/v1.0`` …; tests)."""
    sites: Annotated[tuple[str, ...], HTTPS] = ()
    """Site URLs to read; empty = every site of the tenant."""
    libraries: tuple[str, ...] = ()
    """Globs on document library names (``Documents``, ``Shared Documents``); empty = all."""
    libraries_exclude: tuple[str, ...] = ()
    """Globs on document library names left out (wins over ``libraries``)."""
    sharing_links: LinkPolicy = "specific_people"
    """What sharing links grant: ``specific_people`` (default) — a "specific people" link grants
    its recipients, organization and anonymous links widen nothing; ``none`` — no link grants;
    ``organization`` — an organization link also grants every internal member
    (``aad:everyone-internal``). Anonymous links never grant anything."""
    sharing_delta: bool = False
    """Ask delta to report sharing changes (``Prefer: deltashowsharingchanges,
    hierarchicalsharing``). Graph only honours it with ``Sites.FullControl.All``; without it,
    permission changes are caught by the periodic permission sweep only."""
    exclude_labels: tuple[str, ...] = ()
    """Purview sensitivity labels (ids or names, case-insensitive) whose documents stay out of
    the index (recorded ``skipped``); a label added later purges the document at the next pass."""
    delta_interval_s: float = Field(60.0, gt=0)
    """Seconds between two delta polls when the daemon watches the source."""
    permission_sweep_interval_s: float = Field(300.0, ge=0)
    """Seconds between two re-reads of every item's permissions (Graph misses some sharing
    changes; without the live check and ``sharing_delta`` this bounds how long a removed
    permission stays searchable — docs/SHAREPOINT.md); 0 = never. A sweep asks
    SharePoint REST which items have unique permissions (one request per 5,000 items) and Graph
    for those only."""
    identity_cache_ttl_s: float = Field(300.0, ge=0)
    """Seconds a user's Entra principals (object id, groups, site groups) are cached."""
    max_in_flight: int = Field(4, ge=1, le=64)
    """Graph requests in flight at once."""
    timeout_s: float = Field(30.0, gt=0)
    """Seconds one Graph or SharePoint REST request may take."""
    max_retries: int = Field(5, ge=0, le=20)
    """Retries of a throttled or failed Graph request (HTTP 429, 500, 502, 503, 504; ``Retry-After`` honoured)."""
    ca_file: Annotated[Path | None, PathRole.READ] = None
    """CA bundle to verify Graph's TLS certificate with (tests); default: the system's."""

    _legacy_env = legacy_env("client_secret", "pfx_passphrase")

    @model_validator(mode="after")
    def _one_credential(self) -> SharePointSourceConfig:
        cert = self.certificate_path is not None
        pfx = self.pfx_path is not None
        secret = self.client_secret is not None
        if sum((cert, pfx, secret)) != 1:
            raise ValueError(
                "set exactly one credential: certificate_path + certificate_thumbprint, pfx_path, or client_secret"
            )
        if cert and not self.certificate_thumbprint:
            raise ValueError("certificate_thumbprint is required with certificate_path")
        return self

    def secret(self) -> str | None:
        """The client secret resolved, or ``None`` with a certificate credential. Raises
        :class:`~ancre.errors.ConfigError` naming ``sources.<id>.client_secret.env`` (…) when its
        variable or file is missing."""
        return self.client_secret.resolve(f"sources.{self.id}.client_secret") if self.client_secret else None

    def passphrase(self) -> str | None:
        """The PFX passphrase resolved (``None``: the PFX has none). Raises
        :class:`~ancre.errors.ConfigError` like :meth:`secret`."""
        return self.pfx_passphrase.resolve(f"sources.{self.id}.pfx_passphrase") if self.pfx_passphrase else None


__all__ = ["SharePointSourceConfig"]
