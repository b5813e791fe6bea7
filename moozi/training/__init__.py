"""The training system: roles, driver and backends (thesis 5.2.1, 5.2.12-5.2.17)."""
