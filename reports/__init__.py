"""The admin's reports (docs/REPORTS.md): the exposure of the
index to broad principals with the sensitive data found (:mod:`ancre.reports.exposure`,
:mod:`ancre.reports.detectors`, rendered by :mod:`ancre.reports.render`), and the audit reports
— who was shown a document, everything logged about a person, statistics
(:mod:`ancre.reports.audit_log`, over the records :mod:`ancre.audit.reading` reads back). Layered
below the API and above the query core and the daemon (docs/ARCHITECTURE.md): it reads the store,
the directory and the audit files, never writes them."""
