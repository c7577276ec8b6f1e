"""The MCP server: UHP memory tools and Memory Git tools over the official ``mcp`` SDK (v2).

``pal mcp`` serves one authenticated agent over stdio; ``pal serve`` mounts the same tools over
streamable HTTP at ``/mcp`` behind the API's bearer authentication and Host/Origin checks.
"""
