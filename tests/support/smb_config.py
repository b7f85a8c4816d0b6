"""An ``ancre.toml`` over the Samba fixture (tests/support/samba.py): e5-local, embedded store,
the DC's directory over LDAPS and its share ``Partage`` as the SMB source ``partage``, read as
Administrator (password from an environment variable)."""

from __future__ import annotations

from pathlib import Path

from support.samba import SambaDC

PASSWORD_ENV = "ANCRE_TEST_SMB_PASSWORD"
"""The variable the config names for the SMB and LDAP passwords (set it to ``dc.admin_password``)."""


def write_smb_config(dest: Path, dc: SambaDC, *, ttl: float = 0, extra: str = "") -> Path:
    """Write ``dest/ancre.toml`` (``data_dir = "data"``; directory cache ``ttl`` seconds;
    ``extra`` TOML appended after the source) and return its path."""
    cfg = dest / "ancre.toml"
    cfg.write_text(
        f'''data_dir = "data"
[embedder]
kind = "e5-local"
[store]
kind = "edge"
[directory]
kind = "ldap"
url = "ldaps://{dc.host}:{dc.ldaps_port}"
base_dn = "{dc.base_dn}"
bind_dn = "{dc.admin_bind_dn}"
bind_password = {{ env = "{PASSWORD_ENV}" }}
ca_file = "{dc.tls_ca_file}"
cache_ttl_s = {ttl}
[sync]
mass_delete_ratio = 1.0
[[sources]]
id = "partage"
kind = "smb"
server = "{dc.host}"
share = "{dc.share}"
username = '{dc.admin_principal}'
password = {{ env = "{PASSWORD_ENV}" }}
unc_root = '\\\\SRV-FICHIERS\\Partage'
collection_overrides = {{ DOCUMENTATION = "documentation" }}
{extra}''',
        encoding="utf-8",
    )
    return cfg
