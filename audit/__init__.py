"""The audit trail (Swiss nLPD; docs/ARCHITECTURE.md "Data flow of a question" step 10), in one
package: the records and the log that writes them (:mod:`ancre.audit.record`), the hash chain —
its format (:mod:`ancre.audit.chain`), its writer (:mod:`ancre.audit.chain_writer`) and its
verification (:mod:`ancre.audit.verify`) —, and the records read back (:mod:`ancre.audit.reading`).
Layered below the query core and the daemon and above the configuration (docs/ARCHITECTURE.md
"Packages and layers"): the query core writes through it, the reports read through it, and it
imports nothing above it."""
