"""The agents' door: `nsstuck mcp`, read-only tools over the Model Context Protocol (stdio or streamable HTTP)."""
