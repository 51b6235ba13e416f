"""The fast row paths: ``rowcodegen`` (one generated Python loop per table), ``rowkernel``
(a compiled numba loop straight into Arrow buffers, ``rowkernel_jit``) and ``rows_columnar``
(undecoded rows events → the ``image_sink`` columns bronze builds). Each gives the bytes the
reference decoder (``pipelines.binlog.values``) gives, and falls back to it per event.
"""
