"""Every stage, in order: ``binlake index`` (``command``) runs bronze over binlog files, then
the stages after it (``stages``), which the live stream's follower runs after its commits too."""
