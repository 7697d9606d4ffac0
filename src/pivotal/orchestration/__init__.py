"""The orchestrator's floors, each built on the one below: ``running`` (a pass under a
saga's lease), ``submitting`` (new sagas, through admission), ``letters`` (dead letters),
``decisions`` (approve, reject, abort); ``pivotal.orchestrator.Orchestrator`` is the top
floor (resume, resolve, re-run, fork)."""
