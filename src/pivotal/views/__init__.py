"""What each audience is shown, built once for every surface: agents (``agent_view``, and
their namespace of saga ids, ``saga_scope``), approvers (``approval_view``), readers of a
catalogue (``catalogue_view``), operators (``render``, ``report``, ``saga_actions``,
``planning_view``, ``worker_view``, ``worker_wait``)."""
