"""The orchestrator, in floors, each built on the one below: ``running`` (a pass under a
saga's lease), ``submitting`` (new sagas, through admission), ``letters`` (dead letters),
``decisions`` (approve, reject, abort) and ``orchestrator`` on top (resume, resolve, re-run,
fork); the rules of a person's acts that every surface shares: who may approve
(``four_eyes``), when a plan may run again (``rerun``) and be forked (``fork``)."""
