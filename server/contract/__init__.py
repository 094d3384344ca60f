"""tensorwire.contract."""
