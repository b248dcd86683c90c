"""The report stage: collect run outputs, plot them, write one HTML page."""
