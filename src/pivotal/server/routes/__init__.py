"""The endpoints, one module per group: ``health``, ``agents``, ``approvals``,
``operators``."""
