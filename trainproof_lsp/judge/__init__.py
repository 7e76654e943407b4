"""Readers and rules put together into reports: the engine (doctor, epoch, checkpoints,
scripts, env), preflight and compare, with what they share (base.py) and the settings
files they run with (settings.py)."""
