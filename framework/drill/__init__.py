"""`sampan drill`: run an example job, expand its inputs live, and verify exact results."""
