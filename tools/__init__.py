"""Developer tools of kraft-jbod (not shipped in the package)."""
