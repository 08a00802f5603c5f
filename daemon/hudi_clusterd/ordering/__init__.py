"""How rows are ordered for layout (strategies, space-filling curves) and how good a layout is (files-scanned)."""
