"""Wire formats shared by the server transports and the clients: pure byte-level helpers."""
