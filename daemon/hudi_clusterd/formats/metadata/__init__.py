"""formats.metadata package."""
