"""Live ACL check benchmark: what re-reading each candidate document's ACL from its
SMB source costs a question — per document and per question with 30 candidates — against the
Samba AD DC of the tests (tests/support/samba.py) on loopback.

Run: ``.venv/bin/python tests/bench/run.py --only live_acl`` (a command, not a test). Needs root
and Samba (``.ci/install-samba.sh``); otherwise the row says why it was skipped. The DC binds
fixed ports on 127.0.0.1: on a shared machine run it under the same lock as the Samba tests
(``flock /tmp/ancre-samba.lock …``).

Thirty small files are written to ``BENCH-LIVE/`` on the share over SMB (their ACL inherited from
the share root). Measured, after one warm-up (session set up):

- **per document**: one ``SmbConnector.read_acls([path])`` at a time (one compound CREATE +
  QUERY_INFO(security) + CLOSE round trip, the descriptor parsed and evaluated);
- **per question**: :meth:`LiveAclChecker.check` of the 30 documents with the cache off
  (``live_acl_ttl_s = 0``), with the default 8 workers and with 1;
- **per question, cached**: the same within the TTL (no SMB traffic).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ → `support`

N_DOCS = 30
ROUNDS = 20
FOLDER = "BENCH-LIVE"


def _p(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


def _row(measure: str, ms: list[float], per: str) -> dict:
    return {
        "measure": measure, "per": per, "n": len(ms),
        "p50_ms": round(statistics.median(ms), 2), "p95_ms": round(_p(ms, 0.95), 2),
    }


def run(quick: bool = False) -> list[dict]:
    """The rows (``measure``, ``per``, ``n``, ``p50_ms``, ``p95_ms``), or one ``skipped`` row."""
    from support.samba import SambaDC, missing_samba_reason

    reason = missing_samba_reason()
    if reason is not None:
        return [{"measure": "skipped", "per": "", "n": 0, "p50_ms": None, "p95_ms": None, "reason": reason}]

    import smbclient
    from pydantic import SecretStr

    from ancre.config import QueryConfig
    from ancre.connectors.smb import SmbConnector, SmbSourceConfig
    from ancre.index.acl_writer import AclWriter
    from ancre.index.edge_store import EdgeStore
    from ancre.models import ChunkPayload
    from ancre.query.live_acl import LiveAclChecker

    rounds = 5 if quick else ROUNDS
    rows: list[dict] = []
    with SambaDC() as dc, tempfile.TemporaryDirectory() as tmp:
        kw = {"username": dc.admin_principal, "password": dc.admin_password, "port": dc.smb_port}
        smbclient.makedirs(f"{dc.unc_root}\\{FOLDER}", exist_ok=True, **kw)
        paths = []
        for i in range(N_DOCS):
            rel = f"{FOLDER}/doc-{i:02d}.txt"
            with smbclient.open_file(f"{dc.unc_root}\\{rel.replace('/', chr(92))}", mode="w", **kw) as fh:
                fh.write(f"document {i}\n")
            paths.append(rel)
        smbclient.reset_connection_cache()

        src = SmbSourceConfig(
            id="bench", kind="smb", server=dc.host, share=dc.share, username=dc.admin_principal,
            password=SecretStr(dc.admin_password),
        )
        conn = SmbConnector(src, directory=None, ignore=())
        acls = conn.read_acls(paths)  # warm-up: session and tree set up
        assert set(acls) == set(paths), "the bench files are not all readable"

        per_doc: list[float] = []
        for _ in range(max(1, rounds // 4)):
            for p in paths:
                t = time.perf_counter()
                conn.read_acls([p])
                per_doc.append((time.perf_counter() - t) * 1000)
        rows.append(_row("read one document's ACL (SMB QUERY_INFO round trip)", per_doc, "document"))

        payloads = [
            ChunkPayload(
                source="bench", doc_id=f"bench:{p}", path=p, filename=p.rsplit("/", 1)[-1], location="",
                chunk_index=0, text="", acl_allow=tuple(sorted(acls[p].allow)), acl_deny=tuple(sorted(acls[p].deny)),
                content_hash="", indexed_at=0.0,
            )
            for p in paths
        ]
        principals = frozenset(next(iter(acls.values())).allow)
        store = EdgeStore(Path(tmp))
        store.open("bench:none", 4)
        try:
            for workers in (8, 1):
                cfg = QueryConfig(live_acl_ttl_s=0, live_acl_workers=workers, live_acl_timeout_s=30)
                checker = LiveAclChecker(lambda _s: conn, AclWriter(store, None), cfg)
                checker.check(payloads, principals)  # warm the pool's threads
                per_q: list[float] = []
                for _ in range(rounds):
                    t = time.perf_counter()
                    out = checker.check(payloads, principals)
                    per_q.append((time.perf_counter() - t) * 1000)
                    assert all(c.outcome == "live" for c in out.values())
                checker.close()
                rows.append(_row(f"check {N_DOCS} candidates, cache off, {workers} worker(s)", per_q, "question"))
                rows.append({**_row(f"  = per document ({workers} worker(s))", [x / N_DOCS for x in per_q], "document")})

            cfg = QueryConfig(live_acl_ttl_s=60)
            checker = LiveAclChecker(lambda _s: conn, AclWriter(store, None), cfg)
            checker.check(payloads, principals)
            cached: list[float] = []
            for _ in range(rounds):
                t = time.perf_counter()
                checker.check(payloads, principals)
                cached.append((time.perf_counter() - t) * 1000)
            checker.close()
            rows.append(_row(f"check {N_DOCS} candidates within the TTL (cached)", cached, "question"))
        finally:
            store.close()
            conn.close()
    return rows


def render(rows: list[dict]) -> None:
    """Print the rows as a table."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"live ACL check against Samba on loopback ({N_DOCS} candidates)")
    for c in ("measure", "per", "n", "p50 ms", "p95 ms"):
        t.add_column(c, justify="left" if c == "measure" else "right")
    for r in rows:
        if r["measure"] == "skipped":
            t.add_row(f"skipped: {r['reason']}", "", "", "", "")
            continue
        t.add_row(r["measure"], r["per"], str(r["n"]), f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}")
    Console().print(t)


def summary(rows: list[dict]) -> list[tuple[str, str, str]]:
    """``(measure, value, target)`` lines for the run summary."""
    if rows and rows[0]["measure"] == "skipped":
        return [("live ACL check", f"skipped: {rows[0]['reason']}", "")]
    by = {r["measure"]: r for r in rows}
    doc = by["read one document's ACL (SMB QUERY_INFO round trip)"]
    q8 = by[f"check {N_DOCS} candidates, cache off, 8 worker(s)"]
    q1 = by[f"check {N_DOCS} candidates, cache off, 1 worker(s)"]
    cached = by[f"check {N_DOCS} candidates within the TTL (cached)"]
    return [
        ("live ACL read per document p50 / p95", f"{doc['p50_ms']:.2f} / {doc['p95_ms']:.2f} ms", ""),
        (f"live ACL check per question ({N_DOCS} docs, 8 workers) p50 / p95",
         f"{q8['p50_ms']:.1f} / {q8['p95_ms']:.1f} ms", ""),
        ("  with 1 worker p50", f"{q1['p50_ms']:.1f} ms", ""),
        ("  within the TTL (cached) p50", f"{cached['p50_ms']:.2f} ms", ""),
    ]


if __name__ == "__main__":
    render(run())
