"""The data model: per-step records, findings, the summary and their names, units and thresholds."""
