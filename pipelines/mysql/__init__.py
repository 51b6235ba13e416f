"""binlake's MySQL/MariaDB client: ``dsn`` (DSNs, TLS, credentials, redaction), ``client``
(connecting), ``bulk`` (the packets of MariaDB's bulk INSERT)."""
