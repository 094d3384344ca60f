"""tensorwire.security."""
