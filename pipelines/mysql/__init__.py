"""binlake's MySQL/MariaDB client: DSNs, TLS, connecting, redaction."""
