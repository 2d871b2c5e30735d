"""§2 placeholder."""
