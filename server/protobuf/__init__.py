"""tensorwire.protobuf."""
