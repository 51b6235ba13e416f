"""binlake: MySQL/MariaDB binary logs kept queryable in a Delta Lake medallion."""

import os as _os

# numpy's OpenBLAS starts a thread per core at import that spins for a while (about 0.13 s
# of CPU per process on 2 cores); binlake does no linear algebra. A value the user set wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
