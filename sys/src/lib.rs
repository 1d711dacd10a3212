//! Raw bindings to the system's libfabric.
