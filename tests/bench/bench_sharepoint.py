"""SharePoint delta benchmark: what a pass over a 10,000-item library costs when
nothing changed — Graph requests made and seconds — against the fake tenant of the tests
(tests/support/fake_microsoft.py) on loopback.

Run: ``.venv/bin/python tests/bench/run.py --only sharepoint`` (a command, not a test).

One site, one library of ``N`` files in folders of 100 ("Everyone except external users" reads).
Measured with the connector's own listing (``list_items``, what a sync pass calls first):

- **first pass**: the full enumeration (delta without a token, paged) and every item's
  permissions read through ``$batch`` (20 per request);
- **no-change pass**: the delta since the saved link (plus the site, its libraries and the
  library's role assignments, once per library) — the row shows the requests made, and how many
  of them concern a single item (``/items/…``): none;
- **permission sweep** (what the daemon runs every ``permission_sweep_interval_s``, 1 % of the
  files with unique permissions): SharePoint REST lists which items have unique role assignments
  (5,000 per request) and Graph is asked the permissions of those only (and the library root);
- **permission sweep without SharePoint REST** (the site refuses it): every item's permissions.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ → `support`

PER_FOLDER = 100
UNIQUE_EVERY = 100
"""One file in this many has unique permissions (breaking inheritance, its role assignments copied)."""


def _tenant(n: int):
    from support.fake_microsoft import EVERYONE_EXCEPT_EXTERNAL, FakeMicrosoft

    ms = FakeMicrosoft(page_size=1000)
    site = ms.add_site("Bench")
    ms.add_site_group(site, "Members", [EVERYONE_EXCEPT_EXTERNAL.format(tenant=ms.tenant_id)], role="Read")
    drive = ms.add_drive(site, "Documents")
    folder = None
    for i in range(n):
        if i % PER_FOLDER == 0:
            folder = ms.add_folder(drive, f"dossier-{i // PER_FOLDER:04d}")
        f = ms.add_file(drive, f"note-{i:05d}.md", f"# Note {i}\n".encode(), parent=folder)
        if i % UNIQUE_EVERY == UNIQUE_EVERY - 1:
            ms.break_inheritance(drive, f, copy=True)
    return ms.start()


def run(quick: bool = False) -> list[dict]:
    """Rows ``measure``, ``items``, ``requests``, ``per_item_requests``, ``seconds``."""
    from ancre.connectors.base import SourceContext
    from ancre.connectors.sharepoint import build
    from ancre.connectors.sharepoint.config import SharePointSourceConfig

    n = 2_000 if quick else 10_000
    ms = _tenant(n)
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="ancre-bench-sp-") as tmp:
            cert = ms.certificate
            cfg = SharePointSourceConfig(
                id="bench", kind="sharepoint", tenant_id=ms.tenant_id, client_id=ms.client_id,
                certificate_path=cert.key_pem_path, certificate_thumbprint=cert.thumbprint,
                authority=ms.authority, graph_url=ms.graph_url, ca_file=ms.ca_path, sites=(ms.site_url("Bench"),),
            )

            def no_directory():
                raise RuntimeError("no directory in this bench")

            ctx = SourceContext(directory=no_directory, ignore=(), private_paths=(), data_dir=Path(tmp))
            conn = build(cfg, ctx)
            try:
                site = next(iter(ms.sites.values()))
                for measure in ("first pass (full enumeration + permissions)", "no-change delta pass",
                                "permission sweep (unique scopes)", "permission sweep without SharePoint REST"):
                    if "without" in measure:
                        ms.refuse_rest(site)
                        conn.refresh()  # the connector learns the site refuses REST
                    ms.requests.clear()
                    t0 = time.perf_counter()
                    if "sweep" in measure:
                        conn.sweep_permissions()
                        listed = n
                    else:
                        listed = sum(1 for _ in conn.list_items())
                    dt = time.perf_counter() - t0
                    graph = ms.graph_requests("")
                    rows.append({
                        "measure": measure, "items": listed,
                        "requests": len([r for r in graph if not r.in_batch]),
                        "batched_sub_requests": len([r for r in graph if r.in_batch]),
                        "per_item_requests": len([r for r in graph if "/items/" in r.path]),
                        "rest_requests": len([r for r in ms.requests if "/_api/" in r.path]),
                        "seconds": round(dt, 2),
                    })
            finally:
                conn.close()  # type: ignore[attr-defined]
    finally:
        ms.stop()
    return rows


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    """``(measure, value, target)`` lines for tests/bench/run.py."""
    out = []
    for r in rows:
        out.append((
            f"{r['measure']} ({r['items']:,} items)",
            (f"{r['requests']} Graph + {r['rest_requests']} SharePoint REST requests, {r['per_item_requests']} per-item reads "
             f"({r['batched_sub_requests']} inside $batch), {r['seconds']} s"),
            "0 per-item requests" if "no-change" in r["measure"]
            else "runs every few minutes (each sweep a few requests)" if r["measure"] == "permission sweep (unique scopes)"
            else "",
        ))
    return out


def render(rows: list[dict]) -> None:
    """Print the rows."""
    for line in summary(rows):
        print(" | ".join(line))


if __name__ == "__main__":
    render(run(quick="--quick" in sys.argv))
