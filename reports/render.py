"""The exposure report as rows, CSV (RFC 4180, ``csv`` module) and one self-contained HTML page
(inline CSS, no script, no external resource: it can be mailed to the data-protection officer as
is). Every text is HTML-escaped; no value found is ever in the report, only kinds and counts."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Callable

from ancre.models import visible
from ancre.reports.detectors import LABELS, Kind
from ancre.reports.exposure import DocumentExposure, ExposureReport, FolderExposure, Reach

CSV_COLUMNS = (
    "source", "folder", "path", "filename", "broad_principal", "basis", "until", "readers", "users", "opened_by",
    *[k.value for k in Kind], "undecided", "undecided_reasons",
)


def readers_text(r: Reach, *, french: bool = False) -> str:
    """``"5 / 5 users (100 %)"`` (``"utilisateurs"`` in French), or why they were not counted."""
    if r.readers is None or not r.users:
        return "utilisateurs non comptés" if french else "users not counted"
    pct = 100 * r.readers / r.users
    more = (f", {r.unresolved} non résolus" if french else f", {r.unresolved} not resolved") if r.unresolved else ""
    return f"{r.readers} / {r.users} {'utilisateurs' if french else 'users'} ({pct:.0f} %){more}"


def findings_text(d: DocumentExposure) -> str:
    """``"numéro AVS ×1, IBAN ×1"`` (``"—"``: nothing), undecided ones marked ``?``."""
    parts = []
    for f in d.findings:
        if f.count:
            parts.append(f"{f.label} ×{f.count}")
        if f.undecided:
            parts.append(f"{f.label} ? ×{f.undecided}")
    return ", ".join(parts) or "—"


def rows(report: ExposureReport, *, all_documents: bool = False) -> list[dict[str, object]]:
    """One dict per exposed document (only those with findings unless ``all_documents``), keys
    :data:`CSV_COLUMNS`."""
    out: list[dict[str, object]] = []
    for folder in report.folders:
        for d in folder.documents:
            if not all_documents and not (d.sensitive or d.undecided):
                continue
            counts = {f.kind.value: f.count for f in d.findings}
            row: dict[str, object] = {
                "source": d.source, "folder": d.location, "path": d.path, "filename": d.filename,
                "broad_principal": d.reach.name, "basis": d.reach.basis.value, "until": d.reach.until or "",
                "readers": d.reach.readers if d.reach.readers is not None else "",
                "users": d.reach.users if d.reach.users is not None else "",
                "opened_by": d.reach.opened_by or d.reach.why_not or "",
            }
            row.update({k.value: counts.get(k.value, 0) for k in Kind})
            row["undecided"] = sum(f.undecided for f in d.findings)
            row["undecided_reasons"] = "; ".join(r for f in d.findings for r in f.reasons)
            out.append(row)
    return out


def to_csv(report: ExposureReport, *, all_documents: bool = False) -> str:
    """The rows as CSV with a header line (``\\r\\n`` line ends, RFC 4180); text cells through
    :func:`~ancre.models.visible` (a file name can't drive the terminal the CSV is printed on)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS)
    w.writeheader()
    w.writerows({k: visible(v) if isinstance(v, str) else v for k, v in row.items()}
                for row in rows(report, all_documents=all_documents))
    return buf.getvalue()


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1d2329;max-width:78rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ccd3da}
.meta{color:#56606b;font-size:.9rem}.cards{display:flex;gap:1rem;margin:1.2rem 0;flex-wrap:wrap}
.card{border:1px solid #ccd3da;border-radius:6px;padding:.6rem 1rem;min-width:9rem}
.card b{display:block;font-size:1.5rem}.bad b{color:#b3261e}.warn b{color:#9a6700}
table{border-collapse:collapse;width:100%;font-size:.9rem;margin:.5rem 0}
th,td{border:1px solid #d8dee4;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f5f7}.found{color:#b3261e;font-weight:600}.undecided{color:#9a6700}
.clean{color:#56606b}.note{background:#fff8e1;border-left:4px solid #e0a800;padding:.4rem .8rem;margin:.3rem 0}
code{font-size:.85rem}
"""


def _folder_html(folder: FolderExposure, e: Callable[[str], str]) -> list[str]:
    """One folder's heading and table of exposed documents (:func:`to_html`); ``e`` escapes text."""
    parts: list[str] = []
    sens = sum(1 for d in folder.documents if d.sensitive)
    parts.append(f"<h2>{e(folder.location or folder.source)} <span class='meta'>(source {e(folder.source)} — "
                 f"{len(folder.documents)} document(s) lisible(s) largement, {sens} sensible(s)"
                 f"{f', {folder.restricted} restreint(s)' if folder.restricted else ''})</span></h2>")
    parts.append("<table><tr><th>Document</th><th>Lisible par</th><th>Utilisateurs</th>"
                 "<th>Ouvert par (ACE ou permission)</th><th>Trouvé</th></tr>")
    for d in folder.documents:
        cls = "found" if d.sensitive else "undecided" if d.undecided else "clean"
        found = e(findings_text(d))
        reasons = "; ".join(r for f in d.findings for r in f.reasons)
        if reasons:
            found += f"<br><span class='undecided'>non tranché : {e(reasons)}</span>"
        opened = e(d.reach.opened_by) if d.reach.opened_by else f"<span class='meta'>{e(d.reach.why_not or '')}</span>"
        basis = " (part des utilisateurs)" if d.reach.basis.value == "share" else ""
        if d.reach.until:
            basis += f" jusqu'au {d.reach.until}"
        parts.append(
            f"<tr><td>{e(d.filename)}<br><span class='meta'>{e(d.path)}</span></td>"
            f"<td>{e(d.reach.name)}{e(basis)}</td><td>{e(readers_text(d.reach, french=True))}</td><td>{opened}</td>"
            f"<td class='{cls}'>{found}</td></tr>"
        )
    parts.append("</table>")
    return parts


def to_html(report: ExposureReport) -> str:
    """One self-contained HTML page (French) with the summary, each folder's exposed documents,
    and the restricted folders that were not scanned."""
    def e(text: str) -> str:  # escaped, and what would reorder or hide text written out
        return html.escape(visible(text))

    parts = [
        "<!DOCTYPE html>", '<html lang="fr"><head><meta charset="utf-8">',
        "<title>Rapport d'exposition — ancre</title>", f"<style>{_CSS}</style></head><body>",
        "<h1>Rapport d'exposition des documents indexés</h1>",
        (f'<p class="meta">Généré le {e(report.generated_at)} par <code>ancre report exposure</code>, depuis '
         f"l'index seul ({report.chunks:,} extraits de {report.documents:,} documents, {report.seconds:.1f} s). "
         f"Principaux larges : {e(', '.join(report.broad_principals))} ; ou plus de "
         f"{report.broad_share * 100:.0f} % des {report.users if report.users is not None else '?'} utilisateurs de "
         "l'annuaire. Aucune valeur trouvée n'est reproduite ici : seulement sa nature et leur nombre.</p>"),
        '<div class="cards">',
        f'<div class="card"><b>{report.exposed}</b>documents lisibles largement</div>',
        f'<div class="card bad"><b>{report.sensitive}</b>avec des données sensibles</div>',
        f'<div class="card warn"><b>{report.undecided}</b>avec un doute (non tranché)</div>',
        (f'<div class="card"><b>{sum(r.documents for r in report.restricted)}</b>documents en dossiers restreints '
         "(non analysés)</div></div>"),
    ]
    for n in report.notes:
        parts.append(f'<p class="note">{e(n)}</p>')
    for folder in report.folders:
        parts += _folder_html(folder, e)
    if report.restricted:
        parts.append("<h2>Dossiers restreints (aucun document lisible largement, non analysés)</h2><table>"
                     "<tr><th>Source</th><th>Dossier</th><th>Documents</th></tr>")
        for r in report.restricted:
            parts.append(f"<tr><td>{e(r.source)}</td><td>{e(r.location)}</td><td>{r.documents}</td></tr>")
        parts.append("</table>")
    parts.append("<h2>Détecteurs</h2><ul>")
    for k in Kind:
        parts.append(f"<li>{e(LABELS[k])} (<code>{k.value}</code>)</li>")
    parts.append("</ul><p class='meta'>Numéros AVS : chiffre de contrôle EAN-13 ; IBAN : longueur du pays et clé "
                 "MOD 97-10 (ISO 13616) ; cartes : plages d'émetteurs et clé de Luhn. Un numéro dont la clé est "
                 "fausse n'est pas compté, sauf dans un texte lu par OCR où il est signalé comme non tranché.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


__all__ = ["CSV_COLUMNS", "findings_text", "readers_text", "rows", "to_csv", "to_html"]
