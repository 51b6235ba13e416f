"""Development harness shared by tests/, bench/ and scripts/ (not part of the binlake wheel).

``mariadb``: a throwaway MariaDB server (:class:`~devtools.mariadb.MariaDBServer`) on loopback,
started for real from the Debian packages (``make mariadb``); ``silver_rows``: a realistic silver
table made fast by the engine (:func:`~devtools.silver_rows.write_silver`).
"""
