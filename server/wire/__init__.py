"""tensorwire.wire."""
