"""What binlake knows about a source server: its schema snapshots (``model``), how one is read
from a live server (``schema``) and what its settings and schema mean (``checks``)."""
