"""Services that call services (`tensorwire.depends`): placement, handles, calls.

`contract.dependency` describes a dependency; this package places it (in this process
through the callee's request plans, or elsewhere through the client: `placement`,
`local`, `remote`), gives each service instance its handles (`handles`), carries what
crosses a call (the request's `CallFrame`, `runtime.call_frame`) and maps a
dependency's failures onto the caller's (`failures`). It is the one server package that
uses `tensorwire.client`.
"""
