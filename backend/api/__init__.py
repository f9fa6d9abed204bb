"""The read-only HTTP API (/api/v1, OpenAPI 3.1) and the MCP tools, served by `fleetview serve` on their own port."""
