"""Reports as text, JSON, SARIF and HTML. Given reports; never runs the judge."""
