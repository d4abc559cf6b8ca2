"""Real, local stand-ins for external services (model providers), shared by every test suite."""
