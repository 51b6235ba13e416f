"""The binlog decoder: MySQL and MariaDB binary log files and dump streams → decoded events.

Standalone: it knows no lake, engine or Delta table. ``names`` and ``directory`` say which files
are binlogs and in what order, ``store`` opens them on a disk or an object store, ``framing``
cuts events out of the bytes, ``parser`` turns them into the objects of ``events``,
``table_map`` and ``rows`` (values by ``values``, ``temporal``, ``decimal_codec``,
``json_binary``, ``json_diff``; compressed transactions by ``payload``), ``reader`` walks one
file, and ``show`` prints events as ``mysqlbinlog -v`` does (``binlake decode``: ``command``).
``fast`` holds the three fast row paths (generated code, the compiled loop, columnar sinks),
each checked against the reference decoder of ``values``.
"""
