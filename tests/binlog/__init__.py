"""Tests of the decoder package ``pipelines/binlog`` (annotated real bytes, the corpus, fuzzing)."""
