"""table.metadata package."""
