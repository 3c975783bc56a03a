"""kraft-jbod's test suite."""
