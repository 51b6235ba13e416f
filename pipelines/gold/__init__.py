"""Gold: silver's row changes exported, exactly once, to a MySQL/MariaDB ``binlog_events``
table that bintrail users read (``docs/gold.md``).

Modules: ``client`` (connections), ``ddl`` (tables, hourly partitions), ``rows`` (pure
value transforms), ``exporter`` (the parallel bulk-load task), ``state`` (the watermark),
``rotate`` (retention), ``job`` (the jobs and status), ``command`` (the commands).
"""
