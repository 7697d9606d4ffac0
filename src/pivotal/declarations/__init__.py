"""What an app declares and an agent proposes in it: the app and its catalogues (``app``,
``catalogue``), the arguments that name an entity (``identity``), the value a step moves
(``exposure``), holds that lapse on their own (``holds``), retry policies (``retry``),
rules and policies over a plan (``rules``, ``policy``), plans and their errors (``plan``,
``plan_errors``, ``plan_view``), and whether a catalogue can run a saga planned against
another build of it (``serving``)."""
