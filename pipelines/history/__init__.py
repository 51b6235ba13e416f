"""Answering questions with the history: ``binlake query``, ``reconstruct``, ``flashback``.

Modules: ``times`` (points in time, GTIDs, positions), ``images`` (silver's JSON images read
without reformatting, and as SQL literals), ``selection`` (silver rows a command selects),
``query``, ``reconstruct``, ``flashback``, ``command`` (the argparse parsers and handlers).
"""
