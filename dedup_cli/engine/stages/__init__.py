"""The stages both engines run: functions from arrays and tables to arrays and tables."""
