"""The bare-framework servers tensorwire is measured against."""


def new_loop(kind: str):
    """A new event loop of `kind` ("asyncio" or "uvloop"), as a careful user would make
    it by hand for the baseline (tensorwire's own choice is `--loop`)."""
    import asyncio

    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()
