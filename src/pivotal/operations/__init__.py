"""Running Pivotal and acting on many sagas: workers and the sweeper (``worker``), the
outbox relay and its signed webhooks (``relay``, ``webhooks``), and acts on every saga a
search selects (``bulk``)."""
