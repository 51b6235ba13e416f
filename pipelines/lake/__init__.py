"""The lake: its tables declared once, Delta reads and writes, leases, stores."""
