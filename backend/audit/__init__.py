"""The audit log: who did and read what through every door (UI, API, MCP), and what was refused."""
