"""Development harness shared by tests/, bench/ and scripts/ (not part of the binlake wheel).

``mariadb``: a throwaway MariaDB server (:class:`~devtools.mariadb.MariaDBServer`) on loopback,
started for real from the Debian packages (``make mariadb``).
"""
