"""Test support: a throwaway MariaDB server, a deterministic workload, a reference reader.

``mariadb`` (:class:`~tests.support.mariadb.MariaDBServer`), ``workload``
(:func:`~tests.support.workload.run_mixed_workload`), ``binlog_verbose`` (rows printed by
``mariadb-binlog -vv``, normalised to bronze bytes) and ``fixtures`` (pytest fixtures, for
``from tests.support.fixtures import *`` in conftest).
"""
