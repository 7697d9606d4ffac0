"""Example applications shipped with Pivotal."""
