"""tensorwire.runtime."""
