"""What runs before the user's program imports its framework: which backend, optional packages, quiet logs."""
