"""The bottom layer: records (model), coordinates (positions), configuration, size caps and
the table of formats. Imports nothing else from the package."""
