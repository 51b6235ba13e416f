"""``binlake mcp`` and ``binlake console``: read-only questions to the lake from an assistant
(MCP tools, :mod:`pipelines.assist.mcp_tools`) and from a browser (:mod:`console_app`), over
the same functions as ``binlake query``/``reconstruct``/``flashback``/``status``/``quality``.
"""
