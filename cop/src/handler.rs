//! The entry point: one function that parses a request, runs it on a snapshot and returns a response.
