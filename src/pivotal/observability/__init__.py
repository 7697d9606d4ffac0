"""Operating Pivotal: Prometheus metrics and alert rules, OpenTelemetry spans, log fields.

Each part observes the engine through ``pivotal.engine.telemetry.Telemetry``; none is imported
unless it is used."""
