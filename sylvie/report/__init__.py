"""The report stage: read run directories (run_output), group them into runs (grouping), summarise them (summary,
time_to_accuracy), plot them (plots), write one HTML page (html)."""
