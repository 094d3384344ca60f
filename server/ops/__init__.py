"""tensorwire.ops."""
