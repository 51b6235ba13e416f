"""Test support: a deterministic workload, a reference reader.

``workload``
(:func:`~devtools.mixed_workload.run_mixed_workload`), ``binlog_verbose`` (rows printed by
``mariadb-binlog -vv``, normalised to bronze bytes) and ``fixtures`` (pytest fixtures, for
``from tests.support.fixtures import *`` in conftest).
"""
