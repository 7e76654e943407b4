"""Readers and rules put together into reports: the engine (doctor, epoch), preflight and
compare."""
