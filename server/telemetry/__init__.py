"""tensorwire.telemetry."""
