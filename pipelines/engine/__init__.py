"""The engine: the one Spark-session factory, worker processes, memory."""
