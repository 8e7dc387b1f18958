"""Test helpers shared across test packages (fakes of external services)."""
