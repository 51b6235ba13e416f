"""``binlake mirror``: typed current-state (SCD1) and history (SCD2) Delta tables per source
table, built from silver (``docs/mirror.md``)."""
